"""CompactingSession: what it records, from where, and what it applies.

The weather conversation (the specification's example) with ``max_tokens=150,
keep_head=1, keep_tail=2`` goes from 195 to 124 tokens by dropping messages 1-3,
so every figure below is exact.
"""

from __future__ import annotations

import inspect
import logging
import threading
from typing import Any, Dict, List

import anyio
import pytest
from anyio import to_thread
from helpers import assistant, system, ten_each, user, weather_messages

from middleware import (
    BudgetExceededError,
    CompactingSession,
    CompactionEvent,
    SessionStats,
    budgeted,
)

WEATHER = {"max_tokens": 150, "keep_head": 1, "keep_tail": 2}
BEFORE, AFTER, DROPPED = 195, 124, 3


@budgeted(**WEATHER)
def ask(messages: List[Any], model: str = "gpt-4o") -> List[Any]:
    return messages


@budgeted(**WEATHER)
async def aask(messages: List[Any], model: str = "gpt-4o") -> List[Any]:
    await anyio.sleep(0)
    return messages


def send(messages: List[Any]) -> List[Any]:
    return messages


def compacted_as_expected(received: List[Any], sent: List[Any]) -> bool:
    """``received`` is a new list holding the caller's messages 0 and 4-9."""
    return received is not sent and [id(m) for m in received] == [
        id(m) for m in sent[:1] + sent[4:]
    ]


def weather_stats(calls: int) -> SessionStats:
    return SessionStats(
        calls=calls,
        compactions=calls,
        messages_dropped=DROPPED * calls,
        tokens_before=BEFORE * calls,
        tokens_after=AFTER * calls,
    )


# --- with / async with, events and stats ------------------------------------------------


def test_with_records_events_and_exact_stats(weather: List[Any]) -> None:
    session = CompactingSession()
    assert not session.active
    with session as entered:
        assert entered is session
        assert session.active
        received = ask(weather)
        ask([system(), user("hi")])  # fits: recorded, nothing dropped
    assert not session.active
    assert compacted_as_expected(received, weather)

    first, second = session.events
    assert first.function.endswith("ask")
    assert (first.tokens_before, first.tokens_after, first.fits) == (195, 124, True)
    assert first.dropped == tuple(weather[1:4])
    assert all(a is b for a, b in zip(first.dropped, weather[1:4]))
    assert first.compacted
    assert not second.compacted
    assert second.tokens_before == second.tokens_after == 15 + 8

    assert session.stats == SessionStats(
        calls=2, compactions=1, messages_dropped=3, tokens_before=218, tokens_after=147
    )
    assert session.stats.tokens_saved == 71


def test_stats_of_a_fresh_session_are_zero() -> None:
    session = CompactingSession()
    assert session.events == []
    assert session.stats == SessionStats()
    assert session.stats.tokens_saved == 0


def test_events_is_a_copy(weather: List[Any]) -> None:
    with CompactingSession() as session:
        ask(weather)
    session.events.clear()
    assert len(session.events) == 1


@pytest.mark.anyio
async def test_async_with_records_events_and_exact_stats() -> None:
    async with CompactingSession() as session:
        assert session.active
        sent = [weather_messages() for _ in range(3)]
        for messages in sent:
            assert compacted_as_expected(await aask(messages), messages)
    assert not session.active
    assert session.stats == weather_stats(3)
    assert session.stats.tokens_saved == 3 * 71
    assert [e.messages[0] for e in session.events] == [m[0] for m in sent]


# --- where calls are recorded from ------------------------------------------------------


@pytest.mark.anyio
async def test_records_calls_from_tasks_and_worker_threads_started_inside() -> None:
    sent: List[List[Any]] = []

    async def in_task() -> None:
        messages = weather_messages()
        sent.append(messages)
        assert compacted_as_expected(await aask(messages), messages)

    def in_worker() -> None:
        messages = weather_messages()
        sent.append(messages)
        assert compacted_as_expected(ask(messages), messages)

    async with CompactingSession() as session:
        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(in_task)
                tg.start_soon(to_thread.run_sync, in_worker)
        await to_thread.run_sync(in_worker)

    assert session.stats == weather_stats(7)
    assert {id(e.messages[0]) for e in session.events} == {id(m[0]) for m in sent}


@pytest.mark.anyio
async def test_calls_outside_the_session_are_compacted_but_not_recorded() -> None:
    go, done = anyio.Event(), anyio.Event()
    outside: Dict[str, Any] = {}

    async def sibling() -> None:  # started before the session was entered
        await go.wait()
        messages = weather_messages()
        outside["sibling"] = (messages, await aask(messages))
        done.set()

    def plain_thread() -> None:  # threading.Thread does not inherit the context
        messages = weather_messages()
        outside["thread"] = (messages, ask(messages))

    async with anyio.create_task_group() as tg:
        tg.start_soon(sibling)
        async with CompactingSession() as session:
            thread = threading.Thread(target=plain_thread)
            thread.start()
            thread.join()
            go.set()
            await done.wait()
            inside = weather_messages()
            await aask(inside)
    messages = weather_messages()
    outside["after"] = (messages, ask(messages))

    assert session.stats == weather_stats(1)
    assert session.events[0].messages[0] is inside[0]
    # The decorator still applies everywhere; only the recording is scoped.
    for sent, received in outside.values():
        assert compacted_as_expected(received, sent)


@pytest.mark.anyio
async def test_a_task_outliving_the_session_is_not_recorded_after_exit() -> None:
    go, done = anyio.Event(), anyio.Event()

    async def late() -> None:
        await go.wait()
        await aask(weather_messages())
        done.set()

    async with anyio.create_task_group() as tg:
        async with CompactingSession() as session:
            tg.start_soon(late)  # inherits the session's context...
            await aask(weather_messages())
        go.set()  # ...but calls only once the session has exited
        await done.wait()

    assert session.stats == weather_stats(1)


@pytest.mark.anyio
async def test_a_task_outliving_the_session_is_not_recorded_when_it_is_reentered() -> None:
    go, done = anyio.Event(), anyio.Event()
    session = CompactingSession()

    async def late() -> None:
        await go.wait()
        await aask(weather_messages())
        done.set()

    async with anyio.create_task_group() as tg:
        async with session:
            tg.start_soon(late)
        async with session:  # the same session, entered again for the next request
            go.set()
            await done.wait()
            await aask(weather_messages())

    assert session.stats == weather_stats(1)


# --- nested and concurrent sessions -----------------------------------------------------


def test_nested_sessions_each_receive_the_event() -> None:
    outer_seen: List[CompactionEvent] = []
    inner_seen: List[CompactionEvent] = []
    with CompactingSession(on_compact=outer_seen.append) as outer:
        ask(weather_messages())
        with CompactingSession(on_compact=inner_seen.append) as inner:
            ask(weather_messages())
            ask(weather_messages())
        ask(weather_messages())

    assert outer.stats == weather_stats(4)
    assert inner.stats == weather_stats(2)
    assert [e is f for e, f in zip(inner.events, outer.events[1:3])] == [True, True]
    assert outer_seen == outer.events
    assert inner_seen == inner.events
    assert all(a is b for a, b in zip(outer_seen, outer.events))


@pytest.mark.anyio
async def test_nested_async_sessions_each_receive_the_event() -> None:
    async with CompactingSession() as outer:
        async with CompactingSession() as inner:
            await aask(weather_messages())
        await aask(weather_messages())
    assert len(outer.events) == 2
    assert inner.events == outer.events[:1]
    assert inner.events[0] is outer.events[0]


@pytest.mark.anyio
async def test_concurrent_sessions_in_concurrent_tasks_record_only_their_own() -> None:
    tasks, calls = 6, 6
    seen: List[CompactionEvent] = []

    @budgeted(**WEATHER, on_compact=seen.append)
    def count(messages: List[Any]) -> List[Any]:
        return messages

    sessions: Dict[int, CompactingSession] = {}
    sent: Dict[int, List[List[Any]]] = {}

    async def conversation(t: int) -> None:
        sent[t] = []
        async with CompactingSession() as session:
            sessions[t] = session
            for k in range(calls):
                messages = weather_messages()
                sent[t].append(messages)
                if k % 3 == 0:
                    received = await to_thread.run_sync(count, messages)
                else:
                    received = count(messages)
                # Each call gets its own compacted list.
                assert compacted_as_expected(received, messages)
                await anyio.sleep(0)  # let the other conversations interleave

    async with anyio.create_task_group() as tg:
        for t in range(tasks):
            tg.start_soon(conversation, t)

    assert len(seen) == tasks * calls
    recorded: List[int] = []
    for t, session in sessions.items():
        assert session.stats == weather_stats(calls)
        assert [e.messages[0] for e in session.events] == [m[0] for m in sent[t]]
        recorded.extend(id(e) for e in session.events)
    # Every event is in exactly one session: none lost, none duplicated.
    assert sorted(recorded) == sorted(id(e) for e in seen)


def test_concurrent_sessions_in_plain_threads_record_only_their_own() -> None:
    threads, calls = 6, 20
    barrier = threading.Barrier(threads)
    sessions: Dict[int, CompactingSession] = {}
    sent: Dict[int, List[List[Any]]] = {}
    errors: List[BaseException] = []

    def conversation(t: int) -> None:
        try:
            sent[t] = []
            with CompactingSession() as session:
                sessions[t] = session
                barrier.wait()
                for _ in range(calls):
                    messages = weather_messages()
                    sent[t].append(messages)
                    assert compacted_as_expected(ask(messages), messages)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    workers = [threading.Thread(target=conversation, args=(t,)) for t in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()

    assert errors == []
    for t, session in sessions.items():
        assert session.stats == weather_stats(calls)
        assert [e.messages[0] for e in session.events] == [m[0] for m in sent[t]]


# --- session.wrap and whose options apply -----------------------------------------------


def test_wrap_sync_applies_the_session_options(weather: List[Any]) -> None:
    session = CompactingSession(**WEATHER)
    wrapped = session.wrap(send)
    assert wrapped.__name__ == "send"
    assert wrapped.__wrapped__ is send
    assert inspect.signature(wrapped) == inspect.signature(send)
    with session:
        received = wrapped(weather)
    assert compacted_as_expected(received, weather)
    (event,) = session.events
    assert event.function.endswith("send")
    assert (event.max_tokens, event.tokens_before, event.tokens_after) == (150, 195, 124)


@pytest.mark.anyio
async def test_wrap_async_applies_the_session_options(weather: List[Any]) -> None:
    async def asend(messages: List[Any]) -> List[Any]:
        await anyio.sleep(0)
        return messages

    session = CompactingSession(**WEATHER)
    wrapped = session.wrap(asend)
    assert inspect.iscoroutinefunction(wrapped)
    async with session:
        received = await wrapped(weather)
    assert compacted_as_expected(received, weather)
    assert session.stats == weather_stats(1)


def test_wrap_generator_compacts_when_the_call_is_made(weather: List[Any]) -> None:
    def stream(messages: List[Any]) -> Any:
        yield from messages

    session = CompactingSession(**WEATHER)
    wrapped = session.wrap(stream)
    assert inspect.isgeneratorfunction(wrapped)
    with session:
        generator = wrapped(weather)
        assert session.stats == weather_stats(1)  # before the first item is asked for
        received = list(generator)
    assert [id(m) for m in received] == [id(m) for m in weather[:1] + weather[4:]]


@pytest.mark.anyio
async def test_wrap_async_generator_applies_the_session_options(weather: List[Any]) -> None:
    async def astream(messages: List[Any]) -> Any:
        for message in messages:
            await anyio.sleep(0)
            yield message

    session = CompactingSession(**WEATHER)
    wrapped = session.wrap(astream)
    assert inspect.isasyncgenfunction(wrapped)
    async with session:
        received = [m async for m in wrapped(weather)]
    assert [id(m) for m in received] == [id(m) for m in weather[:1] + weather[4:]]
    assert session.stats == weather_stats(1)


def test_a_budgeted_function_keeps_its_own_options_inside_a_session(
    weather: List[Any],
) -> None:
    with CompactingSession(
        max_tokens=40, keep_head=0, keep_tail=1, count_tokens=ten_each
    ) as session:
        own = ask(weather)
        by_session = session.wrap(send)(weather)

    mine, theirs = session.events
    assert compacted_as_expected(own, weather)
    assert (mine.max_tokens, mine.tokens_before, mine.tokens_after) == (150, 195, 124)
    # The session's options: ten tokens a message, head 0, tail 1, budget 40.
    assert (theirs.max_tokens, theirs.tokens_before, theirs.tokens_after) == (40, 100, 40)
    assert [id(m) for m in by_session] == [id(m) for m in weather[6:]]
    assert theirs.dropped == tuple(weather[:6])


def test_an_observing_session_needs_no_budget_but_cannot_wrap(weather: List[Any]) -> None:
    session = CompactingSession()
    assert session.options is None
    with session:
        ask(weather)
        with pytest.raises(TypeError, match="max_tokens"):
            session.wrap(send)
    assert session.stats == weather_stats(1)


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"max_tokens": 0}, TypeError),
        ({"max_tokens": float("inf")}, TypeError),
        ({"max_tokens": True}, TypeError),
        ({"keep_tail": -1}, ValueError),
        ({"keep_head": 1.5}, TypeError),
        ({"on_overflow": "drop"}, ValueError),
        ({"on_compact": 42}, TypeError),
        ({"count_tokens": "len"}, TypeError),
        ({"messages_arg": "not an identifier"}, ValueError),
    ],
)
def test_bad_session_options_fail_at_construction(
    options: Dict[str, Any], error: type[Exception]
) -> None:
    with pytest.raises(error):
        CompactingSession(**options)


# --- hooks ------------------------------------------------------------------------------


def test_session_hooks_receive_every_event(weather: List[Any]) -> None:
    first: List[CompactionEvent] = []
    second: List[CompactionEvent] = []
    with CompactingSession(**WEATHER, on_compact=[first.append, second.append]) as session:
        ask(weather)
        session.wrap(send)(weather_messages())
    assert len(first) == 2
    assert all(a is b for a, b in zip(first, session.events))
    assert all(a is b for a, b in zip(second, session.events))


@pytest.mark.anyio
async def test_session_hooks_sync_and_async_on_an_async_call(weather: List[Any]) -> None:
    awaited: List[CompactionEvent] = []
    called: List[CompactionEvent] = []

    async def async_hook(event: CompactionEvent) -> None:
        await anyio.sleep(0)
        awaited.append(event)

    async with CompactingSession(on_compact=[async_hook, called.append]) as session:
        await aask(weather)
    (event,) = session.events
    assert awaited == [event]
    assert called == [event]
    assert awaited[0] is event
    assert called[0] is event


def test_wrap_refuses_an_async_session_hook_for_a_sync_function() -> None:
    async def async_hook(event: CompactionEvent) -> None:  # pragma: no cover - never run
        pass

    session = CompactingSession(**WEATHER, on_compact=async_hook)
    with pytest.raises(TypeError, match="async on_compact hook"):
        session.wrap(send)


def test_a_failing_session_hook_is_logged_and_the_call_goes_on(
    weather: List[Any], caplog: pytest.LogCaptureFixture
) -> None:
    after: List[CompactionEvent] = []

    def broken(event: CompactionEvent) -> None:
        raise RuntimeError("hook failed")

    with CompactingSession(on_compact=[broken, after.append]) as session:
        received = ask(weather)
    assert compacted_as_expected(received, weather)
    assert after == session.events
    assert len(after) == 1
    (record,) = [r for r in caplog.records if r.name == "ctx_compact.middleware"]
    assert record.levelno == logging.ERROR
    assert record.exc_info is not None
    assert "hook failed" in str(record.exc_info[1])


def test_an_async_session_hook_is_skipped_on_a_sync_call(
    weather: List[Any], caplog: pytest.LogCaptureFixture
) -> None:
    awaited: List[CompactionEvent] = []

    async def async_hook(event: CompactionEvent) -> None:  # pragma: no cover - never run
        awaited.append(event)

    with CompactingSession(on_compact=async_hook) as session:
        received = ask(weather)
    assert compacted_as_expected(received, weather)
    assert session.stats == weather_stats(1)
    assert awaited == []
    assert any(
        r.name == "ctx_compact.middleware" and "skipped" in r.getMessage() for r in caplog.records
    )


# --- re-entry ---------------------------------------------------------------------------


def test_reentering_an_active_session_raises(weather: List[Any]) -> None:
    session = CompactingSession()
    with session:
        with pytest.raises(RuntimeError, match="already active"):
            session.__enter__()
        assert session.active
        ask(weather)
    assert not session.active
    assert session.stats == weather_stats(1)
    ask(weather_messages())
    assert session.stats == weather_stats(1)


@pytest.mark.anyio
async def test_reentering_an_active_session_from_another_task_raises() -> None:
    session = CompactingSession()
    errors: List[BaseException] = []

    async def intruder() -> None:
        try:
            async with session:
                pass  # pragma: no cover - never entered
        except RuntimeError as exc:
            errors.append(exc)

    async with session:
        async with anyio.create_task_group() as tg:
            tg.start_soon(intruder)
        assert session.active
        await aask(weather_messages())
    assert len(errors) == 1
    assert "already active" in str(errors[0])
    assert session.stats == weather_stats(1)


# --- on_overflow ------------------------------------------------------------------------


def test_session_on_overflow_raise_for_wrapped_calls(weather: List[Any]) -> None:
    called: List[Any] = []

    def record(messages: List[Any]) -> None:
        called.append(messages)

    tight = {"max_tokens": 30, "keep_head": 1, "keep_tail": 2}
    with CompactingSession(**tight, on_overflow="raise") as session:
        with pytest.raises(BudgetExceededError) as info:
            session.wrap(record)(weather)
        # A @budgeted function keeps its own on_overflow ("call").
        lenient = budgeted(**tight)(record)
        lenient(weather_messages())

    refused, made = session.events
    assert info.value.event is refused
    assert not refused.fits
    assert refused.tokens_after == 15 + 14 + 13
    assert len(called) == 1
    assert len(called[0]) == 3
    assert not made.fits
    assert session.stats == SessionStats(
        calls=2, compactions=2, messages_dropped=14, tokens_before=390, tokens_after=84
    )


@pytest.mark.anyio
async def test_session_on_overflow_raise_for_async_calls(weather: List[Any]) -> None:
    async def record(messages: List[Any]) -> None:  # pragma: no cover - never called
        raise AssertionError("the call must not be made")

    session = CompactingSession(max_tokens=30, keep_head=1, keep_tail=2, on_overflow="raise")
    async with session:
        with pytest.raises(BudgetExceededError) as info:
            await session.wrap(record)(weather)
    assert session.events == [info.value.event]


def test_a_budgeted_on_overflow_raise_is_recorded_by_an_observing_session(
    weather: List[Any],
) -> None:
    strict = budgeted(max_tokens=30, keep_head=1, keep_tail=2, on_overflow="raise")(send)
    with CompactingSession() as session, pytest.raises(BudgetExceededError) as info:
        strict(weather)
    assert session.events == [info.value.event]
    assert session.stats.calls == 1


# --- several counters in one session ---------------------------------------------------


def test_each_counter_gets_its_own_figures_inside_one_session(weather: List[Any]) -> None:
    by_ten = budgeted(max_tokens=1000, count_tokens=ten_each)(send)
    by_default = budgeted(max_tokens=1000)(send)
    with CompactingSession() as session:
        for _ in range(2):
            by_ten(weather)
            by_default(weather)
        weather.append(assistant("Tomorrow: sunny."))
        by_ten(weather)
        by_default(weather)
    assert [e.tokens_before for e in session.events] == [100, 195, 100, 195, 110, 195 + 13]


# --- re-entrancy: counters, summarizers and hooks may make budgeted calls -------------------


def _run_with_deadline(fn: Any, seconds: float = 30.0) -> Any:
    """Run ``fn`` on a thread; a deadlock fails the test instead of hanging the suite."""
    outcome: List[Any] = []

    def target() -> None:
        try:
            outcome.append(("ok", fn()))
        except BaseException as exc:  # reported below
            outcome.append(("error", exc))

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "deadlocked"
    kind, value = outcome[0]
    if kind == "error":
        raise value
    return value


def test_a_counter_that_makes_a_budgeted_call_does_not_deadlock() -> None:
    history = weather_messages()
    depth = threading.local()

    def counter(message: Any) -> int:
        if not getattr(depth, "inside", False):
            depth.inside = True
            try:
                inner(history)  # the same conversation, through the same counter
            finally:
                depth.inside = False
        return len(str(message)) // 4

    inner = budgeted(max_tokens=100, count_tokens=counter)(lambda messages: messages)
    outer = budgeted(max_tokens=100, count_tokens=counter)(lambda messages: messages)

    def run() -> int:
        with CompactingSession() as session:
            outer(history)
            outer(history)
        return session.stats.calls

    assert _run_with_deadline(run) >= 2


def test_a_summarizer_and_a_hook_that_make_budgeted_calls_do_not_deadlock() -> None:
    def summarize(dropped: List[Any]) -> str:
        return f"{len(ask(weather_messages()))} kept"

    def hook(event: CompactionEvent) -> None:
        ask(weather_messages())

    summarizing = budgeted(**WEATHER, summarize=summarize, on_compact=hook)(
        lambda messages: messages
    )

    def run() -> List[Any]:
        with CompactingSession():
            return summarizing(weather_messages())  # type: ignore[no-any-return]

    assert _run_with_deadline(run)[1]["content"] == "7 kept"


# --- memory: a bounded number of events, exact stats ----------------------------------------


def test_max_events_keeps_the_most_recent_and_stats_stay_exact() -> None:
    with CompactingSession(max_events=3) as session:
        for i in range(10):
            ask([system(), user(f"question {i}")])
    assert len(session.events) == 3
    assert session.events[-1].messages[-1]["content"] == "question 9"
    assert session.stats.calls == 10


def test_max_events_zero_keeps_none() -> None:
    with CompactingSession(max_events=0) as session:
        ask(weather_messages())
    assert session.events == []
    assert session.stats.messages_dropped == 3


# --- sessions entered and exited out of order, in other tasks, many times -------------------


def test_nested_sessions_exited_out_of_order_stay_as_they_say() -> None:
    outer, inner = CompactingSession(), CompactingSession()
    outer.__enter__()
    inner.__enter__()
    outer.__exit__(None, None, None)
    assert not outer.active
    assert inner.active
    ask(weather_messages())
    assert (outer.stats.calls, inner.stats.calls) == (0, 1)
    inner.__exit__(None, None, None)
    ask(weather_messages())
    assert inner.stats.calls == 1


@pytest.mark.anyio
async def test_a_session_exited_in_another_task_stops_everywhere() -> None:
    session = CompactingSession(max_tokens=150, keep_tail=2)
    entered = anyio.Event()
    exited = anyio.Event()
    counts: List[int] = []

    async def owner() -> None:
        session.__enter__()
        entered.set()
        await exited.wait()
        assert not session.active
        ask(weather_messages())  # the entering task no longer records
        counts.append(session.stats.calls)

    async with anyio.create_task_group() as group:
        group.start_soon(owner)
        await entered.wait()
        session.__exit__(None, None, None)  # no contextvars ValueError
        exited.set()
    assert counts == [0]


def test_many_sequential_sessions_leave_no_entries_behind() -> None:
    for _ in range(200):
        with CompactingSession():
            ask(weather_messages())
    with CompactingSession() as session:
        ask(weather_messages())
    assert session.stats.calls == 1
