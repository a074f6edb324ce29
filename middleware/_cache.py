"""A session's memory of messages it has already counted.

Chatbots re-send a growing history on every turn. A ``CountCache`` keeps, per
conversation, a snapshot of each message it counted with the message's token
count (as prefix sums) and the group boundaries. On the next call the longest
prefix of the new list that still equals those snapshots is found with C-level
list comparisons; only the messages after it are grouped and counted again.
A message that was changed since it was counted, whether a value was reassigned
(a streamed reply appended chunk by chunk) or a nested list mutated in place,
no longer equals its deep snapshot and is counted afresh, never with a stale
figure. Numbers in a snapshot equal only numbers of the same type and spelling,
so ``1`` reassigned to ``True`` or ``1.0`` (equal, but written differently) is
noticed too. The arrays handed out are exactly those a from-scratch pass computes.
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from itertools import accumulate
from typing import Any, List, Optional, Tuple

from ctx_compact._engine import (
    CountTokens,
    count_all,
    group_bounds,
    measure,
    message_views,
    regroup_from,
)


class _Unequal:
    """Stands for a message that could not be snapshotted: it equals nothing."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return False

    __hash__ = None  # type: ignore[assignment]


_UNEQUAL = _Unequal()


class _Exact:
    """A number in a snapshot: equal only to a number of the same type and spelling.

    ``1 == True == 1.0`` and ``0.0 == -0.0``, yet each is written (and counted)
    differently, so a plain copy would hide such a reassignment. Only numbers
    pay for this Python-level ``__eq__``; strings still compare at C speed.
    """

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        value = self.value
        if type(other) is not type(value):
            return False
        if isinstance(value, float):
            return float.__repr__(other) == float.__repr__(value)
        return bool(other == value)

    def __hash__(self) -> int:
        return hash(self.value)


def _freeze(value: Any) -> Any:
    """A deep copy in which every number is an ``_Exact``."""
    kind = type(value)
    if kind is str or value is None:
        return value
    if kind is dict:
        return {_freeze(k): _freeze(v) for k, v in value.items()}
    if kind is list:
        return [_freeze(v) for v in value]
    if kind is tuple:
        return tuple([_freeze(v) for v in value])
    if isinstance(value, (int, float)):
        return _Exact(value)
    return copy.deepcopy(value)


def _snapshot(message: Any) -> Any:
    try:
        return _freeze(message)
    except Exception:  # not copyable, or circular (RecursionError)
        return _UNEQUAL


def _same(a: List[Any], b: List[Any]) -> bool:
    try:
        return bool(a == b)
    except Exception:  # a value whose == raises or is ambiguous (arrays)
        return False


class _Line:
    """One conversation: snapshots, prefix sums and group boundaries, all in step."""

    __slots__ = ("bounds", "first", "lock", "pre", "snapshots")

    def __init__(self, first: Any) -> None:
        self.first = first
        self.snapshots: List[Any] = []
        self.pre: List[int] = [0]
        self.bounds: List[int] = [0]
        self.lock = threading.Lock()

    def unchanged_prefix(self, messages: List[Any]) -> int:
        known = len(self.snapshots)
        if len(messages) >= known and _same(messages[:known], self.snapshots):
            return known
        # Binary search on prefix equality, comparing each message at most about twice.
        lo, hi = 0, min(known, len(messages))
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if _same(messages[lo:mid], self.snapshots[lo:mid]):
                lo = mid
            else:
                hi = mid - 1
        return lo

    def update(
        self, messages: List[Any], count_tokens: Optional[CountTokens]
    ) -> Tuple[List[int], List[int]]:
        keep = self.unchanged_prefix(messages)
        regroup_at = regroup_from(messages, self.bounds, keep)
        start = self.bounds[regroup_at]
        # Grouped and counted as the core does: through the messages' mapping views.
        views = message_views(messages, start)
        bounds = group_bounds(views, start)
        counts = count_all(views, count_tokens, keep)
        snapshots = [_snapshot(m) for m in messages[keep:]]
        # Validation and counting succeeded: now change the line, all at once.
        del self.bounds[regroup_at:]
        self.bounds.extend(bounds)
        del self.snapshots[keep:]
        self.snapshots.extend(snapshots)
        del self.pre[keep + 1 :]
        sums = accumulate(counts, initial=self.pre[keep])
        next(sums)
        self.pre.extend(sums)
        return self.pre[:], self.bounds[:]


class CountCache:
    """Token counts and group boundaries remembered across calls, for one counter.

    Args:
        count_tokens: The counter every figure in this cache comes from.
        conversations: How many conversations (told apart by their first
            message object) are remembered at once; the least recently used
            is forgotten first.
    """

    def __init__(self, count_tokens: Optional[CountTokens], conversations: int = 8) -> None:
        self.count_tokens = count_tokens
        self._conversations = conversations
        self._lines: OrderedDict[int, _Line] = OrderedDict()
        self._lock = threading.Lock()

    def arrays(self, messages: List[Any]) -> Tuple[List[int], List[int]]:
        """Prefix token sums and group boundaries of ``messages``, as computed from scratch.

        Raises:
            InvalidMessageError: As ``compact`` would, naming the message index.
        """
        if not messages:
            return measure(messages, self.count_tokens)
        first = messages[0]
        with self._lock:
            line = self._lines.get(id(first))
            if line is None or line.first is not first:
                line = _Line(first)
                self._lines[id(first)] = line
                while len(self._lines) > self._conversations:
                    self._lines.popitem(last=False)
            else:
                self._lines.move_to_end(id(first))
        with line.lock:
            return line.update(messages, self.count_tokens)
