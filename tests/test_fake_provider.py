"""The fake provider, proved with the real ``openai`` and ``anthropic`` SDKs.

Async tests run on asyncio and trio through the ``anyio_backend`` fixture in
conftest.py. The SDKs need Python 3.10+; without them this module is skipped.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.error
import urllib.request
from typing import Any, Dict, Iterator, List

import pytest

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

from ctx_compact.testing import FakeProvider, count_tokens  # noqa: E402

Message = Dict[str, Any]

OPENAI_MODEL = "gpt-4o"
CLAUDE_MODEL = "claude-sonnet-4-6"

ORPHAN_TOOL = (
    "Invalid parameter: messages with role 'tool' must be a response to a preceeding message "
    "with 'tool_calls'."
)
MISSING_RESPONSES = (
    "An assistant message with 'tool_calls' must be followed by tool messages responding to "
    "each 'tool_call_id'. The following tool_call_ids did not have response messages: "
)


@pytest.fixture
def openai_client(provider: FakeProvider) -> Iterator[Any]:
    with openai.OpenAI(base_url=provider.base_url + "/v1", api_key="test", max_retries=0) as client:
        yield client


@pytest.fixture
def anthropic_client(provider: FakeProvider) -> Iterator[Any]:
    with anthropic.Anthropic(base_url=provider.base_url, api_key="test", max_retries=0) as client:
        yield client


# --- conversations --------------------------------------------------------------


def call(call_id: str, city: str) -> Message:
    arguments = json.dumps({"city": city})
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "get_weather", "arguments": arguments},
    }


def openai_tool_conversation() -> List[Message]:
    """Developer prompt, parallel calls answered out of order, then a follow-up."""
    return [
        {"role": "developer", "content": "You are terse."},
        {"role": "user", "content": "Weather in Denver and Austin?"},
        {"role": "assistant", "content": None, "tool_calls": [call("call_1", "Denver")]},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"tempF": 72}'},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [call("call_2", "Austin"), call("call_3", "Austin")],
        },
        {"role": "tool", "tool_call_id": "call_3", "content": '{"tempF": 88}'},
        {"role": "tool", "tool_call_id": "call_2", "content": '{"tempF": 88}'},
        {"role": "assistant", "content": "72F and 88F."},
        {"role": "user", "content": "Thanks 🎉"},
    ]


def tool_use(tool_id: str, city: str) -> Message:
    return {"type": "tool_use", "id": tool_id, "name": "get_weather", "input": {"city": city}}


def tool_result(tool_id: str, text: str = '{"tempF": 72}') -> Message:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": text}


def anthropic_tool_conversation() -> List[Message]:
    """Parallel tool_use blocks answered by tool_result blocks at the start of the next turn."""
    return [
        {"role": "user", "content": "Weather in Denver and Austin?"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking both."},
                tool_use("toolu_1", "Denver"),
                tool_use("toolu_2", "Austin"),
            ],
        },
        {
            "role": "user",
            "content": [
                tool_result("toolu_2"),
                tool_result("toolu_1"),
                {"type": "text", "text": "Also, is it windy?"},
            ],
        },
        {"role": "assistant", "content": "72F and 88F, calm."},
        {"role": "user", "content": [{"type": "text", "text": "Thanks 🎉"}]},
    ]


# --- OpenAI Chat Completions -----------------------------------------------------


def test_openai_accepts_a_tool_conversation_and_counts_its_tokens(
    openai_client: Any, provider: FakeProvider
) -> None:
    messages = openai_tool_conversation()

    response = openai_client.chat.completions.create(model=OPENAI_MODEL, messages=messages)

    assert response.object == "chat.completion"
    assert response.choices[0].message.role == "assistant"
    assert response.choices[0].message.content == "Fake reply to 9 messages."
    assert response.choices[0].finish_reason == "stop"
    assert response.usage.prompt_tokens == sum(count_tokens(m) for m in messages)
    usage = response.usage
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    (request,) = provider.requests
    assert request.path == "/v1/chat/completions"
    assert request.body["messages"] == messages
    assert request.headers["authorization"] == "Bearer test"


def test_prompt_tokens_are_a_quarter_of_the_utf16_length_rounded_up(openai_client: Any) -> None:
    # {"role":"user","content":"hi"} is 30 characters: ceil(30 / 4) == 8.
    response = openai_client.chat.completions.create(
        model=OPENAI_MODEL, messages=[{"role": "user", "content": "hi"}]
    )

    assert response.usage.prompt_tokens == 8


def test_openai_rejects_an_orphan_tool_message(openai_client: Any) -> None:
    messages = openai_tool_conversation()
    del messages[2]  # the assistant message that called call_1

    with pytest.raises(openai.BadRequestError) as caught:
        openai_client.chat.completions.create(model=OPENAI_MODEL, messages=messages)

    assert caught.value.status_code == 400
    assert caught.value.body == {
        "message": ORPHAN_TOOL,
        "type": "invalid_request_error",
        "param": "messages.[2].role",
        "code": None,
    }


def test_openai_rejects_calls_without_results_naming_the_next_message(openai_client: Any) -> None:
    messages = openai_tool_conversation()
    del messages[5:7]  # both results of the parallel calls

    with pytest.raises(openai.BadRequestError) as caught:
        openai_client.chat.completions.create(model=OPENAI_MODEL, messages=messages)

    assert caught.value.body["message"] == MISSING_RESPONSES + "call_2, call_3"
    assert caught.value.param == "messages.[5].role"
    assert caught.value.code is None


def test_openai_rejects_calls_without_results_at_the_end(openai_client: Any) -> None:
    messages = openai_tool_conversation()[:6]  # call_3 answered, call_2 not

    with pytest.raises(openai.BadRequestError) as caught:
        openai_client.chat.completions.create(model=OPENAI_MODEL, messages=messages)

    assert caught.value.body["message"] == MISSING_RESPONSES + "call_2"
    assert caught.value.param == "messages"


def test_openai_rejects_a_result_for_another_call(openai_client: Any) -> None:
    messages = openai_tool_conversation()
    messages[3] = {"role": "tool", "tool_call_id": "call_9", "content": "{}"}

    with pytest.raises(openai.BadRequestError, match="'tool_call_id' of 'call_9' not found"):
        openai_client.chat.completions.create(model=OPENAI_MODEL, messages=messages)


def test_openai_rejects_an_empty_message_list(openai_client: Any) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        openai_client.chat.completions.create(model=OPENAI_MODEL, messages=[])

    assert caught.value.code == "empty_array"
    assert caught.value.param == "messages"


def test_openai_stream_sends_the_text_then_usage_when_asked(openai_client: Any) -> None:
    messages = openai_tool_conversation()

    chunks = list(
        openai_client.chat.completions.create(
            model=OPENAI_MODEL,
            messages=messages,
            stream=True,
            stream_options={"include_usage": True},
        )
    )

    assert {chunk.object for chunk in chunks} == {"chat.completion.chunk"}
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Fake reply to 9 messages."
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == []
    assert chunks[-1].usage.prompt_tokens == sum(count_tokens(m) for m in messages)
    assert all(chunk.usage is None for chunk in chunks[:-1])


def test_openai_stream_without_include_usage_has_no_usage(openai_client: Any) -> None:
    chunks = list(
        openai_client.chat.completions.create(
            model=OPENAI_MODEL, messages=[{"role": "user", "content": "hi"}], stream=True
        )
    )

    assert all(chunk.usage is None for chunk in chunks)
    assert all(chunk.choices for chunk in chunks)


def test_openai_stream_helper_assembles_the_completion(openai_client: Any) -> None:
    with openai_client.chat.completions.stream(
        model=OPENAI_MODEL,
        messages=[{"role": "user", "content": "hi"}],
        stream_options={"include_usage": True},
    ) as stream:
        completion = stream.get_final_completion()

    assert completion.choices[0].message.content == "Fake reply to 1 messages."
    assert completion.usage.prompt_tokens == 8


def test_a_returned_message_model_goes_back_as_its_set_fields(
    openai_client: Any, provider: FakeProvider
) -> None:
    first = openai_client.chat.completions.create(
        model=OPENAI_MODEL, messages=[{"role": "user", "content": "hi"}]
    )
    returned = first.choices[0].message  # a pydantic ChatCompletionMessage

    openai_client.chat.completions.create(
        model=OPENAI_MODEL,
        messages=[{"role": "user", "content": "hi"}, returned, {"role": "user", "content": "?"}],
    )

    # The SDK sends model_dump(exclude_unset=True, mode="json"): the fields the
    # server sent, nulls included, and none of the defaults it did not.
    assert provider.requests[-1].body["messages"][1] == {
        "role": "assistant",
        "content": "Fake reply to 1 messages.",
        "refusal": None,
        "annotations": [],
    }


@pytest.mark.anyio
async def test_async_openai_client(provider: FakeProvider) -> None:
    async with openai.AsyncOpenAI(
        base_url=provider.base_url + "/v1", api_key="test", max_retries=0
    ) as client:
        response = await client.chat.completions.create(
            model=OPENAI_MODEL, messages=openai_tool_conversation()
        )
        with pytest.raises(openai.BadRequestError) as caught:
            await client.chat.completions.create(
                model=OPENAI_MODEL, messages=openai_tool_conversation()[:3]
            )

    assert response.usage.prompt_tokens == sum(count_tokens(m) for m in openai_tool_conversation())
    assert caught.value.body["message"] == MISSING_RESPONSES + "call_1"


# openai's AsyncStream stops reading at `data: [DONE]` with `break`, leaving its
# inner async generators (and httpx2's) unexhausted. asyncio closes them quietly;
# trio closes them too but warns (ResourceWarning) as they are collected.
@pytest.mark.filterwarnings(
    r"ignore:Async generator '(openai|httpx2?|httpcore2?)\.:ResourceWarning"
)
@pytest.mark.anyio
async def test_async_openai_stream(provider: FakeProvider) -> None:
    async with openai.AsyncOpenAI(
        base_url=provider.base_url + "/v1", api_key="test", max_retries=0
    ) as client:
        stream = await client.chat.completions.create(
            model=OPENAI_MODEL,
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]

    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == (
        "Fake reply to 1 messages."
    )
    assert chunks[-1].usage.prompt_tokens == 8


# --- Anthropic Messages ----------------------------------------------------------


def test_anthropic_accepts_a_tool_conversation_and_counts_its_tokens(
    anthropic_client: Any, provider: FakeProvider
) -> None:
    messages = anthropic_tool_conversation()

    message = anthropic_client.messages.create(
        model=CLAUDE_MODEL, max_tokens=64, system="You are terse.", messages=messages
    )

    assert message.type == "message"
    assert message.role == "assistant"
    assert message.content[0].type == "text"
    assert message.content[0].text == "Fake reply to 5 messages."
    assert message.stop_reason == "end_turn"
    expected = sum(count_tokens(m) for m in messages) + count_tokens("You are terse.")
    assert message.usage.input_tokens == expected
    assert message.usage.output_tokens == count_tokens("Fake reply to 5 messages.")
    (request,) = provider.requests
    assert request.path == "/v1/messages"
    assert request.body["system"] == "You are terse."
    assert "anthropic-version" in request.headers


def test_input_tokens_are_a_quarter_of_the_utf16_length_rounded_up(anthropic_client: Any) -> None:
    message = anthropic_client.messages.create(
        model=CLAUDE_MODEL, max_tokens=64, messages=[{"role": "user", "content": "hi"}]
    )

    assert message.usage.input_tokens == 8


def test_anthropic_rejects_tool_use_without_results(anthropic_client: Any) -> None:
    messages = anthropic_tool_conversation()
    messages[2]["content"] = [tool_result("toolu_2"), {"type": "text", "text": "go on"}]

    with pytest.raises(anthropic.BadRequestError) as caught:
        anthropic_client.messages.create(model=CLAUDE_MODEL, max_tokens=64, messages=messages)

    assert caught.value.status_code == 400
    assert caught.value.body["type"] == "error"
    assert caught.value.body["error"] == {
        "type": "invalid_request_error",
        "message": "messages.1: `tool_use` ids were found without `tool_result` blocks "
        "immediately after: toolu_1. Each `tool_use` block must have a corresponding "
        "`tool_result` block in the next message.",
    }


def test_anthropic_wants_results_at_the_start_of_the_next_message(anthropic_client: Any) -> None:
    messages = anthropic_tool_conversation()
    messages[2]["content"] = [
        {"type": "text", "text": "Here you go."},
        tool_result("toolu_1"),
        tool_result("toolu_2"),
    ]

    with pytest.raises(anthropic.BadRequestError, match=re.escape("after: toolu_1, toolu_2. Each")):
        anthropic_client.messages.create(model=CLAUDE_MODEL, max_tokens=64, messages=messages)


def test_anthropic_rejects_a_result_without_its_tool_use(anthropic_client: Any) -> None:
    messages = anthropic_tool_conversation()[2:]  # starts with the results

    with pytest.raises(anthropic.BadRequestError) as caught:
        anthropic_client.messages.create(model=CLAUDE_MODEL, max_tokens=64, messages=messages)

    assert caught.value.body["error"]["message"] == (
        "messages.0.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_2. "
        "Each `tool_result` block must have a corresponding `tool_use` block in the previous "
        "message."
    )


def test_anthropic_counts_a_text_block_after_tool_use_as_unanswered(anthropic_client: Any) -> None:
    messages = anthropic_tool_conversation()
    messages[1]["content"].append({"type": "text", "text": "Done calling."})

    with pytest.raises(anthropic.BadRequestError, match=re.escape("after: toolu_1, toolu_2.")):
        anthropic_client.messages.create(model=CLAUDE_MODEL, max_tokens=64, messages=messages)


def test_anthropic_rejects_empty_content_except_a_final_assistant(anthropic_client: Any) -> None:
    prefill = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": ""}]
    anthropic_client.messages.create(model=CLAUDE_MODEL, max_tokens=64, messages=prefill)

    with pytest.raises(anthropic.BadRequestError) as caught:
        anthropic_client.messages.create(
            model=CLAUDE_MODEL, max_tokens=64, messages=[*prefill, {"role": "user", "content": "?"}]
        )

    assert caught.value.body["error"]["message"] == (
        "messages.1: all messages must have non-empty content except for the optional final "
        "assistant message"
    )


def test_anthropic_takes_a_system_message_only_after_a_user_turn(anthropic_client: Any) -> None:
    system = {"role": "system", "content": "Answer in French."}
    accepted = [{"role": "user", "content": "hi"}, system]
    anthropic_client.messages.create(model=CLAUDE_MODEL, max_tokens=64, messages=accepted)

    with pytest.raises(anthropic.BadRequestError, match="must immediately follow a `user`"):
        anthropic_client.messages.create(
            model=CLAUDE_MODEL, max_tokens=64, messages=[system, {"role": "user", "content": "hi"}]
        )


def test_anthropic_combines_consecutive_turns_of_one_role(anthropic_client: Any) -> None:
    messages = [
        {"role": "assistant", "content": "I can check the weather."},
        {"role": "user", "content": "Denver?"},
        {"role": "assistant", "content": [tool_use("toolu_1", "Denver")]},
        {"role": "user", "content": [tool_result("toolu_1")]},
        {"role": "user", "content": "And tomorrow?"},
    ]

    message = anthropic_client.messages.create(model=CLAUDE_MODEL, max_tokens=64, messages=messages)

    assert message.stop_reason == "end_turn"


def test_anthropic_rejects_an_empty_message_list(anthropic_client: Any) -> None:
    with pytest.raises(anthropic.BadRequestError, match="at least one message is required"):
        anthropic_client.messages.create(model=CLAUDE_MODEL, max_tokens=64, messages=[])


def test_anthropic_stream_events(anthropic_client: Any) -> None:
    messages = anthropic_tool_conversation()

    events = list(
        anthropic_client.messages.create(
            model=CLAUDE_MODEL, max_tokens=64, messages=messages, stream=True
        )
    )

    kinds = [event.type for event in events]
    assert kinds[:2] == ["message_start", "content_block_start"]
    assert kinds[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert set(kinds[2:-3]) == {"content_block_delta"}
    text = "".join(e.delta.text for e in events if e.type == "content_block_delta")
    assert text == "Fake reply to 5 messages."
    assert events[0].message.usage.input_tokens == sum(count_tokens(m) for m in messages)
    assert events[-2].usage.output_tokens == count_tokens(text)


def test_anthropic_stream_helper_assembles_the_message(anthropic_client: Any) -> None:
    with anthropic_client.messages.stream(
        model=CLAUDE_MODEL, max_tokens=64, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()

    assert text == "Fake reply to 1 messages."
    assert final.content[0].text == text
    assert final.usage.input_tokens == 8
    assert final.usage.output_tokens == count_tokens(text)


@pytest.mark.anyio
async def test_async_anthropic_client(provider: FakeProvider) -> None:
    async with anthropic.AsyncAnthropic(
        base_url=provider.base_url, api_key="test", max_retries=0
    ) as client:
        message = await client.messages.create(
            model=CLAUDE_MODEL, max_tokens=64, messages=anthropic_tool_conversation()
        )
        async with client.messages.stream(
            model=CLAUDE_MODEL, max_tokens=64, messages=[{"role": "user", "content": "hi"}]
        ) as stream:
            text = "".join([piece async for piece in stream.text_stream])
            final = await stream.get_final_message()
        with pytest.raises(anthropic.BadRequestError, match="unexpected `tool_use_id`"):
            await client.messages.create(
                model=CLAUDE_MODEL, max_tokens=64, messages=anthropic_tool_conversation()[2:]
            )

    assert message.content[0].text == "Fake reply to 5 messages."
    assert text == "Fake reply to 1 messages."
    assert final.usage.input_tokens == 8


# --- the server itself -----------------------------------------------------------


def test_unknown_paths_get_a_json_404(provider: FakeProvider) -> None:
    request = urllib.request.Request(
        provider.base_url + "/v1/nothing",
        data=b"{}",
        headers={"Content-Type": "application/json"},
    )

    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=5)

    assert caught.value.code == 404
    body = json.loads(caught.value.read())
    caught.value.close()
    assert body["error"]["message"] == "Invalid URL (POST /v1/nothing)"
    assert provider.requests[-1].path == "/v1/nothing"


def test_a_custom_reply() -> None:
    echo = FakeProvider(reply=lambda messages: messages[-1]["content"].upper())
    with echo, anthropic.Anthropic(base_url=echo.base_url, api_key="t", max_retries=0) as client:
        message = client.messages.create(
            model=CLAUDE_MODEL, max_tokens=64, messages=[{"role": "user", "content": "hi"}]
        )

    assert message.content[0].text == "HI"


def test_the_command_line_prints_its_url_and_serves() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "ctx_compact.testing", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        base_url = process.stdout.readline().strip()
        with openai.OpenAI(base_url=base_url + "/v1", api_key="test", max_retries=0) as client:
            response = client.chat.completions.create(
                model=OPENAI_MODEL, messages=[{"role": "user", "content": "hi"}]
            )
    finally:
        process.terminate()
        process.wait(timeout=10)
        assert process.stdout is not None
        process.stdout.close()

    assert base_url.startswith("http://127.0.0.1:")
    assert response.usage.prompt_tokens == 8


# --- the scripted model ----------------------------------------------------------

WEATHER_TOOL_SCHEMA: Message = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "days": {"type": "integer"},
        "units": {"enum": ["C", "F"]},
        "note": {"type": "string"},
    },
    "required": ["city", "days", "units"],
}
SAMPLED_ARGUMENTS = {"city": "fake", "days": 1, "units": "C"}


def test_a_scripted_model_calls_the_first_tool_then_answers(provider: FakeProvider) -> None:
    provider.tool_calls = 2
    tools = [
        {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER_TOOL_SCHEMA}}
    ]
    messages: List[Any] = [{"role": "user", "content": "Weather?"}]
    with openai.OpenAI(base_url=provider.base_url + "/v1", api_key="t", max_retries=0) as client:
        replies = []
        for _ in range(3):
            reply = client.chat.completions.create(
                model=OPENAI_MODEL, messages=messages, tools=tools
            )
            replies.append(reply)
            message = reply.choices[0].message
            messages.append(message)
            for tool_call in message.tool_calls or []:
                messages.append({"role": "tool", "tool_call_id": tool_call.id, "content": "sunny"})

    assert [r.choices[0].finish_reason for r in replies] == ["tool_calls", "tool_calls", "stop"]
    first_call = replies[0].choices[0].message.tool_calls[0]
    assert first_call.function.name == "get_weather"
    assert json.loads(first_call.function.arguments) == SAMPLED_ARGUMENTS
    assert replies[0].usage.completion_tokens == count_tokens(first_call.function.arguments)
    assert replies[2].choices[0].message.content == "Fake reply to 5 messages."
    # A new prompt starts a new round of calls.
    messages.append({"role": "user", "content": "And tomorrow?"})
    with openai.OpenAI(base_url=provider.base_url + "/v1", api_key="t", max_retries=0) as client:
        again = client.chat.completions.create(model=OPENAI_MODEL, messages=messages, tools=tools)
    assert again.choices[0].finish_reason == "tool_calls"


def test_a_scripted_model_answers_text_when_no_tool_is_offered(
    openai_client: Any, provider: FakeProvider
) -> None:
    provider.tool_calls = 3

    reply = openai_client.chat.completions.create(
        model=OPENAI_MODEL, messages=[{"role": "user", "content": "hi"}]
    )

    assert reply.choices[0].message.content == "Fake reply to 1 messages."


def test_a_scripted_tool_call_streams_as_chat_completion_chunks(
    openai_client: Any, provider: FakeProvider
) -> None:
    provider.tool_calls = 1
    tools = [
        {"type": "function", "function": {"name": "lookup", "parameters": WEATHER_TOOL_SCHEMA}}
    ]

    with openai_client.chat.completions.stream(
        model=OPENAI_MODEL,
        messages=[{"role": "user", "content": "Weather?"}],
        tools=tools,
        stream_options={"include_usage": True},
    ) as stream:
        completion = stream.get_final_completion()

    call = completion.choices[0].message.tool_calls[0]
    assert call.function.name == "lookup"
    assert json.loads(call.function.arguments) == SAMPLED_ARGUMENTS
    assert completion.choices[0].finish_reason == "tool_calls"
    assert completion.usage.prompt_tokens == count_tokens({"role": "user", "content": "Weather?"})


def test_a_scripted_anthropic_model_uses_a_tool_then_answers(
    anthropic_client: Any, provider: FakeProvider
) -> None:
    provider.tool_calls = 1
    tools = [{"name": "get_weather", "description": "d", "input_schema": WEATHER_TOOL_SCHEMA}]
    messages: List[Any] = [{"role": "user", "content": "Weather?"}]

    first = anthropic_client.messages.create(
        model=CLAUDE_MODEL, max_tokens=64, messages=messages, tools=tools
    )
    use = first.content[0]
    messages += [
        {"role": "assistant", "content": first.content},
        {"role": "user", "content": [tool_result(use.id, "sunny")]},
    ]
    with anthropic_client.messages.stream(
        model=CLAUDE_MODEL, max_tokens=64, messages=messages, tools=tools
    ) as stream:
        second = stream.get_final_message()

    assert first.stop_reason == "tool_use"
    assert (use.type, use.name, use.input) == ("tool_use", "get_weather", SAMPLED_ARGUMENTS)
    assert second.stop_reason == "end_turn"
    assert second.content[0].text == "Fake reply to 3 messages."


def test_a_scripted_anthropic_tool_use_streams_its_input_as_json_deltas(
    anthropic_client: Any, provider: FakeProvider
) -> None:
    provider.tool_calls = 1
    tools = [{"name": "get_weather", "input_schema": WEATHER_TOOL_SCHEMA}]

    with anthropic_client.messages.stream(
        model=CLAUDE_MODEL, max_tokens=64, messages=[{"role": "user", "content": "?"}], tools=tools
    ) as stream:
        final = stream.get_final_message()

    assert final.content[0].input == SAMPLED_ARGUMENTS
    assert final.stop_reason == "tool_use"
    assert final.usage.input_tokens == count_tokens({"role": "user", "content": "?"})


# --- the context limit -----------------------------------------------------------


def test_openai_rejects_a_prompt_over_the_context_limit(
    openai_client: Any, provider: FakeProvider
) -> None:
    messages = openai_tool_conversation()
    tokens = sum(count_tokens(m) for m in messages)
    provider.context_limit = tokens - 1

    with pytest.raises(openai.BadRequestError) as caught:
        openai_client.chat.completions.create(model=OPENAI_MODEL, messages=messages)
    provider.context_limit = tokens
    accepted = openai_client.chat.completions.create(model=OPENAI_MODEL, messages=messages)

    assert caught.value.status_code == 400
    assert caught.value.code == "context_length_exceeded"
    assert caught.value.param == "messages"
    assert caught.value.type == "invalid_request_error"
    assert caught.value.body["message"] == (
        f"This model's maximum context length is {tokens - 1} tokens. However, your messages "
        f"resulted in {tokens} tokens. Please reduce the length of the messages."
    )
    assert accepted.usage.prompt_tokens == tokens


def test_anthropic_rejects_a_prompt_over_the_context_limit_counting_system(
    anthropic_client: Any, provider: FakeProvider
) -> None:
    messages = anthropic_tool_conversation()
    tokens = sum(count_tokens(m) for m in messages) + count_tokens("Be terse.")
    provider.context_limit = tokens - 1

    with pytest.raises(anthropic.BadRequestError) as caught:
        anthropic_client.messages.create(
            model=CLAUDE_MODEL, max_tokens=64, system="Be terse.", messages=messages
        )

    assert caught.value.status_code == 400
    assert caught.value.body["error"] == {
        "type": "invalid_request_error",
        "message": f"prompt is too long: {tokens} tokens > {tokens - 1} maximum",
    }


def test_a_stream_over_the_limit_fails_before_any_event(
    anthropic_client: Any, provider: FakeProvider
) -> None:
    provider.context_limit = 1

    with pytest.raises(anthropic.BadRequestError, match="prompt is too long: 8 tokens > 1 maximum"):
        anthropic_client.messages.create(
            model=CLAUDE_MODEL,
            max_tokens=64,
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
        )


# --- OpenAI Responses --------------------------------------------------------------


def responses_tool_conversation() -> List[Message]:
    """A function call answered by its output, with a system item and a follow-up."""
    return [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Weather in Denver?"},
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": '{"city":"Denver"}',
        },
        {"type": "function_call_output", "call_id": "call_1", "output": '{"tempF": 72}'},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "72F."}],
        },
        {"role": "user", "content": [{"type": "input_text", "text": "Thanks 🎉"}]},
    ]


def test_responses_accepts_a_tool_conversation_and_counts_its_tokens(
    openai_client: Any, provider: FakeProvider
) -> None:
    items = responses_tool_conversation()

    response = openai_client.responses.create(
        model=OPENAI_MODEL, input=items, instructions="Be terse."
    )

    assert response.output_text == "Fake reply to 6 messages."
    assert response.status == "completed"
    assert response.usage.input_tokens == sum(count_tokens(i) for i in items) + count_tokens(
        "Be terse."
    )
    assert response.usage.output_tokens == count_tokens("Fake reply to 6 messages.")
    assert provider.requests[-1].path == "/v1/responses"
    assert provider.requests[-1].body["input"] == items


def test_responses_takes_a_string_input(openai_client: Any) -> None:
    response = openai_client.responses.create(model=OPENAI_MODEL, input="hi")

    assert response.output_text == "Fake reply to 1 messages."
    assert response.usage.input_tokens == count_tokens("hi")


def test_responses_rejects_an_output_without_its_call(openai_client: Any) -> None:
    items = responses_tool_conversation()
    del items[2]

    with pytest.raises(openai.BadRequestError) as caught:
        openai_client.responses.create(model=OPENAI_MODEL, input=items)

    assert caught.value.body["message"] == (
        "No tool call found for function call output with call_id call_1."
    )
    assert caught.value.param == "input"
    assert caught.value.code is None


def test_responses_rejects_a_call_without_its_output(openai_client: Any) -> None:
    items = responses_tool_conversation()
    del items[3]

    with pytest.raises(openai.BadRequestError) as caught:
        openai_client.responses.create(model=OPENAI_MODEL, input=items)

    assert caught.value.body["message"] == "No tool output found for function call call_1."


def test_responses_rejects_input_over_the_context_limit(
    openai_client: Any, provider: FakeProvider
) -> None:
    provider.context_limit = 5

    with pytest.raises(openai.BadRequestError) as caught:
        openai_client.responses.create(model=OPENAI_MODEL, input=responses_tool_conversation())

    assert caught.value.code == "context_length_exceeded"
    assert caught.value.param == "input"
    assert caught.value.body["message"] == (
        "Your input exceeds the context window of this model. Please adjust your input and try "
        "again."
    )


def test_responses_keeps_no_previous_response(openai_client: Any) -> None:
    with pytest.raises(openai.BadRequestError, match="Previous response with id 'resp_1'"):
        openai_client.responses.create(
            model=OPENAI_MODEL, input="hi", previous_response_id="resp_1"
        )


def test_responses_stream_sends_text_deltas_then_usage(openai_client: Any) -> None:
    items = responses_tool_conversation()

    events = list(openai_client.responses.create(model=OPENAI_MODEL, input=items, stream=True))

    kinds = [event.type for event in events]
    assert kinds[:3] == ["response.created", "response.in_progress", "response.output_item.added"]
    assert kinds[-1] == "response.completed"
    assert [event.sequence_number for event in events] == list(range(len(events)))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == "Fake reply to 6 messages."
    assert events[0].response.usage is None
    assert events[-1].response.usage.input_tokens == sum(count_tokens(i) for i in items)
    assert events[-1].response.output_text == text


def test_a_scripted_responses_model_calls_a_function_in_a_stream(
    openai_client: Any, provider: FakeProvider
) -> None:
    provider.tool_calls = 1
    tools = [{"type": "function", "name": "get_weather", "parameters": WEATHER_TOOL_SCHEMA}]
    items: List[Any] = [{"role": "user", "content": "Weather?"}]

    with openai_client.responses.stream(model=OPENAI_MODEL, input=items, tools=tools) as stream:
        first = stream.get_final_response()
    call = first.output[0]
    items += [call, {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}]
    second = openai_client.responses.create(model=OPENAI_MODEL, input=items, tools=tools)

    assert (call.type, call.name) == ("function_call", "get_weather")
    assert json.loads(call.arguments) == SAMPLED_ARGUMENTS
    assert first.usage.input_tokens == count_tokens(items[0])
    assert second.output_text == "Fake reply to 3 messages."


@pytest.mark.anyio
async def test_async_responses_client(provider: FakeProvider) -> None:
    async with openai.AsyncOpenAI(
        base_url=provider.base_url + "/v1", api_key="test", max_retries=0
    ) as client:
        response = await client.responses.create(model=OPENAI_MODEL, input="hi")

    assert response.output_text == "Fake reply to 1 messages."


# --- the Anthropic beta namespace ------------------------------------------------


def test_the_beta_messages_path_is_served_and_recorded(
    anthropic_client: Any, provider: FakeProvider
) -> None:
    message = anthropic_client.beta.messages.create(
        model=CLAUDE_MODEL, max_tokens=64, messages=anthropic_tool_conversation()
    )

    assert message.content[0].text == "Fake reply to 5 messages."
    assert provider.requests[-1].path == "/v1/messages"


def test_the_beta_query_is_served_and_recorded(provider: FakeProvider) -> None:
    # Older anthropic releases put ?beta=true on the URL of client.beta.messages calls.
    body = {
        "model": CLAUDE_MODEL,
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "hi"}],
    }
    request = urllib.request.Request(
        provider.base_url + "/v1/messages?beta=true",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "anthropic-version": "2023-06-01"},
    )

    with urllib.request.urlopen(request, timeout=5) as response:
        reply = json.loads(response.read())

    assert reply["content"] == [{"type": "text", "text": "Fake reply to 1 messages."}]
    assert (provider.requests[-1].path, provider.requests[-1].query) == (
        "/v1/messages",
        "beta=true",
    )


def test_the_beta_path_enforces_pairing_and_the_limit(
    anthropic_client: Any, provider: FakeProvider
) -> None:
    with pytest.raises(anthropic.BadRequestError, match="unexpected `tool_use_id`"):
        anthropic_client.beta.messages.create(
            model=CLAUDE_MODEL, max_tokens=64, messages=anthropic_tool_conversation()[2:]
        )
    provider.context_limit = 1
    stream = anthropic_client.beta.messages.stream(
        model=CLAUDE_MODEL, max_tokens=64, messages=[{"role": "user", "content": "hi"}]
    )
    with pytest.raises(anthropic.BadRequestError, match="prompt is too long"), stream as events:
        events.get_final_message()
