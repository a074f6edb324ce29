"""The step rule of ``target_tokens``: a reduction that is a function of the history alone.

Compacting to ``max_tokens`` afresh on every call takes a little more off the
front of a growing history each time, so the prompt's prefix changes on almost
every call and the provider's prompt cache misses. With ``target_tokens`` the
reduction is what one process would have made had it been called after every
message of the history, remembering its cut in between: nothing is taken off
while the history fits; the first prefix of the history that is over
``max_tokens`` loses enough to come down to ``target_tokens``; that reduction
stands until a longer prefix is over ``max_tokens`` again with it, which then
comes down to ``target_tokens`` in its turn; and so on to the whole history.

The walk reads the prefix sums of the messages' counts alone, so every process
given the same history makes the same reduction, with no memory between calls;
and each reduction stands until the history has grown by more than one *step*,
``max_tokens - target_tokens``, since it was made (more by the part of the
message that crossed the budget). A history's reduction *began* at the prefix that
made it: the history as it was when the current cut (or clearing) was first
made. What is cleared for a reduction is chosen from that prefix alone, so that
it does not change while the reduction stands.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from typing import NamedTuple, Optional, Sequence


def step_size(max_tokens: float, target_tokens: Optional[float]) -> Optional[float]:
    """``max_tokens - target_tokens``, or ``None`` without a target (the specification's rule)."""
    if target_tokens is None:
        return None
    return max(max_tokens - target_tokens, 0)


def whole_steps(excess: float, step: float) -> float:
    """The smallest multiple of ``step`` that is at least ``excess`` (0 if none is over).

    Never less than ``excess``, whatever the float rounding; ``excess`` itself
    for a zero step.
    """
    if excess <= 0:
        return 0
    if step <= 0:
        return excess
    return max(max(math.ceil(excess / step), 1) * step, excess)


class Steps(NamedTuple):
    """The step rule's reduction of one history.

    Attributes:
        reduction: The tokens the history loses (0 while it fits); never less
            than its excess over ``max_tokens``, so what is left always fits.
        began: The length of the prefix of the history that made the
            reduction (``len(pre) - 1`` when the history fits).
    """

    reduction: float
    began: int


def steps(pre: Sequence[int], max_tokens: float, step: float) -> Steps:
    """The reduction of the history whose prefix sums are ``pre`` (see the module).

    Args:
        pre: The prefix sums of the messages' token counts (``pre[0] == 0``).
        max_tokens: The budget.
        step: ``step_size(max_tokens, target_tokens)``: the reduction brings a
            prefix over the budget down to ``max_tokens - step``.

    A zero step is the specification's rule: the reduction is the excess itself.
    Each reduction is found by bisection, so the walk costs a logarithm per
    change of the cut, not a pass over the messages.
    """
    last = len(pre) - 1
    if pre[last] <= max_tokens:
        return Steps(0, last)
    if step <= 0:
        return Steps(pre[last] - max_tokens, min(bisect_right(pre, max_tokens), last))
    target = max_tokens - step
    taken: float = 0
    began = last
    at = 1
    while True:
        # The first prefix after ``at`` over the budget once ``taken`` is off; the
        # comparison has the last word, so float rounding cannot move it a message.
        end = max(bisect_right(pre, max_tokens + taken, at), at)
        while end > at and pre[end - 1] - taken > max_tokens:
            end -= 1
        while end <= last and not pre[end] - taken > max_tokens:
            end += 1
        if end > last:
            break
        taken = pre[end] - target
        began = end
        at = end + 1
    return Steps(max(taken, pre[last] - max_tokens), began)
