"""framework_view: LangChain, pydantic-ai and openai-agents objects seen as what they send.

Each framework's tests are skipped when it is not installed (they live in the
optional framework environment). Where a framework talks to a provider, the
view is checked against what it really sent to the local fake provider.
"""

from __future__ import annotations

import asyncio
import base64
import importlib.util
import json
from typing import Any, List, Mapping

import pytest
from media_files import png

from ctx_compact import (
    InvalidMessageError,
    check_pairing,
    compact,
    media_aware_counter,
    truncate_tool_results,
)
from ctx_compact._contract import group_bounds
from ctx_compact.formats.frameworks import framework_view
from ctx_compact.testing import FakeProvider


def has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


needs_langchain = pytest.mark.skipif(
    not (has("langchain_core") and has("langchain_openai")), reason="langchain is not installed"
)
needs_pydantic_ai = pytest.mark.skipif(
    not has("pydantic_ai"), reason="pydantic-ai is not installed"
)
needs_agents = pytest.mark.skipif(not has("agents"), reason="openai-agents is not installed")


def views(messages: List[Any]) -> List[Mapping[str, Any]]:
    seen = [framework_view(message) for message in messages]
    assert all(view is not None for view in seen)
    return [view for view in seen if view is not None]


def get_weather(city: str) -> str:
    """Get the weather for a city."""
    return f"sunny in {city}"


# --- anything else --------------------------------------------------------------


class Message:
    role = "user"
    content = "hi"


@pytest.mark.parametrize(
    "value", [{"role": "user", "content": "hi"}, Message(), "hi", None, 3, [{"role": "user"}]]
)
def test_objects_of_no_known_framework_have_no_view(value: Any) -> None:
    assert framework_view(value) is None


# --- LangChain ------------------------------------------------------------------


def langchain_conversation() -> List[Any]:
    from langchain_core.messages import (
        AIMessage,
        ChatMessage,
        HumanMessage,
        SystemMessage,
        ToolMessage,
    )

    return [
        SystemMessage("Be terse."),
        HumanMessage("Weather in Paris and Rome?", name="ann"),
        AIMessage(
            content="",
            tool_calls=[
                {"name": "get_weather", "args": {"city": "Paris"}, "id": "call_1"},
                {"name": "get_weather", "args": {"city": "Rome é"}, "id": "call_2"},
            ],
        ),
        ToolMessage(content="sunny", tool_call_id="call_2"),
        ToolMessage(content="rainy", tool_call_id="call_1"),
        AIMessage("Sunny and rainy."),
        ChatMessage(role="user", content="Thanks"),
    ]


@needs_langchain
def test_a_langchain_tool_exchange_is_one_group() -> None:
    messages = langchain_conversation()

    seen = views(messages)

    assert group_bounds(seen) == [0, 1, 2, 5, 6, 7]
    assert check_pairing(seen) == []
    assert [view["role"] for view in seen] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "user",
    ]


@needs_langchain
def test_a_langchain_result_without_its_call_is_reported() -> None:
    messages = langchain_conversation()
    del messages[2]

    problems = check_pairing(views(messages))

    assert [(p.index, p.code) for p in problems][:1] == [(2, "orphan_tool_result")]


@needs_langchain
def test_langchain_views_are_what_chat_openai_sends(provider: FakeProvider) -> None:
    from langchain_openai import ChatOpenAI

    messages = langchain_conversation()
    before = [message.model_dump() for message in messages]
    llm = ChatOpenAI(model="gpt-4o", base_url=provider.base_url + "/v1", api_key="t", max_retries=0)

    try:
        llm.invoke(messages)
    finally:
        llm.root_client.close()

    assert provider.requests[-1].body["messages"] == views(messages)
    assert [message.model_dump() for message in messages] == before


@needs_langchain
def test_a_langchain_chunk_and_invalid_calls_are_seen_as_assistant_calls() -> None:
    from langchain_core.messages import AIMessage, AIMessageChunk

    chunk = AIMessageChunk(
        content="", tool_call_chunks=[{"name": "f", "args": "{}", "id": "c1", "index": 0}]
    )
    invalid = AIMessage(
        content="x", invalid_tool_calls=[{"name": "f", "args": "{oops", "id": "c2", "error": "e"}]
    )

    chunk_view, invalid_view = views([chunk, invalid])

    assert chunk_view["tool_calls"][0]["id"] == "c1"
    assert chunk_view["content"] is None
    assert invalid_view["tool_calls"] == [
        {"type": "function", "id": "c2", "function": {"name": "f", "arguments": "{oops"}}
    ]


def claude_exchange(ai: Any) -> List[Any]:
    from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage

    return [SystemMessage("s"), HumanMessage("h?"), ai, ToolMessage("9-5", tool_call_id="toolu_1")]


def anthropic_reply() -> Any:
    """An AIMessage as ChatAnthropic (and ChatBedrockConverse) returns one: its tool_use
    blocks in content, and the same calls in tool_calls."""
    from langchain_core.messages import AIMessage

    return AIMessage(
        content=[
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"q": "h"}},
        ],
        tool_calls=[{"id": "toolu_1", "name": "lookup", "args": {"q": "h"}}],
    )


@needs_langchain
def test_claudes_tool_use_blocks_are_its_tool_calls_once() -> None:
    messages = claude_exchange(anthropic_reply())

    result = compact(messages, max_tokens=10**9)
    ai = views(messages)[2]

    assert result.messages == messages
    assert ai["content"] == [{"type": "text", "text": "Let me look."}]
    assert ai["tool_calls"] == [
        {
            "type": "function",
            "id": "toolu_1",
            "function": {"name": "lookup", "arguments": '{"q": "h"}'},
        }
    ]
    assert group_bounds(views(messages)) == [0, 1, 2, 4]


@needs_langchain
@pytest.mark.parametrize(
    "block",
    [
        # ChatAnthropic's streamed call: its input arrives as partial_json.
        {
            "type": "tool_use",
            "id": "toolu_1",
            "name": "lookup",
            "input": {},
            "index": 1,
            "partial_json": '{"q": "h"}',
        },
        # ChatBedrockConverse's streamed call: its input is the raw text.
        {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": '{"q": "h"}', "index": 1},
        # langchain-core's v1 standard block (output_version="v1").
        {"type": "tool_call", "id": "toolu_1", "name": "lookup", "args": {"q": "h"}},
        # ChatOpenAI's Responses API output ("responses/v1"): answered by its call_id.
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "toolu_1",
            "name": "lookup",
            "arguments": '{"q": "h"}',
        },
    ],
    ids=["anthropic stream", "bedrock stream", "v1 tool_call", "responses function_call"],
)
def test_every_integrations_call_blocks_beside_tool_calls_are_one_call(block: Any) -> None:
    from langchain_core.messages import AIMessage

    thinking = {"type": "reasoning", "reasoning": "The user asks for h."}
    ai = AIMessage(
        content=[thinking, block],
        tool_calls=[{"id": "toolu_1", "name": "lookup", "args": {"q": "h"}}],
        response_metadata={"output_version": "v1"},
    )

    seen = views(claude_exchange(ai))

    assert seen[2]["content"] == [thinking]  # counted, as the providers that take it back send it
    assert [call["id"] for call in seen[2]["tool_calls"]] == ["toolu_1"]
    assert check_pairing(seen) == []
    assert group_bounds(seen) == [0, 1, 2, 4]


@needs_langchain
def test_a_call_block_that_tool_calls_lack_is_a_call_too() -> None:
    # ChatAnthropic sends a tool_use block whatever tool_calls say: its result answers it.
    from langchain_core.messages import AIMessage

    ai = AIMessage(
        content=[{"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"q": "h"}}]
    )

    seen = views(claude_exchange(ai))

    assert seen[2]["tool_calls"][0]["function"] == {"name": "lookup", "arguments": '{"q": "h"}'}
    assert seen[2]["content"] is None
    assert check_pairing(seen) == []


@needs_langchain
@pytest.mark.parametrize(
    ("block", "part"),
    [
        (
            {"type": "image", "base64": "iVBORw0KGgo=", "mime_type": "image/png"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        ),
        (
            {"type": "image", "url": "https://example.com/a.png"},
            {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
        ),
        (
            {"type": "image", "source_type": "base64", "data": "iVBO", "mime_type": "image/png"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}},
        ),
        (
            {"type": "file", "base64": "JVBERi0=", "mime_type": "application/pdf"},
            {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBERi0="}},
        ),
        (
            {"type": "audio", "base64": "UklGRg==", "mime_type": "audio/wav"},
            {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
        ),
    ],
    ids=["image base64", "image url", "v0 image", "pdf", "audio"],
)
def test_standard_data_blocks_are_seen_as_media_parts(block: Any, part: Any) -> None:
    from langchain_core.messages import HumanMessage, ToolMessage

    text = {"type": "text", "text": "What is this?"}
    human, tool = views([HumanMessage([text, block]), ToolMessage([block], tool_call_id="c1")])

    assert human["content"] == [text, part]
    assert tool["content"] == [part]


@needs_langchain
def test_a_large_base64_image_is_counted_as_an_image_not_as_its_text() -> None:
    from langchain_core.messages import HumanMessage

    pixels = base64.b64encode(png(512, 512) + bytes(200_000)).decode()
    image = {"type": "image", "base64": pixels, "mime_type": "image/png"}

    counted = media_aware_counter()(HumanMessage([image]))

    # One 512 x 512 tile is 255 tokens at OpenAI; the base64 read as text would be 66,000.
    assert 255 < counted < 300


@needs_langchain
@pytest.mark.parametrize(
    ("message", "keys"),
    [
        ("human", "'tool_use' blocks"),
        ("tool", "'tool_result' blocks"),
    ],
)
def test_structure_no_integration_sends_is_refused(message: str, keys: str) -> None:
    from langchain_core.messages import HumanMessage, ToolMessage

    use = {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "9-5"}
    odd = (
        HumanMessage([use]) if message == "human" else ToolMessage([result], tool_call_id="toolu_1")
    )
    messages = [*claude_exchange(anthropic_reply())[:3], odd]

    with pytest.raises(InvalidMessageError, match=f"message 3: .*{keys}"):
        compact(messages, max_tokens=10**9)


@needs_langchain
@pytest.mark.parametrize(
    ("provider", "resumes_at"),
    [
        ("openai", 2),  # the call
        ("anthropic", 2),
        ("ollama", 2),
        ("google_genai", 4),  # a model's text turn: Gemini takes it after the system's
        ("bedrock_converse", 5),  # the next question: Bedrock starts with the user
    ],
)
def test_a_cut_resumes_where_the_provider_takes_the_models_turn(
    provider: str, resumes_at: int
) -> None:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    def turn(n: int) -> List[Any]:
        call = {"id": f"c{n}", "name": "lookup", "args": {"q": "x" * 40}}
        stamp = {"model_provider": provider}
        return [
            HumanMessage(f"question {n} " * 20),
            AIMessage("", tool_calls=[call], response_metadata=stamp),
            ToolMessage("y" * 200, tool_call_id=f"c{n}"),
            AIMessage(f"answer {n}", response_metadata=stamp),
        ]

    messages = [SystemMessage("s"), *turn(1), *turn(2), *turn(3)]
    whole = compact(messages, max_tokens=10**9).tokens_before
    question = compact(messages[1:2], max_tokens=10**9).tokens_before

    result = compact(messages, max_tokens=whole - question)

    assert result.fits
    assert result.messages[1] is messages[resumes_at]


# --- pydantic-ai ----------------------------------------------------------------


def pydantic_ai_history() -> List[Any]:
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        SystemPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

    return [
        ModelRequest(parts=[SystemPromptPart("Be terse."), UserPromptPart("Paris and Rome?")]),
        ModelResponse(
            parts=[
                TextPart("Checking."),
                ToolCallPart("get_weather", {"city": "Paris"}, "call_1"),
                ToolCallPart("get_weather", '{"city": "Rome"}', "call_2"),
            ]
        ),
        ModelRequest(
            parts=[
                ToolReturnPart("get_weather", "sunny", "call_1"),
                ToolReturnPart("get_weather", {"tempC": 20}, "call_2"),
            ]
        ),
        ModelResponse(parts=[TextPart("Sunny, 20C.")]),
        ModelRequest(parts=[UserPromptPart("Thanks")]),
    ]


@needs_pydantic_ai
def test_a_pydantic_ai_response_stays_with_the_request_that_answers_it() -> None:
    seen = views(pydantic_ai_history())

    assert group_bounds(seen) == [0, 1, 3, 4, 5]
    assert check_pairing(seen) == []
    assert seen[1]["content"][1:] == [
        {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Paris"}},
        {"type": "tool_use", "id": "call_2", "name": "get_weather", "input": {"city": "Rome"}},
    ]
    assert [block["tool_use_id"] for block in seen[2]["content"]] == ["call_1", "call_2"]
    assert json.loads(seen[2]["content"][1]["content"]) == {"tempC": 20}


@needs_pydantic_ai
def test_a_pydantic_ai_response_without_its_returns_is_reported() -> None:
    history = pydantic_ai_history()
    del history[2]

    problems = check_pairing(views(history))

    assert [(p.index, p.code, p.ids) for p in problems] == [
        (1, "missing_tool_result_blocks", ("call_1", "call_2"))
    ]


@needs_pydantic_ai
def test_a_tool_retry_is_the_failed_result_of_its_call() -> None:
    import warnings

    from pydantic_ai.messages import ModelRequest

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # RetryPromptPart is deprecated in newer releases
        from pydantic_ai.messages import RetryPromptPart

        retry = RetryPromptPart(
            content="city is required", tool_name="get_weather", tool_call_id="c"
        )
        (view,) = views([ModelRequest(parts=[retry])])

    block = view["content"][0]
    assert (block["type"], block["tool_use_id"], block["is_error"]) == ("tool_result", "c", True)
    assert "city is required" in block["content"]


@needs_pydantic_ai
def test_a_real_pydantic_ai_run_pairs_its_call_and_return(provider: FakeProvider) -> None:
    import openai
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    provider.tool_calls = 1

    async def run() -> Any:
        async with openai.AsyncOpenAI(
            base_url=provider.base_url + "/v1", api_key="t", max_retries=0
        ) as client:
            model = OpenAIChatModel("gpt-4o", provider=OpenAIProvider(openai_client=client))
            return await Agent(model, tools=[get_weather]).run("Weather in Paris?")

    # asyncio.run and a closed client: run_sync would leave its loop and connections open.
    history = asyncio.run(run()).all_messages()

    seen = views(history)

    assert [type(m).__name__ for m in history] == [
        "ModelRequest",
        "ModelResponse",
        "ModelRequest",
        "ModelResponse",
    ]
    assert group_bounds(seen) == [0, 1, 3, 4]
    assert check_pairing(seen) == []


# --- openai-agents --------------------------------------------------------------


@needs_agents
def test_openai_agents_run_items_are_seen_as_their_input_items(provider: FakeProvider) -> None:
    import openai
    from agents import Agent, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled

    set_tracing_disabled(True)
    provider.tool_calls = 1

    async def run() -> Any:
        async with openai.AsyncOpenAI(
            base_url=provider.base_url + "/v1", api_key="t", max_retries=0
        ) as client:
            model = OpenAIResponsesModel(model="gpt-4o", openai_client=client)
            agent = Agent(name="a", tools=[function_tool(get_weather)], model=model)
            return await Runner.run(agent, "Weather in Paris?")

    result = asyncio.run(run())
    items = result.new_items

    seen = views(items)

    assert [type(item).__name__ for item in items] == [
        "ToolCallItem",
        "ToolCallOutputItem",
        "MessageOutputItem",
    ]
    assert [view["type"] for view in seen] == ["function_call", "function_call_output", "message"]
    assert group_bounds(seen) == [0, 2, 3]
    assert seen[0]["call_id"] == seen[1]["call_id"]
    # The list the SDK hands back for the next turn holds plain dicts: no view needed.
    assert all(framework_view(item) is None for item in result.to_input_list())


# --- cutting an oversized result held in a framework's object ----------------------------

LOG = "".join(f"line {n} of the log\n" for n in range(5000))


@needs_langchain
def test_an_oversized_langchain_tool_message_is_cut_as_its_view() -> None:
    from langchain_core.messages import ToolMessage

    messages = langchain_conversation()
    messages[3] = ToolMessage(content=LOG, tool_call_id="call_2")

    result = truncate_tool_results(messages, max_result_tokens=300)

    [cut] = result.cleared
    assert (cut.index, cut.call_id, cut.tool, cut.tokens_after <= 300) == (
        3,
        "call_2",
        "get_weather",
        True,
    )
    new = result.messages[3]
    assert new["role"] == "tool"
    assert new["tool_call_id"] == "call_2"
    assert new["content"].startswith("line 0 of the log")
    assert "characters (about" in new["content"]
    assert messages[3].content == LOG  # the caller's object is untouched
    assert all(result.messages[i] is messages[i] for i in (0, 1, 2, 4, 5, 6))
    assert check_pairing(result.messages) == []


@needs_pydantic_ai
def test_an_oversized_pydantic_ai_tool_return_is_cut_as_its_view() -> None:
    from pydantic_ai.messages import ModelRequest, ToolReturnPart

    history = pydantic_ai_history()
    history[2] = ModelRequest(
        parts=[
            ToolReturnPart("get_weather", LOG, "call_1"),
            ToolReturnPart("get_weather", {"tempC": 20}, "call_2"),
        ]
    )

    result = truncate_tool_results(history, max_result_tokens=300)

    [cut] = result.cleared
    assert (cut.index, cut.call_id, cut.tool) == (2, "call_1", "get_weather")
    blocks = result.messages[2]["content"]
    assert [b["tool_use_id"] for b in blocks] == ["call_1", "call_2"]
    assert "characters (about" in blocks[0]["content"]
    assert json.loads(blocks[1]["content"]) == {"tempC": 20}
    assert history[2].parts[0].content == LOG
    assert check_pairing(result.messages) == []
