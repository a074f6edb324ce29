"""compact: grouping, head/tail snapping, drop order, budgets and the caller's data."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence
from types import MappingProxyType
from typing import Any, List

import pytest
from helpers import assistant, calling, exchange, system, ten_each, tool, tool_call, user

from ctx_compact import CompactResult, InvalidMessageError, compact


def assert_same_objects(actual: List[Any], expected: List[Any]) -> None:
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a is e


def dropped_with_budget(messages: List[Any], max_tokens: float, **options: Any) -> List[Any]:
    """Everything droppable (keep 0/0), every message costs 10; what goes first?"""
    options.setdefault("keep_head", 0)
    options.setdefault("keep_tail", 0)
    result = compact(messages, max_tokens=max_tokens, count_tokens=ten_each, **options)
    return result.dropped


# --- the specification's example ----------------------------------------------


def test_spec_example_figures(weather):
    result = compact(weather, max_tokens=150, keep_head=1, keep_tail=2)

    assert isinstance(result, CompactResult)
    assert result.tokens_before == 195
    assert result.tokens_after == 124
    assert result.fits is True


def test_spec_example_drops_the_first_turn_and_its_tool_exchange(weather):
    result = compact(weather, max_tokens=150, keep_head=1, keep_tail=2)

    assert_same_objects(result.dropped, weather[1:4])
    assert_same_objects(result.messages, [weather[0], *weather[4:]])


def test_result_is_frozen(weather):
    result = compact(weather, max_tokens=150)

    with pytest.raises(dataclasses.FrozenInstanceError):
        result.fits = False  # type: ignore[misc]


# --- grouping -----------------------------------------------------------------


def test_assistant_and_its_matching_results_are_dropped_together():
    messages = [*exchange("c1"), user()]

    # Only 10 tokens must go, but the call and its result are one 20-token unit.
    assert_same_objects(dropped_with_budget(messages, 20), messages[:2])


def test_parallel_calls_answered_out_of_order_form_one_group():
    messages = [calling("c1", "c2", "c3"), tool("c3"), tool("c1"), tool("c2"), user()]

    assert_same_objects(dropped_with_budget(messages, 40), messages[:4])


def test_repeated_result_for_the_same_call_stays_in_the_group():
    messages = [calling("c1"), tool("c1"), tool("c1"), user()]

    assert_same_objects(dropped_with_budget(messages, 30), messages[:3])


def test_tool_message_with_non_matching_id_ends_the_group_and_stands_alone():
    messages = [calling("c1"), tool("c1"), tool("other"), user()]

    # Dropping the exchange (20) is enough; the stray result is not dragged along.
    assert_same_objects(dropped_with_budget(messages, 20), messages[:2])
    # And it can be dropped on its own, after the exchange.
    assert_same_objects(dropped_with_budget(messages, 10), messages[:3])


def test_result_answering_an_earlier_assistant_does_not_join_a_later_group():
    messages = [*exchange("c1"), calling("c2"), tool("c2"), tool("c1"), user()]

    assert_same_objects(dropped_with_budget(messages, 20), messages[:4])


def test_only_tool_messages_join_a_group():
    messages = [calling("c1"), {**user(), "tool_call_id": "c1"}, tool("c1"), user()]

    # The user message naming c1 ends the exchange; the result after it is an orphan.
    assert_same_objects(dropped_with_budget(messages, 30), messages[:1])


def test_orphan_tool_message_is_its_own_group():
    messages = [tool("nobody"), user(), user()]

    assert_same_objects(dropped_with_budget(messages, 20), messages[:1])


def test_assistant_with_empty_tool_calls_is_its_own_group():
    messages = [assistant("thinking", []), tool("c1"), user()]

    assert_same_objects(dropped_with_budget(messages, 20), messages[:1])


def test_tool_calls_on_a_non_assistant_message_are_refused():
    # No format has a user message call tools: grouping it as text could keep the
    # result without its call, so it is refused, naming the index and the key.
    messages = [{**user(), "tool_calls": [tool_call("c1")]}, tool("c1"), user()]

    with pytest.raises(InvalidMessageError, match=r"message 0: 'tool_calls' on a 'user' message"):
        compact(messages, max_tokens=20)


def test_user_message_interrupts_a_group():
    messages = [calling("c1", "c2"), tool("c1"), user(), tool("c2"), user()]

    # The exchange is only the assistant and the result before the user message.
    assert_same_objects(dropped_with_budget(messages, 30), messages[:2])
    # The late result is an orphan of its own: dropping 30 takes exchange + user only.
    assert_same_objects(dropped_with_budget(messages, 20), messages[:3])


def test_consecutive_exchanges_are_separate_groups():
    messages = [*exchange("c1"), *exchange("c2"), user()]

    assert_same_objects(dropped_with_budget(messages, 30), messages[:2])


def test_mapping_proxy_messages_are_grouped_like_dicts():
    messages = [
        MappingProxyType(calling("c1")),
        MappingProxyType(tool("c1")),
        MappingProxyType(user()),
    ]

    assert_same_objects(dropped_with_budget(messages, 10), messages[:2])


# --- keep_head / keep_tail ----------------------------------------------------


def test_defaults_keep_one_head_and_four_tail_messages():
    messages = [system(), *(user(str(i)) for i in range(7))]

    result = compact(messages, max_tokens=1, count_tokens=ten_each)

    assert_same_objects(result.dropped, messages[1:4])
    assert_same_objects(result.messages, [messages[0], *messages[4:]])


def test_head_boundary_inside_a_group_extends_forward():
    messages = [system(), *exchange("c1"), user(), user(), user()]

    result = compact(messages, max_tokens=1, count_tokens=ten_each, keep_head=2, keep_tail=0)

    assert_same_objects(result.messages, messages[:3])
    assert_same_objects(result.dropped, messages[3:])


def test_tail_boundary_inside_a_group_extends_backward():
    messages = [system(), user(), user(), *exchange("c1", "c2")]

    result = compact(messages, max_tokens=1, count_tokens=ten_each, keep_head=1, keep_tail=1)

    assert_same_objects(result.dropped, messages[1:3])
    assert_same_objects(result.messages, [messages[0], *messages[3:]])


def test_tail_boundary_on_a_group_start_keeps_exactly_that_many():
    messages = [system(), user(), *exchange("c1"), user()]

    result = compact(messages, max_tokens=1, count_tokens=ten_each, keep_head=1, keep_tail=3)

    assert_same_objects(result.dropped, messages[1:2])


@pytest.mark.parametrize(("keep_head", "keep_tail"), [(10, 0), (0, 10), (5, 5), (3, 3), (4, 1)])
def test_head_and_tail_covering_everything_leave_nothing_droppable(keep_head, keep_tail):
    messages = [system(), user(), assistant(), user(), assistant()]

    result = compact(
        messages, max_tokens=1, count_tokens=ten_each, keep_head=keep_head, keep_tail=keep_tail
    )

    assert result.dropped == []
    assert_same_objects(result.messages, messages)
    assert result.tokens_after == result.tokens_before == 50
    assert result.fits is False


def test_zero_head_and_tail_make_everything_droppable():
    messages = [*exchange("c1"), user()]

    result = compact(messages, max_tokens=1, count_tokens=ten_each, keep_head=0, keep_tail=0)

    assert result.messages == []
    assert_same_objects(result.dropped, messages)
    assert result.tokens_after == 0
    assert result.fits is True


def test_zero_head_drops_from_the_start():
    messages = [system(), user(), user()]

    result = compact(messages, max_tokens=20, count_tokens=ten_each, keep_head=0, keep_tail=1)

    assert_same_objects(result.dropped, messages[:1])


def test_zero_tail_drops_up_to_the_end():
    messages = [system(), user(), user()]

    result = compact(messages, max_tokens=10, count_tokens=ten_each, keep_head=1, keep_tail=0)

    assert_same_objects(result.dropped, messages[1:])
    assert result.fits is True


# --- what is dropped and when it stops ------------------------------------------


def by_length(message: Any) -> int:
    return len(message["content"])


def test_oldest_middle_groups_are_dropped_first():
    messages = [user("h" * 10), user("a" * 30), user("b" * 30), user("c" * 30), user("t" * 10)]

    result = compact(messages, max_tokens=70, count_tokens=by_length, keep_head=1, keep_tail=1)

    assert_same_objects(result.dropped, messages[1:3])
    assert result.tokens_after == 50


def test_oldest_first_even_when_a_newer_group_alone_would_do():
    messages = [user("h"), user("s" * 5), user("b" * 50), user("t")]

    result = compact(messages, max_tokens=47, count_tokens=by_length, keep_head=1, keep_tail=1)

    # Dropping only the 50-token message would fit; oldest-first drops both.
    assert_same_objects(result.dropped, messages[1:3])
    assert result.tokens_after == 2


def test_stops_as_soon_as_it_fits():
    messages = [user(str(i)) for i in range(6)]

    result = compact(messages, max_tokens=40, count_tokens=ten_each, keep_head=1, keep_tail=1)

    assert_same_objects(result.dropped, messages[1:3])
    assert result.tokens_after == 40
    assert result.fits is True


def test_input_that_fits_is_returned_unchanged(weather):
    result = compact(weather, max_tokens=195, keep_head=1, keep_tail=2)

    assert result.messages == weather
    assert result.messages is not weather
    assert_same_objects(result.messages, weather)
    assert result.dropped == []
    assert result.tokens_before == result.tokens_after == 195
    assert result.fits is True


def test_one_token_over_the_budget_drops(weather):
    result = compact(weather, max_tokens=194, keep_head=1, keep_tail=2)

    assert_same_objects(result.dropped, weather[1:2])
    assert result.tokens_after == 180


def test_total_equal_to_budget_fits(weather):
    result = compact(weather, max_tokens=124, keep_head=1, keep_tail=2)

    assert_same_objects(result.dropped, weather[1:4])
    assert result.tokens_after == 124
    assert result.fits is True


def test_float_budget_just_under_a_total_drops_one_more_group(weather):
    result = compact(weather, max_tokens=123.5, keep_head=1, keep_tail=2)

    assert_same_objects(result.dropped, weather[1:5])
    assert result.tokens_after == 110
    assert result.fits is True


def test_float_budget_above_the_total_drops_nothing(weather):
    result = compact(weather, max_tokens=195.5)

    assert result.dropped == []
    assert result.fits is True


def test_not_fitting_after_dropping_all_of_the_middle(weather):
    result = compact(weather, max_tokens=30, keep_head=1, keep_tail=2)

    assert_same_objects(result.dropped, weather[1:8])
    assert_same_objects(result.messages, [weather[0], *weather[8:]])
    assert result.tokens_after == 15 + 14 + 13
    assert result.fits is False


def test_empty_input():
    result = compact([], max_tokens=1)

    assert result == CompactResult(
        messages=[], dropped=[], tokens_before=0, tokens_after=0, fits=True
    )


def test_zero_token_messages_are_not_dropped_needlessly():
    messages = [user("h"), user(""), user("x" * 5), user(""), user("t")]

    result = compact(messages, max_tokens=2, count_tokens=by_length, keep_head=1, keep_tail=1)

    # The empty message before the 5-token one has to go with it (oldest first);
    # the one after it does not.
    assert_same_objects(result.dropped, messages[1:3])


# --- the caller's data ----------------------------------------------------------


def test_input_list_and_messages_are_not_mutated(weather):
    before = copy.deepcopy(weather)
    outer = list(weather)

    compact(weather, max_tokens=100, keep_head=1, keep_tail=2)

    assert weather == before
    assert_same_objects(weather, outer)


def test_returned_lists_are_new_lists_of_the_callers_objects(weather):
    result = compact(weather, max_tokens=150, keep_head=1, keep_tail=2)

    assert type(result.messages) is list
    assert type(result.dropped) is list
    assert result.messages is not weather
    result.messages.append(user())
    assert len(weather) == 10


def test_tuple_input_is_accepted(weather):
    result = compact(tuple(weather), max_tokens=150, keep_head=1, keep_tail=2)

    assert type(result.messages) is list
    assert_same_objects(result.dropped, weather[1:4])
    assert result.tokens_after == 124


class MessageSequence(Sequence):  # type: ignore[type-arg]
    """A read-only sequence that is neither a list nor a tuple."""

    def __init__(self, items: List[Any]) -> None:
        self._items = items

    def __getitem__(self, index: Any) -> Any:
        return self._items[index]

    def __len__(self) -> int:
        return len(self._items)


def test_other_sequences_are_accepted(weather):
    result = compact(MessageSequence(weather), max_tokens=150, keep_head=1, keep_tail=2)

    assert_same_objects(result.messages, [weather[0], *weather[4:]])
    assert result.tokens_before == 195


def test_messages_without_role_or_content_are_accepted():
    messages = [{}, {"role": "user"}, {"content": "x"}, {"role": None, "content": None}]

    result = compact(messages, max_tokens=1, keep_head=0, keep_tail=1)

    assert_same_objects(result.dropped, messages[:3])
