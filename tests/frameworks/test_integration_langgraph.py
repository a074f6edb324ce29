"""middleware.integrations.langgraph: pre_model_hook in a real create_react_agent loop.

LangGraph's prebuilt agent (``ChatOpenAI`` against the local provider, one tool,
a prompt) holds ``TURNS`` tool-using turns on one checkpointed thread, so its
stored history passes the limit after a few turns. See ``_scenario.py`` for the
scenario and ``_integrations.py`` for the checks.
"""

from __future__ import annotations

import asyncio
from importlib.metadata import version
from typing import Any, List

import pytest
from langchain_core.messages import RemoveMessage
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent

from ctx_compact import check_pairing
from ctx_compact.testing import FakeProvider
from middleware import CompactionEvent
from middleware.integrations.langgraph import pre_model_hook

from ._integrations import check_integration, first_system
from ._langchain_models import INTEGRATIONS
from ._scenario import LIMIT, OPENAI_MODEL, TURNS, Run, get_report, prompts

# LangGraph 1.x points to langchain's create_agent, but create_react_agent still works.
pytestmark = pytest.mark.filterwarnings(
    "ignore:create_react_agent has been moved:langgraph.warnings.LangGraphDeprecatedSinceV10"
)

LANGGRAPH = f"langgraph {version('langgraph')}"
SYSTEM = "Be terse. Answer with the figures of the report and nothing else."
CONFIG: Any = {"configurable": {"thread_id": "t"}}


def make_agent(provider: FakeProvider, hook: Any) -> Any:
    model = ChatOpenAI(
        model=OPENAI_MODEL, base_url=provider.base_url + "/v1", api_key="t", max_retries=0
    )
    return create_react_agent(
        model, [get_report], prompt=SYSTEM, pre_model_hook=hook, checkpointer=InMemorySaver()
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


@pytest.mark.parametrize("rewrite_state", [False, True], ids=["llm_input_messages", "rewrite"])
def test_a_sync_agent_stays_within_the_limit(provider: FakeProvider, rewrite_state: bool) -> None:
    seen: List[CompactionEvent] = []
    hook = pre_model_hook(
        LIMIT,
        prompt=SYSTEM,
        tools=[get_report],
        rewrite_state=rewrite_state,
        on_compact=seen.append,
    )
    agent = make_agent(provider, hook)
    label = "rewrite_state" if rewrite_state else "llm_input_messages"

    with Run(
        f"{LANGGRAPH} create_react_agent (sync, {label})", "/v1/chat/completions", provider
    ) as run:
        history = converse(agent)

    check_integration(run, seen, expected_requests=2 * TURNS, usage=False)
    assert all(first_system(request) == SYSTEM for request in run.requests())
    assert all(event.function == "langgraph pre_model_hook" for event in seen)
    assert check_pairing(history) == []
    assert not any(isinstance(m, RemoveMessage) for m in history)
    assert (len(history) < 4 * TURNS) if rewrite_state else (len(history) == 4 * TURNS)


@pytest.mark.parametrize("rewrite_state", [False, True], ids=["llm_input_messages", "rewrite"])
def test_an_async_agent_stays_within_the_limit(provider: FakeProvider, rewrite_state: bool) -> None:
    seen: List[CompactionEvent] = []

    async def on_compact(event: CompactionEvent) -> None:
        seen.append(event)

    hook = pre_model_hook(
        LIMIT, prompt=SYSTEM, tools=[get_report], rewrite_state=rewrite_state, on_compact=on_compact
    )
    label = "rewrite_state" if rewrite_state else "llm_input_messages"

    async def main() -> Any:
        agent = make_agent(provider, hook)
        with Run(
            f"{LANGGRAPH} create_react_agent (async, {label})", "/v1/chat/completions", provider
        ) as r:
            history = await aconverse(agent)
        return r, history

    run, history = asyncio.run(main())

    check_integration(run, seen, expected_requests=2 * TURNS, usage=False)
    assert check_pairing(history) == []
    assert (len(history) < 4 * TURNS) if rewrite_state else (len(history) == 4 * TURNS)


def test_a_summary_reaches_the_model_as_a_human_message(provider: FakeProvider) -> None:
    seen: List[CompactionEvent] = []
    hook = pre_model_hook(
        LIMIT,
        prompt=SYSTEM,
        tools=[get_report],
        summarize=lambda dropped: f"Earlier: {len(dropped)} messages about the weather.",
        on_compact=seen.append,
    )
    agent = make_agent(provider, hook)

    with Run(f"{LANGGRAPH} create_react_agent (summary)", "/v1/chat/completions", provider) as run:
        converse(agent)

    check_integration(run, seen, expected_requests=2 * TURNS, usage=False)
    assert any(event.summary for event in seen)
    last = run.requests()[-1].body["messages"]
    assert [m["role"] for m in last[:3]] == ["system", "user", "user"]
    assert last[2]["content"].startswith("Earlier:")


@pytest.mark.parametrize("name", list(INTEGRATIONS))
def test_the_model_given_has_the_request_counted_as_it_sends_it(
    provider: FakeProvider, name: str
) -> None:
    # Each provider integration's request, counted in its own form, fits a budget that is
    # the provider's limit: none is refused, and each count is at least what was sent.
    integration = INTEGRATIONS[name]
    seen: List[CompactionEvent] = []
    model = integration.make(provider)
    hook = pre_model_hook(
        LIMIT, prompt=SYSTEM, tools=[get_report], model=model, on_compact=seen.append
    )
    agent = create_react_agent(
        model, [get_report], prompt=SYSTEM, pre_model_hook=hook, checkpointer=InMemorySaver()
    )

    try:
        label = f"{LANGGRAPH} create_react_agent, {integration.label}"
        with Run(label, integration.route, provider) as run:
            converse(agent)
    finally:
        integration.close(model)

    check_integration(
        run,
        seen,
        expected_requests=2 * TURNS,
        usage=False,
        label=integration.label,
        over=integration.hook_over,
    )


def test_what_cannot_be_counted_or_retried_is_refused() -> None:
    with pytest.raises(ValueError, match="cannot retry"):
        pre_model_hook(LIMIT, on_overflow="retry")
    with pytest.raises(TypeError, match="'prompt' must be"):
        pre_model_hook(LIMIT, prompt=lambda state: state)
    with pytest.raises(TypeError, match="'tools' must be"):
        pre_model_hook(LIMIT, tools=get_report)
