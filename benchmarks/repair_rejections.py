"""How many generated broken histories the testing kit's validators reject before and after repair.

    python benchmarks/repair_rejections.py [--examples 500]

The histories are the property tests' (tests/test_repair.py: unanswered and parallel calls,
orphaned results, results out of place, reasoning items without their follower, legacy function
pairs, Gemini calls without ids, Bedrock roles out of order), drawn by hypothesis derandomized,
so a run prints the same figures every time. For each format and each way of settling an
unanswered call (dropped, or answered with the placeholder), it prints how many histories the
kit's validator for that provider rejects as they are, and after ``repair_pairing``. The exit
status is 1 when any repaired history is still rejected.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Dict, List, Tuple

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from hypothesis import HealthCheck, given, settings  # noqa: E402
from test_repair import FORMATS  # noqa: E402

from ctx_compact import repair_pairing  # noqa: E402


def measure(name: str, answer: bool, examples: int) -> Tuple[int, int, int]:
    """``(histories, rejected before, rejected after)`` for one format."""
    histories, rejects = FORMATS[name]
    counts = [0, 0, 0]

    @settings(
        max_examples=examples,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(histories)
    def run(history: List[Dict[str, object]]) -> None:
        counts[0] += 1
        counts[1] += rejects(history)
        counts[2] += rejects(repair_pairing(history, answer_unanswered=answer).messages)

    run()
    return counts[0], counts[1], counts[2]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=500, help="histories per format and mode")
    args = parser.parse_args()
    print(f"{'format':<10} {'calls':<8} {'histories':>9} {'rejected before':>16} {'after':>6}")
    still = 0
    for name in FORMATS:
        for answer in (False, True):
            total, before, after = measure(name, answer, args.examples)
            still += after
            mode = "answered" if answer else "dropped"
            print(f"{name:<10} {mode:<8} {total:>9} {before:>16} {after:>6}")
    return 1 if still else 0


if __name__ == "__main__":
    sys.exit(main())
