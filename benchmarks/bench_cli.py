"""Time the ``ctx-compact --jsonl`` command against the floor of any JSONL rewrite.

No command that reads and rewrites a JSONL dataset of conversations can beat
parsing each line, serialising each message once (which is what the default
token estimator costs) and writing the line back. This script generates
realistic agent conversations (20 to 400 messages each: a system prompt, user
turns, assistant messages with parallel tool calls and their JSON results,
reasoning-sized replies, some non-ASCII text) into a temporary directory, times
that floor with the standard library, then the command itself, each in a
fresh process, and prints the ratios measured in the same run:

- the command with the standard library over the floor;
- the command with orjson over the same floor, when orjson is installed;
- ``--jobs 2`` over ``--jobs 1`` in throughput (a shared, loaded machine
  depresses it), beside what two separate one-process runs started at once give
  (about the most any two processes get from these cores at that moment);
- peak memory (maximum resident set size of the command's process) at N and 10N
  conversations.

The floor and the command are compared in CPU seconds (user + system), which a
machine shared with other work disturbs less than wall time; ``--jobs`` can only
be compared in wall time, so that ratio needs idle cores to mean anything. All
of them run in turns, round after round, and each one's best is kept, so a
machine whose speed drifts over minutes favours none of them.
Everything runs in fresh processes, so interpreter start-up and imports count:
use enough conversations that they do not dominate.

Run from the repository root::

    python benchmarks/bench_cli.py --quick     # 600 conversations (97 MiB); memory at 100 and 1,000
    python benchmarks/bench_cli.py             # 10,000 conversations; memory at 10,000 and
                                               # 100,000 (a 16 GB file: needs the disk, and hours)
    python benchmarks/bench_cli.py --small     # 80,000 conversations of 3 to 36 messages
                                               # (bench_engines.py's); memory at 8,000 and 80,000

The exit status is 0 whatever the figures: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parent.parent

WORDS = (
    "the", "request", "returned", "a", "result", "from", "cache", "index", "while", "vector",
    "search", "ranked", "each", "token", "budget", "query", "against", "recent", "context",
    "window", "and", "planner", "retried", "with", "backoff", "after", "timeout", "so", "worker",
    "wrote", "its", "report", "to", "storage", "rows", "errors", "latency", "deploy", "branch",
    "merge", "commit", "test", "failed", "passed", "file", "line", "function", "module", "import",
    "config", "value",
)  # fmt: skip
ACCENTED = ["café", "naïve", "façade", "über", "señor", "déjà-vu", "crème", "東京", "München"]
TOOLS = ["read_file", "run_tests", "search_code", "list_dir", "http_get", "sql_query"]

Message = Dict[str, Any]


def text(rng: random.Random, words: int) -> str:
    picked = [rng.choice(WORDS) for _ in range(words)]
    if picked and rng.random() < 0.2:
        picked[rng.randrange(len(picked))] = rng.choice(ACCENTED)
    return " ".join(picked)


def tool_result(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.4:  # a file or a log excerpt
        lines = [f"{n:4d}  {text(rng, rng.randint(3, 12))}" for n in range(rng.randint(5, 60))]
        return "\n".join(lines)
    if kind < 0.8:  # rows from a query or an API
        rows = [
            {"id": rng.randint(1, 10**6), "name": text(rng, 2), "score": round(rng.random(), 4)}
            for _ in range(rng.randint(1, 25))
        ]
        return json.dumps({"status": "ok", "rows": rows})
    return json.dumps({"error": text(rng, rng.randint(4, 15)), "code": rng.randint(400, 599)})


def conversation(rng: random.Random) -> Message:
    target = rng.randint(20, 400)
    messages: List[Message] = [{"role": "system", "content": text(rng, rng.randint(30, 120))}]
    call = 0
    while len(messages) < target:
        messages.append({"role": "user", "content": text(rng, rng.randint(5, 60))})
        for _ in range(rng.randint(0, 4)):
            calls = []
            for _ in range(rng.randint(1, 3)):
                call += 1
                arguments = {"path": f"src/{rng.choice(WORDS)}.py", "limit": rng.randint(1, 99)}
                calls.append(
                    {
                        "id": f"call_{call:06d}",
                        "type": "function",
                        "function": {
                            "name": rng.choice(TOOLS),
                            "arguments": json.dumps(arguments),
                        },
                    }
                )
            thought = text(rng, rng.randint(0, 25)) or None
            messages.append({"role": "assistant", "content": thought, "tool_calls": calls})
            for one in calls:
                messages.append(
                    {"role": "tool", "tool_call_id": one["id"], "content": tool_result(rng)}
                )
        messages.append({"role": "assistant", "content": text(rng, rng.randint(10, 150))})
    return {"id": rng.randint(1, 10**9), "messages": messages}


def write_dataset(path: Path, count: int, seed: int) -> None:
    """``count`` conversations, one per line; a pool of 200 is cycled to keep generation quick."""
    rng = random.Random(seed)
    pool = [
        json.dumps(conversation(rng), ensure_ascii=False).encode("utf-8") + b"\n"
        for _ in range(min(count, 200))
    ]
    with path.open("wb") as out:
        for n in range(count):
            out.write(pool[n % len(pool)])


def write_small_dataset(path: Path, count: int, seed: int) -> None:
    """``count`` lines of bench_engines.py's dataset: 3 to 36 messages, arrays and objects."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_engines
    finally:
        sys.path.pop(0)
    bench_engines.write_dataset(path, count, seed)


FLOOR = """
import json, sys
encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
with open(sys.argv[1], "rb") as data, open(sys.argv[2], "wb") as out:
    for line in data:
        value = json.loads(line)
        for message in value if type(value) is list else value["messages"]:
            encoder.encode(message)
        out.write(encoder.encode(value).encode("utf-8") + b"\\n")
"""


def run(command: Sequence[str], env: Optional[Dict[str, str]] = None) -> Tuple[float, float]:
    """Wall seconds and CPU seconds (user + system, its workers included) of one child."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def together(commands: Sequence[Sequence[str]]) -> float:
    """Wall seconds until every one of ``commands``, all started at once, has finished."""
    started = time.perf_counter()
    children = [subprocess.Popen(command, stdout=subprocess.DEVNULL) for command in commands]
    for child, command in zip(children, commands):
        if child.wait() != 0:
            raise subprocess.CalledProcessError(child.returncode, list(command))
    return time.perf_counter() - started


def peak_rss(command: Sequence[str]) -> int:
    """Peak RSS (KiB) of one run, measured in a child so earlier children do not count."""
    probe = (
        "import resource, subprocess, sys;"
        "subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=False);"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, *command], capture_output=True, check=True, text=True
    )
    return int(done.stdout.strip())


def has_orjson() -> bool:
    try:
        import orjson  # noqa: F401
    except ImportError:
        return False
    return True


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, three rounds")
    parser.add_argument(
        "--small",
        action="store_true",
        help="small conversations (3 to 36 messages, bench_engines.py's), 80,000 by default",
    )
    parser.add_argument("--conversations", type=int, default=None)
    parser.add_argument("--repeat", type=int, default=None, help="rounds (at least 3)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-tokens", default="8000")
    parser.add_argument(
        "--memory",
        default=None,
        help="the two dataset sizes whose peak memory is compared, e.g. 1000,10000"
        " (default: 100,1000 with --quick, else 10000,100000)",
    )
    args = parser.parse_args(argv)
    count = args.conversations or (600 if args.quick else 80_000 if args.small else 10_000)
    rounds = max(args.repeat or 3, 3)
    memory = args.memory or (
        "100,1000" if args.quick else "8000,80000" if args.small else "10000,100000"
    )
    write = write_small_dataset if args.small else write_dataset
    small, large = (int(n) for n in memory.split(","))
    memory_counts = (small, large)

    with tempfile.TemporaryDirectory(prefix="bench_cli.") as tmp:
        directory = Path(tmp)
        data = directory / "data.jsonl"
        write(data, count, args.seed)
        size = data.stat().st_size
        out = str(directory / "out.jsonl")
        cli = [sys.executable, "-m", "ctx_compact", "--jsonl", "--max-tokens", args.max_tokens]
        cli += ["--no-progress", "-o", out, str(data)]
        stdlib_env = dict(os.environ, CTX_COMPACT_JSON="stdlib")
        print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load {os.getloadavg()}")
        print(f"{count} conversations, {size / 2**20:.1f} MiB, best of {rounds} rounds")

        # A shared machine's speed drifts by a third over minutes, so nothing is timed
        # in a block of its own: every round runs the floor, the command with each
        # backend, --jobs 2, and two separate one-process runs started at once (what
        # these two cores give any pair of processes), and each one's best is kept.
        fast = has_orjson()
        alone = [*cli[:-3], "--jobs", "1", "-o"]
        timed: Dict[str, List[Tuple[float, float]]] = {}
        for _ in range(rounds):
            for label, command, env in (
                ("floor", [sys.executable, "-c", FLOOR, str(data), out], None),
                ("stdlib", [*cli, "--jobs", "1"], stdlib_env),
                ("one", [*cli, "--jobs", "1"], None),  # orjson when installed
                ("two", [*cli, "--jobs", "2"], None),
            ):
                timed.setdefault(label, []).append(run(command, env))
            both = together([[*alone, f"{out}.{k}", str(data)] for k in (1, 2)])
            timed.setdefault("both", []).append((both, math.nan))
        wall = {label: min(w for w, _ in runs) for label, runs in timed.items()}
        cpu = {label: min(c for _, c in runs) for label, runs in timed.items()}

        print(f"{'':46}{'wall':>8}  {'CPU':>8}  CPU ratio")
        print(f"{'floor (parse, dump each message, write back)':46}{wall['floor']:8.2f}"
              f"  {cpu['floor']:8.2f}")  # fmt: skip
        print(
            f"{'ctx-compact, standard library':46}{wall['stdlib']:8.2f}  {cpu['stdlib']:8.2f}"
            f"  {cpu['stdlib'] / cpu['floor']:5.2f}x floor"
        )
        if fast:
            print(
                f"{'ctx-compact, orjson':46}{wall['one']:8.2f}  {cpu['one']:8.2f}"
                f"  {cpu['one'] / cpu['floor']:5.2f}x floor"
            )
        else:
            print("ctx-compact, orjson: not installed (pip install orjson)")
        one, two, both = wall["one"], wall["two"], wall["both"]
        print(
            f"{'ctx-compact --jobs 2':46}{two:8.2f}  {cpu['two']:8.2f}"
            f"  throughput {one / two:4.2f}x --jobs 1 ({one:.2f} s; wall, best of each)"
        )
        print(
            f"{'two separate --jobs 1 runs at once':46}{both:8.2f}  {'':8}"
            f"  throughput {2 * one / both:4.2f}x one run: what these two cores give any two"
            f" processes (--jobs 2 reaches {one / two / (2 * one / both):.0%} of it)"
        )

        peaks = []
        for n in memory_counts:
            write(data, n, args.seed)
            peaks.append(peak_rss([*cli, "--jobs", "1"]))
        ratio = peaks[1] / peaks[0]
        print(
            f"peak RSS: {peaks[0] / 1024:.1f} MiB at {memory_counts[0]} conversations, "
            f"{peaks[1] / 1024:.1f} MiB at {memory_counts[1]} ({ratio:.2f}x)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
