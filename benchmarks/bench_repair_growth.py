"""How repair_pairing's work grows with the length of a broken history: linearly, in every shape.

    python benchmarks/bench_repair_growth.py [--sizes 1000,10000,100000] [--shape NAME ...]
    python benchmarks/bench_repair_growth.py --no-count

The histories are tests/broken_histories.py's shapes: each puts many calls, results, turns or
reasoning items where one repair step meets all the others. For each shape and size it prints the
work counted (the lines of Python run, under ``sys.settrace``, plus the comparisons of call ids,
made with a ``str`` that counts its ``==``), the time taken without the tracer (best of three,
``time.perf_counter``), and the growth of each from one size to the next: linear work grows as
the size does (10x for 10x), quadratic work as its square (100x). tests/test_repair_growth.py
holds the growth from 1,000 to 10,000 messages under 14x.

Counting under the tracer is slow: at the default sizes a run takes several minutes, most of it
counting the 100,000-message histories; ``--no-count`` times alone. The exit status is 0
whatever the figures: they are printed, not asserted.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any, Callable, Optional, Sequence

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from broken_histories import SHAPES  # noqa: E402

from ctx_compact import check_pairing, repair_pairing  # noqa: E402


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
        repair_pairing(messages, answer_unanswered=answer)
    finally:
        sys.settrace(None)
    return lines + CountedId.compared


def seconds(shape: str, n: int) -> float:
    """The best of three runs of ``repair_pairing`` on the shape at ``n`` messages."""
    messages, answer = SHAPES[shape](n, str)
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        result = repair_pairing(messages, answer_unanswered=answer)
        best = min(best, time.perf_counter() - start)
    if check_pairing(result.messages):
        raise SystemExit(f"{shape} at {n}: the repaired history still has pairing problems")
    return best


def growth(figures: Sequence[float]) -> str:
    return " ".join(f"{b / a:6.1f}x" for a, b in zip(figures, figures[1:]) if a)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="history lengths")
    parser.add_argument("--shape", action="append", choices=sorted(SHAPES), help="only these")
    parser.add_argument("--no-count", action="store_true", help="time only, no tracer")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    shown = ",".join(f"{size:,}" for size in sizes)
    print(f"{'shape':<52} {'work at ' + shown:>34} {'growth':>16} {'seconds':>22} {'growth':>16}")
    for shape in args.shape or sorted(SHAPES):
        counted = [] if args.no_count else [work(shape, n) for n in sizes]
        timed = [seconds(shape, n) for n in sizes]
        count_text = " ".join(f"{c:>11,}" for c in counted)
        time_text = " ".join(f"{t:>7.3f}" for t in timed)
        print(
            f"{shape:<52} {count_text:>34} {growth(counted):>16} {time_text:>22} "
            f"{growth(timed):>16}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
