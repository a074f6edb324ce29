"""middleware.integrations.langchain: CompactionMiddleware in a real create_agent loop.

A LangChain v1 agent (each of LangChain's provider integrations against the
local provider, one tool, a system prompt) holds ``TURNS`` tool-using turns on
one checkpointed thread, so its stored history passes the limit after a few
turns. See ``_scenario.py`` for the scenario, ``_integrations.py`` for the
checks and ``_langchain_models.py`` for the chat models.
"""

from __future__ import annotations

import asyncio
import json
from importlib.metadata import version
from typing import Any, List

import pytest
from langchain.agents import create_agent
from langgraph.checkpoint.memory import InMemorySaver

from ctx_compact import check_pairing
from ctx_compact.testing import FakeProvider
from middleware import CompactionEvent
from middleware.integrations.langchain import CompactionMiddleware

from ._integrations import check_integration, first_system
from ._langchain_models import INTEGRATIONS, Integration
from ._scenario import LIMIT, TURNS, Run, get_report, prompts

LANGCHAIN = f"langchain {version('langchain')}"
SYSTEM = "Be terse. Answer with the figures of the report and nothing else."
CONFIG: Any = {"configurable": {"thread_id": "t"}}
OPENAI = INTEGRATIONS["ChatOpenAI"]


@pytest.fixture(params=list(INTEGRATIONS))
def integration(request: pytest.FixtureRequest) -> Integration:
    return INTEGRATIONS[request.param]


def counted(integration: Integration) -> Any:
    return {"label": integration.label, "under": integration.under, "over": integration.over}


def budget(integration: Integration) -> int:
    """The provider's limit, less what the count may be under what the client sends."""
    return LIMIT - integration.under


def make_agent(model: Any, middleware: CompactionMiddleware) -> Any:
    return create_agent(
        model,
        tools=[get_report],
        system_prompt=SYSTEM,
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )


def converse(agent: Any) -> List[Any]:
    for index, prompt in enumerate(prompts()):
        if index % 2:
            for _ in agent.stream({"messages": [("user", prompt)]}, CONFIG):
                pass
        else:
            agent.invoke({"messages": [("user", prompt)]}, CONFIG)
    return list(agent.get_state(CONFIG).values["messages"])


async def aconverse(agent: Any) -> List[Any]:
    for index, prompt in enumerate(prompts()):
        if index % 2:
            async for _ in agent.astream({"messages": [("user", prompt)]}, CONFIG):
                pass
        else:
            await agent.ainvoke({"messages": [("user", prompt)]}, CONFIG)
    return list((await agent.aget_state(CONFIG)).values["messages"])


@pytest.mark.parametrize("rewrite_state", [False, True], ids=["model view", "rewrite state"])
def test_a_sync_agent_stays_within_the_limit(
    provider: FakeProvider, integration: Integration, rewrite_state: bool
) -> None:
    seen: List[CompactionEvent] = []
    middleware = CompactionMiddleware(
        budget(integration), on_compact=seen.append, rewrite_state=rewrite_state
    )
    model = integration.make(provider)
    agent = make_agent(model, middleware)
    label = "rewrite_state" if rewrite_state else "model view"

    try:
        with Run(
            f"{LANGCHAIN} create_agent, {integration.label} (sync, {label})",
            integration.route,
            provider,
        ) as run:
            history = converse(agent)
    finally:
        integration.close(model)

    check_integration(run, seen, 2 * TURNS, **counted(integration))
    assert all(first_system(request) == SYSTEM for request in run.requests())
    assert check_pairing(history) == []
    if rewrite_state:
        # The stored history is what the model was last sent, and its reply.
        assert len(history) < 4 * TURNS
        assert all(event.function == "langchain wrap_model_call" for event in seen)
    else:
        assert len(history) == 4 * TURNS  # the agent's own history is untouched


@pytest.mark.parametrize("rewrite_state", [False, True], ids=["model view", "rewrite state"])
def test_an_async_agent_stays_within_the_limit(
    provider: FakeProvider, integration: Integration, rewrite_state: bool
) -> None:
    seen: List[CompactionEvent] = []

    async def hook(event: CompactionEvent) -> None:
        seen.append(event)

    middleware = CompactionMiddleware(
        budget(integration), on_compact=hook, rewrite_state=rewrite_state
    )
    label = "rewrite_state" if rewrite_state else "model view"

    async def main() -> Any:
        model = integration.make(provider)
        agent = make_agent(model, middleware)
        try:
            with Run(
                f"{LANGCHAIN} create_agent, {integration.label} (async, {label})",
                integration.route,
                provider,
            ) as r:
                history = await aconverse(agent)
        finally:
            await integration.aclose(model)
        return r, history

    run, history = asyncio.run(main())

    check_integration(run, seen, 2 * TURNS, **counted(integration))
    assert check_pairing(history) == []
    assert (len(history) < 4 * TURNS) if rewrite_state else (len(history) == 4 * TURNS)


# Ollama cuts a long prompt to its context instead of refusing it: nothing to retry.
@pytest.mark.parametrize("name", [name for name in INTEGRATIONS if name != "ChatOllama"])
def test_a_lower_provider_limit_is_met_by_retrying(provider: FakeProvider, name: str) -> None:
    integration = INTEGRATIONS[name]
    provider.context_limit = LIMIT - 300  # the budget is too generous: the provider refuses some
    seen: List[CompactionEvent] = []
    model = integration.make(provider)
    agent = make_agent(
        model, CompactionMiddleware(LIMIT, on_overflow="retry", on_compact=seen.append)
    )

    try:
        with Run(
            f"{LANGCHAIN} create_agent, {integration.label} (limit {LIMIT - 300}, retry)",
            integration.route,
            provider,
        ) as run:
            converse(agent)
    finally:
        integration.close(model)

    row = run.check(limit=LIMIT - 300)
    assert row.retries > 0
    assert [e.retried for e in seen].count(True) == row.retries


def test_summaries_and_cleared_results_reach_the_model_and_the_state(
    provider: FakeProvider, integration: Integration
) -> None:
    dropped_counts: List[int] = []

    def summarize(dropped: List[Any]) -> str:
        dropped_counts.append(len(dropped))
        return f"Earlier: {len(dropped)} messages about the weather."

    seen: List[CompactionEvent] = []
    middleware = CompactionMiddleware(
        budget(integration),
        summarize=summarize,
        clear_tool_results={"keep": 2, "clear_inputs": True},
        rewrite_state=True,
        on_compact=seen.append,
    )
    model = integration.make(provider)
    agent = make_agent(model, middleware)

    try:
        with Run(
            f"{LANGCHAIN} create_agent, {integration.label} (summary, clearing)",
            integration.route,
            provider,
        ) as run:
            history = converse(agent)
    finally:
        integration.close(model)

    check_integration(run, seen, 2 * TURNS, **counted(integration))
    assert dropped_counts
    assert any(event.cleared_results for event in seen)
    summarized = [e for e in seen if e.summary is not None]
    assert summarized
    assert "Earlier: " in json.dumps(run.requests()[-1].body)  # the summary reached the model
    # The state holds the summary as a HumanMessage, and cleared results in place of the originals.
    assert any(
        type(m).__name__ == "HumanMessage" and m.content.startswith("Earlier:") for m in history
    )
    assert check_pairing(history) == []
    assert len({m.id for m in history}) == len(history)
    # A cleared call keeps its id and name, with its arguments emptied, in the state too.
    cleared_calls = [c for m in history for c in getattr(m, "tool_calls", ()) if c["args"] == {}]
    assert cleared_calls
    assert all(c["name"] == "get_report" for c in cleared_calls)


def test_an_async_summarizer_needs_the_async_agent(provider: FakeProvider) -> None:
    async def summarize(dropped: List[Any]) -> str:
        return "summary"

    agent = make_agent(OPENAI.make(provider), CompactionMiddleware(LIMIT, summarize=summarize))

    with pytest.raises(TypeError, match="a sync model call cannot await"):
        agent.invoke({"messages": [("user", prompts()[0])]}, CONFIG)

    assert provider.requests == []


def test_bad_options_are_refused_when_the_middleware_is_made() -> None:
    with pytest.raises(ValueError, match="keep_tail"):
        CompactionMiddleware(LIMIT, keep_tail=-1)
    with pytest.raises(TypeError, match="rewrite_state"):
        CompactionMiddleware(LIMIT, rewrite_state="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="messages_arg"):
        CompactionMiddleware(LIMIT, messages_arg="messages")  # type: ignore[call-arg]


def test_a_session_intercepting_the_sdk_records_one_event_per_call(provider: FakeProvider) -> None:
    seen: List[CompactionEvent] = []
    model = OPENAI.make(provider)
    agent = make_agent(model, CompactionMiddleware(LIMIT, on_compact=seen.append))

    label = f"{LANGCHAIN} create_agent (inside intercept='openai')"
    try:
        with Run(label, "/v1/chat/completions", provider, intercept="openai") as run:
            converse(agent)
    finally:
        OPENAI.close(model)

    # The middleware's call is exclusive: the SDK's interception underneath passes through.
    check_integration(run, seen, expected_requests=2 * TURNS)
    assert {event.function for event in run.session.events} == {"langchain wrap_model_call"}
