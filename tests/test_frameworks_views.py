"""framework_view: LangChain, pydantic-ai and openai-agents objects seen as what they send.

Each framework's tests are skipped when it is not installed (they live in the
optional framework environment). Where a framework talks to a provider, the
view is checked against what it really sent to the local fake provider.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
from typing import Any, List, Mapping

import pytest

from ctx_compact import check_pairing
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
