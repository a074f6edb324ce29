"""compact_many and compact_indices: the same decisions as compact, lazily, in few bytes."""

from __future__ import annotations

import copy
import multiprocessing
import pickle
from typing import Any, Dict, Iterator, List

import pytest
from helpers import (
    budgets,
    conversations,
    examples,
    keeps,
    system,
    ten_each,
    user,
    weather_messages,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctx_compact import (
    CompactedConversation,
    InvalidConversationError,
    InvalidMessageError,
    KeptIndices,
    compact,
    compact_indices,
    compact_many,
)

PROPERTY = settings(
    max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def same_identities(left: List[Any], right: List[Any]) -> bool:
    return len(left) == len(right) and all(a is b for a, b in zip(left, right))


# --- the same decision as compact -------------------------------------------------


@PROPERTY
@given(conversations(), budgets(), keeps, keeps)
def test_compact_indices_is_compact(messages: List[Any], budget: float, head: int, tail: int):
    snapshot = copy.deepcopy(messages)
    expected = compact(messages, max_tokens=budget, keep_head=head, keep_tail=tail)
    lean = compact_indices(messages, max_tokens=budget, keep_head=head, keep_tail=tail)

    assert same_identities(lean.apply(messages), expected.messages)
    assert lean.tokens_before == expected.tokens_before
    assert lean.tokens_after == expected.tokens_after
    assert lean.fits == expected.fits
    assert lean.messages_before == len(messages)
    assert lean.messages_after == len(expected.messages)
    assert lean.dropped_count == len(expected.dropped)
    # The ranges are ordered, non-empty, disjoint and inside the conversation.
    flat = [i for start, stop in lean.kept for i in (start, stop)]
    assert flat == sorted(flat)
    assert all(start < stop for start, stop in lean.kept)
    assert not lean.kept or (lean.kept[0][0] >= 0 and lean.kept[-1][1] <= len(messages))
    assert len(lean.kept) <= 2
    # What the ranges leave out is exactly what compact dropped.
    kept = {i for start, stop in lean.kept for i in range(start, stop)}
    dropped = [m for i, m in enumerate(messages) if i not in kept]
    assert same_identities(dropped, expected.dropped)
    assert messages == snapshot


@PROPERTY
@given(
    st.lists(st.tuples(conversations(max_segments=8), st.booleans()), max_size=6),
    budgets(),
    keeps,
    keeps,
)
def test_compact_many_is_compact_on_each(
    items: List[Any], budget: float, head: int, tail: int
) -> None:
    # Plain lists and line objects ({"id": ..., "messages": [...], "meta": ...}) mixed.
    inputs: List[Any] = [
        {"id": n, "messages": messages, "meta": {"n": n}} if wrapped else messages
        for n, (messages, wrapped) in enumerate(items)
    ]
    snapshot = copy.deepcopy(inputs)
    results = list(compact_many(inputs, max_tokens=budget, keep_head=head, keep_tail=tail))

    assert [r.position for r in results] == list(range(len(inputs)))
    for given_in, result in zip(inputs, results):
        messages = given_in["messages"] if isinstance(given_in, dict) else given_in
        expected = compact(messages, max_tokens=budget, keep_head=head, keep_tail=tail)
        assert same_identities(result.messages, expected.messages)
        assert result.indices == compact_indices(
            messages, max_tokens=budget, keep_head=head, keep_tail=tail
        )
        assert result.indices.tokens_after == expected.tokens_after
        assert result.indices.fits == expected.fits
        if isinstance(given_in, dict):
            assert list(result.conversation) == ["id", "messages", "meta"]
            assert result.conversation["messages"] is result.messages
            assert result.conversation["meta"] is given_in["meta"]
        else:
            assert result.conversation is result.messages
    assert inputs == snapshot


def test_the_specification_example_through_compact_many(weather: List[Any]) -> None:
    (result,) = compact_many([weather], max_tokens=150, keep_head=1, keep_tail=2)
    assert (result.indices.tokens_before, result.indices.tokens_after) == (195, 124)
    assert result.indices.dropped_count == 3
    assert result.indices.kept == ((0, 1), (4, 10))
    assert same_identities(result.messages, weather[:1] + weather[4:])


def test_count_tokens_is_used_for_every_conversation() -> None:
    conversation = [system(), *[user(str(i)) for i in range(9)]]
    (result,) = compact_many([conversation], max_tokens=55, count_tokens=ten_each)
    assert (result.indices.tokens_before, result.indices.tokens_after) == (100, 50)
    assert result.indices.kept == ((0, 1), (6, 10))


def test_nothing_dropped_is_one_range_and_empty_is_none() -> None:
    short = [system(), user()]
    assert compact_indices(short, max_tokens=10_000).kept == ((0, 2),)
    assert compact_indices([], max_tokens=10).kept == ()
    assert compact_indices([], max_tokens=10).apply([]) == []


def test_apply_refuses_another_conversation() -> None:
    lean = compact_indices(weather_messages(), max_tokens=150, keep_tail=2)
    with pytest.raises(ValueError, match="conversation of 10 messages, got 9"):
        lean.apply(weather_messages()[:9])


def test_apply_works_on_an_equal_copy() -> None:
    # What a driver does with indices computed by a worker on its own copy.
    mine = weather_messages()
    lean = compact_indices(copy.deepcopy(mine), max_tokens=150, keep_tail=2)
    assert same_identities(lean.apply(mine), compact(mine, max_tokens=150, keep_tail=2).messages)


# --- lazy: generator in, generator out ----------------------------------------------


class CountingSource:
    """A generator of conversations that records how many it has handed out."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.taken = 0

    def __iter__(self) -> Iterator[List[Any]]:
        for _ in range(self.count):
            self.taken += 1
            yield weather_messages()


def test_compact_many_reads_one_conversation_per_result() -> None:
    source = CountingSource(1000)
    results = compact_many(source, max_tokens=150, keep_tail=2)
    assert source.taken == 0  # the call itself reads nothing
    for expected_taken, result in enumerate(results, 1):
        assert source.taken == expected_taken
        assert result.position == expected_taken - 1
        if expected_taken == 3:
            break
    assert source.taken == 3


def test_compact_many_works_on_an_endless_generator() -> None:
    def endless() -> Iterator[List[Any]]:
        while True:
            yield weather_messages()

    results = compact_many(endless(), max_tokens=150, keep_tail=2)
    taken = [next(results) for _ in range(5)]
    assert [r.position for r in taken] == [0, 1, 2, 3, 4]


def test_options_are_checked_before_anything_is_read() -> None:
    source = CountingSource(3)
    with pytest.raises(TypeError, match="max_tokens"):
        compact_many(source, max_tokens=0)
    with pytest.raises(ValueError, match="keep_tail"):
        compact_many(source, max_tokens=10, keep_tail=-1)
    with pytest.raises(TypeError, match="count_tokens"):
        compact_many(source, max_tokens=10, count_tokens=3)  # type: ignore[arg-type]
    assert source.taken == 0


# --- small to ship ------------------------------------------------------------------


def test_the_lean_result_pickles_small_for_a_large_conversation() -> None:
    n = 200_000
    messages = [system()] + [user(f"message {i}") for i in range(1, n)]
    budget = 1000
    lean = compact_indices(messages, max_tokens=budget, count_tokens=ten_each, keep_tail=4)
    assert lean.dropped_count > n - 200

    shipped = pickle.dumps(lean, protocol=pickle.HIGHEST_PROTOCOL)
    # Class reference and field names, then a few ints per range: nothing that grows with n.
    assert len(shipped) < 200 + 32 * len(lean.kept)
    assert pickle.loads(shipped) == lean
    # The full result carries every dropped message.
    full = compact(messages, max_tokens=budget, count_tokens=ten_each, keep_tail=4)
    assert len(pickle.dumps(full, protocol=pickle.HIGHEST_PROTOCOL)) > 1000 * len(shipped)


def test_results_are_frozen() -> None:
    lean = compact_indices(weather_messages(), max_tokens=150)
    with pytest.raises(AttributeError):
        lean.fits = False  # type: ignore[misc]
    (item,) = compact_many([weather_messages()], max_tokens=150)
    assert isinstance(item, CompactedConversation)
    with pytest.raises(AttributeError):
        item.position = 3  # type: ignore[misc]


def _lean_in_worker(messages: List[Any]) -> KeptIndices:
    return compact_indices(messages, max_tokens=150, keep_tail=2)


def test_a_pool_ships_indices_back_and_the_parent_applies_them() -> None:
    mine = [weather_messages(), weather_messages()[:5], [system()]]
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        leans = pool.map(_lean_in_worker, mine)
    for messages, lean in zip(mine, leans):
        assert same_identities(
            lean.apply(messages), compact(messages, max_tokens=150, keep_tail=2).messages
        )


# --- bad input names the conversation and the message ------------------------------


def test_a_bad_message_names_the_conversation_and_the_message() -> None:
    bad = weather_messages()
    bad[4] = "not a message"
    results = compact_many([weather_messages(), {"id": "x", "messages": bad}], max_tokens=150)
    assert next(results).position == 0
    with pytest.raises(InvalidConversationError) as caught:
        next(results)
    error = caught.value
    assert (error.position, error.index) == (1, 4)
    assert str(error).startswith("conversation 1: message 4: expected a mapping")
    # Code that catches the core's errors keeps working.
    assert isinstance(error, InvalidMessageError)
    assert isinstance(error, TypeError)
    assert isinstance(error, ValueError)


def test_a_bad_count_names_the_conversation_and_the_message() -> None:
    def negative_for_tools(message: Dict[str, Any]) -> int:
        return -1 if message.get("role") == "tool" else 1

    with pytest.raises(InvalidConversationError, match=r"^conversation 0: message 3: count_tokens"):
        list(compact_many([weather_messages()], max_tokens=150, count_tokens=negative_for_tools))


@pytest.mark.parametrize(
    ("conversation", "words"),
    [
        ("a string", "a conversation must be a list (or other sequence) of message mappings"),
        (42, "a conversation must be a list (or other sequence) of message mappings, not int"),
        ({"messages": "hi"}, '"messages" must be a list (or other sequence) of message mappings'),
        ({"role": "user", "content": "hi"}, "under a \"messages\" key, got keys 'role', 'content'"),
    ],
)
def test_a_bad_conversation_names_its_position(conversation: Any, words: str) -> None:
    with pytest.raises(InvalidConversationError) as caught:
        list(compact_many([weather_messages(), weather_messages(), conversation], max_tokens=150))
    assert caught.value.position == 2
    assert caught.value.index is None
    assert str(caught.value) == f"conversation 2: {caught.value.reason}"
    assert words in str(caught.value)


@pytest.mark.parametrize("not_conversations", ["text", b"bytes", {"messages": []}, 7])
def test_conversations_must_be_an_iterable_of_conversations(not_conversations: Any) -> None:
    with pytest.raises(TypeError, match="'conversations' must be an iterable of conversations"):
        compact_many(not_conversations, max_tokens=10)


def _compact_all_in_worker(conversations: List[Any]) -> int:
    return sum(1 for _ in compact_many(conversations, max_tokens=150))


def test_a_pool_worker_error_reaches_the_parent_whole() -> None:
    bad = weather_messages()
    bad[2] = None
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        pending = pool.apply_async(_compact_all_in_worker, ([weather_messages(), bad],))
        with pytest.raises(InvalidConversationError) as caught:
            pending.get(timeout=60)
    assert (caught.value.position, caught.value.index) == (1, 2)
    assert str(caught.value).startswith("conversation 1: message 2: expected a mapping")


def test_the_error_survives_pickling_with_its_fields() -> None:
    error = InvalidConversationError(7, "count_tokens returned -1", 3)
    copied = pickle.loads(pickle.dumps(error))
    assert (copied.position, copied.index, copied.reason) == (7, 3, error.reason)
    assert str(copied) == str(error) == "conversation 7: message 3: count_tokens returned -1"
