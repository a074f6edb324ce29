"""The testing kit's Bedrock Converse API: its validator, and its routes over plain HTTP.

The real boto3 client against these routes is tests/sdks/test_kit_bedrock_sdk.py.
"""

from __future__ import annotations

import json
import struct
import urllib.error
import urllib.parse
import urllib.request
import zlib
from typing import Any, Dict, List, Tuple

import pytest

from ctx_compact.testing import FakeProvider, Problem, count_tokens
from ctx_compact.testing.bedrock import (
    ALTERNATE,
    START_WITH_USER,
    TOOL_CONFIG_REQUIRED,
    input_tokens,
    validate_messages,
)

pytest_plugins = ["pytester"]

Message = Dict[str, Any]


def user(text: str = "Weather in Paris and Rome?") -> Message:
    return {"role": "user", "content": [{"text": text}]}


def assistant(text: str = "Sunny in both.") -> Message:
    return {"role": "assistant", "content": [{"text": text}]}


def uses(*ids: str, text: str = "") -> Message:
    content: List[Message] = [{"text": text}] if text else []
    for tool_id in ids:
        content.append({"toolUse": {"toolUseId": tool_id, "name": "get_weather", "input": {}}})
    return {"role": "assistant", "content": content}


def results(*ids: str, text: str = "") -> Message:
    content: List[Message] = []
    for tool_id in ids:
        answer = [{"json": {"sky": "sunny"}}]
        content.append(
            {"toolResult": {"toolUseId": tool_id, "content": answer, "status": "success"}}
        )
    if text:
        content.append({"text": text})
    return {"role": "user", "content": content}


def tool_conversation() -> List[Message]:
    """Two parallel calls answered out of order, one more with a follow-up, then the answer."""
    return [
        user(),
        uses("tooluse_1", "tooluse_2", text="Checking both."),
        results("tooluse_2", "tooluse_1"),
        uses("tooluse_3"),
        results("tooluse_3", text="And Oslo?"),
        assistant(),
    ]


def excess(index: int) -> Problem:
    return Problem(
        index,
        f"The number of toolResult blocks at messages.{index}.content exceeds the number of "
        "toolUse blocks of previous turn.",
    )


def expected(index: int, ids: str) -> Problem:
    return Problem(
        index,
        f"Expected toolResult blocks at messages.{index}.content for the following Ids: {ids}",
    )


# --- the validator -----------------------------------------------------------------


def test_a_paired_conversation_has_no_problems() -> None:
    assert validate_messages(tool_conversation()) == []


def test_a_result_without_its_call() -> None:
    contents = [user(), assistant("Let me think."), results("tooluse_1")]

    assert validate_messages(contents) == [excess(2)]


def test_more_results_than_calls() -> None:
    contents = [user(), uses("tooluse_1"), results("tooluse_1", "tooluse_2")]

    assert validate_messages(contents) == [excess(2)]


def test_calls_the_next_message_does_not_answer() -> None:
    contents = [user(), uses("tooluse_1", "tooluse_2"), results("tooluse_2"), assistant()]

    assert validate_messages(contents) == [expected(2, "tooluse_1")]


def test_calls_followed_by_text_name_every_id() -> None:
    contents = [user(), uses("tooluse_1", "tooluse_2"), user("never mind"), assistant()]

    assert validate_messages(contents) == [expected(2, "tooluse_1, tooluse_2")]


def test_a_call_at_the_end_names_the_message_that_should_follow() -> None:
    assert validate_messages([user(), uses("tooluse_1")]) == [expected(2, "tooluse_1")]


def test_the_first_message_must_be_the_users() -> None:
    problems = validate_messages(tool_conversation()[1:])

    assert problems[0] == Problem(0, START_WITH_USER)


def test_roles_must_alternate() -> None:
    contents = [user(), user("again"), assistant(), assistant("more")]

    assert validate_messages(contents) == [Problem(1, ALTERNATE), Problem(3, ALTERNATE)]


@pytest.mark.parametrize("messages", [[], None, "hi"])
def test_no_messages(messages: Any) -> None:
    assert validate_messages(messages) == [Problem(None, START_WITH_USER)]


def test_empty_content_and_unknown_roles_are_checked_first() -> None:
    contents = [user(), {"role": "assistant", "content": []}, {"role": "system", "content": []}]

    assert validate_messages(contents) == [
        Problem(
            1,
            "The content field in the Message object at messages.1 is empty. Add a ContentBlock "
            "object to the content field and try again.",
        ),
        Problem(
            2,
            "1 validation error detected: Value 'system' at 'messages.2.member.role' failed to "
            "satisfy constraint: Member must satisfy enum value set: [user, assistant]",
        ),
    ]


def test_the_callers_messages_are_not_changed() -> None:
    messages = tool_conversation()[1:]
    before = repr(messages)

    validate_messages(messages)

    assert repr(messages) == before


# --- the routes, over plain HTTP ---------------------------------------------------

MODEL_ID = "anthropic.claude-3-5-haiku-20241022-v1:0"
# boto3 percent-encodes the model id in the path, ":" included.
CONVERSE = f"/model/{urllib.parse.quote(MODEL_ID, safe='')}/converse"
STREAM = f"/model/{urllib.parse.quote(MODEL_ID, safe='')}/converse-stream"
WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city", "days"],
}
TOOL_CONFIG = {
    "tools": [{"toolSpec": {"name": "get_weather", "inputSchema": {"json": WEATHER_SCHEMA}}}]
}
# What boto3 adds to a request; the kit accepts any signature.
SIGNED = {
    "X-Amz-Date": "20260101T000000Z",
    "Authorization": "AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/bedrock/aws4_request, "
    "SignedHeaders=content-type;host;x-amz-date, Signature=00",
}


def post(provider: FakeProvider, path: str, body: Any) -> Tuple[int, Dict[str, str], bytes]:
    """POST ``body`` as JSON, signed as boto3 signs; the status, headers and raw body."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {"Content-Type": "application/json", **SIGNED}
    request = urllib.request.Request(provider.base_url + path, data, headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            answer = response.status, dict(response.headers.items()), response.read()
    except urllib.error.HTTPError as error:
        with error:
            answer = error.code, dict(error.headers.items()), error.read()
    status, found, raw = answer
    return status, {k.lower(): v for k, v in found.items()}, raw


def converse(provider: FakeProvider, body: Any) -> Tuple[int, Any]:
    status, _, raw = post(provider, CONVERSE, body)
    return status, json.loads(raw)


def assert_validation_exception(provider: FakeProvider, body: Any, message: str) -> None:
    status, headers, raw = post(provider, CONVERSE, body)
    assert status == 400
    assert headers["x-amzn-errortype"] == "ValidationException"
    assert json.loads(raw) == {"message": message}


def test_converse_answers_with_the_message_its_usage_and_metrics(provider: FakeProvider) -> None:
    messages = tool_conversation()
    system = [{"text": "Be brief."}]

    status, body = converse(
        provider, {"messages": messages, "system": system, "toolConfig": TOOL_CONFIG}
    )

    assert status == 200
    assert body["output"] == {
        "message": {"role": "assistant", "content": [{"text": "Fake reply to 6 messages."}]}
    }
    assert body["stopReason"] == "end_turn"
    tokens = sum(count_tokens(m) for m in messages) + count_tokens(system)
    assert tokens == input_tokens(messages, system)
    answer = count_tokens("Fake reply to 6 messages.")
    assert body["usage"] == {
        "inputTokens": tokens,
        "outputTokens": answer,
        "totalTokens": tokens + answer,
    }
    assert isinstance(body["metrics"]["latencyMs"], int)
    (request,) = provider.requests
    assert request.path == CONVERSE
    assert request.body["messages"] == messages
    assert request.headers["authorization"].startswith("AWS4-HMAC-SHA256")


def test_a_broken_conversation_is_a_validation_exception(provider: FakeProvider) -> None:
    messages = tool_conversation()
    del messages[1]  # the calls tooluse_1 and tooluse_2: two users in a row, their results orphaned

    assert_validation_exception(
        provider, {"messages": messages, "toolConfig": TOOL_CONFIG}, ALTERNATE
    )
    orphan = [user(), assistant("Let me see."), results("tooluse_1")]
    assert_validation_exception(
        provider, {"messages": orphan, "toolConfig": TOOL_CONFIG}, excess(2).message
    )


def test_tool_blocks_need_a_tool_config(provider: FakeProvider) -> None:
    assert_validation_exception(provider, {"messages": tool_conversation()}, TOOL_CONFIG_REQUIRED)


def test_input_over_the_context_limit(provider: FakeProvider) -> None:
    messages = [user()]
    provider.context_limit = input_tokens(messages) - 1

    assert_validation_exception(
        provider, {"messages": messages}, "Input is too long for requested model."
    )
    provider.context_limit += 1
    assert converse(provider, {"messages": messages})[0] == 200


def test_the_scripted_model_uses_the_tool_then_answers(provider: FakeProvider) -> None:
    provider.tool_calls = 2
    messages = [user()]

    for _ in range(2):
        status, body = converse(provider, {"messages": messages, "toolConfig": TOOL_CONFIG})
        assert (status, body["stopReason"]) == (200, "tool_use")
        message = body["output"]["message"]
        (block,) = message["content"]
        assert block["toolUse"]["name"] == "get_weather"
        assert block["toolUse"]["input"] == {"city": "fake", "days": 1}
        assert body["usage"]["outputTokens"] == count_tokens(
            json.dumps({"city": "fake", "days": 1})
        )
        messages = [*messages, message, results(block["toolUse"]["toolUseId"])]

    status, body = converse(provider, {"messages": messages, "toolConfig": TOOL_CONFIG})
    assert body["stopReason"] == "end_turn"
    assert body["output"]["message"]["content"] == [{"text": "Fake reply to 5 messages."}]


# An event-stream decoder written from the framing's description, apart from the kit's encoder.
def decode_events(raw: bytes) -> List[Tuple[Dict[str, str], Any]]:
    events = []
    while raw:
        total, headers_length = struct.unpack(">II", raw[:8])
        assert struct.unpack(">I", raw[8:12])[0] == zlib.crc32(raw[:8])
        assert struct.unpack(">I", raw[total - 4 : total])[0] == zlib.crc32(raw[: total - 4])
        headers: Dict[str, str] = {}
        at = 12
        while at < 12 + headers_length:
            name_length = raw[at]
            name = raw[at + 1 : at + 1 + name_length].decode()
            at += 1 + name_length
            assert raw[at] == 7  # a string
            (value_length,) = struct.unpack(">H", raw[at + 1 : at + 3])
            headers[name] = raw[at + 3 : at + 3 + value_length].decode()
            at += 3 + value_length
        events.append((headers, json.loads(raw[at : total - 4])))
        raw = raw[total:]
    return events


def test_converse_stream_sends_aws_event_stream_messages(provider: FakeProvider) -> None:
    messages = [user("Tell me about Paris")]

    status, headers, raw = post(provider, STREAM, {"messages": messages})

    assert status == 200
    assert headers["content-type"] == "application/vnd.amazon.eventstream"
    events = decode_events(raw)
    assert all(
        h[":message-type"] == "event" and h[":content-type"] == "application/json"
        for h, _ in events
    )
    kinds = [h[":event-type"] for h, _ in events]
    assert kinds == [
        "messageStart",
        *["contentBlockDelta"] * 5,
        "contentBlockStop",
        "messageStop",
        "metadata",
    ]
    assert events[0][1] == {"role": "assistant"}
    text = "".join(
        data["delta"]["text"] for h, data in events if h[":event-type"] == "contentBlockDelta"
    )
    assert text == "Fake reply to 1 messages."
    assert events[-2][1] == {"stopReason": "end_turn"}
    tokens, answer = input_tokens(messages), count_tokens(text)
    assert events[-1][1]["usage"] == {
        "inputTokens": tokens,
        "outputTokens": answer,
        "totalTokens": tokens + answer,
    }


def test_a_streamed_tool_use_starts_its_block_and_streams_its_input(provider: FakeProvider) -> None:
    provider.tool_calls = 1

    _, _, raw = post(provider, STREAM, {"messages": [user()], "toolConfig": TOOL_CONFIG})

    events = decode_events(raw)
    start = events[1]
    assert start[0][":event-type"] == "contentBlockStart"
    assert start[1]["start"]["toolUse"]["name"] == "get_weather"
    pieces = [
        d["delta"]["toolUse"]["input"] for h, d in events if h[":event-type"] == "contentBlockDelta"
    ]
    assert json.loads("".join(pieces)) == {"city": "fake", "days": 1}
    assert events[-2][1] == {"stopReason": "tool_use"}


def test_a_stream_over_the_limit_is_refused_before_any_event(provider: FakeProvider) -> None:
    provider.context_limit = 1

    status, headers, raw = post(provider, STREAM, {"messages": [user()]})

    assert (status, headers["x-amzn-errortype"]) == (400, "ValidationException")
    assert json.loads(raw) == {"message": "Input is too long for requested model."}


def test_unknown_paths_and_bodies_that_are_not_json_get_awss_envelope(
    provider: FakeProvider,
) -> None:
    status, headers, _ = post(provider, f"/model/{MODEL_ID}/invoke-agent", {})
    assert (status, headers["x-amzn-errortype"]) == (404, "UnknownOperationException")

    status, headers, _ = post(provider, CONVERSE, b"{not json")
    assert (status, headers["x-amzn-errortype"]) == (400, "SerializationException")
    assert "x-amzn-requestid" in headers


# --- the plugin's fixture --------------------------------------------------------


def test_the_bedrock_fixture_without_boto3_fails_naming_the_package(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest('import sys\n\nsys.modules["boto3"] = None\n')
    pytester.makepyfile(
        test_agent="""
        def test_converse(fake_bedrock):
            pass
        """
    )

    result = pytester.runpytest("-p", "no:cacheprovider")

    result.assert_outcomes(errors=1)
    assert "fake_bedrock needs the boto3 SDK" in result.stdout.str()
    assert "Install it with: pip install boto3" in result.stdout.str()


def test_a_reply_callable_is_given_the_messages() -> None:
    def reply(messages: List[Message]) -> str:
        return f"{len(messages)} messages, the last {messages[-1]['role']}'s"

    with FakeProvider(reply=reply) as provider:
        _, body = converse(provider, {"messages": tool_conversation(), "toolConfig": TOOL_CONFIG})

    assert body["output"]["message"]["content"] == [{"text": "6 messages, the last assistant's"}]
