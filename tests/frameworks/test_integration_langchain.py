"""middleware.integrations.langchain: CompactionMiddleware in a real create_agent loop.

A LangChain v1 agent (each of LangChain's provider integrations against the
local provider, one tool, a system prompt) holds ``TURNS`` tool-using turns on
one checkpointed thread, so its stored history passes the limit after a few
turns. See ``_scenario.py`` for the scenario, ``_integrations.py`` for the
checks and ``_langchain_models.py`` for the chat models.
"""

from __future__ import annotations

import asyncio
import base64
import json
from importlib.metadata import version
from typing import Any, List

import pytest
from helpers import LOG_LINES, read_log
from langchain.agents import create_agent
from langchain.agents.middleware import ModelRequest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_google_genai import ChatGoogleGenerativeAI
from langgraph.checkpoint.memory import InMemorySaver

from ctx_compact import check_pairing
from ctx_compact.testing import FakeProvider
from middleware import CompactionEvent
from middleware.integrations.langchain import CompactionMiddleware

from ._integrations import check_integration, first_system, sent_tokens
from ._langchain_models import INTEGRATIONS, Integration
from ._scenario import LIMIT, TURNS, Run, get_report, is_api, prompts

LANGCHAIN = f"langchain {version('langchain')}"
SYSTEM = "Be terse. Answer with the figures of the report and nothing else."
CONFIG: Any = {"configurable": {"thread_id": "t"}}
OPENAI = INTEGRATIONS["ChatOpenAI"]


@pytest.fixture(params=list(INTEGRATIONS))
def integration(request: pytest.FixtureRequest) -> Integration:
    return INTEGRATIONS[request.param]


def counted(integration: Integration) -> Any:
    """Each event's count at least what its request sent, tools included, and at most
    ``hook_over`` more (the turns the client joins into one, counted each alone)."""
    return {"label": integration.label, "over": integration.hook_over}


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
    middleware = CompactionMiddleware(LIMIT, on_compact=seen.append, rewrite_state=rewrite_state)
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

    middleware = CompactionMiddleware(LIMIT, on_compact=hook, rewrite_state=rewrite_state)
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
        LIMIT,
        summarize=summarize,
        clear_tool_results={"keep": 5, "clear_inputs": True},
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


def history(call: AIMessage, reasoning: AIMessage) -> List[Any]:
    """A conversation whose replies hold what only their provider's form sends."""
    report = get_report("Paris")
    return [
        HumanMessage(prompts()[0]),
        call,
        ToolMessage(report, tool_call_id="c1", name="get_report"),
        reasoning,
        HumanMessage(prompts()[1]),
        AIMessage("", tool_calls=[{"name": "get_report", "args": {"city": "Rome"}, "id": "c2"}]),
        ToolMessage(report, tool_call_id="c2", name="get_report"),
    ]


SIGNED = bytes(range(256)) * 2
SIGNATURE = base64.b64encode(SIGNED).decode()
THOUGHTS = "The user wants the weather; the report has it hour by hour. " * 8
CALL = {"name": "get_report", "args": {"city": "Paris"}, "id": "c1"}


def gemini_3(provider: FakeProvider) -> Any:
    # A Gemini 3 model: its calls carry thought signatures, and a call without one is sent
    # with a placeholder signature.
    return ChatGoogleGenerativeAI(
        model="gemini-3-flash-preview",
        google_api_key="t",
        base_url=provider.gemini_url,
        max_retries=1,
    )


# What each model sends of a reply that the Chat Completions form has no place for.
SENT_APART = {
    "ChatGoogleGenerativeAI": (
        gemini_3,
        AIMessage(
            "",
            tool_calls=[CALL],
            additional_kwargs={"__gemini_function_call_thought_signatures__": {"c1": SIGNATURE}},
        ),
        AIMessage([{"type": "thinking", "thinking": THOUGHTS, "signature": SIGNATURE}]),
    ),
    "ChatOllama": (
        INTEGRATIONS["ChatOllama"].make,
        AIMessage("", tool_calls=[CALL], additional_kwargs={"reasoning_content": THOUGHTS}),
        AIMessage("Paris: 12C.", additional_kwargs={"reasoning_content": THOUGHTS}),
    ),
}


@pytest.mark.parametrize("name", list(SENT_APART))
def test_what_only_the_providers_form_sends_is_counted(provider: FakeProvider, name: str) -> None:
    # Thought signatures (Gemini's, kept in additional_kwargs or a block's signature) and
    # Ollama's thinking are sent, so they are counted: the event is what the provider saw.
    make, call, reasoning = SENT_APART[name]
    model = make(provider)
    seen: List[CompactionEvent] = []
    middleware = CompactionMiddleware(10**6, on_compact=seen.append)
    request = ModelRequest(
        model=model,
        messages=history(call, reasoning),
        system_message=SystemMessage(SYSTEM),
        tools=[get_report],
    )

    def handler(request: ModelRequest) -> Any:
        bound = model.bind_tools(request.tools)
        return bound.invoke([request.system_message, *request.messages])

    try:
        middleware.wrap_model_call(request, handler)
    finally:
        INTEGRATIONS[name].close(model)

    (sent,) = [r for r in provider.requests if is_api(r.path)]
    (event,) = seen
    body = json.dumps(sent.body)
    # google-genai sends a signature's bytes in URL-safe base64: as long, other characters.
    sent_apart = base64.urlsafe_b64encode(SIGNED).decode() if name != "ChatOllama" else THOUGHTS
    assert sent_apart in body
    assert event.tokens_before == sent_tokens(sent)


# The integrations whose plain text conversation is bigger than in Chat form (Gemini's
# contents), or whose cut may join two user turns into one (Anthropic then sends both as
# blocks, Bedrock as one message).
@pytest.mark.parametrize("name", ["ChatAnthropic", "ChatGoogleGenerativeAI", "ChatBedrockConverse"])
def test_every_cut_is_counted_at_least_as_sent(provider: FakeProvider, name: str) -> None:
    # At every budget, which is also the provider's limit, the count of a text conversation
    # cut after its first prompt is never under what is sent, and no request is refused.
    integration = INTEGRATIONS[name]
    model = integration.make(provider)
    messages: List[Any] = []
    for turn in range(6):
        messages += [HumanMessage(f"Question {turn}: " + "word " * 20)]
        messages += [AIMessage(f"Answer {turn}: " + "text " * 20)]
    messages.append(HumanMessage("And the last question?"))
    seen: List[CompactionEvent] = []
    gaps = []
    try:
        for budget in range(200, 450, 10):
            provider.context_limit = budget
            request = ModelRequest(model=model, messages=messages)
            start = len(provider.requests)
            CompactionMiddleware(budget, on_compact=seen.append).wrap_model_call(
                request, lambda r: model.invoke(r.messages)
            )
            (sent,) = [r for r in provider.requests[start:] if is_api(r.path)]
            gaps.append(seen[-1].tokens_after - sent_tokens(sent))
    finally:
        integration.close(model)

    assert all(event.dropped and event.fits for event in seen)
    assert all(0 <= gap <= integration.hook_over for gap in gaps), gaps


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


def test_each_events_breakdown_is_the_request_as_sent(
    provider: FakeProvider, integration: Integration
) -> None:
    seen: List[CompactionEvent] = []
    model = integration.make(provider)
    agent = make_agent(model, CompactionMiddleware(LIMIT, on_compact=seen.append))
    try:
        with Run(f"{LANGCHAIN} {integration.label} breakdown", integration.route, provider):
            converse(agent)
    finally:
        integration.close(model)

    assert any(event.dropped for event in seen)
    for event in seen:
        result = event.breakdown()
        # The system prompt and the tool's schema as sent, beside the messages.
        assert result.categories["system"] > 0
        assert result.categories["tools"] > 0
        assert sum(result.categories.values()) == result.tokens == event.tokens_before
        assert len(result.rows) == event.messages_before
        assert sum(row.status == "dropped" for row in result.rows) == len(event.dropped)
    assert seen[-1].breakdown().tools["get_report"]["results"] > 0


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


@pytest.mark.parametrize("name", list(INTEGRATIONS))
def test_a_tool_output_larger_than_the_budget_is_cut_and_the_agent_goes_on(
    provider: FakeProvider, name: str
) -> None:
    integration = INTEGRATIONS[name]
    provider.tool_calls = 1
    seen: List[CompactionEvent] = []
    middleware = CompactionMiddleware(
        LIMIT, on_compact=seen.append, pin=lambda m: str(m.content).startswith("TASK")
    )
    model = integration.make(provider)
    agent = create_agent(
        model, tools=[read_log], system_prompt=SYSTEM, middleware=[middleware],
        checkpointer=InMemorySaver(),
    )  # fmt: skip
    try:
        agent.invoke({"messages": [("user", "TASK: which worker is slow?")]}, CONFIG)
    finally:
        integration.close(model)
    cut = [e for e in seen if e.truncated_results]
    assert cut, "the log is over the budget: the last resort cut it"
    assert all(e.fits for e in seen)
    assert all(e.tokens_after <= LIMIT for e in seen)
    history = agent.get_state(CONFIG).values["messages"]
    assert history[-2].content == LOG_LINES  # the state keeps the whole output


def test_without_the_last_resort_the_provider_refuses_the_request(provider: FakeProvider) -> None:
    openai = pytest.importorskip("openai")
    provider.tool_calls = 1
    middleware = CompactionMiddleware(LIMIT, truncate_tool_results=False)
    model = OPENAI.make(provider)
    agent = create_agent(model, tools=[read_log], system_prompt=SYSTEM, middleware=[middleware])
    try:
        with pytest.raises(openai.BadRequestError, match="context length"):
            agent.invoke({"messages": [("user", "TASK: which worker is slow?")]})
    finally:
        OPENAI.close(model)
