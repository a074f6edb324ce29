"""How large and how complex the library is, outside the testing kit.

The library is ``ctx_compact/`` without ``ctx_compact/testing/``, and ``middleware/``.
This script prints its lines in all and per module (largest first), then the blocks
(functions, methods, classes) radon ranks C and those it ranks D or worse, listing the
latter. The ranks are radon's cyclomatic complexity ranks, the same as
``radon cc -s -n C ctx_compact middleware -e "ctx_compact/testing/*"`` shows.

Run from the repository root::

    python benchmarks/code_size.py

Lines need only the standard library; the ranks need radon (``pip install radon``):
without it the script prints the lines, says so and exits with status 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import List, Tuple

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("ctx_compact", "middleware")
EXCLUDED = ROOT / "ctx_compact" / "testing"


def modules(root: Path) -> List[Path]:
    """The library's Python files, the testing kit left out."""
    found = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            if EXCLUDED not in path.parents:
                found.append(path)
    return found


def lines_of(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def print_lines(paths: List[Path], root: Path) -> None:
    counts = sorted(((lines_of(p), p.relative_to(root).as_posix()) for p in paths), reverse=True)
    print(f"lines: {sum(n for n, _ in counts):,} in {len(counts)} modules")
    for n, name in counts:
        print(f"  {n:>6,}  {name}")


def print_ranks(paths: List[Path], root: Path) -> int:
    try:
        from radon.complexity import cc_rank, cc_visit
    except ImportError:
        print("\nradon is not installed: pip install radon, then run this again", file=sys.stderr)
        return 2
    ranked: List[Tuple[str, str, int]] = []  # (rank, "module:line name", complexity)
    for path in paths:
        for block in cc_visit(path.read_text(encoding="utf-8")):
            rank = cc_rank(block.complexity)
            if rank >= "C":
                where = f"{path.relative_to(root).as_posix()}:{block.lineno} {block.fullname}"
                ranked.append((rank, where, block.complexity))
    worse = sorted((b for b in ranked if b[0] >= "D"), key=lambda b: -b[2])
    print(f"\nradon: {sum(b[0] == 'C' for b in ranked)} blocks ranked C, {len(worse)} D or worse")
    for rank, where, complexity in worse:
        print(f"  {rank} ({complexity:>2})  {where}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args()
    paths = modules(ROOT)
    print_lines(paths, ROOT)
    return print_ranks(paths, ROOT)


if __name__ == "__main__":
    sys.exit(main())
