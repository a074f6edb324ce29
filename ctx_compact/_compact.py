"""compact / compact_with_summary / acompact_with_summary, their result types and ``Compaction``.

``Compaction`` decides what to drop from the messages' prefix token sums and group boundaries
alone; the sync and async forms (and the middleware) differ only in how they obtain a summary.
"""

from __future__ import annotations

import inspect
from bisect import bisect_left, bisect_right
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, List, Optional, Sequence, Tuple, Union

from ._checks import (
    check_callable,
    check_messages,
    check_options,
    check_summary,
    check_summary_role,
)
from ._defaults import KEEP_HEAD, KEEP_TAIL
from ._errors import InvalidMessageError
from ._grouping import group_bounds
from ._option_docs import with_option_docs
from ._steps import step_size, steps, whole_steps
from ._tokens import CountTokens, check_sums, count_all, count_one, finite, prefix_sums
from ._views import message_view, message_views, trailing_views
from .formats import awaiting, joined, resumes, summary_note

Summarize = Callable[[List[Any]], str]
Pin = Callable[[Any], Any]
AsyncSummarize = Callable[[List[Any]], Union[str, Awaitable[str]]]


@dataclass(frozen=True)
class CompactResult:
    """What ``compact`` returns.

    Attributes:
        messages: The compacted list: the caller's own message objects, in order.
        dropped: The removed messages, the caller's own objects, in original order.
        tokens_before: Summed estimated tokens of the input list.
        tokens_after: Summed estimated tokens of ``messages``.
        fits: ``tokens_after <= max_tokens``.
    """

    messages: List[Any]
    dropped: List[Any]
    tokens_before: int
    tokens_after: int
    fits: bool


@dataclass(frozen=True)
class CompactResultWithSummary(CompactResult):
    """What ``compact_with_summary`` returns: ``CompactResult`` plus the summary.

    Attributes:
        summary: The text ``summarize`` returned, inserted as a message right
            after the head-kept messages (or, where roles must alternate, at the
            end of a copy of the head's last message); ``None`` when nothing was
            dropped, no ``summarize`` was given, or no cut lets the conversation
            resume after it.
    """

    summary: Optional[str]


@dataclass(frozen=True)
class MessageRow:
    """One message as a ``Compaction`` decided it, for a report such as ``--explain``.

    Attributes:
        index: The message's position in the input.
        role: Its ``"role"`` value as given (``None`` when it has none, as for a
            Responses item).
        tokens: Its token count.
        group_first, group_last: The first and last index of the group it belongs to.
        status: ``"kept"`` or ``"dropped"``.
        reason: Why: ``"head"``, ``"tail"``, ``"head (group kept whole)"``,
            ``"tail (group kept whole)"``, ``"tail (calls awaiting their results)"``,
            ``"latest compaction item (group kept whole)"``, ``"before the latest
            compaction item"``, ``"pinned (group kept whole)"``, ``"oldest middle
            group while over budget"``, ``"budget reached"`` or ``"input already fits"``.
    """

    index: int
    role: Any
    tokens: int
    group_first: int
    group_last: int
    status: str
    reason: str


def _cut_after(pre: Sequence[int], bounds: Sequence[int], lo: int, hi: int, excess: float) -> int:
    """The smallest group boundary ``b`` in ``[lo, hi]`` whose groups ``[lo, b)`` hold ``excess``.

    ``hi`` when even dropping every group up to it is not enough.
    """
    if excess <= 0:
        return lo
    j = bisect_left(pre, pre[lo] + excess, lo, hi + 1)
    if j > hi:
        return hi
    return bounds[bisect_left(bounds, j)]


def _held(bounds: Sequence[int], pinned: Sequence[int], n: int) -> List[bool]:
    """For each message, whether its group holds a pinned message."""
    held = [False] * n
    for group in {bisect_right(bounds, i) - 1 for i in pinned}:
        held[bounds[group] : bounds[group + 1]] = [True] * (bounds[group + 1] - bounds[group])
    return held


def pinned_groups(messages: Sequence[Any], bounds: Sequence[int], pin: Optional[Pin]) -> List[int]:
    """The indices of the messages in a group holding a message ``pin`` accepts."""
    if pin is None:
        return []
    chosen = [i for i, message in enumerate(messages) if pin(message)]
    held = _held(bounds, chosen, len(messages)) if chosen else []
    return [i for i, kept in enumerate(held) if kept]


def _free(pre: Sequence[int], held: Sequence[bool]) -> List[int]:
    """The prefix sums of the counts of the messages not ``held``."""
    counts = [0 if kept else pre[i + 1] - pre[i] for i, kept in enumerate(held)]
    return prefix_sums(counts)


class Compaction:
    """The decision for one call, made from counts and boundaries alone.

    Args:
        messages: The input, as a list.
        pre: Prefix sums of the messages' token counts (``len(messages) + 1`` items).
        bounds: Group boundaries (see ``group_bounds``).
        max_tokens, keep_head, keep_tail, count_tokens: The checked options.
        target_tokens: The checked target, for the step rule (``_steps``).
        uncleared: With ``target_tokens``, the prefix sums before clearing edited some
            messages (``None``: ``pre``): the step rule reads the history as it was,
            and what clearing took off counts towards its reduction.
        restart: The index of the latest message holding a provider's compaction
            item, ``-1`` for none. Over budget, the conversation starts at its group
            (``start``): what is before goes first, the head is counted from there.
        pinned: The indices of the pinned messages: their groups between the head
            and the tail are never dropped, and stay in place.

    Calls still awaiting their results at the end (``formats.awaiting``) are kept
    whole with the tail, whatever ``keep_tail`` says.

    Raises:
        InvalidMessageError: The counts add up to more than a float can hold.
    """

    def __init__(
        self,
        messages: List[Any],
        pre: Sequence[int],
        bounds: Sequence[int],
        *,
        max_tokens: float,
        keep_head: int,
        keep_tail: int,
        count_tokens: Optional[CountTokens],
        target_tokens: Optional[float] = None,
        uncleared: Optional[Sequence[int]] = None,
        restart: int = -1,
        pinned: Sequence[int] = (),
    ) -> None:
        n = len(messages)
        check_sums(pre)
        self.messages = messages
        self.pre = pre
        self.bounds = bounds
        self.held: Optional[List[bool]] = None
        self.free = pre  # the prefix sums of what dropping from the middle may take off
        self.pinned: List[int] = []
        self.max_tokens = max_tokens
        self.count_tokens = count_tokens
        self.step = step_size(max_tokens, target_tokens)
        self.tokens_before = pre[n]
        # The step rule reads the history as it was before clearing.
        self.sums = pre if uncleared is None or self.step is None else uncleared
        self.saved = self.sums[-1] - pre[n]
        self.taken: float = 0
        self.began = n
        if self.step is not None:
            self.taken, self.began = steps(self.sums, max_tokens, self.step)
        excess = self._to_drop()
        # Over budget, a compaction item starts the conversation: what is before it goes first.
        self.restart = restart if excess > 0 and 0 <= restart < n else -1
        self.start = bounds[bisect_right(bounds, self.restart) - 1] if self.restart >= 0 else 0
        self._snap(keep_head, keep_tail, excess > 0)
        if pinned:
            self.held = self._hold(pinned)
            self.free = _free(pre, self.held)
            self.pinned = [i for i, held in enumerate(self.held) if held]
        cut: Optional[int] = _cut_after(
            self.free, bounds, self.head_end, self.tail_start, excess - pre[self.start]
        )
        if cut != self.head_end:  # only a format with rules on resuming can move it
            cut = self._resumed(cut or 0, self._head_last(), self.head_end + 1)
        self.cut: int = self.head_end if cut is None else cut

    def _snap(self, keep_head: int, keep_tail: int, over: bool) -> None:
        """Set the head's end and the tail's start: counted in messages, snapped outward to
        whole groups; the compaction item's group and calls awaiting results kept."""
        bounds, start, n = self.bounds, self.start, len(self.messages)
        self.head_end = bounds[bisect_left(bounds, min(start + keep_head, n))]
        if self.restart >= 0:  # the item's group is never dropped
            self.head_end = max(self.head_end, bounds[bisect_right(bounds, start)])
        self.tail_start = max(
            bounds[bisect_right(bounds, max(n - keep_tail, 0)) - 1], self.head_end
        )
        self.awaits = n
        waiting = awaiting(trailing_views(self.messages)) if over else n
        if waiting < n:  # kept whole with the tail, whatever keep_tail says
            self.awaits = bounds[bisect_right(bounds, waiting) - 1]
            self.tail_start = max(min(self.tail_start, self.awaits), self.head_end)

    def _hold(self, pinned: Sequence[int]) -> List[bool]:
        """For each message, whether it is kept as pinned: a pinned message's group and,
        where a format has rules on how a conversation goes on (Bedrock's alternating
        roles), the groups before it that let it follow what is kept before it."""
        bounds, messages = self.bounds, self.messages
        held = _held(bounds, pinned, len(messages))
        before, i = self._head_last(), self.head_end
        while i < self.tail_start:
            if not held[i]:
                i += 1
                continue
            start = i
            while start > self.head_end and not held[start - 1]:
                if resumes(before, message_view(messages[start], start)):
                    break
                group = bisect_right(bounds, start - 1) - 1
                held[bounds[group] : start] = [True] * (start - bounds[group])
                start = bounds[group]
            while i < len(messages) and held[i]:
                i += 1
            before = message_view(messages[i - 1], i - 1)
        return held

    def _head_last(self) -> Optional[Mapping[str, Any]]:
        """The last message of the head (its view), what the kept tail resumes after."""
        end = self.head_end
        return message_view(self.messages[end - 1], end - 1) if end else None

    def _may_resume(self, before: Optional[Mapping[str, Any]], cut: int) -> bool:
        """Whether the conversation may go on at ``cut`` right after ``before`` (or after
        the last pinned message kept before ``cut``)."""
        n = len(self.messages)
        if cut >= n:
            return True
        pinned = self.pinned_between(self.head_end, cut)
        if pinned:
            before = message_view(self.messages[pinned[-1]], pinned[-1])
        return resumes(before, message_view(self.messages[cut], cut))

    def is_pinned(self, i: int) -> bool:
        """Whether message ``i`` is in a pinned group."""
        return self.held is not None and self.held[i]

    def pinned_between(self, start: int, stop: int) -> List[int]:
        """The indices in ``[start, stop)`` of the messages in pinned groups."""
        pinned = self.pinned
        return pinned[bisect_left(pinned, start) : bisect_left(pinned, stop)]

    def _dropped_between(self, start: int, stop: int) -> List[Any]:
        held, messages = self.held, self.messages
        if held is None:
            return messages[start:stop]
        return [messages[i] for i in range(start, stop) if not held[i]]

    def _resumed(self, cut: int, before: Optional[Mapping[str, Any]], lowest: int) -> Optional[int]:
        """The cut to make instead of ``cut`` so that the conversation may resume after
        ``before`` (see ``formats.resumes``).

        ``cut`` itself when it may; else the nearest group boundary after it up to
        the tail's start that may (dropping more never makes it fit less); else
        the furthest one before it, down to ``lowest``; ``None`` when there is none.
        """
        if self._may_resume(before, cut):
            return cut
        bounds = self.bounds
        at = bisect_left(bounds, cut)
        for later in bounds[at + 1 :]:
            if later > self.tail_start:
                break
            if self._may_resume(before, later):
                return later
        for earlier in reversed(bounds[:at]):
            if earlier < lowest:
                break
            if self._may_resume(before, earlier):
                return earlier
        return None

    def cut_points(self, stop: int) -> List[int]:
        """The group boundaries strictly between the head's end and ``stop`` at which the
        conversation may resume after the head: where this decision could cut."""
        before = self._head_last()
        return [b for b in self.bounds if self.head_end < b < stop and self._may_resume(before, b)]

    def _to_drop(self, extra: float = 0) -> float:
        """The tokens to drop from the messages when ``extra`` more are sent with them
        (a summary): what the step rule takes off, less what clearing took."""
        if self.step is None:
            return self.tokens_before + extra - self.max_tokens
        taken = self.taken
        if extra:
            # What the summary puts over the budget goes in whole steps on top of the
            # reduction: the same summary of the same history makes the same further cut.
            taken += whole_steps(self.sums[-1] - taken + extra - self.max_tokens, self.step)
        return taken - self.saved

    def kept(self) -> List[Any]:
        """The messages kept (head, pinned and tail), in original order, as a new list."""
        pinned = [self.messages[i] for i in self.pinned_between(self.head_end, self.cut)]
        return self.messages[self.start : self.head_end] + pinned + self.messages[self.cut :]

    @property
    def dropped(self) -> List[Any]:
        """The messages dropped so far, in original order."""
        return self.messages[: self.start] + self.summarized

    @property
    def summarized(self) -> List[Any]:
        """What a summary stands for: the dropped messages after ``start`` (those before
        it are in the provider's own compaction item already)."""
        return self._dropped_between(self.head_end, self.cut)

    @property
    def tokens_after(self) -> int:
        """The tokens left once ``[head_end, cut)`` and what is before ``start`` are dropped."""
        free = self.free
        return self.tokens_before - self.pre[self.start] - (free[self.cut] - free[self.head_end])

    def kept_ranges(self) -> Tuple[Tuple[int, int], ...]:
        """The kept messages as ``(start, stop)`` index ranges, in order, without empty
        ones: the head, each run of pinned messages and the tail when something is
        dropped, one when nothing is, none for an empty list."""
        n = len(self.messages)
        if self.cut == self.head_end:
            return ((self.start, n),) if self.start < n else ()
        ranges: List[Tuple[int, int]] = [(self.start, self.head_end)]
        for i in [*self.pinned_between(self.head_end, self.cut), self.cut]:
            start, stop = ranges[-1]
            if i == stop:
                ranges[-1] = (start, i + 1)
            else:
                ranges.append((i, i + 1))
        ranges[-1] = (ranges[-1][0], n)
        return tuple((start, stop) for start, stop in ranges if start < stop)

    def result(self) -> CompactResult:
        """The ``compact`` result."""
        after = self.tokens_after
        return CompactResult(
            messages=self.kept(),
            dropped=self.dropped,
            tokens_before=self.tokens_before,
            tokens_after=after,
            fits=after <= self.max_tokens,
        )

    def _summary_message(self, summary: str, summary_role: str) -> Tuple[Any, Any, int]:
        """The note carrying ``summary``, the copy of the head's last message it went into
        instead (``None`` unless roles must alternate), and the tokens it adds."""
        head_end, before = self.head_end, self._head_last()
        # The note takes the shape of the messages around it: the head's last, or the
        # first of those it stands for.
        beside = before
        if beside is None and head_end < len(self.messages):
            beside = message_view(self.messages[head_end], head_end)
        note = summary_note(summary, summary_role, beside)
        # A format whose roles alternate (Bedrock, Gemini) cannot take the note as a
        # message of its own after a head message of its role: it joins that message.
        merged = (
            joined(before, summary) if before is not None and not resumes(before, note) else None
        )
        try:
            if merged is None:
                return note, None, count_one(note, self.count_tokens, None)
            last = self.pre[head_end] - self.pre[head_end - 1]
            return note, merged, count_one(merged, self.count_tokens, None) - last
        except InvalidMessageError as exc:
            raise InvalidMessageError(f"the summary message: {exc.reason}") from exc

    def summary_message(self, summary: str, summary_role: str) -> Tuple[Any, bool]:
        """The message ``result_with_summary`` inserts for ``summary``, and whether it
        replaces the head's last message (the note joined to it, where roles alternate)
        rather than following the head."""
        note, merged, _ = self._summary_message(summary, summary_role)
        return (note, False) if merged is None else (merged, True)

    def result_with_summary(
        self, summary: Optional[str], summary_role: str, at_least: int = 0
    ) -> CompactResultWithSummary:
        """The ``compact_with_summary`` result, with ``summary`` inserted after the head.

        The summary message counts against the budget; when it no longer fits,
        further whole groups are dropped, oldest first, without re-summarising.
        ``at_least`` is a cut the result drops up to whatever the summary's
        size (a group boundary, at most the tail's start): that of the messages
        ``summary`` was made from, so it never describes a message still sent.
        """
        if summary is None:
            return CompactResultWithSummary(**vars(self.result()), summary=None)
        pre, head_end, start = self.pre, self.head_end, self.start
        note, merged, summary_tokens = self._summary_message(summary, summary_role)
        after = self.tokens_after + summary_tokens
        if not finite(after):
            raise InvalidMessageError(
                "the summary message: its token count makes the total more than a float can hold"
            )
        free = self.free
        if self.step is None or after <= self.max_tokens:
            excess = after - self.max_tokens
            cut = _cut_after(free, self.bounds, self.cut, self.tail_start, excess)
        else:
            # By the step rule again, the summary counted: the same summary of the
            # same cut makes the same further cut in every process.
            more = self._to_drop(summary_tokens) - pre[start]
            cut = max(_cut_after(free, self.bounds, head_end, self.tail_start, more), self.cut)
        cut = max(cut, at_least)
        after_head = self._head_last() if merged is not None else note
        resumed = self._resumed(cut, after_head, max(at_least, head_end + 1))
        pinned = self.pinned_between(head_end, resumed or head_end)
        if (
            resumed is None
            or resumed <= head_end
            or (pinned and not resumes(after_head, message_view(self.messages[pinned[0]], 0)))
        ):
            # No cut lets the conversation resume after the summary: none is sent.
            return self.result_with_summary(None, summary_role)
        after -= free[resumed] - free[self.cut]
        if merged is not None:
            messages = [*self.messages[start : head_end - 1], merged]
        else:
            messages = [*self.messages[start:head_end], note]
        messages.extend(self.messages[i] for i in pinned)
        messages.extend(self.messages[resumed:])
        return CompactResultWithSummary(
            messages=messages,
            dropped=self.messages[:start] + self._dropped_between(head_end, resumed),
            tokens_before=self.tokens_before,
            tokens_after=after,
            fits=after <= self.max_tokens,
            summary=summary,
        )

    def _reason(self, i: int, keep_head: int, keep_tail: int) -> Tuple[str, str]:
        """Whether message ``i`` is kept or dropped, and why: the first rule that holds."""
        start, head, tail = self.start, i < self.head_end, i >= self.tail_start
        item_end = self.bounds[bisect_right(self.bounds, start)] if self.restart >= 0 else start
        rules = (
            (i < start, "dropped", "before the latest compaction item"),
            (head and i < start + keep_head, "kept", "head"),
            (head and i < item_end, "kept", "latest compaction item (group kept whole)"),
            (head, "kept", "head (group kept whole)"),
            (tail and i >= len(self.messages) - keep_tail, "kept", "tail"),
            (tail and i >= self.awaits, "kept", "tail (calls awaiting their results)"),
            (tail, "kept", "tail (group kept whole)"),
            (i < self.cut and self.is_pinned(i), "kept", "pinned (group kept whole)"),
            (i < self.cut, "dropped", "oldest middle group while over budget"),
            (self.tokens_before > self.max_tokens, "kept", "budget reached"),
        )
        return next(((s, why) for hit, s, why in rules if hit), ("kept", "input already fits"))

    def rows(self, keep_head: int, keep_tail: int) -> List[MessageRow]:
        """One row per message, in order: its tokens, its group and why ``result()`` keeps or
        drops it (``keep_head`` and ``keep_tail``: the options this decision was made with)."""
        views = message_views(self.messages)
        bounds, pre = self.bounds, self.pre
        rows: List[MessageRow] = []
        for i in range(len(self.messages)):
            group = bisect_right(bounds, i) - 1
            status, reason = self._reason(i, keep_head, keep_tail)
            rows.append(
                MessageRow(
                    index=i,
                    role=views[i].get("role"),
                    tokens=pre[i + 1] - pre[i],
                    group_first=bounds[group],
                    group_last=bounds[group + 1] - 1,
                    status=status,
                    reason=reason,
                )
            )
        return rows


def measure(
    messages: Sequence[Any],
    count_tokens: Optional[CountTokens],
    restarts: Optional[List[int]] = None,
) -> Tuple[List[int], List[int]]:
    """``(pre, bounds)`` of ``messages``, validating each one: the prefix sums of their
    token counts and their group boundaries (``restarts`` as for ``group_bounds``)."""
    views = message_views(messages)
    bounds = group_bounds(views, 0, restarts)
    return prefix_sums(count_all(views, count_tokens)), bounds


def decide(
    messages: object, options: Mapping[str, Any], uncleared: Optional[Sequence[int]] = None
) -> Compaction:
    """Group and count the messages once and decide what to drop, with checked ``options``
    (``check_options``); ``uncleared`` as for ``Compaction``."""
    msgs = list(check_messages(messages))
    restarts: List[int] = []
    options = dict(options)
    pin = options.pop("pin", None)
    pre, bounds = measure(msgs, options["count_tokens"], restarts)
    restart = restarts[-1] if restarts else -1
    pinned = [] if pin is None else [i for i, message in enumerate(msgs) if pin(message)]
    return Compaction(
        msgs, pre, bounds, **options, uncleared=uncleared, restart=restart, pinned=pinned
    )


def prepare(
    messages: object,
    *,
    max_tokens: object,
    count_tokens: Optional[CountTokens],
    keep_head: object,
    keep_tail: object,
    target_tokens: object = None,
    uncleared: Optional[Sequence[int]] = None,
    pin: object = None,
) -> Compaction:
    """Check every argument, group and count the messages once, and decide what to drop."""
    return decide(messages, check_options(locals()), uncleared)


@with_option_docs()
def compact(
    messages: Sequence[Any],
    *,
    max_tokens: float,
    count_tokens: Optional[CountTokens] = None,
    keep_head: int = KEEP_HEAD,
    keep_tail: int = KEEP_TAIL,
    target_tokens: Optional[float] = None,
    pin: Optional[Pin] = None,
) -> CompactResult:
    """Drop whole groups from the middle of ``messages`` until it fits ``max_tokens``.

    A group is the smallest contiguous run of messages that closes every tool call
    opened in it and every result given in it, in any wire format (docs/grouping.md).
    ``keep_head`` leading and ``keep_tail`` trailing messages are kept, snapped
    outward to whole groups, and the middle groups are dropped oldest first until
    the total fits or nothing droppable is left; a group holding a message ``pin``
    accepts stays, in place. An input that already fits is
    returned unchanged. Where a provider has rules on how a conversation may go on
    (Bedrock, Gemini), the cut is only made where the kept messages may follow the
    head (docs/formats/).

    Returns:
        A ``CompactResult`` whose ``messages`` and ``dropped`` hold the caller's
        own message objects in original order.

    Raises:
        TypeError: ``max_tokens`` is missing, a bool, not a number, not finite
            or not positive; ``messages`` is not a sequence; ``keep_head`` or
            ``keep_tail`` is not an int; ``count_tokens`` is not callable;
            ``target_tokens`` is given and is not a finite positive number;
            ``pin`` is not callable.
        ValueError: ``keep_head`` or ``keep_tail`` is negative, or
            ``target_tokens`` is more than ``max_tokens``.
        InvalidMessageError: A message is malformed or cannot be counted; the
            error names its index.
    """
    return decide(messages, check_options(locals())).result()


def _planned(arguments: Mapping[str, Any]) -> Tuple[Compaction, str]:
    """The decision of a ``compact_with_summary`` call, and its checked summary role."""
    check_callable(arguments["summarize"], "summarize")
    role = check_summary_role(arguments["summary_role"])
    return decide(arguments["messages"], check_options(arguments)), role


@with_option_docs(
    summarize="``(dropped: list) -> str``, called synchronously. Without it this behaves "
    "exactly like ``compact`` with ``summary=None``."
)
def compact_with_summary(
    messages: Sequence[Any],
    *,
    max_tokens: float,
    count_tokens: Optional[CountTokens] = None,
    keep_head: int = KEEP_HEAD,
    keep_tail: int = KEEP_TAIL,
    summarize: Optional[Summarize] = None,
    summary_role: str = "user",
    target_tokens: Optional[float] = None,
    pin: Optional[Pin] = None,
) -> CompactResultWithSummary:
    """``compact``, then splice a summary of what was dropped back in.

    If anything was dropped and ``summarize`` is given, ``summarize(dropped)`` is
    called once and its string inserted as ``{"role": summary_role, "content":
    summary}`` right after the head-kept messages (shaped as a Gemini content or a
    Bedrock message among those; where roles must alternate, added to a copy of the
    head's last message as one more text part). The summary counts against the
    budget: if it no longer fits, further whole groups are dropped, oldest first,
    and the summary is not regenerated (with ``target_tokens``, in whole steps).

    Returns:
        A ``CompactResultWithSummary``.

    Raises:
        TypeError, ValueError, InvalidMessageError: As for ``compact``; also when
            ``summarize`` is not callable, ``summary_role`` is not a string, or
            ``summarize`` returns something other than a string.
    """
    plan, role = _planned(locals())
    if summarize is None or plan.cut == plan.head_end:
        return plan.result_with_summary(None, role)
    return plan.result_with_summary(check_summary(summarize(plan.summarized)), role)


@with_option_docs(summarize="``(dropped: list) -> str | Awaitable[str]``.")
async def acompact_with_summary(
    messages: Sequence[Any],
    *,
    max_tokens: float,
    count_tokens: Optional[CountTokens] = None,
    keep_head: int = KEEP_HEAD,
    keep_tail: int = KEEP_TAIL,
    summarize: Optional[AsyncSummarize] = None,
    summary_role: str = "user",
    target_tokens: Optional[float] = None,
    pin: Optional[Pin] = None,
) -> CompactResultWithSummary:
    """``compact_with_summary`` for async code: ``summarize`` may be async or plain.

    An async ``summarize`` (or one returning an awaitable) is awaited; a plain
    one is called directly, on the event loop's thread.

    Returns:
        A ``CompactResultWithSummary``, the same as ``compact_with_summary`` would give.

    Raises:
        TypeError, ValueError, InvalidMessageError: As for ``compact_with_summary``.
    """
    plan, role = _planned(locals())
    if summarize is None or plan.cut == plan.head_end:
        return plan.result_with_summary(None, role)
    summary: object = summarize(plan.summarized)
    if inspect.isawaitable(summary):
        summary = await summary
    return plan.result_with_summary(check_summary(summary), role)
