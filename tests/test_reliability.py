"""The middleware under hostile use: bad options, odd targets, pickles, re-entrancy, usage figures.

Each test is a regression test for one item of the reliability review: what
used to break, hang or leak, and the behaviour decided for it.
"""

from __future__ import annotations

import copy
import logging
import multiprocessing
import pickle
import subprocess
import sys
import textwrap
import threading
from typing import Any, Dict, List

import anyio
import pytest
from helpers import system, user, weather_messages

from ctx_compact import InvalidMessageError, PairingError, check_pairing, compact
from middleware import (
    BudgetExceededError,
    CompactingSession,
    CompactionEvent,
    UnpairedMessagesError,
    budgeted,
)

WEATHER: Dict[str, Any] = {"max_tokens": 150, "keep_head": 1, "keep_tail": 2}


@budgeted(**WEATHER)
def ask(messages: List[Any]) -> List[Any]:
    return messages


@budgeted(max_tokens=10, keep_tail=1, on_overflow="raise")
def strict(messages: List[Any]) -> int:
    return len(messages)


class Chat:
    @budgeted(**WEATHER)
    def ask(self, messages: List[Any]) -> List[Any]:
        return messages


# --- bad options fail at construction, naming the option -------------------------------


def test_budgeted_without_parentheses_says_how_to_use_it() -> None:
    with pytest.raises(TypeError, match=r"with parentheses: @budgeted\(max_tokens=...\)"):
        budgeted(lambda messages: messages)  # type: ignore[arg-type]


def test_budgeted_without_max_tokens_names_it() -> None:
    with pytest.raises(TypeError, match="max_tokens"):
        budgeted()


def test_an_unknown_option_is_named() -> None:
    with pytest.raises(TypeError, match="'keep_tial'"):
        budgeted(max_tokens=10, keep_tial=2)
    with pytest.raises(TypeError, match="'keep_tial'"):
        CompactingSession(keep_tial=2)


async def _acount(message: Any) -> int:
    return 1


def test_an_async_count_tokens_is_refused_at_decoration() -> None:
    with pytest.raises(TypeError, match=r"count_tokens .* is async"):
        budgeted(max_tokens=10, count_tokens=_acount)
    with pytest.raises(TypeError, match=r"count_tokens .* is async"):
        CompactingSession(max_tokens=10, count_tokens=_acount)


@pytest.mark.parametrize("max_events", [-1, 1.5, "10", True])
def test_a_bad_max_events_is_refused(max_events: Any) -> None:
    with pytest.raises(TypeError, match="max_events"):
        CompactingSession(max_events=max_events)


def test_the_signatures_show_every_option_with_its_default() -> None:
    import inspect

    params = inspect.signature(budgeted).parameters
    assert params["keep_tail"].default == 4
    assert params["summary_role"].default == "user"
    assert params["max_tokens"].default is inspect.Parameter.empty
    session_params = inspect.signature(CompactingSession).parameters
    assert session_params["keep_tail"].default == 4
    assert session_params["max_tokens"].default is None
    assert session_params["max_events"].default == 10_000


# --- interception of an instance, and of a base class with its subclass --------------------


class Client:
    def create(self, messages: List[Any], model: str = "m") -> List[Any]:
        return messages


class Base:
    def create(self, messages: List[Any]) -> List[Any]:
        return messages


class Sub(Base):
    pass


def test_intercepting_an_instance_method_compacts_that_instance_only() -> None:
    client, other = Client(), Client()
    with CompactingSession(**WEATHER, intercept=[(client, "create")]) as session:
        sent = client.create(weather_messages(), model="x")
        untouched = other.create(weather_messages())
    assert len(sent) == 7
    assert len(untouched) == 10
    assert len(session.events) == 1
    assert "create" not in vars(client)  # put back exactly: the instance holds nothing
    assert client.create.__func__ is Client.create


@pytest.mark.parametrize("order", [(Base, Sub), (Sub, Base)])
def test_a_base_class_and_its_subclass_compact_one_call_once(order: Any) -> None:
    targets = [(cls, "create") for cls in order]
    with CompactingSession(**WEATHER, intercept=targets) as session:
        assert len(Sub().create(weather_messages())) == 7
        assert len(Base().create(weather_messages())) == 7
    assert [event.tokens_before for event in session.events] == [195, 195]
    assert session.stats.calls == 2
    assert "create" not in vars(Sub)
    assert Base.__dict__["create"].__name__ == "create"


# --- re-entrancy: counters, summarizers and hooks may make budgeted calls ----------------


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


# --- pickling: results, events, errors, stats and decorated functions -------------------


def roundtrip(value: Any) -> Any:
    return pickle.loads(pickle.dumps(value))


def test_a_module_level_budgeted_function_pickles_and_copies_as_itself() -> None:
    assert roundtrip(ask) is ask
    assert copy.deepcopy(ask) is ask
    assert copy.copy(ask) is ask
    assert roundtrip(Chat.ask) is Chat.__dict__["ask"]


def test_a_bound_budgeted_method_pickles_with_its_instance() -> None:
    restored = roundtrip(Chat().ask)
    assert len(restored(weather_messages())) == 7


def test_results_events_stats_and_errors_survive_a_pickle_round_trip() -> None:
    result = compact(weather_messages(), **WEATHER)
    assert roundtrip(result) == result
    with CompactingSession() as session:
        ask(weather_messages())
    (event,) = session.events
    assert roundtrip(event) == event
    assert copy.deepcopy(event) == event
    assert roundtrip(session.stats) == session.stats

    with pytest.raises(BudgetExceededError) as raised:
        strict([user("x" * 400), user("y" * 400)])
    error = roundtrip(raised.value)
    assert type(error) is BudgetExceededError
    assert error.event == raised.value.event
    assert str(error) == str(raised.value)

    with pytest.raises(InvalidMessageError) as invalid:
        compact([system(), 42], max_tokens=10)
    again = roundtrip(invalid.value)
    assert (again.index, again.reason, str(again)) == (1, invalid.value.reason, str(invalid.value))

    problems = check_pairing([user(), {"role": "tool", "tool_call_id": "c", "content": "x"}])
    pairing = roundtrip(PairingError(problems))
    assert pairing.problems == tuple(problems)

    checked = budgeted(max_tokens=1000, validate="raise")(lambda messages: messages)
    with pytest.raises(UnpairedMessagesError) as unpaired:
        checked([user(), {"role": "tool", "tool_call_id": "c", "content": "x"}])
    restored = roundtrip(unpaired.value)
    assert restored.event == unpaired.value.event
    assert restored.problems == unpaired.value.problems


def _strict_in_worker(size: int) -> int:
    return strict([user("x" * size), user("y" * size)])  # type: ignore[no-any-return]


def test_a_budget_error_raised_in_a_pool_worker_reaches_the_parent() -> None:
    # Before errors could be unpickled in the parent, Pool.map hung forever here.
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        pending = pool.map_async(_strict_in_worker, [400])
        with pytest.raises(BudgetExceededError) as raised:
            pending.get(timeout=120)
    assert raised.value.event.tokens_after > 10


@pytest.mark.skipif(
    sys.version_info < (3, 10),
    reason="on Python 3.9 a budgeted function keeps wrapt's class, which cloudpickle takes "
    "for the bare function (a documented limitation)",
)
def test_cloudpickle_ships_a_main_module_budgeted_function_with_its_budget(tmp_path: Any) -> None:
    pytest.importorskip("cloudpickle")
    driver = tmp_path / "driver.py"
    driver.write_text(
        textwrap.dedent(
            """
            import sys, cloudpickle
            from middleware import budgeted

            @budgeted(max_tokens=60, keep_head=1, keep_tail=2)
            def send(messages):
                return len(messages)

            history = [{"role": "user", "content": f"message {i} " * 5} for i in range(51)]
            print("driver", send(history))
            sys.stdout.flush()
            sys.stdout.buffer.write(cloudpickle.dumps((send, history)))
            """
        )
    )
    shipped = subprocess.run(
        [sys.executable, str(driver)], capture_output=True, check=True, timeout=120
    ).stdout
    first_line, payload = shipped.split(b"\n", 1)
    worker = (
        "import pickle, sys; send, history = pickle.loads(sys.stdin.buffer.read()); "
        "print(send(history))"
    )
    received = subprocess.run(
        [sys.executable, "-c", worker], input=payload, capture_output=True, check=True, timeout=120
    ).stdout
    assert first_line.decode() == "driver 3"
    assert received.decode().strip() == "3"  # not 51: the budget came along


# --- calibration: implausible or outlying figures -----------------------------------------


class Usage:
    def __init__(self, prompt_tokens: Any) -> None:
        self.usage = {"prompt_tokens": prompt_tokens}


def reporting(prompt_tokens: List[Any]) -> Any:
    figures = iter(prompt_tokens)
    return budgeted(max_tokens=10_000)(lambda messages: Usage(next(figures)))


@pytest.mark.parametrize("figure", [10**400, -5, 0, 10**6])
def test_an_implausible_usage_figure_is_ignored_and_logged(
    figure: int, caplog: pytest.LogCaptureFixture
) -> None:
    call = reporting([figure, 200])
    caplog.set_level(logging.WARNING, logger="ctx_compact.middleware")
    with CompactingSession(calibrate=True) as session:
        call(weather_messages())  # 195 estimated tokens
        assert session.calibration == 1.0
        call(weather_messages())
    assert session.calibration == pytest.approx(200 / 195)
    assert "not a plausible count" in caplog.text
    assert session.stats.calls == 2


def test_one_outlier_cannot_move_the_calibration_much() -> None:
    call = reporting([200, 205, 210, 1500, 200])
    with CompactingSession(calibrate=True) as session:
        for _ in range(5):
            call(weather_messages())
    assert session.calibration == pytest.approx(210 / 195)


def test_the_calibration_follows_the_recent_worst_case() -> None:
    call = reporting([195, 195, 195, 230, 230, 230])
    with CompactingSession(calibrate=True) as session:
        for _ in range(6):
            call(weather_messages())
    assert session.calibration == pytest.approx(230 / 195)


# --- memory: a bounded number of events, exact stats --------------------------------------


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


# --- decided behaviours -------------------------------------------------------------------


def test_a_summarizer_that_raises_does_not_fail_the_call() -> None:
    def broken(dropped: List[Any]) -> str:
        raise RuntimeError("summarizer down")

    calls: List[Any] = []
    fn = budgeted(**WEATHER, summarize=broken)(lambda messages: calls.append(messages))
    with CompactingSession() as session:
        fn(weather_messages())
    (event,) = session.events
    assert calls == [list(event.messages)]  # made without a summary, dropping as compact does
    assert (event.summary, len(event.dropped), event.tokens_after) == (None, 3, 124)
    assert event.summary_error == "RuntimeError: summarizer down"


@pytest.mark.anyio
async def test_an_async_summarizer_that_raises_does_not_fail_the_call_either() -> None:
    async def broken(dropped: List[Any]) -> str:
        raise RuntimeError("summarizer down")

    sent: List[Any] = []

    @budgeted(**WEATHER, summarize=broken)
    async def fn(messages: List[Any]) -> None:
        sent.append(messages)

    with CompactingSession() as session:
        await fn(weather_messages())
    (event,) = session.events
    assert sent == [list(event.messages)]
    assert event.summary_error == "RuntimeError: summarizer down"


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


def test_a_hook_cannot_change_what_the_session_keeps() -> None:
    def meddle(event: CompactionEvent) -> None:
        with pytest.raises((TypeError, AttributeError)):
            event.messages.append("x")  # type: ignore[attr-defined]
        with pytest.raises((TypeError, AttributeError)):
            event.dropped.clear()  # type: ignore[attr-defined]

    fn = budgeted(**WEATHER, on_compact=meddle)(lambda messages: messages)
    with CompactingSession() as session:
        fn(weather_messages())
    (event,) = session.events
    assert (len(event.messages), len(event.dropped)) == (7, 3)


def test_counters_built_per_request_are_released_with_their_caches() -> None:
    import gc
    import weakref

    from middleware._cache import CountCache

    def live_caches() -> int:
        gc.collect()
        return sum(isinstance(o, CountCache) for o in gc.get_objects())

    before = live_caches()
    refs = []
    with CompactingSession():
        for _ in range(50):

            def counter(message: Any) -> int:
                return 5

            refs.append(weakref.ref(counter))
            fn = budgeted(max_tokens=100, count_tokens=counter)(lambda messages: messages)
            fn(weather_messages())
            del fn, counter
        gc.collect()
        assert all(ref() is None for ref in refs)
        assert live_caches() - before <= 1
    assert live_caches() == before


# --- the second round: what a session, a retry and the cut keep hold of --------------------


def test_a_session_per_request_with_a_module_level_counter_keeps_nothing_after_it() -> None:
    import gc
    import tracemalloc

    from helpers import ten_each

    from middleware._cache import CountCache
    from middleware._state import SessionState

    # A counter that lives as long as the module, as a tokenizer-backed one built at import does.
    fn = budgeted(max_tokens=10_000, count_tokens=ten_each)(lambda messages: len(messages))

    def request(number: int) -> None:
        history = [user(f"request {number}, turn {turn}: " + "x" * 200) for turn in range(20)]
        with CompactingSession() as session:
            fn(history)
        assert session.stats.calls == 1

    def live() -> Any:
        gc.collect()
        objects = gc.get_objects()
        return (
            sum(isinstance(o, SessionState) for o in objects),
            sum(isinstance(o, CountCache) for o in objects),
        )

    request(-1)  # whatever the first call sets up once
    before = live()
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        for number in range(300):
            request(number)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - start
    finally:
        tracemalloc.stop()
    assert live() == before  # no session state nor count cache outlives its session
    assert grown < 150_000  # 300 requests of 20 messages: leaked, about 6 MB


def length_refusal() -> Exception:
    """The OpenAI SDK's refusal for context length, as its class and figures look."""
    cls = type("BadRequestError", (Exception,), {"__module__": "openai"})
    err = cls(
        "This model's maximum context length is 100 tokens. However, your messages resulted "
        "in 200 tokens."
    )
    err.status_code = 400  # type: ignore[attr-defined]
    err.code = "context_length_exceeded"  # type: ignore[attr-defined]
    return err


def test_a_retry_sends_the_messages_of_a_generator_again() -> None:
    sent: List[List[Any]] = []
    events: List[CompactionEvent] = []

    @budgeted(max_tokens=10_000, keep_tail=2, on_overflow="retry", on_compact=events.append)
    def send(messages: List[Any]) -> int:
        sent.append(messages)
        if len(sent) == 1:
            raise length_refusal()
        return len(messages)

    history = weather_messages()
    assert send(m for m in history) == len(sent[1]) > 0
    assert sent[0] == history
    assert all(any(m is h for h in history) for m in sent[1])  # the caller's own messages
    (event,) = events
    assert event.retried
    assert event.messages_before == len(history)
    assert event.tokens_after > 0


@pytest.mark.anyio
async def test_an_async_retry_sends_the_messages_of_a_generator_again() -> None:
    sent: List[List[Any]] = []
    events: List[CompactionEvent] = []

    @budgeted(max_tokens=10_000, keep_tail=2, on_overflow="retry", on_compact=events.append)
    async def send(messages: List[Any]) -> int:
        await anyio.sleep(0)
        sent.append(messages)
        if len(sent) == 1:
            raise length_refusal()
        return len(messages)

    history = weather_messages()
    assert await send(m for m in history) == len(sent[1]) > 0
    assert sent[0] == history
    (event,) = events
    assert event.retried
    assert event.messages_before == len(history)
