"""repair_pairing does linear work on any broken history: ten times the messages, about ten
times the work, never a hundred (tests/broken_histories.py holds the shapes).

Work is counted, not timed: the lines of Python run (``sys.settrace``) and the comparisons of
call ids, whose ``==`` counts itself (a scan of a list of ids is one line of Python, but it
compares every id in it; a set or dict lookup compares none, or one).
benchmarks/bench_repair_growth.py prints the same counts, and the time taken, up to 100,000
messages.
"""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any, Callable, Optional

import pytest
from broken_histories import SHAPES

from ctx_compact import check_pairing, repair_pairing

SMALL, LARGE = 300, 3_000
# Linear work grows 10x from SMALL to LARGE (a little more where the repair of the small
# history is mostly fixed costs); quadratic work grows 100x. From 300 messages on, the
# work per message outweighs the fixed costs: the quadratic repairs this test was written
# against already grew 29x and more from 300 to 3,000.
MOST_GROWTH = 14


class CountedId(str):
    """A call id that counts how often it is compared."""

    compared = 0

    def __eq__(self, other: object) -> bool:
        CountedId.compared += 1
        return str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        CountedId.compared += 1
        return str.__ne__(self, other)

    __hash__ = str.__hash__


Tracer = Callable[[FrameType, str, Any], Optional[Callable[..., Any]]]


def work(shape: str, n: int) -> int:
    """Lines run and ids compared by ``repair_pairing`` on the shape at ``n`` messages."""
    messages, answer = SHAPES[shape](n, CountedId)
    lines = 0

    def line(frame: FrameType, event: str, arg: Any) -> Tracer:
        nonlocal lines
        if event == "line":
            lines += 1
        return line

    def call(frame: FrameType, event: str, arg: Any) -> Tracer:
        return line

    CountedId.compared = 0
    sys.settrace(call)
    try:
        result = repair_pairing(messages, answer_unanswered=answer)
    finally:
        sys.settrace(None)
    assert result.changes
    assert check_pairing(result.messages) == []
    return lines + CountedId.compared


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_ten_times_the_messages_is_about_ten_times_the_work(shape: str) -> None:
    small, large = work(shape, SMALL), work(shape, LARGE)
    assert large <= MOST_GROWTH * small, f"{large / small:.1f}x the work for 10x the messages"
