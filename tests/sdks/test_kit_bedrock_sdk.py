"""The testing kit's Bedrock Converse routes, proved with the real boto3 client.

``converse`` and ``converse_stream`` through the plugin's ``fake_bedrock``
fixture, and a client made the usual way (credentials from the environment,
``endpoint_url``); botocore's own event-stream parser reads the kit's framing.
Runs in the ``providers`` extra's venv (``pip install -e ".[test,providers]"``).
"""

from __future__ import annotations

import json
from typing import Any, Dict, List

import boto3
import pytest
from botocore.eventstream import ChecksumMismatch, EventStreamBuffer

from ctx_compact.testing import FakeProvider, count_tokens
from ctx_compact.testing._eventstream import event
from ctx_compact.testing.bedrock import (
    ALTERNATE,
    CONTEXT_LENGTH,
    EXCESS_RESULTS,
    input_tokens,
    stream_events,
)

MODEL_ID = "anthropic.claude-3-5-haiku-20241022-v1:0"
SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city", "days"],
}
TOOL_CONFIG = {"tools": [{"toolSpec": {"name": "get_weather", "inputSchema": {"json": SCHEMA}}}]}
Message = Dict[str, Any]


def user(text: str) -> Message:
    return {"role": "user", "content": [{"text": text}]}


def result(tool_use_id: str) -> Message:
    block = {"toolUseId": tool_use_id, "content": [{"json": {"sky": "sunny"}}], "status": "success"}
    return {"role": "user", "content": [{"toolResult": block}]}


def tool_conversation() -> List[Message]:
    return [
        user("Weather in Paris?"),
        {
            "role": "assistant",
            "content": [
                {"text": "Checking."},
                {
                    "toolUse": {
                        "toolUseId": "tooluse_1",
                        "name": "get_weather",
                        "input": {"city": "Paris", "days": 1},
                    }
                },
            ],
        },
        result("tooluse_1"),
        {"role": "assistant", "content": [{"text": "Sunny."}]},
        user("Thanks"),
    ]


def sent_tokens(provider: FakeProvider) -> int:
    body = provider.requests[-1].body
    return input_tokens(body["messages"], body.get("system"))


def test_converse_with_a_tool_conversation(fake_bedrock: Any, fake_provider: FakeProvider) -> None:
    response = fake_bedrock.converse(
        modelId=MODEL_ID,
        messages=tool_conversation(),
        system=[{"text": "Be brief."}],
        toolConfig=TOOL_CONFIG,
    )

    assert response["output"]["message"] == {
        "role": "assistant",
        "content": [{"text": "Fake reply to 5 messages."}],
    }
    assert response["stopReason"] == "end_turn"
    tokens, answer = sent_tokens(fake_provider), count_tokens("Fake reply to 5 messages.")
    assert response["usage"] == {
        "inputTokens": tokens,
        "outputTokens": answer,
        "totalTokens": tokens + answer,
    }
    assert isinstance(response["metrics"]["latencyMs"], int)
    (request,) = fake_provider.requests
    assert request.path == "/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse"
    assert request.headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=test/")


def test_a_broken_conversation_raises_validation_exception(fake_bedrock: Any) -> None:
    orphaned = tool_conversation()
    orphaned[1] = {"role": "assistant", "content": [{"text": "Checking."}]}

    with pytest.raises(fake_bedrock.exceptions.ValidationException) as raised:
        fake_bedrock.converse(modelId=MODEL_ID, messages=orphaned, toolConfig=TOOL_CONFIG)

    error = raised.value.response
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert error["Error"]["Code"] == "ValidationException"
    assert error["Error"]["Message"] == EXCESS_RESULTS.format(index=2)

    with pytest.raises(fake_bedrock.exceptions.ValidationException, match="must alternate"):
        fake_bedrock.converse(modelId=MODEL_ID, messages=[user("a"), user("b")])
    assert ALTERNATE.startswith("A conversation must alternate")


def test_the_context_limit(fake_bedrock: Any, fake_provider: FakeProvider) -> None:
    fake_provider.context_limit = 10

    with pytest.raises(fake_bedrock.exceptions.ValidationException) as raised:
        fake_bedrock.converse(
            modelId=MODEL_ID, messages=tool_conversation(), toolConfig=TOOL_CONFIG
        )

    assert raised.value.response["Error"]["Message"] == CONTEXT_LENGTH


def test_converse_stream_is_decoded_by_botocore(
    fake_bedrock: Any, fake_provider: FakeProvider
) -> None:
    response = fake_bedrock.converse_stream(
        modelId=MODEL_ID, messages=[user("Tell me about Paris")]
    )

    events = list(response["stream"])

    kinds = [next(iter(e)) for e in events]
    assert kinds == [
        "messageStart",
        *["contentBlockDelta"] * 5,
        "contentBlockStop",
        "messageStop",
        "metadata",
    ]
    text = "".join(
        e["contentBlockDelta"]["delta"]["text"] for e in events if "contentBlockDelta" in e
    )
    assert text == "Fake reply to 1 messages."
    assert events[-2] == {"messageStop": {"stopReason": "end_turn"}}
    tokens, answer = sent_tokens(fake_provider), count_tokens(text)
    usage = events[-1]["metadata"]["usage"]
    assert usage == {"inputTokens": tokens, "outputTokens": answer, "totalTokens": tokens + answer}


def test_a_streamed_tool_use(fake_bedrock: Any, fake_provider: FakeProvider) -> None:
    fake_provider.tool_calls = 1

    events = list(
        fake_bedrock.converse_stream(
            modelId=MODEL_ID, messages=[user("Paris?")], toolConfig=TOOL_CONFIG
        )["stream"]
    )

    start = events[1]["contentBlockStart"]["start"]["toolUse"]
    assert start["name"] == "get_weather"
    assert start["toolUseId"].startswith("tooluse_fake")
    pieces = [
        e["contentBlockDelta"]["delta"]["toolUse"]["input"]
        for e in events
        if "contentBlockDelta" in e
    ]
    assert json.loads("".join(pieces)) == {"city": "fake", "days": 1}
    assert events[-2] == {"messageStop": {"stopReason": "tool_use"}}


def test_a_stream_over_the_limit_raises_before_any_event(
    fake_bedrock: Any, fake_provider: FakeProvider
) -> None:
    fake_provider.context_limit = 1

    with pytest.raises(fake_bedrock.exceptions.ValidationException, match="Input is too long"):
        fake_bedrock.converse_stream(modelId=MODEL_ID, messages=[user("hi")])


def test_a_tool_loop_with_the_scripted_model(
    fake_bedrock: Any, fake_provider: FakeProvider
) -> None:
    fake_provider.tool_calls = 3
    messages = [user("Weather for the week?")]

    while True:
        response = fake_bedrock.converse(
            modelId=MODEL_ID, messages=messages, toolConfig=TOOL_CONFIG
        )
        message = response["output"]["message"]
        messages.append(message)
        if response["stopReason"] != "tool_use":
            break
        messages.append(result(message["content"][0]["toolUse"]["toolUseId"]))

    assert len(fake_provider.requests) == 4
    assert message["content"] == [{"text": "Fake reply to 7 messages."}]


def test_a_client_made_the_usual_way_from_environment_credentials(
    fake_provider: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "test")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    client = boto3.client("bedrock-runtime", endpoint_url=fake_provider.bedrock_url)

    try:
        response = client.converse(modelId=MODEL_ID, messages=[user("hi")])
    finally:
        client.close()

    assert response["output"]["message"]["content"] == [{"text": "Fake reply to 1 messages."}]
    headers = fake_provider.requests[-1].headers
    assert "/eu-west-1/bedrock/aws4_request" in headers["authorization"]
    assert headers["x-amz-security-token"] == "test"


def test_botocore_checks_the_frames_crcs() -> None:
    frames = b"".join(stream_events("Sunny.", 12, 0))
    buffer = EventStreamBuffer()
    buffer.add_data(frames)

    decoded = list(buffer)

    assert [m.headers[":event-type"] for m in decoded] == [
        "messageStart",
        "contentBlockDelta",
        "contentBlockStop",
        "messageStop",
        "metadata",
    ]
    assert json.loads(decoded[1].payload) == {"contentBlockIndex": 0, "delta": {"text": "Sunny."}}
    damaged = bytearray(event("messageStop", {"stopReason": "end_turn"}))
    damaged[-5] ^= 0xFF  # a payload byte: the message's CRC no longer matches
    broken = EventStreamBuffer()
    broken.add_data(bytes(damaged))
    with pytest.raises(ChecksumMismatch):
        list(broken)
