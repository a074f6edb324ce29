"""The step rule of ``target_tokens``: a reduction that is a function of the history alone.

The reduction is what one process would have made had it been called after every message of
the history, remembering its cut in between (docs/prompt-cache.md). It is read from the prefix
sums alone, so every process makes the same one, and it stands until the history has grown by
more than one step, ``max_tokens - target_tokens``. It *began* at the prefix that made it.
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
