"""Provider usage on events, session calibration, and validation before the call."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any, Dict, List

import pytest
from helpers import weather_messages

from ctx_compact import PairingError, check_pairing, compact
from middleware import (
    CompactingSession,
    CompactionEvent,
    UnpairedMessagesError,
    budgeted,
    provider_prompt_tokens,
)

SPEC: Dict[str, Any] = {"max_tokens": 150, "keep_head": 1, "keep_tail": 2}


# -- reading usage -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        ({"usage": {"prompt_tokens": 130, "completion_tokens": 9}}, 130),
        (SimpleNamespace(usage=SimpleNamespace(prompt_tokens=77)), 77),
        ({"usage": {"input_tokens": 50, "output_tokens": 3}}, 50),
        (
            SimpleNamespace(
                usage=SimpleNamespace(
                    input_tokens=50, cache_creation_input_tokens=20, cache_read_input_tokens=5
                )
            ),
            75,
        ),
        ({"usage": None}, None),
        ({"choices": []}, None),
        ("a plain string", None),
        (None, None),
        ({"usage": {"prompt_tokens": "130"}}, None),
    ],
)
def test_provider_prompt_tokens(response: Any, expected: Any) -> None:
    assert provider_prompt_tokens(response) == expected


def test_a_response_whose_usage_attribute_raises_gives_no_figure() -> None:
    class Odd:
        @property
        def usage(self) -> Any:
            raise RuntimeError("boom")

    assert provider_prompt_tokens(Odd()) is None


# -- the event carries the provider's figure --------------------------------------------


def test_sync_event_records_the_provider_figure(weather: List[Any]) -> None:
    events: List[CompactionEvent] = []

    @budgeted(**SPEC, on_compact=events.append)
    def ask(messages: List[Any]) -> Dict[str, Any]:
        return {"usage": {"prompt_tokens": 2 * len(messages)}}

    ask(weather)
    (event,) = events
    assert (event.tokens_after, event.provider_tokens) == (124, 14)


@pytest.mark.anyio
async def test_async_event_records_the_provider_figure(weather: List[Any]) -> None:
    events: List[CompactionEvent] = []

    @budgeted(**SPEC, on_compact=events.append)
    async def ask(messages: List[Any]) -> Any:
        return SimpleNamespace(usage=SimpleNamespace(input_tokens=100, cache_read_input_tokens=1))

    await ask(weather)
    assert [e.provider_tokens for e in events] == [101]


def test_no_usage_leaves_the_figure_empty(weather: List[Any]) -> None:
    events: List[CompactionEvent] = []
    budgeted(**SPEC, on_compact=events.append)(lambda messages: "text")(weather)
    assert events[0].provider_tokens is None
    assert events[0].calibration == 1.0


# -- calibration ---------------------------------------------------------------------------


def _provider(factor: float) -> Any:
    """A stand-in model whose provider counts `factor` times the default estimate."""
    sent: List[int] = []

    def call(messages: List[Any]) -> Dict[str, Any]:
        tokens = round(compact(messages, max_tokens=10**9).tokens_before * factor)
        sent.append(tokens)
        return {"usage": {"prompt_tokens": tokens}}

    call.sent = sent  # type: ignore[attr-defined]
    return call


def _history(turns: int) -> List[Any]:
    history: List[Any] = [{"role": "system", "content": "You are a helpful assistant."}]
    for turn in range(turns):
        history.append({"role": "user", "content": f"Question {turn}: " + "words " * 12})
        history.append({"role": "assistant", "content": f"Answer {turn}: " + "more " * 12})
    return history


def test_a_calibrating_session_converges_on_the_provider_budget() -> None:
    provider = _provider(1.5)
    ask = budgeted(max_tokens=300, keep_tail=1)(provider)
    history = _history(30)
    with CompactingSession(calibrate=True) as session:
        for _ in range(3):
            ask(history)
    # The first call is estimated 1:1 and the provider counts more than the budget;
    # once the factor is learned, what the provider counts fits.
    assert provider.sent[0] > 300
    assert all(tokens <= 300 for tokens in provider.sent[1:])
    assert session.calibration == pytest.approx(1.5, rel=0.02)
    assert session.events[0].calibration == 1.0
    assert session.events[-1].calibration == pytest.approx(1.5, rel=0.02)
    assert session.events[-1].fits


def test_without_calibrate_the_factor_is_observed_but_not_applied() -> None:
    provider = _provider(1.5)
    ask = budgeted(max_tokens=300, keep_tail=1)(provider)
    history = _history(30)
    with CompactingSession() as session:
        for _ in range(3):
            ask(history)
    assert all(tokens > 300 for tokens in provider.sent)
    assert session.calibration == pytest.approx(1.5, rel=0.02)
    assert {e.calibration for e in session.events} == {1.0}


def test_calibrate_must_be_a_bool() -> None:
    with pytest.raises(TypeError, match="calibrate"):
        CompactingSession(calibrate="yes")  # type: ignore[arg-type]


# -- validate ------------------------------------------------------------------------------


def _recorder(calls: List[Any]) -> Any:
    def ask(messages: List[Any]) -> None:
        calls.append(messages)

    return ask


def _broken() -> List[Any]:
    return [
        {"role": "system", "content": "s"},
        {"role": "tool", "tool_call_id": "call_9", "content": "{}"},
        {"role": "user", "content": "hi"},
    ]


def test_validate_report_puts_the_problems_on_the_event_and_calls() -> None:
    events: List[CompactionEvent] = []
    calls: List[Any] = []
    ask = budgeted(max_tokens=1000, validate="report", on_compact=events.append)(_recorder(calls))
    ask(_broken())
    assert len(calls) == 1
    (event,) = events
    assert event.problems == tuple(check_pairing(_broken()))
    assert event.problems[0].code == "orphan_tool_result"


def test_validate_raise_refuses_the_call_and_still_reports() -> None:
    events: List[CompactionEvent] = []
    calls: List[Any] = []
    ask = budgeted(max_tokens=1000, validate="raise", on_compact=events.append)(_recorder(calls))
    with pytest.raises(UnpairedMessagesError) as caught:
        ask(_broken())
    assert calls == []
    assert isinstance(caught.value, PairingError)
    assert isinstance(caught.value, ValueError)
    assert caught.value.event is events[0]
    assert caught.value.problems == events[0].problems
    assert "preceeding message with 'tool_calls'" in str(caught.value)


@pytest.mark.anyio
async def test_validate_raise_on_an_async_callable() -> None:
    async def ask(messages: List[Any]) -> None:
        raise AssertionError("must not be called")

    with pytest.raises(UnpairedMessagesError):
        await budgeted(max_tokens=1000, validate="raise")(ask)(_broken())


def test_a_well_formed_list_validates_clean(weather: List[Any]) -> None:
    events: List[CompactionEvent] = []
    budgeted(**SPEC, validate="raise", on_compact=events.append)(_recorder([]))(weather)
    assert events[0].problems == ()


def test_validate_is_off_by_default() -> None:
    events: List[CompactionEvent] = []
    budgeted(max_tokens=1000, on_compact=events.append)(_recorder([]))(_broken())
    assert events[0].problems == ()


@pytest.mark.parametrize(
    ("bad", "error"), [("yes", ValueError), ("RAISE", ValueError), (True, TypeError)]
)
def test_a_bad_validate_option_fails_at_decoration(bad: Any, error: type) -> None:
    # A string that is no choice is a wrong value; a bool is a wrong type.
    with pytest.raises(error, match=r"^'validate' must be None, 'raise'"):
        budgeted(max_tokens=100, validate=bad)


def test_a_string_input_passes_through_untouched() -> None:
    # The Responses API accepts input="..." as well as a list of items.
    events: List[CompactionEvent] = []
    seen: List[Any] = []

    @budgeted(max_tokens=10, messages_arg="input", on_compact=events.append)
    def create(*, model: str, input: Any) -> None:
        seen.append(input)

    create(model="m", input="Tell me a story.")
    assert seen == ["Tell me a story."]
    assert events == []


# --- calibration: implausible or outlying figures -------------------------------------------


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
