"""Time the media-aware count of two checkouts in one process (issue 22's before and after).

On a shared, loaded machine two runs of ``bench_media.py`` differ by 30% or more,
so a before/after figure taken from separate runs says little. This script loads
a second copy of the package (``git archive <commit> ctx_compact | tar -x -C DIR``)
beside the installed one, times both counters on ``bench_media.py``'s messages,
round after round, each message by both versions back to back, keeps each best,
and checks that both give the same counts.

Run from the repository root::

    mkdir /tmp/before && git archive 8b4c812 ctx_compact | tar -x -C /tmp/before
    python benchmarks/media_before_after.py /tmp/before/ctx_compact --rounds 9

Standard library only.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any, Dict, List, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_media

import ctx_compact

TEXT = "text, 1 KB (Chat)"


def load(name: str, path: Path) -> ModuleType:
    """The package at ``path`` imported as ``name`` (its own imports are relative)."""
    spec = importlib.util.spec_from_file_location(
        name, path / "__init__.py", submodule_search_locations=[str(path)]
    )
    if spec is None or spec.loader is None:
        raise SystemExit(f"no package at {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path, help="the other checkout's ctx_compact directory")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--loops", type=int, default=3000)
    args = parser.parse_args(argv)
    before = load("ctx_compact_before", args.before.resolve())
    counters = {"before": before.media_aware_counter(), "after": ctx_compact.media_aware_counter()}
    messages = bench_media.messages()
    for name, message in messages.items():
        if counters["before"](message) != counters["after"](message):
            print(f"the counts differ on {name!r}")
            return 1
    best: Dict[Tuple[str, str], float] = {(w, k): float("inf") for w in counters for k in messages}
    for _ in range(args.rounds):
        for name, message in messages.items():
            for which, count in counters.items():
                start = time.process_time()
                for _ in range(args.loops):
                    count(message)
                took = (time.process_time() - start) / args.loops
                best[which, name] = min(best[which, name], took)
    print(f"ctx-compact {ctx_compact.__version__} (after) against {args.before} (before)")
    print(f"{'message':<42} {'tokens':>7} {'before':>8} {'after':>8}  us per count, best")
    count: Any = counters["after"]
    for name, message in messages.items():
        b, a = best["before", name] * 1e6, best["after", name] * 1e6
        print(f"{name:<42} {count(message):>7} {b:>8.2f} {a:>8.2f}")
    for which in counters:
        text = best[which, TEXT]
        worst = max(v for (w, k), v in best.items() if w == which and "MB" in k)
        print(f"{which}: slowest 1 MB photo / 1 KB text {worst / text:.2f}x (target <= 1.0x)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
