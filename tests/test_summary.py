"""compact_with_summary and acompact_with_summary."""

from __future__ import annotations

import copy
from typing import Any, List

import anyio
import pytest
from helpers import exchange, system, ten_each, user

from ctx_compact import (
    CompactResultWithSummary,
    acompact_with_summary,
    compact,
    compact_with_summary,
)

SPEC_SUMMARY = "Earlier in this conversation: 3 messages were removed."


def spec_summarize(dropped: List[Any]) -> str:
    return f"Earlier in this conversation: {len(dropped)} messages were removed."


async def async_spec_summarize(dropped: List[Any]) -> str:
    await anyio.sleep(0)  # a real checkpoint, so the backend actually schedules it
    return spec_summarize(dropped)


class Recorder:
    """A summarizer that records its calls and returns a fixed text."""

    def __init__(self, text: str = "summary") -> None:
        self.text = text
        self.calls: List[List[Any]] = []

    def __call__(self, dropped: List[Any]) -> str:
        self.calls.append(dropped)
        return self.text


def assert_same_objects(actual: List[Any], expected: List[Any]) -> None:
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a is e


def assert_spec_summary_result(result: CompactResultWithSummary, weather: List[Any]) -> None:
    assert isinstance(result, CompactResultWithSummary)
    assert result.summary == SPEC_SUMMARY
    assert result.tokens_before == 195
    assert result.tokens_after == 145
    assert result.fits is True
    assert result.messages[1] == {"role": "user", "content": SPEC_SUMMARY}
    assert_same_objects(result.messages[:1], weather[:1])
    assert_same_objects(result.messages[2:], weather[4:])
    assert_same_objects(result.dropped, weather[1:4])


# --- the specification's example ----------------------------------------------


def test_spec_example_with_summary(weather):
    result = compact_with_summary(
        weather,
        max_tokens=150,
        keep_head=1,
        keep_tail=2,
        summarize=lambda dropped: (
            f"Earlier in this conversation: {len(dropped)} messages were removed."
        ),
    )

    assert_spec_summary_result(result, weather)


@pytest.mark.anyio
async def test_async_variant_with_a_sync_summarizer(weather):
    result = await acompact_with_summary(
        weather, max_tokens=150, keep_head=1, keep_tail=2, summarize=spec_summarize
    )

    assert_spec_summary_result(result, weather)


@pytest.mark.anyio
async def test_async_variant_with_an_async_summarizer(weather):
    result = await acompact_with_summary(
        weather, max_tokens=150, keep_head=1, keep_tail=2, summarize=async_spec_summarize
    )

    assert_spec_summary_result(result, weather)


@pytest.mark.anyio
async def test_async_variant_with_an_async_callable_object(weather):
    class Summarizer:
        async def __call__(self, dropped: List[Any]) -> str:
            return await async_spec_summarize(dropped)

    result = await acompact_with_summary(
        weather, max_tokens=150, keep_head=1, keep_tail=2, summarize=Summarizer()
    )

    assert_spec_summary_result(result, weather)


@pytest.mark.anyio
async def test_async_variant_with_a_plain_function_returning_an_awaitable(weather):
    result = await acompact_with_summary(
        weather,
        max_tokens=150,
        keep_head=1,
        keep_tail=2,
        summarize=lambda dropped: async_spec_summarize(dropped),
    )

    assert_spec_summary_result(result, weather)


# --- where the summary goes -----------------------------------------------------


def test_summary_goes_after_the_snapped_head():
    messages = [system(), *exchange("c1"), user("a"), user("b"), user("c")]

    result = compact_with_summary(
        messages,
        max_tokens=45,
        count_tokens=ten_each,
        keep_head=2,
        keep_tail=1,
        summarize=Recorder("gist"),
    )

    assert_same_objects(result.messages[:3], messages[:3])
    assert result.messages[3] == {"role": "user", "content": "gist"}
    assert_same_objects(result.messages[4:], messages[5:])
    assert_same_objects(result.dropped, messages[3:5])


def test_zero_head_puts_the_summary_first():
    messages = [user("a"), user("b"), user("c")]

    result = compact_with_summary(
        messages,
        max_tokens=25,
        count_tokens=ten_each,
        keep_head=0,
        keep_tail=1,
        summarize=Recorder("gist"),
    )

    assert result.messages == [{"role": "user", "content": "gist"}, messages[2]]
    assert result.messages[1] is messages[2]


@pytest.mark.parametrize(
    ("role", "tokens_after"),
    # The summary message's JSON is 82, 84 and 87 characters: 21, 21 and 22 tokens.
    [("user", 145), ("system", 145), ("assistant", 146)],
)
def test_summary_role(weather, role, tokens_after):
    result = compact_with_summary(
        weather,
        max_tokens=150,
        keep_head=1,
        keep_tail=2,
        summarize=spec_summarize,
        summary_role=role,
    )

    assert result.messages[1] == {"role": role, "content": SPEC_SUMMARY}
    assert result.tokens_after == tokens_after


def test_summary_message_is_counted_with_the_custom_estimator():
    seen: List[Any] = []

    def count(message: Any) -> int:
        seen.append(message)
        return 10

    messages = [system(), user("a"), user("b"), user("c")]

    result = compact_with_summary(
        messages, max_tokens=30, count_tokens=count, keep_tail=1, summarize=Recorder("gist")
    )

    assert seen[-1] == {"role": "user", "content": "gist"}
    assert result.tokens_after == 30
    assert_same_objects(result.dropped, messages[1:3])


# --- the summary counts against the budget ----------------------------------------


def make_six() -> List[Any]:
    return [system(), *(user(str(i)) for i in range(1, 6))]


def test_summary_that_breaks_the_budget_makes_room_by_dropping_the_next_group():
    messages = make_six()
    summarize = Recorder("gist")

    result = compact_with_summary(
        messages,
        max_tokens=45,
        count_tokens=ten_each,
        keep_head=1,
        keep_tail=1,
        summarize=summarize,
    )

    # Without the summary, dropping messages 1 and 2 fits (40); with it (50), 3 goes too.
    assert_same_objects(result.dropped, messages[1:4])
    assert_same_objects(result.messages, [messages[0], result.messages[1], *messages[4:]])
    assert result.tokens_after == 40
    assert result.fits is True


def test_summarize_is_called_once_with_the_first_dropped_list():
    messages = make_six()
    summarize = Recorder("gist")

    compact_with_summary(
        messages,
        max_tokens=45,
        count_tokens=ten_each,
        keep_head=1,
        keep_tail=1,
        summarize=summarize,
    )

    assert len(summarize.calls) == 1
    assert_same_objects(summarize.calls[0], messages[1:3])


def test_summarize_receives_the_dropped_messages(weather):
    summarize = Recorder()

    result = compact_with_summary(
        weather, max_tokens=150, keep_head=1, keep_tail=2, summarize=summarize
    )

    assert_same_objects(summarize.calls[0], result.dropped)
    assert_same_objects(summarize.calls[0], weather[1:4])


def test_summary_that_fits_drops_nothing_more():
    messages = make_six()

    result = compact_with_summary(
        messages,
        max_tokens=45,
        count_tokens=lambda m: 5 if m["content"] == "gist" else 10,
        keep_head=1,
        keep_tail=1,
        summarize=Recorder("gist"),
    )

    # Dropping 1 and 2 leaves 40; the 5-token summary brings it exactly to the budget.
    assert_same_objects(result.dropped, messages[1:3])
    assert result.tokens_after == 45
    assert result.fits is True


def test_still_over_budget_after_the_summary_reports_not_fitting():
    messages = make_six()

    result = compact_with_summary(
        messages,
        max_tokens=25,
        count_tokens=lambda m: 40 if m["content"] == "long" else 10,
        keep_head=1,
        keep_tail=1,
        summarize=Recorder("long"),
    )

    assert_same_objects(result.dropped, messages[1:5])
    assert result.messages == [messages[0], {"role": "user", "content": "long"}, messages[5]]
    assert result.tokens_after == 60
    assert result.fits is False


def test_summary_is_kept_even_when_nothing_else_can_be_dropped_for_it():
    messages = [system(), user("a"), user("b")]

    result = compact_with_summary(
        messages,
        max_tokens=25,
        count_tokens=ten_each,
        keep_head=1,
        keep_tail=1,
        summarize=Recorder("gist"),
    )

    assert result.summary == "gist"
    assert result.messages == [messages[0], {"role": "user", "content": "gist"}, messages[2]]
    assert result.tokens_after == 30
    assert result.fits is False


# --- when no summary is made ------------------------------------------------------


def test_summarize_not_called_when_the_input_fits(weather):
    summarize = Recorder()

    result = compact_with_summary(weather, max_tokens=195, summarize=summarize)

    assert summarize.calls == []
    assert result.summary is None
    assert_same_objects(result.messages, weather)
    assert result.dropped == []


def test_summarize_not_called_when_nothing_is_droppable(weather):
    summarize = Recorder()

    result = compact_with_summary(
        weather, max_tokens=10, keep_head=5, keep_tail=5, summarize=summarize
    )

    assert summarize.calls == []
    assert result.summary is None
    assert_same_objects(result.messages, weather)
    assert result.fits is False


@pytest.mark.parametrize("options", [{}, {"summarize": None}])
def test_without_summarize_it_is_compact_with_summary_none(weather, options):
    result = compact_with_summary(weather, max_tokens=150, keep_head=1, keep_tail=2, **options)
    plain = compact(weather, max_tokens=150, keep_head=1, keep_tail=2)

    assert isinstance(result, CompactResultWithSummary)
    assert result.summary is None
    assert_same_objects(result.messages, plain.messages)
    assert_same_objects(result.dropped, plain.dropped)
    assert (result.tokens_before, result.tokens_after, result.fits) == (195, 124, True)


@pytest.mark.anyio
async def test_async_summarize_not_called_when_the_input_fits(weather):
    calls: List[Any] = []

    async def summarize(dropped: List[Any]) -> str:
        calls.append(dropped)
        return "never"

    result = await acompact_with_summary(weather, max_tokens=195, summarize=summarize)

    assert calls == []
    assert result.summary is None
    assert_same_objects(result.messages, weather)


@pytest.mark.anyio
async def test_async_variant_without_summarize(weather):
    result = await acompact_with_summary(weather, max_tokens=150, keep_head=1, keep_tail=2)

    assert result.summary is None
    assert result.tokens_after == 124


@pytest.mark.anyio
async def test_async_variant_makes_room_for_the_summary_like_the_sync_one():
    messages = make_six()
    calls: List[Any] = []

    async def summarize(dropped: List[Any]) -> str:
        calls.append(dropped)
        await anyio.sleep(0)
        return "gist"

    result = await acompact_with_summary(
        messages, max_tokens=45, count_tokens=ten_each, keep_tail=1, summarize=summarize
    )

    assert len(calls) == 1
    assert_same_objects(calls[0], messages[1:3])
    assert_same_objects(result.dropped, messages[1:4])
    assert result.tokens_after == 40


# --- the caller's data ----------------------------------------------------------


@pytest.mark.parametrize("max_tokens", [150, 100, 40])
def test_input_is_not_mutated_with_a_summary(weather, max_tokens):
    before = copy.deepcopy(weather)
    outer = list(weather)

    result = compact_with_summary(
        weather, max_tokens=max_tokens, keep_head=1, keep_tail=2, summarize=spec_summarize
    )

    assert weather == before
    assert_same_objects(weather, outer)
    originals = [m for m in result.messages if m is not result.messages[1]]
    assert all(any(m is o for o in weather) for m in originals)


def test_tuple_input_with_summary(weather):
    result = compact_with_summary(
        tuple(weather), max_tokens=150, keep_head=1, keep_tail=2, summarize=spec_summarize
    )

    assert type(result.messages) is list
    assert_spec_summary_result(result, weather)


@pytest.mark.anyio
async def test_async_input_is_not_mutated(weather):
    before = copy.deepcopy(weather)

    await acompact_with_summary(
        weather, max_tokens=100, keep_head=1, keep_tail=2, summarize=async_spec_summarize
    )

    assert weather == before
