"""CompactionEvent, on_compact hooks and the log_compaction hook.

The specification's example (``max_tokens=150, keep_head=1, keep_tail=2``)
drops messages 1-3 (195 -> 124 tokens; 145 with the summary).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any, Dict, Iterator, List

import anyio
import pytest
from helpers import weather_messages

from middleware import (
    BudgetExceededError,
    CompactingSession,
    CompactionEvent,
    budgeted,
    log_compaction,
)

SPEC: Dict[str, Any] = {"max_tokens": 150, "keep_head": 1, "keep_tail": 2}
LOGGER = "ctx_compact.middleware"

EXTRA_FIELDS = (
    "ctx_compact_function",
    "ctx_compact_max_tokens",
    "ctx_compact_tokens_before",
    "ctx_compact_tokens_after",
    "ctx_compact_tokens_saved",
    "ctx_compact_messages_before",
    "ctx_compact_messages_after",
    "ctx_compact_dropped",
    "ctx_compact_summarized",
    "ctx_compact_fits",
    "ctx_compact_elapsed",
)


def spec_summary(dropped: List[Any]) -> str:
    return f"Earlier in this conversation: {len(dropped)} messages were removed."


def assert_same_objects(actual: List[Any], expected: List[Any]) -> None:
    assert len(actual) == len(expected)
    for got, want in zip(actual, expected):
        assert got is want


def ask(messages: List[Any], model: str = "gpt-4o") -> str:
    return f"{len(messages)} messages"


async def aask(messages: List[Any]) -> str:
    await anyio.sleep(0)
    return f"{len(messages)} messages"


class Boom(Exception):
    pass


def failing_hook(event: CompactionEvent) -> None:
    raise Boom("the hook failed")


async def async_failing_hook(event: CompactionEvent) -> None:
    await anyio.sleep(0)
    raise Boom("the async hook failed")


# --- one event per intercepted call ----------------------------------------------


def test_one_event_per_call(weather):
    events: List[CompactionEvent] = []
    decorated = budgeted(**SPEC, on_compact=events.append)(ask)

    decorated(weather)
    assert len(events) == 1
    decorated(weather)
    decorated(messages=weather)
    assert len(events) == 3
    assert all(isinstance(event, CompactionEvent) for event in events)


def test_an_event_also_when_nothing_was_dropped(weather):
    events: List[CompactionEvent] = []

    budgeted(max_tokens=1000, on_compact=events.append)(ask)(weather)

    (event,) = events
    assert event.compacted is False
    assert event.dropped == ()
    assert event.tokens_before == 195
    assert event.tokens_after == 195
    assert event.tokens_saved == 0
    assert event.fits is True
    assert event.summary is None
    assert event.messages_before == 10
    assert_same_objects(event.messages, weather)


def test_no_event_for_a_call_without_messages():
    events: List[CompactionEvent] = []

    def send(messages: Any = None, prompt: str = "") -> str:
        return prompt

    assert budgeted(**SPEC, on_compact=events.append)(send)(prompt="hi") == "hi"
    assert events == []


def test_event_fields(weather):
    events: List[CompactionEvent] = []

    budgeted(**SPEC, on_compact=events.append)(ask)(weather)

    (event,) = events
    assert event.function == f"{ask.__module__}.{ask.__qualname__}"
    assert event.max_tokens == 150
    assert event.tokens_before == 195
    assert event.tokens_after == 124
    assert event.tokens_saved == 71
    assert event.fits is True
    assert event.compacted is True
    assert_same_objects(event.dropped, weather[1:4])
    assert_same_objects(event.messages, [weather[0], *weather[4:]])
    assert event.summary is None
    assert isinstance(event.elapsed, float)
    assert event.elapsed >= 0
    assert event.messages_before == 10


@pytest.mark.parametrize("max_tokens", [150, 1000], ids=["dropped", "nothing dropped"])
def test_an_event_is_a_whole_frozen_dataclass(weather, max_tokens):
    # The wrapper builds events without the dataclass __init__: every field is
    # set, and the event is equal to one built the documented way.
    events: List[CompactionEvent] = []
    budgeted(max_tokens=max_tokens, keep_tail=2, on_compact=events.append)(ask)(weather)
    (event,) = events
    fields = {f.name: getattr(event, f.name) for f in dataclasses.fields(CompactionEvent)}
    assert set(vars(event)) == set(fields)
    assert CompactionEvent(**fields) == event
    assert dataclasses.replace(event, provider_tokens=7).provider_tokens == 7
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.fits = False  # type: ignore[misc]


def test_event_fields_with_a_summary(weather):
    events: List[CompactionEvent] = []

    budgeted(**SPEC, summarize=spec_summary, on_compact=events.append)(ask)(weather)

    (event,) = events
    assert event.summary == spec_summary(weather[1:4])
    assert event.tokens_after == 145
    assert event.fits is True
    assert len(event.messages) == 8
    assert event.messages[1] == {"role": "user", "content": event.summary}
    assert_same_objects(event.dropped, weather[1:4])
    assert event.messages_before == 10


def test_event_function_is_the_qualified_name_of_a_method(weather):
    events: List[CompactionEvent] = []

    class Client:
        @budgeted(**SPEC, on_compact=events.append)
        def create(self, messages: List[Any]) -> None:
            pass

    Client().create(weather)

    assert events[0].function == f"{__name__}.{Client.__qualname__}.create"


def test_event_elapsed_includes_the_summarizer(weather):
    events: List[CompactionEvent] = []

    def slow_summary(dropped: List[Any]) -> str:
        time.sleep(0.05)
        return "slow"

    budgeted(**SPEC, summarize=slow_summary, on_compact=events.append)(ask)(weather)

    # Compacting alone takes far less; the bound leaves room for clock granularity.
    assert events[0].elapsed >= 0.04


def test_event_is_frozen(weather):
    events: List[CompactionEvent] = []
    budgeted(**SPEC, on_compact=events.append)(ask)(weather)
    (event,) = events

    with pytest.raises(dataclasses.FrozenInstanceError):
        event.fits = False  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.messages = []  # type: ignore[misc]
    assert event.fits is True


def test_an_events_repr_is_the_logged_line_not_the_messages(weather, caplog):
    # print(event) used to dump every kept and dropped message (20 KB for one event).
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    events: List[CompactionEvent] = []
    long = [
        {**message, "content": f"{message.get('content')} " + "x" * 5000} for message in weather
    ]
    budgeted(max_tokens=1500, keep_head=1, keep_tail=2, on_compact=[events.append, log_compaction])(
        ask
    )(long)
    (event,) = events
    (record,) = log_records(caplog)

    assert repr(event) == str(event) == f"<CompactionEvent {record.getMessage()}>"
    assert repr(event) == (
        f"<CompactionEvent {ask.__module__}.{ask.__qualname__}: 12697 -> 3792 tokens"
        " (budget 1500), 7 of 10 messages dropped, does not fit>"
    )
    # The messages are still there, as fields: the caller's own objects.
    assert {id(m) for m in (*event.messages, *event.dropped)} == {id(m) for m in long}


def test_event_documented_fields():
    names = {field.name for field in dataclasses.fields(CompactionEvent)}

    assert names >= {
        "function",
        "max_tokens",
        "tokens_before",
        "tokens_after",
        "fits",
        "dropped",
        "messages",
        "summary",
        "elapsed",
        "messages_before",
    }


@pytest.mark.anyio
async def test_one_event_per_async_call(weather):
    events: List[CompactionEvent] = []
    decorated = budgeted(**SPEC, on_compact=events.append)(aask)

    assert await decorated(weather) == "7 messages"
    assert await decorated(weather) == "7 messages"

    assert len(events) == 2
    assert events[0] is not events[1]
    assert events[0].tokens_after == 124


def test_one_event_per_generator_call(weather):
    events: List[CompactionEvent] = []

    def stream(messages: List[Any]) -> Iterator[Any]:
        yield from messages

    gen = budgeted(**SPEC, on_compact=events.append)(stream)(weather)
    assert len(events) == 1
    list(gen)
    assert len(events) == 1


# --- hooks -----------------------------------------------------------------------


def test_one_hook(weather):
    seen: List[CompactionEvent] = []

    def hook(event: CompactionEvent) -> None:
        seen.append(event)

    assert budgeted(**SPEC, on_compact=hook)(ask)(weather) == "7 messages"
    assert len(seen) == 1


def test_a_list_of_hooks_all_get_the_same_event_in_order(weather):
    calls: List[Any] = []

    hooks = [
        lambda event: calls.append(("first", event)),
        lambda event: calls.append(("second", event)),
    ]
    budgeted(**SPEC, on_compact=hooks)(ask)(weather)

    assert [name for name, _ in calls] == ["first", "second"]
    assert calls[0][1] is calls[1][1]


def test_a_tuple_of_hooks(weather):
    first: List[CompactionEvent] = []
    second: List[CompactionEvent] = []

    budgeted(**SPEC, on_compact=(first.append, second.append))(ask)(weather)

    assert len(first) == len(second) == 1


@pytest.mark.anyio
async def test_sync_and_async_hooks_on_an_async_callable(weather):
    sync_seen: List[CompactionEvent] = []
    async_seen: List[CompactionEvent] = []

    async def async_hook(event: CompactionEvent) -> None:
        await anyio.sleep(0)
        async_seen.append(event)

    decorated = budgeted(**SPEC, on_compact=[sync_seen.append, async_hook])(aask)

    assert await decorated(weather) == "7 messages"
    assert len(sync_seen) == 1
    assert len(async_seen) == 1
    assert sync_seen[0] is async_seen[0]
    assert sync_seen[0].tokens_after == 124


@pytest.mark.anyio
async def test_async_hook_is_awaited_once_the_call_returns(weather):
    # Hooks run after the call so that the event can carry the provider's usage figure.
    order: List[str] = []

    async def async_hook(event: CompactionEvent) -> None:
        await anyio.sleep(0)
        order.append(f"hook {event.provider_tokens}")

    async def call(messages: List[Any]) -> Dict[str, Any]:
        order.append("call")
        return {"usage": {"prompt_tokens": 130}}

    await budgeted(**SPEC, on_compact=async_hook)(call)(weather)

    assert order == ["call", "hook 130"]


@pytest.mark.anyio
async def test_async_hook_is_awaited_when_the_call_raises(weather):
    seen: List[CompactionEvent] = []

    async def async_hook(event: CompactionEvent) -> None:
        await anyio.sleep(0)
        seen.append(event)

    async def call(messages: List[Any]) -> None:
        raise RuntimeError("provider down")

    with pytest.raises(RuntimeError, match="provider down"):
        await budgeted(**SPEC, on_compact=async_hook)(call)(weather)

    assert [(e.tokens_after, e.provider_tokens) for e in seen] == [(124, None)]


@pytest.mark.anyio
async def test_async_hook_on_an_async_generator(weather):
    seen: List[CompactionEvent] = []

    async def async_hook(event: CompactionEvent) -> None:
        await anyio.sleep(0)
        seen.append(event)

    async def stream(messages: List[Any]) -> Any:
        for message in messages:
            yield message

    received = [m async for m in budgeted(**SPEC, on_compact=async_hook)(stream)(weather)]

    assert len(received) == 7
    assert len(seen) == 1


def test_a_failing_hook_is_logged_and_the_call_goes_on(weather, caplog):
    seen: List[CompactionEvent] = []
    caplog.set_level(logging.ERROR, logger=LOGGER)

    decorated = budgeted(**SPEC, on_compact=[failing_hook, seen.append])(ask)

    assert decorated(weather) == "7 messages"
    assert len(seen) == 1
    records = [r for r in caplog.records if r.name == LOGGER]
    assert len(records) == 1
    assert records[0].levelno == logging.ERROR
    assert records[0].exc_info is not None
    assert isinstance(records[0].exc_info[1], Boom)
    assert "failing_hook" in records[0].getMessage()


@pytest.mark.anyio
async def test_failing_sync_and_async_hooks_on_an_async_callable(weather, caplog):
    seen: List[CompactionEvent] = []
    caplog.set_level(logging.ERROR, logger=LOGGER)

    decorated = budgeted(**SPEC, on_compact=[failing_hook, async_failing_hook, seen.append])(aask)

    assert await decorated(weather) == "7 messages"
    assert len(seen) == 1
    records = [r for r in caplog.records if r.name == LOGGER]
    assert len(records) == 2
    assert all(r.levelno == logging.ERROR for r in records)
    assert [str(r.exc_info[1]) for r in records if r.exc_info] == [
        "the hook failed",
        "the async hook failed",
    ]


def test_a_hook_returning_an_awaitable_on_a_sync_call_is_skipped_and_logged(weather, caplog):
    seen: List[CompactionEvent] = []
    caplog.set_level(logging.ERROR, logger=LOGGER)

    async def late(event: CompactionEvent) -> None:
        seen.append(event)

    # Not detectable as async when decorating; the coroutine must be closed, not leaked.
    decorated = budgeted(**SPEC, on_compact=[lambda event: late(event), seen.append])(ask)

    assert decorated(weather) == "7 messages"
    assert len(seen) == 1
    (record,) = log_records(caplog)
    assert "skipped" in record.getMessage()


def test_a_failing_hook_before_the_other_hooks_on_overflow_raise(weather, caplog):
    seen: List[CompactionEvent] = []
    caplog.set_level(logging.ERROR, logger=LOGGER)
    decorated = budgeted(
        max_tokens=10,
        keep_head=1,
        keep_tail=2,
        on_overflow="raise",
        on_compact=[failing_hook, seen.append],
    )(ask)

    with pytest.raises(BudgetExceededError) as info:
        decorated(weather)

    assert info.value.event is seen[0]
    assert len([r for r in caplog.records if r.name == LOGGER]) == 1


# --- on_overflow and events ------------------------------------------------------


def test_on_overflow_raise_reports_the_event(weather):
    seen: List[CompactionEvent] = []
    called: List[bool] = []

    def send(messages: List[Any]) -> None:
        called.append(True)

    decorated = budgeted(
        max_tokens=10, keep_head=1, keep_tail=2, on_overflow="raise", on_compact=seen.append
    )(send)

    with pytest.raises(BudgetExceededError) as info:
        decorated(weather)

    assert called == []
    (event,) = seen
    assert info.value.event is event
    assert event.fits is False
    assert event.tokens_after > 10
    assert event.tokens_before == 195


@pytest.mark.anyio
async def test_on_overflow_raise_reports_the_event_to_async_hooks(weather):
    seen: List[CompactionEvent] = []

    async def hook(event: CompactionEvent) -> None:
        seen.append(event)

    decorated = budgeted(
        max_tokens=10, keep_head=1, keep_tail=2, on_overflow="raise", on_compact=hook
    )(aask)

    with pytest.raises(BudgetExceededError) as info:
        await decorated(weather)

    assert seen == [info.value.event]


def test_on_overflow_call_reports_an_event_that_does_not_fit(weather):
    seen: List[CompactionEvent] = []

    result = budgeted(max_tokens=10, keep_head=1, keep_tail=2, on_compact=seen.append)(ask)(weather)

    assert result == "3 messages"
    assert seen[0].fits is False
    assert_same_objects(seen[0].messages, [weather[0], *weather[8:]])


# --- log_compaction --------------------------------------------------------------


def content_strings(messages: List[Any]) -> List[str]:
    """Every non-empty text a message carries, the tool-call arguments included."""
    texts: List[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            texts.append(value)
        elif isinstance(value, dict):
            for key, item in value.items():
                if key not in ("role", "type", "id", "tool_call_id", "name"):
                    walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    for message in messages:
        walk(message)
    return [text for text in texts if text]


def log_records(caplog: pytest.LogCaptureFixture) -> List[logging.LogRecord]:
    return [r for r in caplog.records if r.name == LOGGER]


def assert_no_content(record: logging.LogRecord, texts: List[str]) -> None:
    shown = [record.getMessage(), *(str(getattr(record, field)) for field in EXTRA_FIELDS)]
    for text in texts:
        for value in shown:
            assert text not in value


def test_log_compaction_info_when_messages_were_dropped(weather, caplog):
    caplog.set_level(logging.DEBUG, logger=LOGGER)

    budgeted(**SPEC, on_compact=log_compaction)(ask)(weather)

    (record,) = log_records(caplog)
    assert record.levelno == logging.INFO
    assert record.ctx_compact_function == f"{ask.__module__}.{ask.__qualname__}"  # type: ignore[attr-defined]
    assert record.ctx_compact_max_tokens == 150  # type: ignore[attr-defined]
    assert record.ctx_compact_tokens_before == 195  # type: ignore[attr-defined]
    assert record.ctx_compact_tokens_after == 124  # type: ignore[attr-defined]
    assert record.ctx_compact_tokens_saved == 71  # type: ignore[attr-defined]
    assert record.ctx_compact_messages_before == 10  # type: ignore[attr-defined]
    assert record.ctx_compact_messages_after == 7  # type: ignore[attr-defined]
    assert record.ctx_compact_dropped == 3  # type: ignore[attr-defined]
    assert record.ctx_compact_summarized is False  # type: ignore[attr-defined]
    assert record.ctx_compact_fits is True  # type: ignore[attr-defined]
    assert isinstance(record.ctx_compact_elapsed, float)  # type: ignore[attr-defined]
    assert record.ctx_compact_elapsed >= 0  # type: ignore[attr-defined]
    message = record.getMessage()
    assert "195" in message
    assert "124" in message
    assert_no_content(record, content_strings(weather))


def test_log_compaction_debug_when_nothing_was_dropped(weather, caplog):
    caplog.set_level(logging.DEBUG, logger=LOGGER)

    budgeted(max_tokens=1000, on_compact=log_compaction)(ask)(weather)

    (record,) = log_records(caplog)
    assert record.levelno == logging.DEBUG
    assert record.ctx_compact_dropped == 0  # type: ignore[attr-defined]
    assert record.ctx_compact_tokens_before == 195  # type: ignore[attr-defined]
    assert record.ctx_compact_tokens_after == 195  # type: ignore[attr-defined]
    assert record.ctx_compact_messages_after == 10  # type: ignore[attr-defined]
    assert record.ctx_compact_fits is True  # type: ignore[attr-defined]
    assert_no_content(record, content_strings(weather))


def test_log_compaction_warning_when_it_does_not_fit(weather, caplog):
    caplog.set_level(logging.DEBUG, logger=LOGGER)

    budgeted(max_tokens=10, keep_head=1, keep_tail=2, on_compact=log_compaction)(ask)(weather)

    (record,) = log_records(caplog)
    assert record.levelno == logging.WARNING
    assert record.ctx_compact_fits is False  # type: ignore[attr-defined]
    assert record.ctx_compact_max_tokens == 10  # type: ignore[attr-defined]
    assert record.ctx_compact_dropped == 7  # type: ignore[attr-defined]
    assert_no_content(record, content_strings(weather))


def test_log_compaction_warning_on_overflow_raise(weather, caplog):
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    decorated = budgeted(
        max_tokens=10, keep_head=1, keep_tail=2, on_overflow="raise", on_compact=log_compaction
    )(ask)

    with pytest.raises(BudgetExceededError):
        decorated(weather)

    (record,) = log_records(caplog)
    assert record.levelno == logging.WARNING


def test_log_compaction_never_logs_the_summary(weather, caplog):
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    secret = "the user's private plans for Denver"

    budgeted(**SPEC, summarize=lambda dropped: secret, on_compact=log_compaction)(ask)(weather)

    (record,) = log_records(caplog)
    assert record.ctx_compact_summarized is True  # type: ignore[attr-defined]
    assert_no_content(record, [secret, *content_strings(weather)])


def test_log_compaction_one_record_per_call(weather, caplog):
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    decorated = budgeted(**SPEC, on_compact=log_compaction)(ask)

    decorated(weather)
    decorated(weather[:2])
    decorated(weather)

    assert [r.levelno for r in log_records(caplog)] == [logging.INFO, logging.DEBUG, logging.INFO]


def test_log_compaction_respects_the_logger_level(weather, caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    decorated = budgeted(max_tokens=1000, on_compact=log_compaction)(ask)

    decorated(weather)

    assert log_records(caplog) == []


@pytest.mark.anyio
async def test_log_compaction_on_an_async_callable(weather, caplog):
    caplog.set_level(logging.DEBUG, logger=LOGGER)

    assert await budgeted(**SPEC, on_compact=log_compaction)(aask)(weather) == "7 messages"

    (record,) = log_records(caplog)
    assert record.levelno == logging.INFO
    assert record.ctx_compact_tokens_after == 124  # type: ignore[attr-defined]
    assert_no_content(record, content_strings(weather))


def test_content_strings_finds_the_content():
    # Guards the no-content assertions above against passing vacuously.
    texts = content_strings(
        [
            {"role": "user", "content": "Denver?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
        ]
    )

    assert texts == ["Denver?", "{}"]


# --- hooks see the event, not the session's state -------------------------------------------


def test_a_hook_cannot_change_what_the_session_keeps() -> None:
    def meddle(event: CompactionEvent) -> None:
        with pytest.raises((TypeError, AttributeError)):
            event.messages.append("x")  # type: ignore[attr-defined]
        with pytest.raises((TypeError, AttributeError)):
            event.dropped.clear()  # type: ignore[attr-defined]

    fn = budgeted(**SPEC, on_compact=meddle)(lambda messages: messages)
    with CompactingSession() as session:
        fn(weather_messages())
    (event,) = session.events
    assert (len(event.messages), len(event.dropped)) == (7, 3)
