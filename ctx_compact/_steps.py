"""The step rule of ``target_tokens``: reductions on a fixed grid of the history's own token count.

Compacting to ``max_tokens`` afresh on every call takes a little more off the
front of a growing history each time, so the prompt's prefix changes on almost
every call and the provider's prompt cache misses. With ``target_tokens``, the
reduction is rounded up to a whole number of steps, ``step = max_tokens -
target_tokens``: a history ``excess`` tokens over the budget loses the smallest
multiple of ``step`` that is at least ``excess``. The reduction depends on the
history alone, so every process makes it the same, and it grows only when the
history has grown by one more step; meanwhile the history keeps the same cut
(and the same cleared results), and so the same prefix.

A history's *step* is that multiple's factor ``k``; the step *began* at the
shortest prefix of the history with the same ``k``: the history as it was when
the current cut (or clearing) was first made. What is cleared in a step is
chosen from that prefix alone, so that it does not change while the step stands.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from typing import Optional, Sequence


def step_size(max_tokens: float, target_tokens: Optional[float]) -> Optional[float]:
    """``max_tokens - target_tokens``, or ``None`` without a target (the specification's rule)."""
    if target_tokens is None:
        return None
    return max(max_tokens - target_tokens, 0)


def step_of(excess: float, step: float) -> int:
    """The number of steps a history ``excess`` tokens over its budget is reduced by (0 if none)."""
    if excess <= 0:
        return 0
    if step <= 0:
        return 1
    return max(math.ceil(excess / step), 1)


def reduction(excess: float, step: Optional[float]) -> float:
    """The tokens to take off a history ``excess`` tokens over its budget.

    Without a step (or a zero one) it is ``excess`` itself; with one it is the
    smallest multiple of ``step`` that is at least ``excess``. Never less than
    ``excess``, whatever the float rounding, so the result always fits.
    """
    if excess <= 0:
        return 0
    if step is None or step <= 0:
        return excess
    return max(step_of(excess, step) * step, excess)


def step_began(pre: Sequence[int], max_tokens: float, step: float) -> int:
    """The length of the shortest prefix of the history in the history's own step.

    Args:
        pre: The prefix sums of the messages' token counts.
        max_tokens: The budget.
        step: ``step_size(max_tokens, target_tokens)``.

    Returns:
        The smallest ``n`` such that ``pre[n]`` is over the budget by the same
        number of steps as ``pre[-1]``; ``len(pre) - 1`` when the history fits.
    """
    last = len(pre) - 1
    k = step_of(pre[last] - max_tokens, step)
    if k == 0:
        return last
    # The threshold finds the spot; step_of has the last word, so that float
    # rounding cannot put the answer one message off from what step_of says.
    i = min(bisect_right(pre, max_tokens + (k - 1) * step), last)
    while i > 0 and step_of(pre[i - 1] - max_tokens, step) == k:
        i -= 1
    while step_of(pre[i] - max_tokens, step) != k:
        i += 1
    return i
