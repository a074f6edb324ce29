"""middleware.integrations.openai_agents: input_filter in real Runner runs.

An openai-agents agent (its Chat Completions and its Responses model against the
local provider, one tool, instructions) holds ``TURNS`` tool-using turns, each
run resending the previous run's ``to_input_list()``, which passes the limit
after a few turns. See ``_scenario.py`` for the scenario and
``_integrations.py`` for the checks.
"""

from __future__ import annotations

import asyncio
from importlib.metadata import version
from typing import Any, Dict, List

import openai
import pytest
from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    RunConfig,
    Runner,
    ToolOutputImage,
    ToolOutputText,
    function_tool,
    set_tracing_disabled,
)
from helpers import read_log
from media_files import data_url, png

from ctx_compact import check_pairing
from ctx_compact.testing import FakeProvider
from middleware import CompactionEvent
from middleware.integrations.openai_agents import input_filter

from ._integrations import check_integration, first_system, sent_tokens
from ._scenario import LIMIT, OPENAI_MODEL, TURNS, Run, get_report, prompts

set_tracing_disabled(True)  # traces would be exported to OpenAI

OPENAI_AGENTS = f"openai-agents {version('openai-agents')}"
SYSTEM = "Be terse. Answer with the figures of the report and nothing else."
MODELS = {
    "OpenAIChatCompletionsModel": (OpenAIChatCompletionsModel, "/v1/chat/completions"),
    "OpenAIResponsesModel": (OpenAIResponsesModel, "/v1/responses"),
}


async def converse(agent: Any, config: RunConfig) -> List[Dict[str, Any]]:
    items: List[Dict[str, Any]] = []
    for index, prompt in enumerate(prompts()):
        items = [*items, {"role": "user", "content": prompt}]
        if index % 2:
            streamed = Runner.run_streamed(agent, items, run_config=config)
            async for _ in streamed.stream_events():
                pass
            items = streamed.to_input_list()
        else:
            items = (await Runner.run(agent, items, run_config=config)).to_input_list()
    return items


def run_agent(
    provider: FakeProvider, name: str, label: str, tools: Any = (get_report,), **options: Any
) -> Any:
    model_class, route = MODELS[name]
    config = RunConfig(call_model_input_filter=input_filter(LIMIT, **options))

    async def main() -> Any:
        client = openai.AsyncOpenAI(base_url=provider.base_url + "/v1", api_key="t", max_retries=0)
        async with client:
            model = model_class(model=OPENAI_MODEL, openai_client=client)
            agent = Agent(
                name="weather",
                instructions=SYSTEM,
                tools=[function_tool(t) for t in tools],
                model=model,
            )
            with Run(f"{OPENAI_AGENTS} {name} ({label})", route, provider) as run:
                items = await converse(agent, config)
            return run, items

    return asyncio.run(main())


@pytest.mark.parametrize("name", list(MODELS))
def test_the_filter_keeps_every_call_within_the_limit(provider: FakeProvider, name: str) -> None:
    seen: List[CompactionEvent] = []

    run, items = run_agent(provider, name, "input_filter", on_compact=seen.append)

    check_integration(run, seen, expected_requests=2 * TURNS, usage=False)
    assert all(first_system(request) == SYSTEM for request in run.requests())
    assert all(event.function == "openai-agents call_model_input_filter" for event in seen)
    # Only what the model was sent was compacted: the run's items are whole.
    assert sum(1 for item in items if item.get("type") == "function_call") == TURNS
    assert check_pairing(items) == []


def get_map(city: str) -> List[Any]:
    """Get the detailed weather report for a city, and its map."""
    image = ToolOutputImage(image_url=data_url("image/png", png(64, 48)))
    return [ToolOutputText(text=get_report(city)), image]


@pytest.mark.parametrize("tools", [(get_report,), (get_map,)], ids=["report", "image"])
def test_the_chat_model_is_counted_as_it_sends_the_items(
    provider: FakeProvider, tools: Any
) -> None:
    # Counted as Responses items, the history looked 10-20% bigger than the Chat
    # Completions messages sent (1,439 for 1,192): history that fitted was dropped.
    # An image a tool returns is not sent to a Chat Completions model at all.
    seen: List[CompactionEvent] = []

    run, _ = run_agent(
        provider, "OpenAIChatCompletionsModel", "counted", tools, on_compact=seen.append
    )

    check_integration(run, seen, expected_requests=2 * TURNS, usage=False)
    assert [event.tokens_after for event in seen] == list(map(sent_tokens, run.requests()))


@pytest.mark.parametrize("name", list(MODELS))
def test_summaries_and_cleared_outputs_are_sent_as_input_items(
    provider: FakeProvider, name: str
) -> None:
    seen: List[CompactionEvent] = []

    async def summarize(dropped: List[Any]) -> str:
        return f"Earlier: {len(dropped)} items about the weather."

    run, _ = run_agent(
        provider,
        name,
        "summary, clearing",
        summarize=summarize,
        clear_tool_results={"keep": 2},
        on_compact=seen.append,
    )

    check_integration(run, seen, expected_requests=2 * TURNS, usage=False)
    assert any(event.summary for event in seen)
    assert any(event.cleared_results for event in seen)
    body = run.requests()[-1].body
    sent = body.get("messages") or body["input"]
    assert any("Earlier:" in str(item.get("content")) for item in sent)


def test_retrying_is_refused() -> None:
    with pytest.raises(ValueError, match="cannot retry"):
        input_filter(LIMIT, on_overflow="retry")


@pytest.mark.parametrize("name", list(MODELS))
def test_a_tool_output_larger_than_the_budget_is_cut_and_the_run_goes_on(
    provider: FakeProvider, name: str
) -> None:
    provider.tool_calls = 1
    seen: List[CompactionEvent] = []
    model_class, _ = MODELS[name]
    config = RunConfig(
        call_model_input_filter=input_filter(
            LIMIT, on_compact=seen.append, pin=lambda m: "TASK" in str(m)
        )
    )

    async def main() -> Any:
        client = openai.AsyncOpenAI(base_url=provider.base_url + "/v1", api_key="t", max_retries=0)
        async with client:
            model = model_class(model=OPENAI_MODEL, openai_client=client)
            agent = Agent(
                name="ops", instructions=SYSTEM, tools=[function_tool(read_log)], model=model
            )
            return await Runner.run(agent, "TASK: which worker is slow?", run_config=config)

    result = asyncio.run(main())
    assert result.final_output
    assert any(event.truncated_results for event in seen)
    assert all(event.fits for event in seen)
    assert "TASK: which worker is slow?" in str(provider.requests[-1].body)
