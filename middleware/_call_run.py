"""One intercepted call's compaction: decided when the call starts, finished into an event.

Nothing here waits on anything, so the sync and async call paths share it; they
differ only in how they obtain the summary and call the hooks.
"""

from __future__ import annotations

import dataclasses
import time
from bisect import bisect_left
from collections.abc import Iterable, Mapping
from typing import Any, List, NamedTuple, Optional, Tuple

from ctx_compact import check_pairing, repair_pairing
from ctx_compact._contract import (
    CALL_OUTPUTS,
    Compaction,
    CountTokens,
    ToolResultClearing,
    ToolResultTruncation,
    check_messages,
    count_all,
    group_bounds,
    measure,
    message_views,
    pinned_groups,
    prefix_sums,
)

from ._call_request import CallRequest
from ._callables import Arguments, Located
from ._events import BudgetExceededError, CompactionEvent, Received, UnpairedMessagesError
from ._options import CompactionOptions
from ._state import SessionState, calibration_factor

# The roles of what the model wrote (Gemini's is "model"); a Responses call item has none.
_MODEL_ROLES = frozenset(("assistant", "model"))


class Cleared(NamedTuple):
    """What clearing leaves to compact, and what it cleared.

    Attributes:
        messages: The messages to compact: the caller's list, or an edited copy.
        pre: Their prefix token sums.
        bounds: Their group boundaries.
        thinking: The thinking cleared (indexing the caller's list).
        results: The tool results cleared (indexing the caller's list).
        origin: Where each of ``messages`` is in the caller's list, when a removed
            reasoning item shifted them; ``None`` when they are where they were.
        uncleared: The prefix sums of the messages before clearing tool results
            edited them (what ``Compaction``'s ``uncleared`` takes); ``None`` when
            it did not run.
        truncated: The tool results cut to their caps (indexing the caller's list).
        pinned: The indices of ``messages`` in a pinned group.
    """

    messages: List[Any]
    pre: List[int]
    bounds: List[int]
    thinking: Tuple[Any, ...] = ()
    results: Tuple[Any, ...] = ()
    origin: Optional[List[int]] = None
    uncleared: Optional[List[int]] = None
    truncated: Tuple[Any, ...] = ()
    pinned: Tuple[int, ...] = ()


def _here(cleared: Cleared, indices: Iterable[int]) -> List[int]:
    """The caller's ``indices`` as indices of ``cleared.messages`` (those still there)."""
    origin = cleared.origin
    if origin is None:
        return list(indices)
    wanted = set(indices)
    return [k for k, i in enumerate(origin) if i in wanted]


def _in_caller(index: int, origin: Optional[List[int]]) -> int:
    return index if origin is None else origin[index]


def _caller(cleared: Any, origin: Optional[List[int]]) -> Any:
    """A cleared or cut result with its indices in the caller's list rather than the
    shortened one."""
    if origin is None:
        return cleared
    call = cleared.call_index
    return dataclasses.replace(
        cleared,
        index=origin[cleared.index],
        call_index=origin[call] if call is not None else None,
    )


def _cleared(
    options: CompactionOptions,
    counter: Optional[CountTokens],
    messages: List[Any],
    pre: List[int],
    bounds: List[int],
    budget: float,
    target: Optional[float],
) -> Cleared:
    """Clear old thinking, then old tool results, until the messages fit ``budget``; then cut
    every result over its cap (``truncate_tool_results``); the pinned groups' thinking is not
    cleared, nor their results cleared or cut.

    ``counter`` counts the copies clearing edits (the call's, ``CallRun.counter``).

    With ``target`` (the budget's ``target_tokens``), tool results are cleared in
    the core's steps, and dropping takes off the rest of the reduction.
    """
    pinned = tuple(pinned_groups(messages, bounds, options.pin))
    cleared = Cleared(messages, pre, bounds, pinned=pinned)
    truncation = options.truncation
    over = pre[-1] > budget and (options.clear_thinking or options.clear_tool_results)
    if not over and truncation is None:
        return cleared
    counts = [pre[i + 1] - pre[i] for i in range(len(messages))]
    if options.clear_thinking is not None:
        done, counts = options.clear_thinking.apply(
            messages,
            message_views(messages),
            counts,
            max_tokens=budget,
            count_tokens=counter,
            protected=pinned,
        )
        if done.cleared:
            cleared = _thinking_cleared(cleared, done.messages, tuple(done.cleared))
    if options.clear_tool_results is not None and sum(counts) > budget:
        cleared, counts = _results_cleared(
            options.clear_tool_results, counter, cleared, counts, budget, target
        )
    if truncation is not None:
        whole = counts
        cut, counts = truncation.apply(
            cleared.messages,
            message_views(cleared.messages),
            counts,
            count_tokens=counter,
            protected=cleared.pinned,
        )
        if cut.cleared:
            uncleared = cleared.uncleared
            if target is not None and uncleared is None:  # the step rule reads them whole
                uncleared = prefix_sums(whole)
            truncated = tuple(_caller(c, cleared.origin) for c in cut.cleared)
            cleared = cleared._replace(
                messages=cut.messages, truncated=truncated, uncleared=uncleared
            )
    return cleared._replace(pre=prefix_sums(counts))


def _thinking_cleared(before: Cleared, messages: List[Any], thinking: Tuple[Any, ...]) -> Cleared:
    """``before`` with its thinking cleared into ``messages``, regrouped."""
    origin: Optional[List[int]] = None
    if len(messages) != len(before.messages):
        gone = {c.index for c in thinking if c.block is None}
        origin = [i for i in range(len(before.messages)) if i not in gone]
    # A removed reasoning item shifts what follows.
    bounds = group_bounds(message_views(messages))
    moved = before._replace(messages=messages, bounds=bounds, thinking=thinking, origin=origin)
    return moved._replace(pinned=tuple(_here(moved, before.pinned)))


def _results_cleared(
    clearing: ToolResultClearing,
    counter: Optional[CountTokens],
    before: Cleared,
    counts: List[int],
    budget: float,
    target: Optional[float],
) -> Tuple[Cleared, List[int]]:
    """``before`` with old tool results cleared, and the counts of its messages after."""
    # The step rule reads the history before clearing.
    uncleared = prefix_sums(counts) if target is not None else None
    edited, counts = clearing.apply(
        before.messages,
        message_views(before.messages),
        counts,
        max_tokens=budget,
        count_tokens=counter,
        target_tokens=target,
        protected=before.pinned,
    )
    if not edited.cleared:
        return before._replace(uncleared=uncleared), counts
    results = tuple(_caller(c, before.origin) for c in edited.cleared)
    # The same groups: results are edited, never removed.
    return before._replace(messages=edited.messages, results=results, uncleared=uncleared), counts


def _measured(
    located: Located, messages: List[Any], counter: Optional[CountTokens], function: str
) -> Tuple[List[int], List[int], int]:
    """The messages' prefix sums, their group boundaries, and the last one holding a
    provider's compaction item (-1 for none)."""
    restarts: List[int] = []
    if located.counts is None:
        pre, bounds = measure(messages, counter, restarts)
    else:
        # Counted by the site, as its framework sends them: grouped here only.
        if len(located.counts) != len(messages):
            raise ValueError(
                f"{function} counted {len(located.counts)} messages but passed {len(messages)}"
            )
        bounds = group_bounds(message_views(messages), 0, restarts)
        pre = prefix_sums(located.counts)
    return pre, bounds, restarts[-1] if restarts else -1


def _listed(value: Any) -> List[Any]:
    """The call's messages as a new list; the core's ``TypeError`` when they are no list."""
    # A lone message (a mapping) is iterable too, but iterating it would yield its keys.
    if type(value) is not list and (
        isinstance(value, (str, bytes, bytearray, Mapping)) or not isinstance(value, Iterable)
    ):
        check_messages(value)
    return list(value)


def _cut_stood(plan: Compaction) -> bool:
    """Whether the previous call's history is cut (and cleared) the same way as this one.

    The previous call's history is taken to be this one without the model's last
    reply and what followed it (in a chat, the last answer and the new
    question). It is cut the same way when the step rule's reduction was made by
    a prefix of it and the cut is not at the start of the kept tail (which moves
    as the history grows).
    """
    if plan.step is None or not plan.head_end < plan.cut < plan.tail_start:
        return False
    views = message_views(plan.messages)
    previous = len(views) - 1
    for i in range(len(views) - 1, plan.cut - 1, -1):
        view = views[i]
        role = view.get("role")
        if role in _MODEL_ROLES or (role is None and view.get("type") in CALL_OUTPUTS):
            previous = i
            break
    return plan.began <= previous


class CallRun:
    """The compaction of one call's messages.

    Args:
        options: The checked options.
        function: The called function's qualified name, for the event (a
            site's own name, ``located.function``, wins).
        located: Where the call carries its messages (``Located``).
        states: The session states active for the call (``active_states()``):
            the innermost calibrating one's factor is used.
        budget: The whole prompt's budget in estimated tokens, when not
            ``max_tokens`` over the calibration (a retry after the provider
            refused the prompt's length passes a smaller one).
        retried: Whether this is the compaction of a retry.

    Raises:
        TypeError: The messages are not a list of messages.
        InvalidMessageError: A message is malformed, naming its index.
    """

    def __init__(
        self,
        options: CompactionOptions,
        function: str,
        located: Located,
        states: Tuple[SessionState, ...],
        budget: Optional[float] = None,
        retried: bool = False,
    ) -> None:
        self.started = time.perf_counter()
        self.options = options
        self.function = located.function or function
        self.located = located
        self.retried = retried
        # Counted against the budget, never dropped: a system prompt, instructions.
        self.beside = located.beside
        self.fixed = located.beside.total
        # What counts the messages compaction makes (a summary, a cleared copy), and
        # the messages themselves unless the site counted them.
        counter = self.counter = located.recount if located.recount is not None else options.counter
        messages = _listed(located.value)
        if type(located.value) is not list:
            # Read once: a retry compacts the same messages again, and a generator
            # or other one-shot iterable would give it none.
            self.located = located._replace(value=messages)
        pre, bounds, restart = _measured(located, messages, counter, self.function)
        self.received, self.pre = messages, pre
        self.calibration = calibration_factor(states)
        self.tokens_before = pre[-1] + self.fixed
        # Calibrated: the estimate times the factor is what the provider will count.
        full = options.max_tokens / self.calibration
        # A retry's smaller budget shrinks target_tokens by the same factor.
        scale = 1.0 if budget is None else budget / full
        budget = max(full * scale - self.fixed, 0.0)
        self.messages_before = len(messages)
        # The core's step rule: the cut (and the clearing) is a function of the
        # history alone, the same in every process, moving after a step of growth.
        target: Optional[float] = None
        if options.target_tokens is not None:
            target = min(
                max(options.target_tokens / self.calibration * scale - self.fixed, 0.0), budget
            )
        cleared = _cleared(options, counter, messages, pre, bounds, budget, target)
        self.cleared_thinking, self.cleared_results = cleared.thinking, cleared.results
        self.truncated = cleared.truncated
        # When clearing edited the list: the caller's, and where each message of
        # the edited one came from (None: where it was), for what is dropped.
        self.given = messages if cleared.messages is not messages else None
        self.origin = cleared.origin
        self.pinned = frozenset(_in_caller(i, self.origin) for i in cleared.pinned)
        if restart >= 0 and self.origin is not None:
            # Clearing removed reasoning items before it: where the item is now.
            restart = bisect_left(self.origin, restart)
        plan = self.plan = Compaction(
            cleared.messages,
            cleared.pre,
            cleared.bounds,
            max_tokens=budget,
            keep_head=options.keep_head,
            keep_tail=options.keep_tail,
            count_tokens=counter,
            target_tokens=target,
            uncleared=cleared.uncleared,
            restart=restart,
            pinned=cleared.pinned,
        )
        self.cut_reused = plan.step is not None and _cut_stood(plan)

    def _dropped_at(self, count: int) -> List[int]:
        """Where the ``count`` messages the call drops are in the caller's list: what came
        before the latest compaction item, then the oldest after the head but the pinned."""
        plan = self.plan
        at = list(range(plan.start))
        i = plan.head_end
        while len(at) < count:
            if not plan.is_pinned(i):
                at.append(i)
            i += 1
        return [_in_caller(i, self.origin) for i in at]

    def originals(self, start: int, stop: int) -> List[Any]:
        """The caller's messages for the decision's ``[start, stop)``.

        The decision's own where nothing was cleared; else the originals of the
        edited copies, so that events, summarizers and summary keys never see a
        placeholder.
        """
        plan = self.plan
        given, origin = self.given, self.origin
        if given is None:
            return plan.messages[start:stop]
        if origin is None:
            return given[start:stop]
        return [given[origin[i]] for i in range(start, stop)]

    @property
    def needs_summary(self) -> bool:
        """Whether something was dropped and a summarizer waits for it."""
        return self.options.summarize is not None and self.plan.cut > self.plan.head_end

    def summary_input(self, cut: int) -> Tuple[List[Any], int, List[int]]:
        """What the summary of ``cut`` is made from: the caller's messages before it, where
        the kept head ends, and the group boundaries between the two, where earlier calls
        may have cut (only where the conversation may resume after the head)."""
        return self.originals(0, cut), self.plan.head_end, self.plan.cut_points(cut)

    def summary_request(self, previous: Optional[str], since: int) -> Optional[CallRequest]:
        """What a summarizer taking ``request`` is shown of the call, when it summarizes the
        messages from ``since`` rolling on from ``previous``: the call's request, and the
        messages a request carrying ``previous`` sent before them (``CallRequest``)."""
        located = self.located
        if located.request is None:
            return None
        plan = self.plan
        before = self.originals(plan.start, plan.head_end)
        if previous is not None:
            message, joins = plan.summary_message(previous, self.options.summary_role)
            before = [*before[:-1], message] if joins else [*before, message]
        pinned = plan.pinned_between(plan.head_end, since)
        before.extend(self.originals(i, i + 1)[0] for i in pinned)
        return CallRequest(located.request, located.api, tuple(before))

    def summary_cut(self, summary: str, covered: int) -> int:
        """Where the call cuts with ``summary`` (made of the messages before ``covered``) in.

        Beyond ``covered`` when the summary's own tokens push the kept messages over
        budget: the summary to send is then that of the further cut.
        """
        result = self.plan.result_with_summary(summary, self.options.summary_role, covered)
        return self.plan.head_end + len(result.dropped) - self.plan.start

    def event(
        self,
        summary: Optional[str],
        summary_error: Optional[str] = None,
        covered: int = 0,
        store_error: Optional[str] = None,
    ) -> CompactionEvent:
        """The call's event, with ``summary`` (or none) inserted.

        ``summary_error`` says why the summarizer failed, when it did; ``covered`` is
        the cut ``summary`` was made for, which the call drops up to at least;
        ``store_error`` what went wrong with the summary store, when something did.
        """
        options = self.options
        plan = self.plan
        if summary is None:
            kept, gone, after = plan.kept(), plan.dropped, plan.tokens_after
        else:
            result = plan.result_with_summary(summary, options.summary_role, covered)
            kept, gone, after = result.messages, result.dropped, result.tokens_after
            summary = result.summary
        truncated = self.truncated
        last = options.last_resort
        if last is not None and after > plan.max_tokens:
            kept, after, more = self._last_resort(last, list(kept))
            truncated += more
        gone_at = self._dropped_at(len(gone))
        messages, dropped = tuple(kept), tuple(self.received[i] for i in gone_at)
        fits = after <= plan.max_tokens
        problems: Tuple[Any, ...] = ()
        repairs: Tuple[Any, ...] = ()
        if options.validate == "repair":
            # What is about to be sent, compaction's own work included, so a history
            # that was already poisoned still gets through.
            repaired = repair_pairing(messages)
            problems, repairs = tuple(repaired.problems), tuple(repaired.changes)
            if repairs:
                messages = tuple(repaired.messages)
                views = message_views(repaired.messages)
                after = sum(count_all(views, self.counter))
                fits = after <= plan.max_tokens
        elif options.validate:
            problems = tuple(check_pairing(messages))
        return CompactionEvent(
            function=self.function,
            max_tokens=options.max_tokens,
            tokens_before=self.tokens_before,
            tokens_after=after + self.fixed,
            fits=fits,
            messages=messages,
            dropped=dropped,
            summary=summary,
            elapsed=time.perf_counter() - self.started,
            messages_before=self.messages_before,
            problems=problems,
            calibration=self.calibration,
            cleared_results=self.cleared_results,
            truncated_results=truncated,
            cleared_thinking=self.cleared_thinking,
            cut_reused=self.cut_reused,
            retried=self.retried,
            summary_error=summary_error,
            repairs=repairs,
            store_error=store_error,
            _received=Received(
                tuple(self.received),
                self.pre,
                self.beside,
                options.counter,
                frozenset(gone_at),
                self.pinned,
            ),
        )

    def _last_resort(
        self, truncation: ToolResultTruncation, kept: List[Any]
    ) -> Tuple[List[Any], int, Tuple[Any, ...]]:
        """The last resort when the kept messages alone are over the budget: their largest
        tool results cut just enough (the pinned ones' never); the messages, their tokens and
        what was cut (indexing the caller's list)."""
        plan = self.plan
        at = {id(message): j for j, message in enumerate(plan.messages)}
        pinned = {id(plan.messages[i]) for i in plan.pinned}
        # A message compaction made (the summary, a head joined with it) is not cut either.
        protected = [k for k, m in enumerate(kept) if id(m) in pinned or id(m) not in at]
        counts = count_all(message_views(kept), self.counter)
        fitted, _ = truncation.fit(kept, counts, plan.max_tokens, self.counter, protected)
        # Where each kept message is in the decision's list, then in the caller's.
        index = {k: _in_caller(at[id(m)], self.origin) for k, m in enumerate(kept) if id(m) in at}
        cut = tuple(
            dataclasses.replace(
                c,
                index=index[c.index],
                call_index=None if c.call_index is None else index.get(c.call_index),
            )
            for c in fitted.cleared
        )
        return fitted.messages, fitted.tokens_after, cut

    def arguments(self, event: CompactionEvent) -> Arguments:
        """The call's arguments with the compacted list, or the overflow or pairing error."""
        options = self.options
        if not event.fits and options.on_overflow == "raise":
            raise BudgetExceededError(event)
        if event.problems and options.validate == "raise":
            raise UnpairedMessagesError(event)
        # The callee gets its own list, so it cannot change the event's.
        return self.located.rebuild(list(event.messages))
