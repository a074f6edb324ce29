"""middleware.integrations.pydantic_ai: the history processor and the capability in real runs.

A pydantic-ai agent (its OpenAI chat model against the local provider, one
tool, instructions) holds ``TURNS`` tool-using turns, each run resending the
previous run's history, which passes the limit after a few turns. See
``_scenario.py`` for the scenario and ``_integrations.py`` for the checks.
"""

from __future__ import annotations

import asyncio
from importlib.metadata import version
from typing import Any, List

import openai
import pytest
from helpers import read_log
from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import (
    ModelRequest,
    ModelResponse,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.usage import RunUsage

from ctx_compact import check_pairing
from ctx_compact.testing import FakeProvider
from middleware import CompactionEvent
from middleware.integrations.pydantic_ai import CompactionCapability, history_processor

from ._integrations import check_integration, first_system, sent_tokens
from ._scenario import LIMIT, OPENAI_MODEL, TURNS, Run, get_report, prompts

PYDANTIC_AI = f"pydantic-ai {version('pydantic-ai-slim')}"
SYSTEM = "Be terse. Answer with the figures of the report and nothing else."


async def converse(agent: Any) -> List[Any]:
    """Hold the conversation, streaming every other turn; return the full history."""
    history: List[Any] = []
    for index, prompt in enumerate(prompts()):
        if index % 2:
            async with agent.run_stream(prompt, message_history=history) as streamed:
                await streamed.get_output()
            history = streamed.all_messages()
        else:
            history = (await agent.run(prompt, message_history=history)).all_messages()
    return history


def run_agent(provider: FakeProvider, label: str, **agent_options: Any) -> Any:
    async def main() -> Any:
        client = openai.AsyncOpenAI(base_url=provider.base_url + "/v1", api_key="t", max_retries=0)
        async with client:
            model = OpenAIChatModel(OPENAI_MODEL, provider=OpenAIProvider(openai_client=client))
            agent = Agent(model, tools=[get_report], instructions=SYSTEM, **agent_options)
            with Run(f"{PYDANTIC_AI} {label}", "/v1/chat/completions", provider) as run:
                history = await converse(agent)
            return run, history

    return asyncio.run(main())


def check_counted_as_sent(run: Run, seen: List[CompactionEvent]) -> None:
    """No request counted below what was sent (its tools included), as the model sends it."""
    short = [
        (i, event.tokens_after, sent_tokens(request))
        for i, (event, request) in enumerate(zip(seen, run.requests()))
        if event.tokens_after < sent_tokens(request)
    ]
    assert short == [], f"counted below what was sent (index, counted, sent): {short}"


def test_the_history_processor_keeps_the_agent_within_the_limit(provider: FakeProvider) -> None:
    seen: List[CompactionEvent] = []
    processor = history_processor(
        LIMIT, instructions=SYSTEM, tools=[get_report], on_compact=seen.append
    )

    run, history = run_agent(
        provider, "history_processor", capabilities=[ProcessHistory(processor)]
    )

    check_integration(run, seen, expected_requests=2 * TURNS, usage=False)
    check_counted_as_sent(run, seen)
    assert all(first_system(request) == SYSTEM for request in run.requests())
    assert all(event.function == "pydantic-ai history_processor" for event in seen)
    # pydantic-ai keeps what its history processors return: the history is the compacted one.
    assert len(history) < 4 * TURNS
    assert check_pairing(history) == []


def test_the_capability_keeps_the_agent_within_the_limit(provider: FakeProvider) -> None:
    seen: List[CompactionEvent] = []

    async def on_compact(event: CompactionEvent) -> None:
        seen.append(event)

    capability = CompactionCapability(LIMIT, on_compact=on_compact)

    run, history = run_agent(provider, "CompactionCapability", capabilities=[capability])

    check_integration(run, seen, expected_requests=2 * TURNS)
    check_counted_as_sent(run, seen)
    assert all(first_system(request) == SYSTEM for request in run.requests())
    assert len(history) == 4 * TURNS  # only the requests were compacted


def test_a_summary_and_cleared_returns_are_pydantic_ai_messages(provider: FakeProvider) -> None:
    seen: List[CompactionEvent] = []
    capability = CompactionCapability(
        LIMIT,
        summarize=lambda dropped: f"Earlier: {len(dropped)} messages about the weather.",
        clear_tool_results={"keep": 2, "clear_inputs": True},
        on_compact=seen.append,
    )

    run, _ = run_agent(
        provider, "CompactionCapability (summary, clearing)", capabilities=[capability]
    )

    check_integration(run, seen, expected_requests=2 * TURNS)
    check_counted_as_sent(run, seen)
    assert any(event.summary for event in seen)
    assert any(event.cleared_results for event in seen)
    last = run.requests()[-1].body["messages"]
    assert any(m["role"] == "user" and "Earlier:" in str(m["content"]) for m in last)
    cleared = [m for m in last if m["role"] == "tool" and "cleared" in str(m["content"]).lower()]
    assert cleared


def test_bad_tools_and_retries_are_refused() -> None:
    with pytest.raises(TypeError, match="'tools' must hold"):
        history_processor(LIMIT, tools=["get_report"])
    with pytest.raises(TypeError, match="'instructions' must be"):
        history_processor(LIMIT, instructions=[ModelRequest(parts=[UserPromptPart("x")])])
    with pytest.raises(ValueError, match="cannot retry"):
        CompactionCapability(LIMIT, on_overflow="retry")


def test_cleared_thinking_and_returns_come_back_as_copies_of_their_messages() -> None:
    history: List[Any] = []
    for turn in range(6):
        call = ToolCallPart("get_report", {"city": f"City {turn}"}, tool_call_id=f"c{turn}")
        history += [
            ModelRequest(parts=[UserPromptPart(f"Turn {turn}?")]),
            ModelResponse(parts=[ThinkingPart("Let me think. " * 30), call]),
            ModelRequest(parts=[ToolReturnPart("get_report", get_report("Oslo"), f"c{turn}")]),
            ModelResponse(parts=[TextPart(f"Answer {turn}.")]),
        ]
    seen: List[CompactionEvent] = []
    processor = history_processor(
        900,
        clear_thinking=True,
        clear_tool_results={"keep": 1, "clear_inputs": True},
        keep_head=0,
        on_compact=seen.append,
    )

    # A model whose mapping is not followed: the messages are counted as the core reads them.
    context = RunContext(deps=None, model=TestModel(), usage=RunUsage())
    kept = asyncio.run(processor(context, history))

    (event,) = seen
    assert event.cleared_thinking
    assert event.cleared_results
    assert all(isinstance(m, (ModelRequest, ModelResponse)) for m in kept)
    assert check_pairing(kept) == []
    copies = [m for m in kept if not any(m is own for own in history)]
    assert copies  # the edited messages are new objects; the caller's are untouched
    thinking = [p for m in kept for p in m.parts if isinstance(p, ThinkingPart)]
    assert len(thinking) < sum(1 for m in history for p in m.parts if isinstance(p, ThinkingPart))
    returns = [p for m in kept for p in m.parts if isinstance(p, ToolReturnPart)]
    assert any(p.content != get_report("Oslo") for p in returns)
    assert all(
        p.content == get_report("Oslo")
        for m in history
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    )


@pytest.mark.parametrize("how", ["capability", "history_processor"])
def test_a_tool_output_larger_than_the_budget_is_cut_and_the_run_goes_on(
    provider: FakeProvider, how: str
) -> None:
    provider.tool_calls = 1
    seen: List[CompactionEvent] = []
    options: Any = {"on_compact": seen.append, "pin": lambda m: "TASK" in str(m)}
    if how == "capability":
        capabilities: Any = [CompactionCapability(LIMIT, **options)]
    else:
        processor = history_processor(LIMIT, instructions=SYSTEM, tools=[read_log], **options)
        capabilities = [ProcessHistory(processor)]

    async def main() -> Any:
        client = openai.AsyncOpenAI(base_url=provider.base_url + "/v1", api_key="t", max_retries=0)
        async with client:
            model = OpenAIChatModel(OPENAI_MODEL, provider=OpenAIProvider(openai_client=client))
            agent = Agent(model, tools=[read_log], instructions=SYSTEM, capabilities=capabilities)
            return await agent.run("TASK: which worker is slow?")

    result = asyncio.run(main())
    assert result.output
    assert any(event.truncated_results for event in seen)
    assert all(event.fits for event in seen)
    sent = provider.requests[-1].body["messages"]
    assert any("TASK: which worker is slow?" in str(m.get("content")) for m in sent)
    assert check_pairing(sent) == []
