"""LangChain's ChatOpenAI and ChatAnthropic against the local provider.

Both send through ``with_raw_response.create``, which the SDK caches on first
use: every model here is used once before the session, so interception must
reach what was captured before the block. Sync (``invoke``, ``stream``,
``batch``) and async (``ainvoke``, ``astream``, ``abatch``) calls alternate turn
by turn. See ``_scenario.py`` for the scenario and its checks.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Iterator, List

import pytest

pytest.importorskip("langchain_openai")
pytest.importorskip("langchain_anthropic")

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from ctx_compact import check_pairing, compact
from ctx_compact.testing import FakeProvider
from middleware import CompactingSession, budgeted

from ._langchain_models import INTEGRATIONS, chat_openai
from ._scenario import (
    LIMIT,
    TURNS,
    Run,
    get_report,
    pairing_problem,
    prompts,
    wire_tokens,
)

MODELS = {
    name: (sdk, INTEGRATIONS[name].route, INTEGRATIONS[name].make)
    for name, sdk in (("ChatOpenAI", "openai"), ("ChatAnthropic", "anthropic"))
}


def close(llm: Any) -> None:
    INTEGRATIONS[type(llm).__name__].close(llm)


async def aclose(llm: Any) -> None:
    await INTEGRATIONS[type(llm).__name__].aclose(llm)


def merged(chunks: Iterator[Any]) -> Any:
    message = None
    for chunk in chunks:
        message = chunk if message is None else message + chunk
    return message


def answer_calls(messages: List[BaseMessage], reply: Any) -> None:
    messages.append(reply)
    for call in reply.tool_calls:
        messages.append(ToolMessage(get_report(**call["args"]), tool_call_id=call["id"]))


def sync_calls(llm: Any) -> List[Callable[[List[BaseMessage]], Any]]:
    return [llm.invoke, lambda m: merged(llm.stream(m)), lambda m: llm.batch([m])[0]]


def opening(system: bool) -> List[BaseMessage]:
    # Without a system message ChatAnthropic sends no `system`: the SDK leaves its sentinel.
    return [SystemMessage("Be terse.")] if system else []


def converse(llm: Any, system: bool = True) -> List[BaseMessage]:
    messages = opening(system)
    calls = sync_calls(llm)
    for index, prompt in enumerate(prompts()):
        call = calls[index % len(calls)]
        messages.append(HumanMessage(prompt))
        answer_calls(messages, call(messages))
        messages.append(call(messages))
    return messages


async def aconverse(llm: Any, system: bool = True) -> List[BaseMessage]:
    async def astream(m: List[BaseMessage]) -> Any:
        message = None
        async for chunk in llm.astream(m):
            message = chunk if message is None else message + chunk
        return message

    async def abatch(m: List[BaseMessage]) -> Any:
        return (await llm.abatch([m]))[0]

    calls = [llm.ainvoke, astream, abatch]
    messages = opening(system)
    for index, prompt in enumerate(prompts()):
        call = calls[index % len(calls)]
        messages.append(HumanMessage(prompt))
        answer_calls(messages, await call(messages))
        messages.append(await call(messages))
    return messages


@pytest.mark.parametrize("system", [True, False], ids=["system", "no system"])
@pytest.mark.parametrize("name", list(MODELS))
def test_sync_invoke_stream_batch_stay_within_the_limit(
    provider: FakeProvider, name: str, system: bool
) -> None:
    sdk, route, make = MODELS[name]
    llm = make(provider)
    bound = llm.bind_tools([get_report])
    try:
        bound.invoke("Warm-up before the session.")  # caches with_raw_response before the block
        with Run(f"LangChain {name} (sync)", route, provider, intercept=sdk) as run:
            messages = converse(bound, system)
    finally:
        close(llm)

    run.check(expected_requests=2 * TURNS, usage_on_every_response=True)
    assert len(messages) == system + 4 * TURNS  # the caller's list is the framework's, uncompacted


@pytest.mark.parametrize("system", [True, False], ids=["system", "no system"])
@pytest.mark.parametrize("name", list(MODELS))
def test_async_invoke_stream_batch_stay_within_the_limit(
    provider: FakeProvider, name: str, system: bool
) -> None:
    sdk, route, make = MODELS[name]
    llm = make(provider)
    bound = llm.bind_tools([get_report])

    async def main() -> Any:
        try:
            await bound.ainvoke("Warm-up before the session.")
            with Run(f"LangChain {name} (async)", route, provider, intercept=sdk) as run:
                await aconverse(bound, system)
            return run
        finally:
            await aclose(llm)

    run = asyncio.run(main())

    run.check(expected_requests=2 * TURNS, usage_on_every_response=True)


@pytest.mark.parametrize("name", list(MODELS))
def test_a_lower_provider_limit_is_met_by_retrying(provider: FakeProvider, name: str) -> None:
    sdk, route, make = MODELS[name]
    llm = make(provider)
    bound = llm.bind_tools([get_report])
    provider.context_limit = LIMIT - 300  # the budget is too generous: the provider refuses some
    try:
        with Run(
            f"LangChain {name} (limit {LIMIT - 300}, retry)",
            route,
            provider,
            intercept=sdk,
            on_overflow="retry",
        ) as run:
            converse(bound)
    finally:
        close(llm)

    run.check(limit=LIMIT - 300, usage_on_every_response=True)


# --- LangChain's own messages through the core ----------------------------------


def real_conversation(bound: Any, turns: int) -> List[BaseMessage]:
    messages: List[BaseMessage] = [SystemMessage("Be terse.")]
    for prompt in prompts()[:turns]:
        messages.append(HumanMessage(prompt))
        answer_calls(messages, bound.invoke(messages))
        messages.append(bound.invoke(messages))
    return messages


@pytest.fixture
def llm(provider: FakeProvider) -> Iterator[Any]:
    provider.context_limit = None
    model = chat_openai(provider)
    try:
        yield model
    finally:
        close(model)


def tight_budget(messages: List[BaseMessage]) -> int:
    """A budget met by dropping the oldest prompt and call but not the call's result.

    Read as separate messages, the cut would fall between the first ``AIMessage``
    with ``tool_calls`` (41 tokens, after a 17-token prompt) and its ``ToolMessage``.
    """
    return compact(messages, max_tokens=10**9).tokens_before - 40


def test_compact_keeps_each_tool_call_with_its_result(llm: Any) -> None:
    messages = real_conversation(llm.bind_tools([get_report]), 6)
    before = [m.model_dump() for m in messages]

    result = compact(messages, max_tokens=tight_budget(messages))

    assert result.dropped
    assert all(any(m is own for own in messages) for m in result.messages)
    assert check_pairing(result.messages) == []
    calls = {c["id"] for m in result.messages if isinstance(m, AIMessage) for c in m.tool_calls}
    results = {m.tool_call_id for m in result.messages if isinstance(m, ToolMessage)}
    assert calls == results
    assert [m.model_dump() for m in messages] == before


def test_check_pairing_reports_a_result_without_its_call() -> None:
    messages = [
        HumanMessage("Paris?"),
        AIMessage("", tool_calls=[{"name": "get_report", "args": {"city": "Paris"}, "id": "c1"}]),
        ToolMessage("sunny", tool_call_id="c1"),
        AIMessage("Sunny."),
    ]
    del messages[1]

    problems = check_pairing(messages)

    assert [(p.index, p.code) for p in problems] == [(1, "orphan_tool_result")]


def test_budgeted_invoke_with_langchain_messages_is_accepted(
    provider: FakeProvider, llm: Any
) -> None:
    bound = llm.bind_tools([get_report])
    messages = [*real_conversation(bound, 8), HumanMessage("And Oslo?")]
    budget = tight_budget(messages)
    provider.context_limit = budget
    seen: List[Any] = []

    @budgeted(max_tokens=budget, on_compact=seen.append)
    def ask(messages: List[BaseMessage]) -> Any:
        return bound.invoke(messages)

    start = len(provider.requests)
    reply = ask(messages)

    (sent,) = provider.requests[start:]
    assert pairing_problem(sent) is None
    (event,) = seen
    assert event.dropped
    assert event.tokens_after <= budget
    assert reply.tool_calls  # the model answered the new prompt


def test_a_session_wraps_a_call_taking_langchain_messages(provider: FakeProvider, llm: Any) -> None:
    bound = llm.bind_tools([get_report])
    messages = [*real_conversation(bound, 8), HumanMessage("And Oslo?")]
    budget = tight_budget(messages)
    provider.context_limit = budget

    with CompactingSession(max_tokens=budget) as session:
        ask = session.wrap(lambda messages: bound.invoke(messages))
        reply = ask(messages)

    (event,) = session.events
    assert event.dropped
    assert all(any(m is own for own in messages) for m in event.dropped)
    assert reply.tool_calls


# --- every provider integration's messages, as it makes them and sends them -----


def streamed_conversation(llm: Any, turns: int) -> List[BaseMessage]:
    """A real tool-using conversation, its replies invoked and streamed by turns (a
    streamed reply is its merged chunks, whose content blocks differ from an invoked one's)."""
    bound = llm.bind_tools([get_report])
    calls = [bound.invoke, lambda m: merged(bound.stream(m))]
    messages: List[BaseMessage] = [SystemMessage("Be terse.")]
    for turn, prompt in enumerate(prompts()[:turns]):
        call = calls[turn % 2]
        messages.append(HumanMessage(prompt))
        answer_calls(messages, call(messages))
        messages.append(call(messages))
    return [*messages, HumanMessage("And Oslo?")]


@pytest.mark.parametrize("name", list(INTEGRATIONS))
def test_every_cut_of_each_integrations_conversation_is_one_it_sends(
    provider: FakeProvider, name: str
) -> None:
    integration = INTEGRATIONS[name]
    provider.context_limit = None
    llm = integration.make(provider)
    bound = llm.bind_tools([get_report])
    try:
        messages = streamed_conversation(llm, 6)
        before = [m.model_dump() for m in messages]
        total = compact(messages, max_tokens=10**9).tokens_before
        results = [compact(messages, max_tokens=budget) for budget in range(total, 0, -10)]
        cuts = {tuple(map(id, r.messages)): r for r in results if r.fits and r.dropped}
        start = len(provider.requests)
        for result in cuts.values():
            bound.invoke(result.messages)  # raises if the provider refuses it
        sent = provider.requests[start:]
    finally:
        integration.close(llm)

    assert len(cuts) >= 5  # a cut before each later turn at least
    assert [pairing_problem(request) for request in sent] == [None] * len(cuts)
    for result, request in zip(cuts.values(), sent):
        assert check_pairing(result.messages) == []
        assert all(any(m is own for own in messages) for m in result.messages)
        gap = result.tokens_after - wire_tokens(request)
        assert -integration.read_under <= gap <= integration.read_over
    assert [m.model_dump() for m in messages] == before


@pytest.mark.parametrize("name", list(INTEGRATIONS))
def test_budgeted_takes_each_integrations_messages(provider: FakeProvider, name: str) -> None:
    integration = INTEGRATIONS[name]
    provider.context_limit = None
    llm = integration.make(provider)
    bound = llm.bind_tools([get_report])
    seen: List[Any] = []
    try:
        messages = streamed_conversation(llm, 6)
        budget = compact(messages, max_tokens=10**9).tokens_before // 2
        provider.context_limit = budget + integration.read_under

        @budgeted(max_tokens=budget, on_compact=seen.append)
        def ask(messages: List[BaseMessage]) -> Any:
            return bound.invoke(messages)

        start = len(provider.requests)
        reply = ask(messages)
        (sent,) = provider.requests[start:]
    finally:
        integration.close(llm)

    assert pairing_problem(sent) is None
    (event,) = seen
    assert event.dropped
    assert event.tokens_after <= budget
    assert event.provider_tokens == wire_tokens(sent)
    assert reply.tool_calls  # the model answered the new prompt
