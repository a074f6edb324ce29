"""openai-agents' Chat Completions and Responses models against the local provider.

The agent's client is used once before the session. Turns alternate between
``Runner.run`` and ``Runner.run_streamed``, each resending the previous run's
``to_input_list()``. See ``_scenario.py`` for the scenario and its checks.
"""

from __future__ import annotations

import asyncio
from typing import Any, Dict, List

import pytest

pytest.importorskip("agents")
openai = pytest.importorskip("openai")

from agents import (  # noqa: E402
    Agent,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)

from ctx_compact import check_pairing, compact  # noqa: E402
from ctx_compact.testing import FakeProvider  # noqa: E402

from ._scenario import LIMIT, OPENAI_MODEL, TURNS, Run, get_report, prompts  # noqa: E402

set_tracing_disabled(True)  # traces would be exported to OpenAI

MODELS = {
    "OpenAIChatCompletionsModel": (OpenAIChatCompletionsModel, "/v1/chat/completions"),
    "OpenAIResponsesModel": (OpenAIResponsesModel, "/v1/responses"),
}


def make_agent(model_class: Any, client: Any) -> Any:
    model = model_class(model=OPENAI_MODEL, openai_client=client)
    return Agent(
        name="weather", instructions="Be terse.", tools=[function_tool(get_report)], model=model
    )


async def converse(agent: Any, turns: List[str]) -> List[Dict[str, Any]]:
    items: List[Dict[str, Any]] = []
    for index, prompt in enumerate(turns):
        items = [*items, {"role": "user", "content": prompt}]
        if index % 2:
            streamed = Runner.run_streamed(agent, items)
            async for _ in streamed.stream_events():
                pass
            items = streamed.to_input_list()
        else:
            items = (await Runner.run(agent, items)).to_input_list()
    return items


def client_for(provider: FakeProvider) -> Any:
    return openai.AsyncOpenAI(base_url=provider.base_url + "/v1", api_key="t", max_retries=0)


@pytest.mark.parametrize("name", list(MODELS))
def test_fourteen_tool_turns_stay_within_the_limit(provider: FakeProvider, name: str) -> None:
    model_class, route = MODELS[name]

    async def main() -> Any:
        async with client_for(provider) as client:
            agent = make_agent(model_class, client)
            await Runner.run(agent, "Warm-up before the session.")
            with Run(f"openai-agents {name}", route, provider, intercept="openai") as run:
                items = await converse(agent, prompts())
            return run, items

    run, items = asyncio.run(main())

    # The Chat Completions model asks for no usage on streams; Responses streams end with it.
    run.check(
        expected_requests=2 * TURNS,
        usage_on_every_response=model_class is OpenAIResponsesModel,
    )
    assert sum(1 for item in items if item.get("type") == "function_call") == TURNS


@pytest.mark.parametrize("name", list(MODELS))
def test_a_lower_provider_limit_is_met_by_retrying(provider: FakeProvider, name: str) -> None:
    model_class, route = MODELS[name]
    provider.context_limit = LIMIT - 300

    async def main() -> Any:
        async with client_for(provider) as client:
            agent = make_agent(model_class, client)
            with Run(
                f"openai-agents {name} (limit {LIMIT - 300}, retry)",
                route,
                provider,
                intercept="openai",
                on_overflow="retry",
            ) as run:
                await converse(agent, prompts())
            return run

    run = asyncio.run(main())

    run.check(limit=LIMIT - 300)


def test_input_items_compact_with_each_call_and_its_output(provider: FakeProvider) -> None:
    provider.context_limit = None

    async def main() -> Any:
        async with client_for(provider) as client:
            return await converse(make_agent(OpenAIResponsesModel, client), prompts()[:6])

    items = asyncio.run(main())

    result = compact(items, max_tokens=600)

    assert result.dropped
    assert all(any(m is own for own in items) for m in result.messages)
    assert check_pairing(result.messages) == []
    calls = {m["call_id"] for m in result.messages if m.get("type") == "function_call"}
    outputs = {m["call_id"] for m in result.messages if m.get("type") == "function_call_output"}
    assert calls == outputs
