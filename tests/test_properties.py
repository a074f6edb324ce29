"""Invariants over random conversations, checked against a plain reference implementation."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Tuple

import anyio
import pytest
from helpers import budgets, conversations, examples, keeps, texts
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctx_compact import acompact_with_summary, compact, compact_with_summary, estimate_tokens

PROPERTY = settings(
    max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

Group = Tuple[int, int]  # [start, end) indices into the conversation


def content_length(message: Any) -> int:
    return len(str(message.get("content")))


# --- the reference: written for clarity, not speed --------------------------------


def reference_groups(messages: List[Any]) -> List[Group]:
    groups = []
    i = 0
    while i < len(messages):
        end = i + 1
        message = messages[i]
        if message.get("role") == "assistant" and message.get("tool_calls"):
            ids = {call.get("id") for call in message["tool_calls"]} - {None}
            # The run of tool messages after the calls; the group ends at its last answer.
            run = end
            while run < len(messages) and messages[run].get("role") == "tool":
                run += 1
                if messages[run - 1].get("tool_call_id") in ids:
                    end = run
        groups.append((i, end))
        i = end
    return groups


@dataclass
class Split:
    head: List[Group]
    middle: List[Group]
    tail: List[Group]


def reference_awaiting(messages: List[Any]) -> int:
    """Where calls still awaiting their results end the list: the last assistant message
    with tool_calls when only tool messages follow it and they leave a call unanswered."""
    at = len(messages) - 1
    while at >= 0 and messages[at].get("role") == "tool":
        at -= 1
    if at >= 0 and messages[at].get("role") == "assistant" and messages[at].get("tool_calls"):
        ids = {call.get("id") for call in messages[at]["tool_calls"]} - {None}
        if ids - {m.get("tool_call_id") for m in messages[at + 1 :]}:
            return at
    return len(messages)


def reference_split(messages: List[Any], keep_head: int, keep_tail: int) -> Split:
    """Head: every group holding one of the first keep_head messages; tail likewise, and
    the calls awaiting their results at the end whatever keep_tail says."""
    n = len(messages)
    awaits = reference_awaiting(messages)
    head, middle, tail = [], [], []
    for start, end in reference_groups(messages):
        if start < keep_head:
            head.append((start, end))
        elif end > n - keep_tail or end > awaits:
            tail.append((start, end))
        else:
            middle.append((start, end))
    return Split(head, middle, tail)


def indices(groups: List[Group]) -> List[int]:
    return [i for start, end in groups for i in range(start, end)]


def total(messages: List[Any], idx: List[int], count: Optional[Callable[[Any], int]]) -> int:
    return sum(estimate_tokens(messages[i], count) for i in idx)


def first_fit(
    messages: List[Any],
    split: Split,
    max_tokens: float,
    count: Optional[Callable[[Any], int]],
    start: int = 0,
    extra: int = 0,
) -> int:
    """The fewest oldest middle groups (at least ``start``) to drop; all of them if none fit."""
    for k in range(start, len(split.middle) + 1):
        kept = indices(split.head) + indices(split.middle[k:]) + indices(split.tail)
        if total(messages, kept, count) + extra <= max_tokens:
            return k
    return len(split.middle)


@dataclass
class Expected:
    messages: List[Any]
    dropped: List[Any]
    tokens_before: int
    tokens_after: int
    fits: bool
    summary: Optional[str] = None
    summarized: Optional[List[Any]] = None


def reference_compact(
    messages: List[Any],
    max_tokens: float,
    keep_head: int,
    keep_tail: int,
    count: Optional[Callable[[Any], int]] = None,
    summary: Optional[str] = None,
    summary_role: str = "user",
) -> Expected:
    split = reference_split(messages, keep_head, keep_tail)
    before = total(messages, list(range(len(messages))), count)
    k = first_fit(messages, split, max_tokens, count)
    summarized = None
    note: List[Any] = []
    if summary is not None and k > 0:
        summarized = [messages[i] for i in indices(split.middle[:k])]
        note = [{"role": summary_role, "content": summary}]
        extra = estimate_tokens(note[0], count)
        k = first_fit(messages, split, max_tokens, count, start=k, extra=extra)
    else:
        summary = None
    head = [messages[i] for i in indices(split.head)]
    rest = [messages[i] for i in indices(split.middle[k:]) + indices(split.tail)]
    kept = head + note + rest
    after = sum(estimate_tokens(m, count) for m in kept)
    return Expected(
        messages=kept,
        dropped=[messages[i] for i in indices(split.middle[:k])],
        tokens_before=before,
        tokens_after=after,
        fits=after <= max_tokens,
        summary=summary,
        summarized=summarized,
    )


# --- helpers ----------------------------------------------------------------------


def same_objects(actual: List[Any], expected: List[Any]) -> bool:
    return len(actual) == len(expected) and all(a is e for a, e in zip(actual, expected))


def assert_matches(result: Any, expected: Expected, summary_at: Optional[int] = None) -> None:
    assert result.tokens_before == expected.tokens_before
    assert result.tokens_after == expected.tokens_after
    assert result.fits is expected.fits
    assert same_objects(result.dropped, expected.dropped)
    if summary_at is None:
        assert same_objects(result.messages, expected.messages)
    else:
        assert result.messages[summary_at] == expected.messages[summary_at]
        rest = result.messages[:summary_at] + result.messages[summary_at + 1 :]
        expected_rest = expected.messages[:summary_at] + expected.messages[summary_at + 1 :]
        assert same_objects(rest, expected_rest)


class Recorder:
    def __init__(self, text: str) -> None:
        self.text = text
        self.calls: List[List[Any]] = []

    def __call__(self, dropped: List[Any]) -> str:
        self.calls.append(dropped)
        return self.text


count_options = st.sampled_from([None, content_length])


# --- compact ----------------------------------------------------------------------


@PROPERTY
@given(conversations(), budgets(), keeps, keeps)
def test_kept_and_dropped_partition_the_input_in_order(messages, max_tokens, keep_head, keep_tail):
    result = compact(messages, max_tokens=max_tokens, keep_head=keep_head, keep_tail=keep_tail)

    dropped_ids = {id(m) for m in result.dropped}
    assert len(dropped_ids) == len(result.dropped)
    # Dropped messages are one contiguous run, so kept + dropped in order is the input.
    if result.dropped:
        start = next(i for i, m in enumerate(messages) if m is result.dropped[0])
        rebuilt = messages[:start] + messages[start + len(result.dropped) :]
        assert same_objects(messages[start : start + len(result.dropped)], result.dropped)
        assert same_objects(result.messages, rebuilt)
    else:
        assert same_objects(result.messages, messages)


@PROPERTY
@given(conversations(), budgets(), keeps, keeps)
def test_no_group_is_split(messages, max_tokens, keep_head, keep_tail):
    result = compact(messages, max_tokens=max_tokens, keep_head=keep_head, keep_tail=keep_tail)

    kept_ids = {id(m) for m in result.messages}
    for start, end in reference_groups(messages):
        kept = [id(messages[i]) in kept_ids for i in range(start, end)]
        assert all(kept) or not any(kept)


@PROPERTY
@given(conversations(), budgets(), keeps, keeps)
def test_no_tool_result_loses_its_call(messages, max_tokens, keep_head, keep_tail):
    result = compact(messages, max_tokens=max_tokens, keep_head=keep_head, keep_tail=keep_tail)

    # A result that answered its preceding assistant in the input still does in the output.
    # (Not the converse: dropping what stood between a stray result and the call it
    # names legitimately makes it adjacent to that call.)
    before = {
        id(m) for s, e in reference_groups(messages) if e - s > 1 for m in messages[s + 1 : e]
    }
    after = {
        id(m)
        for s, e in reference_groups(result.messages)
        if e - s > 1
        for m in result.messages[s + 1 : e]
    }
    kept_ids = {id(m) for m in result.messages}
    assert before & kept_ids <= after


@PROPERTY
@given(conversations(), budgets(), keeps, keeps)
def test_head_and_tail_are_kept(messages, max_tokens, keep_head, keep_tail):
    result = compact(messages, max_tokens=max_tokens, keep_head=keep_head, keep_tail=keep_tail)

    kept_ids = {id(m) for m in result.messages}
    n = len(messages)
    protected = messages[: min(keep_head, n)] + messages[max(n - keep_tail, 0) :]
    assert all(id(m) in kept_ids for m in protected)
    split = reference_split(messages, keep_head, keep_tail)
    assert all(id(messages[i]) in kept_ids for i in indices(split.head) + indices(split.tail))


@PROPERTY
@given(conversations(), budgets(), keeps, keeps, count_options)
def test_token_figures_are_exact(messages, max_tokens, keep_head, keep_tail, count):
    result = compact(
        messages,
        max_tokens=max_tokens,
        keep_head=keep_head,
        keep_tail=keep_tail,
        count_tokens=count,
    )

    assert result.tokens_before == sum(estimate_tokens(m, count) for m in messages)
    assert result.tokens_after == sum(estimate_tokens(m, count) for m in result.messages)
    assert result.fits == (result.tokens_after <= max_tokens)


@PROPERTY
@given(conversations(), budgets(), keeps, keeps, count_options)
def test_matches_the_reference(messages, max_tokens, keep_head, keep_tail, count):
    result = compact(
        messages,
        max_tokens=max_tokens,
        keep_head=keep_head,
        keep_tail=keep_tail,
        count_tokens=count,
    )

    assert_matches(result, reference_compact(messages, max_tokens, keep_head, keep_tail, count))


@PROPERTY
@given(conversations(), budgets(), keeps, keeps)
def test_dropping_one_group_fewer_would_not_fit(messages, max_tokens, keep_head, keep_tail):
    result = compact(messages, max_tokens=max_tokens, keep_head=keep_head, keep_tail=keep_tail)

    if not result.dropped:
        return
    groups = reference_groups(messages)
    dropped_ids = {id(m) for m in result.dropped}
    last = max(g for g in groups if id(messages[g[0]]) in dropped_ids)
    restored = result.tokens_after + sum(estimate_tokens(m) for m in messages[last[0] : last[1]])
    assert restored > max_tokens


@PROPERTY
@given(conversations(), budgets(), keeps, keeps)
def test_input_is_never_mutated(messages, max_tokens, keep_head, keep_tail):
    snapshot = copy.deepcopy(messages)
    outer = list(messages)

    compact(messages, max_tokens=max_tokens, keep_head=keep_head, keep_tail=keep_tail)
    compact_with_summary(
        messages,
        max_tokens=max_tokens,
        keep_head=keep_head,
        keep_tail=keep_tail,
        summarize=lambda dropped: "summary",
    )

    assert messages == snapshot
    assert same_objects(messages, outer)


@PROPERTY
@given(conversations(), budgets(), keeps, keeps)
def test_tuple_input_gives_the_same_result(messages, max_tokens, keep_head, keep_tail):
    options = {"max_tokens": max_tokens, "keep_head": keep_head, "keep_tail": keep_tail}

    as_list = compact(messages, **options)
    as_tuple = compact(tuple(messages), **options)

    assert as_tuple == as_list
    assert same_objects(as_tuple.messages, as_list.messages)


# --- compact_with_summary ---------------------------------------------------------


@PROPERTY
@given(
    conversations(),
    budgets(),
    keeps,
    keeps,
    count_options,
    texts,
    st.sampled_from(["user", "system"]),
)
def test_summary_matches_the_reference(
    messages, max_tokens, keep_head, keep_tail, count, text, role
):
    summarize = Recorder(text)

    result = compact_with_summary(
        messages,
        max_tokens=max_tokens,
        keep_head=keep_head,
        keep_tail=keep_tail,
        count_tokens=count,
        summarize=summarize,
        summary_role=role,
    )
    expected = reference_compact(
        messages, max_tokens, keep_head, keep_tail, count, summary=text, summary_role=role
    )

    assert result.summary == expected.summary
    split = reference_split(messages, keep_head, keep_tail)
    at = len(indices(split.head)) if expected.summary is not None else None
    assert_matches(result, expected, summary_at=at)
    if expected.summarized is None:
        assert summarize.calls == []
    else:
        assert len(summarize.calls) == 1
        assert same_objects(summarize.calls[0], expected.summarized)
        assert result.messages[at] == {"role": role, "content": text}


@PROPERTY
@given(conversations(), budgets(), keeps, keeps, texts)
def test_summary_token_figures_are_exact(messages, max_tokens, keep_head, keep_tail, text):
    result = compact_with_summary(
        messages,
        max_tokens=max_tokens,
        keep_head=keep_head,
        keep_tail=keep_tail,
        summarize=lambda dropped: text,
    )

    assert result.tokens_before == sum(estimate_tokens(m) for m in messages)
    assert result.tokens_after == sum(estimate_tokens(m) for m in result.messages)
    assert result.fits == (result.tokens_after <= max_tokens)
    summaries = [m for m in result.messages if not any(m is o for o in messages)]
    assert len(summaries) == (0 if result.summary is None else 1)


@PROPERTY
@given(conversations(), budgets(), keeps, keeps)
def test_without_summarize_it_equals_compact(messages, max_tokens, keep_head, keep_tail):
    options = {"max_tokens": max_tokens, "keep_head": keep_head, "keep_tail": keep_tail}

    plain = compact(messages, **options)
    with_summary = compact_with_summary(messages, **options)

    assert with_summary.summary is None
    assert same_objects(with_summary.messages, plain.messages)
    assert same_objects(with_summary.dropped, plain.dropped)
    assert (with_summary.tokens_before, with_summary.tokens_after, with_summary.fits) == (
        plain.tokens_before,
        plain.tokens_after,
        plain.fits,
    )


# --- acompact_with_summary --------------------------------------------------------


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@settings(PROPERTY, max_examples=examples(50))
@given(conversations(), budgets(), keeps, keeps, texts, st.booleans())
def test_async_equals_sync(backend, messages, max_tokens, keep_head, keep_tail, text, use_async):
    options = {"max_tokens": max_tokens, "keep_head": keep_head, "keep_tail": keep_tail}
    sync_calls: List[Any] = []
    async_calls: List[Any] = []

    def summarize(dropped: List[Any]) -> str:
        sync_calls.append(dropped)
        return text

    async def asummarize(dropped: List[Any]) -> str:
        async_calls.append(dropped)
        await anyio.sleep(0)
        return text

    def plain_summarize(dropped: List[Any]) -> str:
        async_calls.append(dropped)
        return text

    async def run() -> Any:
        return await acompact_with_summary(
            messages, summarize=asummarize if use_async else plain_summarize, **options
        )

    expected = compact_with_summary(messages, summarize=summarize, **options)
    result = anyio.run(run, backend=backend)

    assert result == expected
    assert same_objects(
        [m for m in result.messages if any(m is o for o in messages)],
        [m for m in expected.messages if any(m is o for o in messages)],
    )
    assert len(async_calls) == len(sync_calls)
    assert all(same_objects(a, s) for a, s in zip(async_calls, sync_calls))
