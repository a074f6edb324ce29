"""``budgeted``: finding the messages, leaving the caller's alone, options, summaries, overflow.

The specification's example (``max_tokens=150, keep_head=1, keep_tail=2``)
drops messages 1-3 (195 -> 124 tokens; 145 with the summary).
"""

from __future__ import annotations

import copy
import math
import threading
from typing import Any, Dict, List, Optional, Tuple

import anyio
import pytest
from helpers import system, ten_each, user, weather_messages

import ctx_compact
import middleware
from ctx_compact import compact, compact_with_summary
from middleware import BudgetExceededError, CompactingSession, CompactionEvent, budgeted

SPEC: Dict[str, Any] = {"max_tokens": 150, "keep_head": 1, "keep_tail": 2}


def spec_summary(dropped: List[Any]) -> str:
    return f"Earlier in this conversation: {len(dropped)} messages were removed."


async def async_spec_summary(dropped: List[Any]) -> str:
    await anyio.sleep(0)
    return spec_summary(dropped)


def assert_same_objects(actual: List[Any], expected: List[Any]) -> None:
    assert len(actual) == len(expected)
    for got, want in zip(actual, expected):
        assert got is want


def assert_compacted(received: Any, weather: List[Any]) -> None:
    assert isinstance(received, list)
    assert received is not weather
    assert_same_objects(received, [weather[0], *weather[4:]])


def assert_summarized(received: Any, weather: List[Any]) -> None:
    assert isinstance(received, list)
    assert received[0] is weather[0]
    assert received[1] == {"role": "user", "content": spec_summary(weather[1:4])}
    assert_same_objects(received[2:], weather[4:])


def echo(messages: Any = None, prompt: Any = None) -> Any:
    return messages


# --- where the messages are ------------------------------------------------------


def test_messages_by_keyword(weather):
    assert_compacted(budgeted(**SPEC)(echo)(messages=weather), weather)


def test_messages_by_position(weather):
    assert_compacted(budgeted(**SPEC)(echo)(weather), weather)


def test_messages_by_position_after_other_arguments(weather):
    def ask(model: str, messages: List[Any], temperature: float = 0.0) -> Tuple[Any, ...]:
        return model, messages, temperature

    model, received, temperature = budgeted(**SPEC)(ask)("gpt-4o", weather, 0.5)

    assert model == "gpt-4o"
    assert temperature == 0.5
    assert_compacted(received, weather)


def test_positional_only_messages(weather):
    def ask(messages: List[Any], /, model: str = "gpt-4o") -> Tuple[List[Any], str]:
        return messages, model

    received, model = budgeted(**SPEC)(ask)(weather, model="small")

    assert model == "small"
    assert_compacted(received, weather)


def test_keyword_only_messages(weather):
    def ask(*, model: str, messages: List[Any]) -> Tuple[List[Any], str]:
        return messages, model

    received, model = budgeted(**SPEC)(ask)(model="gpt-4o", messages=weather)

    assert model == "gpt-4o"
    assert_compacted(received, weather)


def test_other_arguments_are_passed_on_unchanged(weather):
    options = {"temperature": 0.5}

    def ask(messages: List[Any], model: str, options: Dict[str, Any]) -> Tuple[Any, ...]:
        return messages, model, options

    _, model, received_options = budgeted(**SPEC)(ask)(weather, "gpt-4o", options=options)

    assert model == "gpt-4o"
    assert received_options is options


def test_messages_from_a_generator(weather):
    events: List[CompactionEvent] = []

    received = budgeted(**SPEC, on_compact=events.append)(echo)(m for m in weather)

    assert_compacted(received, weather)
    assert events[0].tokens_before == 195
    assert events[0].tokens_after == 124


def test_messages_from_a_tuple(weather):
    received = budgeted(**SPEC)(echo)(tuple(weather))

    assert_compacted(received, weather)


def test_a_call_without_messages_passes_through_untouched():
    events: List[CompactionEvent] = []
    seen: List[Dict[str, Any]] = []

    def ask(messages: Any = None, prompt: Any = None) -> str:
        seen.append({"messages": messages, "prompt": prompt})
        return "called"

    prompt = object()
    assert budgeted(**SPEC, on_compact=events.append)(ask)(prompt=prompt) == "called"

    assert len(seen) == 1
    assert seen[0]["messages"] is None
    assert seen[0]["prompt"] is prompt
    assert events == []


def test_messages_none_passes_through():
    events: List[CompactionEvent] = []
    decorated = budgeted(**SPEC, on_compact=events.append)(echo)

    assert decorated(None) is None
    assert decorated(messages=None) is None
    assert events == []


def test_messages_that_are_not_iterable_fail_before_the_call():
    called: List[bool] = []

    def ask(messages: Any) -> None:
        called.append(True)

    with pytest.raises(TypeError, match=r"'messages' must be a list.* \(got 42\)"):
        budgeted(**SPEC)(ask)(42)
    assert called == []


def test_a_string_as_messages_fails_before_the_call():
    called: List[bool] = []

    def ask(messages: Any) -> None:
        called.append(True)

    with pytest.raises(TypeError, match=r"\(got '"):
        budgeted(**SPEC)(ask)("What is the weather in Denver?")
    assert called == []


def test_a_single_message_as_messages_fails_like_compact():
    # A dict is iterable, but a lone message is a mistake, not a list of its keys.
    called: List[bool] = []

    def ask(messages: Any) -> None:
        called.append(True)

    with pytest.raises(TypeError, match=r"\(got \{'role'"):
        budgeted(**SPEC)(ask)(user("What is the weather in Denver?"))
    assert called == []


def test_an_empty_list_is_passed_on_with_an_event():
    events: List[CompactionEvent] = []

    received = budgeted(**SPEC, on_compact=events.append)(echo)([])

    assert received == []
    assert events[0].tokens_before == 0
    assert events[0].compacted is False


def test_count_tokens_is_used(weather):
    events: List[CompactionEvent] = []
    expected = compact(weather, max_tokens=60, keep_head=1, keep_tail=2, count_tokens=ten_each)

    received = budgeted(
        max_tokens=60, keep_head=1, keep_tail=2, count_tokens=ten_each, on_compact=events.append
    )(echo)(weather)

    assert_same_objects(received, expected.messages)
    assert events[0].tokens_before == 100
    assert events[0].tokens_after == expected.tokens_after


# --- the caller's list and messages ----------------------------------------------


def test_the_callers_list_and_messages_are_not_mutated(weather):
    before = copy.deepcopy(weather)
    ids = [id(m) for m in weather]

    def greedy(messages: List[Any]) -> List[Any]:
        # A callee that changes its own list must not reach the caller's.
        messages.append(user("extra"))
        del messages[0]
        return messages

    budgeted(**SPEC)(greedy)(weather)

    assert weather == before
    assert [id(m) for m in weather] == ids


def test_the_callers_list_is_not_mutated_with_a_summary(weather):
    before = copy.deepcopy(weather)

    received = budgeted(**SPEC, summarize=spec_summary)(echo)(weather)

    assert weather == before
    assert_summarized(received, weather)


def test_the_callee_gets_a_new_list_of_the_callers_objects_when_nothing_is_dropped(weather):
    events: List[CompactionEvent] = []

    received = budgeted(max_tokens=1000, on_compact=events.append)(echo)(weather)

    assert received is not weather
    assert_same_objects(received, weather)
    assert events[0].compacted is False


def test_the_callee_cannot_change_the_events_list(weather):
    events: List[CompactionEvent] = []

    def greedy(messages: List[Any]) -> None:
        messages.clear()

    budgeted(**SPEC, on_compact=events.append)(greedy)(weather)

    assert_same_objects(events[0].messages, [weather[0], *weather[4:]])


# --- messages_arg ----------------------------------------------------------------


def test_messages_arg_input(weather):
    def respond(model: str, input: List[Any]) -> List[Any]:
        return input

    decorated = budgeted(**SPEC, messages_arg="input")(respond)

    assert_compacted(decorated("gpt-4o", input=weather), weather)
    assert_compacted(decorated("gpt-4o", weather), weather)


def test_messages_arg_contents(weather):
    def generate(*, model: str, contents: List[Any], messages: Any = "left alone") -> Any:
        return contents, messages

    contents, messages = budgeted(**SPEC, messages_arg="contents")(generate)(
        model="gemini", contents=weather
    )

    assert_compacted(contents, weather)
    assert messages == "left alone"


def test_messages_arg_the_function_cannot_accept_fails_at_decoration():
    def ask(messages: List[Any], model: str) -> None:
        raise AssertionError("never called")

    decorate = budgeted(**SPEC, messages_arg="input")

    with pytest.raises(TypeError, match="'input'"):
        decorate(ask)


def test_default_messages_arg_the_function_cannot_accept_fails_at_decoration():
    def respond(input: List[Any]) -> None:
        raise AssertionError("never called")

    with pytest.raises(TypeError, match="'messages'"):
        budgeted(**SPEC)(respond)


def test_wrapping_something_not_callable_fails():
    with pytest.raises(TypeError, match="callable"):
        budgeted(**SPEC)(42)


# --- bad options fail when decorating --------------------------------------------


def test_max_tokens_is_required():
    with pytest.raises(TypeError, match="max_tokens"):
        budgeted()  # type: ignore[call-arg]


BAD_OPTIONS = [
    # (options, error, the option the message must name)
    pytest.param({"max_tokens": 0}, TypeError, "max_tokens", id="max_tokens-0"),
    pytest.param({"max_tokens": -5}, TypeError, "max_tokens", id="max_tokens-negative"),
    pytest.param({"max_tokens": True}, TypeError, "max_tokens", id="max_tokens-bool"),
    pytest.param({"max_tokens": math.nan}, TypeError, "max_tokens", id="max_tokens-nan"),
    pytest.param({"max_tokens": math.inf}, TypeError, "max_tokens", id="max_tokens-inf"),
    pytest.param({"max_tokens": "100"}, TypeError, "max_tokens", id="max_tokens-str"),
    pytest.param({"max_tokens": None}, TypeError, "max_tokens", id="max_tokens-none"),
    pytest.param({"keep_tail": -1}, ValueError, "keep_tail", id="keep_tail-negative"),
    pytest.param({"keep_head": -1}, ValueError, "keep_head", id="keep_head-negative"),
    pytest.param({"keep_head": 1.5}, TypeError, "keep_head", id="keep_head-float"),
    pytest.param({"keep_tail": True}, TypeError, "keep_tail", id="keep_tail-bool"),
    pytest.param({"on_overflow": "bogus"}, ValueError, "on_overflow", id="on_overflow"),
    pytest.param({"on_compact": 5}, TypeError, "on_compact", id="on_compact-int"),
    pytest.param({"on_compact": [print, 5]}, TypeError, "on_compact", id="on_compact-list"),
    pytest.param({"on_compact": "log"}, TypeError, "on_compact", id="on_compact-str"),
    pytest.param({"summarize": 3}, TypeError, "summarize", id="summarize"),
    pytest.param({"count_tokens": "len"}, TypeError, "count_tokens", id="count_tokens"),
    pytest.param({"summary_role": 3}, TypeError, "summary_role", id="summary_role"),
    pytest.param({"messages_arg": "two words"}, ValueError, "messages_arg", id="messages_arg"),
    pytest.param({"messages_arg": 3}, TypeError, "messages_arg", id="messages_arg-int"),
]


@pytest.mark.parametrize(("options", "error", "named"), BAD_OPTIONS)
def test_bad_options_fail_when_decorating(options, error, named):
    with pytest.raises(error, match=named):
        budgeted(**{"max_tokens": 100, **options})


# --- summarize -------------------------------------------------------------------


def test_sync_summarize_on_a_sync_callable(weather):
    events: List[CompactionEvent] = []
    calls: List[List[Any]] = []

    def summarize(dropped: List[Any]) -> str:
        calls.append(dropped)
        return spec_summary(dropped)

    received = budgeted(**SPEC, summarize=summarize, on_compact=events.append)(echo)(weather)

    assert_summarized(received, weather)
    assert len(calls) == 1
    assert_same_objects(calls[0], weather[1:4])
    assert events[0].tokens_after == 145
    assert events[0].summary == spec_summary(weather[1:4])


def test_summarize_is_not_called_when_nothing_is_dropped(weather):
    calls: List[Any] = []

    def summarize(dropped: List[Any]) -> str:
        calls.append(dropped)
        return "never"

    received = budgeted(max_tokens=1000, summarize=summarize)(echo)(weather)

    assert calls == []
    assert_same_objects(received, weather)


def test_summary_role(weather):
    received = budgeted(**SPEC, summarize=spec_summary, summary_role="system")(echo)(weather)

    assert received[1] == {"role": "system", "content": spec_summary(weather[1:4])}


@pytest.mark.anyio
async def test_async_summarize_on_an_async_callable_is_awaited(weather):
    events: List[CompactionEvent] = []

    async def ask(messages: List[Any]) -> List[Any]:
        return messages

    decorated = budgeted(**SPEC, summarize=async_spec_summary, on_compact=events.append)(ask)

    assert_summarized(await decorated(weather), weather)
    assert events[0].summary == spec_summary(weather[1:4])
    assert events[0].tokens_after == 145


@pytest.mark.anyio
async def test_sync_summarize_on_an_async_callable_runs_on_a_worker_thread(weather):
    threads: List[int] = []

    def summarize(dropped: List[Any]) -> str:
        threads.append(threading.get_ident())
        return spec_summary(dropped)

    async def ask(messages: List[Any]) -> List[Any]:
        return messages

    received = await budgeted(**SPEC, summarize=summarize)(ask)(weather)

    assert_summarized(received, weather)
    assert len(threads) == 1
    assert threads[0] != threading.get_ident()


@pytest.mark.anyio
async def test_sync_summarize_on_an_async_generator_runs_on_a_worker_thread(weather):
    threads: List[int] = []

    def summarize(dropped: List[Any]) -> str:
        threads.append(threading.get_ident())
        return spec_summary(dropped)

    async def stream(messages: List[Any]) -> Any:
        for message in messages:
            yield message

    received = [m async for m in budgeted(**SPEC, summarize=summarize)(stream)(weather)]

    assert_summarized(received, weather)
    assert len(threads) == 1
    assert threads[0] != threading.get_ident()


@pytest.mark.anyio
async def test_async_summarize_on_an_async_generator_is_awaited(weather):
    async def stream(messages: List[Any]) -> Any:
        for message in messages:
            yield message

    received = [m async for m in budgeted(**SPEC, summarize=async_spec_summary)(stream)(weather)]

    assert_summarized(received, weather)


def test_async_summarize_on_a_sync_callable_is_refused_when_decorating():
    decorate = budgeted(**SPEC, summarize=async_spec_summary)

    with pytest.raises(TypeError, match="cannot await the async summarize"):
        decorate(echo)


def test_async_summarize_on_a_generator_function_is_refused_when_decorating():
    def stream(messages: List[Any]) -> Any:
        yield from messages

    with pytest.raises(TypeError, match="generator function, so it cannot await"):
        budgeted(**SPEC, summarize=async_spec_summary)(stream)


def test_async_callable_object_summarize_on_a_sync_callable_is_refused():
    class Summarizer:
        async def __call__(self, dropped: List[Any]) -> str:
            return spec_summary(dropped)

    with pytest.raises(TypeError, match="cannot await"):
        budgeted(**SPEC, summarize=Summarizer())(echo)


def test_async_hook_on_a_sync_callable_is_refused_when_decorating():
    async def hook(event: CompactionEvent) -> None:
        pass

    decorate = budgeted(**SPEC, on_compact=[print, hook])

    with pytest.raises(TypeError, match="cannot await the async on_compact hook"):
        decorate(echo)


def test_async_hook_on_a_generator_function_is_refused_when_decorating():
    async def hook(event: CompactionEvent) -> None:
        pass

    def stream(messages: List[Any]) -> Any:
        yield from messages

    with pytest.raises(TypeError, match="cannot await the async on_compact hook"):
        budgeted(**SPEC, on_compact=hook)(stream)


def test_summarize_returning_an_awaitable_on_a_sync_callable_fails_before_the_call(weather):
    called: List[bool] = []

    def ask(messages: List[Any]) -> None:
        called.append(True)

    decorated = budgeted(**SPEC, summarize=lambda dropped: async_spec_summary(dropped))(ask)

    with pytest.raises(ctx_compact.InvalidMessageError, match="awaitable"):
        decorated(weather)
    assert called == []


def test_summarize_returning_a_non_string_fails_before_the_call(weather):
    called: List[bool] = []

    def ask(messages: List[Any]) -> None:
        called.append(True)

    decorated = budgeted(**SPEC, summarize=lambda dropped: 42)(ask)

    with pytest.raises(ctx_compact.InvalidMessageError, match="string"):
        decorated(weather)
    assert called == []


# --- on_overflow -----------------------------------------------------------------


def test_on_overflow_raise_does_not_make_the_call(weather):
    events: List[CompactionEvent] = []
    called: List[bool] = []

    def ask(messages: List[Any]) -> None:
        called.append(True)

    decorated = budgeted(
        max_tokens=10, keep_head=1, keep_tail=2, on_overflow="raise", on_compact=events.append
    )(ask)

    with pytest.raises(BudgetExceededError) as info:
        decorated(weather)

    assert called == []
    assert len(events) == 1
    assert info.value.event is events[0]
    assert info.value.event.fits is False
    assert info.value.event.max_tokens == 10
    assert "ask" in str(info.value)
    assert isinstance(info.value, RuntimeError)


@pytest.mark.anyio
async def test_on_overflow_raise_on_an_async_callable(weather):
    events: List[CompactionEvent] = []
    called: List[bool] = []

    async def ask(messages: List[Any]) -> None:
        called.append(True)

    decorated = budgeted(
        max_tokens=10, keep_head=1, keep_tail=2, on_overflow="raise", on_compact=events.append
    )(ask)

    with pytest.raises(BudgetExceededError) as info:
        await decorated(weather)

    assert called == []
    assert info.value.event is events[0]
    assert info.value.event.fits is False


@pytest.mark.anyio
async def test_on_overflow_raise_on_an_async_generator(weather):
    started: List[bool] = []

    async def stream(messages: List[Any]) -> Any:
        started.append(True)
        yield messages

    agen = budgeted(max_tokens=10, keep_head=1, keep_tail=2, on_overflow="raise")(stream)(weather)

    with pytest.raises(BudgetExceededError):
        await agen.__anext__()
    assert started == []


def test_on_overflow_raise_makes_the_call_when_it_fits(weather):
    received = budgeted(**SPEC, on_overflow="raise")(echo)(weather)

    assert_compacted(received, weather)


def test_on_overflow_call_makes_the_call_with_the_best_result(weather):
    events: List[CompactionEvent] = []
    best = compact(weather, max_tokens=10, keep_head=1, keep_tail=2)
    assert best.fits is False

    received = budgeted(max_tokens=10, keep_head=1, keep_tail=2, on_compact=events.append)(echo)(
        weather
    )

    assert_same_objects(received, best.messages)
    assert events[0].fits is False
    assert events[0].tokens_after == best.tokens_after
    assert_same_objects(events[0].dropped, best.dropped)


# --- a call whose event nobody receives -----------------------------------------------

QUIET_CASES = [
    pytest.param({"max_tokens": 1000}, id="fits whole"),
    pytest.param(SPEC, id="drops three"),
    pytest.param({"max_tokens": 10, "keep_head": 1, "keep_tail": 2}, id="does not fit"),
    pytest.param({**SPEC, "on_overflow": "raise"}, id="raise, fits"),
    pytest.param({**SPEC, "clear_tool_results": {"keep": 0}}, id="clearing"),
]


@pytest.mark.parametrize("options", QUIET_CASES)
def test_a_call_nobody_hears_passes_on_what_a_heard_call_does(
    weather: List[Any], options: Dict[str, Any]
) -> None:
    """With no hook and no session, the callee gets the list a heard call gets."""
    events: List[CompactionEvent] = []
    result = object()
    received: List[List[Any]] = []

    def ask(messages: List[Any]) -> object:
        received.append(messages)
        return result

    assert budgeted(**options)(ask)(weather) is result  # the result itself, never a proxy
    budgeted(**options, on_compact=events.append)(ask)(weather)
    with middleware.CompactingSession():
        budgeted(**options)(ask)(weather)

    quiet, heard, in_session = received
    assert quiet is not weather
    assert quiet == heard == in_session == list(events[0].messages)
    if "clear_tool_results" not in options:
        assert_same_objects(quiet, list(events[0].messages))
    else:
        assert quiet != weather  # something was cleared, in copies
    assert weather == weather_messages()  # the caller's messages are left alone


@pytest.mark.anyio
@pytest.mark.parametrize("options", QUIET_CASES)
async def test_an_async_call_nobody_hears_passes_on_what_a_heard_call_does(
    weather: List[Any], options: Dict[str, Any]
) -> None:
    events: List[CompactionEvent] = []
    received: List[List[Any]] = []

    async def ask(messages: List[Any]) -> None:
        received.append(messages)

    await budgeted(**options)(ask)(weather)
    await budgeted(**options, on_compact=events.append)(ask)(weather)

    quiet, heard = received
    assert quiet is not weather
    assert quiet == heard == list(events[0].messages)


@pytest.mark.anyio
async def test_a_call_nobody_hears_still_raises_with_its_event_when_it_does_not_fit(
    weather: List[Any],
) -> None:
    options = {"max_tokens": 10, "keep_head": 1, "keep_tail": 2, "on_overflow": "raise"}

    async def ask(messages: List[Any]) -> None:
        raise AssertionError("called")

    with pytest.raises(BudgetExceededError) as sync_info:
        budgeted(**options)(echo)(weather)
    with pytest.raises(BudgetExceededError) as async_info:
        await budgeted(**options)(ask)(weather)
    for info in (sync_info, async_info):
        assert info.value.event.fits is False
        assert info.value.event.tokens_before == compact(weather, max_tokens=10).tokens_before


# --- one import path per name --------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["budgeted", "CompactingSession", "CompactionEvent", "BudgetExceededError", "log_compaction"],
)
def test_middleware_names_are_imported_from_middleware_only(name):
    # The core points at nothing above it: the middleware's names have one path.
    assert hasattr(middleware, name)
    assert not hasattr(ctx_compact, name)
    with pytest.raises(ImportError):
        exec(f"from ctx_compact import {name}", {})


# --- concurrency -----------------------------------------------------------------


def conversation(i: int) -> List[Any]:
    """A conversation of its own: its length and every content differ by ``i``."""
    return [system(f"system {i}"), *(user(f"message {i}.{k}") for k in range(3 + i % 7))]


@pytest.mark.anyio
async def test_concurrent_calls_each_get_their_own_compacted_list():
    events: List[CompactionEvent] = []
    options: Dict[str, Any] = {
        "max_tokens": 50,
        "keep_head": 1,
        "keep_tail": 2,
        "count_tokens": ten_each,
    }

    def summarize(dropped: List[Any]) -> str:
        return f"dropped from {dropped[0]['content']}"

    @budgeted(**options, summarize=summarize, on_compact=events.append)
    async def ask(messages: List[Any], i: int) -> List[Any]:
        for _ in range(i % 4):
            await anyio.sleep(0)
        return messages

    conversations = [conversation(i) for i in range(40)]
    results: Dict[int, List[Any]] = {}

    async def one(i: int) -> None:
        results[i] = await ask(conversations[i], i=i)

    async with anyio.create_task_group() as tg:
        for i in range(len(conversations)):
            tg.start_soon(one, i)

    assert len(events) == len(conversations)
    for i, messages in enumerate(conversations):
        expected = compact_with_summary(messages, **options, summarize=summarize)
        received = results[i]
        assert len(received) == len(expected.messages)
        for got, want in zip(received, expected.messages):
            if want["content"].startswith("dropped from"):
                # The summary names this conversation's own first dropped message.
                assert got == {"role": "user", "content": f"dropped from message {i}.0"}
            else:
                assert got is want
    assert sum(1 for event in events if event.summary is not None) > 10


@pytest.mark.anyio
async def test_concurrent_calls_without_summary_match_compact():
    @budgeted(max_tokens=45, keep_head=1, keep_tail=2, count_tokens=ten_each)
    async def ask(messages: List[Any], delay: Optional[int] = None) -> List[Any]:
        for _ in range(delay or 0):
            await anyio.sleep(0)
        return messages

    conversations = [conversation(i) for i in range(30)]
    results: Dict[int, List[Any]] = {}

    async def one(i: int) -> None:
        results[i] = await ask(conversations[i], delay=(7 * i) % 5)

    async with anyio.create_task_group() as tg:
        for i in range(len(conversations)):
            tg.start_soon(one, i)

    for i, messages in enumerate(conversations):
        expected = compact(messages, max_tokens=45, keep_head=1, keep_tail=2, count_tokens=ten_each)
        assert_same_objects(results[i], expected.messages)


# --- a summarizer that raises ---------------------------------------------------------------


def test_a_summarizer_that_raises_does_not_fail_the_call() -> None:
    def broken(dropped: List[Any]) -> str:
        raise RuntimeError("summarizer down")

    calls: List[Any] = []
    fn = budgeted(**SPEC, summarize=broken)(lambda messages: calls.append(messages))
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

    @budgeted(**SPEC, summarize=broken)
    async def fn(messages: List[Any]) -> None:
        sent.append(messages)

    with CompactingSession() as session:
        await fn(weather_messages())
    (event,) = session.events
    assert sent == [list(event.messages)]
    assert event.summary_error == "RuntimeError: summarizer down"


# --- a retry after a context-length refusal, from a generator of messages -------------------


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
