"""Time ``compact`` and ``compact_with_summary`` against a ``json.dumps`` floor.

The default estimator serialises every message once, so no implementation can
beat one ``json.dumps(m, separators=(",", ":"), ensure_ascii=False)`` per
message. This script builds long, tool-heavy conversations, times that floor
and the two public functions on them, and prints the ratios and whether the
time per message stays constant across sizes. Nothing is asserted: the exit
status is 0 whatever the figures.

Run from the repository root::

    python benchmarks/bench_core.py
    python benchmarks/bench_core.py --sizes 1000,10000,100000 --repeat 5 --seed 0
    python benchmarks/bench_core.py --sizes 10000,100000 --clock cpu

Standard library only. See benchmarks/README.md for what the figures mean.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import platform
import random
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

try:
    import ctx_compact
except ImportError:  # a checkout that was never installed: use the sources beside us
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import ctx_compact

Message = Dict[str, Any]

# The estimator's settings, as the specification states them.
SEPARATORS = (",", ":")

CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
# Per-message time at the largest size over the smallest, beyond what the floor
# itself shows (memory effects slow the floor down too), still counted as linear.
LINEARITY_SLACK = 1.25
# Each timed repeat covers at least this many messages (small sizes loop), so
# that a 1,000-message run is not timed from a single ~millisecond call.
MIN_MESSAGES_PER_REPEAT = 100_000

ASCII_WORDS = (
    "the", "request", "returned", "a", "result", "from", "cache", "index", "while",
    "vector", "search", "ranked", "each", "token", "budget", "query", "against", "recent",
    "context", "window", "and", "planner", "retried", "with", "backoff", "after", "timeout",
    "so", "worker", "wrote", "its", "report", "to", "storage", "rows", "errors", "latency",
)  # fmt: skip
ACCENTED_WORDS = (
    "café", "naïve", "façade", "über", "Ærøskøbing", "señor", "déjà-vu", "crème", "brûlée",
    "Zürich", "São", "Paulo", "Kraków", "Øresund", "fiancée", "résumé", "jalapeño", "Ångström",
)  # fmt: skip
CJK_WORDS = ("東京", "大阪", "数据", "検索結果", "文件", "用户", "한국어", "서울", "天气", "注文")
# Astral-plane emoji (two UTF-16 units each), a skin-tone modifier, a flag, a ZWJ sequence.
EMOJI_WORDS = ("🚀", "✅", "🔥", "👍🏽", "🇫🇷", "📦", "🧪", "⚠️", "😀", "👩\u200d💻", "🐍")
TOOL_NAMES = ("search_docs", "read_file", "run_sql", "get_weather", "http_get", "list_dir")

NON_ASCII_SHARE = 0.25  # of the messages whose text comes from the mixed corpus
CORPUS_CHARS = 16_000  # longer than any slice taken from it
# Tool rounds per user turn (0, 1, 2, 3) and their weights: most turns call tools.
ROUND_WEIGHTS = (0.2, 0.35, 0.3, 0.15)


class Corpus:
    """Two long texts (ASCII, and mixed with accented Latin, CJK and emoji) to slice from."""

    def __init__(self, rng: random.Random) -> None:
        self.ascii = self._build(rng, [(ASCII_WORDS, 1.0)])
        self.mixed = self._build(
            rng,
            [(ASCII_WORDS, 0.6), (ACCENTED_WORDS, 0.2), (CJK_WORDS, 0.12), (EMOJI_WORDS, 0.08)],
        )

    @staticmethod
    def _build(rng: random.Random, pools: Sequence[tuple[Sequence[str], float]]) -> str:
        words = [w for pool, _ in pools for w in pool]
        weights = [share / len(pool) for pool, share in pools for _ in pool]
        parts: List[str] = []
        size = 0
        while size < CORPUS_CHARS:
            word = rng.choices(words, weights)[0]
            parts.append(word)
            size += len(word) + 1
        return " ".join(parts)

    def text(self, rng: random.Random, length: int) -> str:
        """``length`` characters, non-ASCII in about ``NON_ASCII_SHARE`` of the calls."""
        source = self.mixed if rng.random() < NON_ASCII_SHARE else self.ascii
        start = rng.randrange(len(source) - length)
        return source[start : start + length]


def log_uniform(rng: random.Random, low: int, high: int) -> int:
    """An int in ``[low, high]``, spread evenly over orders of magnitude."""
    return min(high, max(low, round(math.exp(rng.uniform(math.log(low), math.log(high))))))


def compact_json(value: object) -> str:
    return json.dumps(value, separators=SEPARATORS, ensure_ascii=False)


def tool_payload(rng: random.Random, corpus: Corpus, length: int) -> str:
    """A JSON document of exactly ``length`` characters (``length >= 20``)."""
    shape = rng.random()
    if shape < 0.3 and length >= 200:
        rows: List[Dict[str, Any]] = [
            {"id": rng.randrange(10**6), "name": "", "score": round(rng.random(), 3)}
            for _ in range(max(1, length // 160))
        ]
        spare = length - len(compact_json({"rows": rows}))
        for i, row in enumerate(rows):
            row["name"] = corpus.text(rng, spare // len(rows) + (i < spare % len(rows)))
        body: Dict[str, Any] = {"rows": rows}
    elif shape < 0.4 and length >= 40:
        code = rng.choice((400, 404, 429, 500))
        spare = length - len(compact_json({"error": {"code": code, "message": ""}}))
        body = {"error": {"code": code, "message": corpus.text(rng, spare)}}
    else:
        body = {"result": corpus.text(rng, length - len(compact_json({"result": ""})))}
    return compact_json(body)


def build_conversation(size: int, seed: int) -> List[Message]:
    """A deterministic, tool-heavy conversation of exactly ``size`` messages.

    A system prompt, then turns of: a user message, zero to three tool rounds
    (an assistant message with one to three parallel ``tool_calls``, then one
    ``tool`` result per call, each a JSON payload of 20 to 2,000 characters),
    and an assistant reply. A round that would not fit in the remaining slots
    is skipped, so every exchange is complete.
    """
    rng = random.Random(seed)
    corpus = Corpus(rng)
    messages: List[Message] = [{"role": "system", "content": corpus.text(rng, 1500)}]
    call_number = 0
    while len(messages) < size:
        messages.append({"role": "user", "content": corpus.text(rng, log_uniform(rng, 20, 600))})
        rounds = rng.choices(range(len(ROUND_WEIGHTS)), ROUND_WEIGHTS)[0]
        for _ in range(rounds):
            calls = rng.randint(1, 3)
            if size - len(messages) < 1 + calls:
                break
            tool_calls = []
            for _ in range(calls):
                call_number += 1
                arguments = {"query": corpus.text(rng, log_uniform(rng, 5, 160))}
                tool_calls.append(
                    {
                        "id": f"call_{call_number:08x}",
                        "type": "function",
                        "function": {
                            "name": rng.choice(TOOL_NAMES),
                            "arguments": json.dumps(arguments, ensure_ascii=False),
                        },
                    }
                )
            preface = corpus.text(rng, log_uniform(rng, 20, 200)) if rng.random() < 0.2 else None
            messages.append({"role": "assistant", "content": preface, "tool_calls": tool_calls})
            for call in tool_calls:
                payload = tool_payload(rng, corpus, log_uniform(rng, 20, 2000))
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": payload})
        if len(messages) < size:
            reply = corpus.text(rng, log_uniform(rng, 40, 1500))
            messages.append({"role": "assistant", "content": reply})
    return messages


def digest(dropped: List[Message]) -> str:
    """The summarizer: one line per dropped message, its role and first 60 characters."""
    lines = []
    for message in dropped:
        content = message.get("content")
        lines.append(f"{message['role']}: {content[:60] if isinstance(content, str) else ''}")
    return "\n".join(lines)


def json_floor(messages: List[Message]) -> None:
    """The floor: one ``json.dumps`` per message, with the estimator's settings."""
    dumps = json.dumps
    for message in messages:
        dumps(message, separators=SEPARATORS, ensure_ascii=False)


def spec_tokens(message: Message) -> int:
    """The specification's estimator, written out from its definition."""
    text = json.dumps(message, separators=SEPARATORS, ensure_ascii=False)
    utf16_units = len(text.encode("utf-16-le", "surrogatepass")) // 2
    return -(-utf16_units // 4)


def best_of(
    tasks: Dict[str, Callable[[], object]], loops: int, repeat: int, clock: Callable[[], float]
) -> Dict[str, float]:
    """The best time of one call of each task, over ``repeat`` rounds of ``loops`` calls.

    The tasks are interleaved within each round so that drift in the machine's
    speed touches all of them alike. The garbage collector is off while a round
    is timed (and a collection runs before it), so that a collection triggered
    by earlier allocations is not charged to whichever task happens to be running.
    """
    best = dict.fromkeys(tasks, math.inf)
    for _ in range(repeat):
        for name, task in tasks.items():
            gc.collect()
            gc.disable()
            try:
                start = clock()
                for _ in range(loops):
                    task()
                elapsed = clock() - start
            finally:
                gc.enable()
            best[name] = min(best[name], elapsed / loops)
    return best


class SizeResult:
    """The figures for one conversation size."""

    def __init__(self, size: int, times: Dict[str, float], notes: str) -> None:
        self.size = size
        self.floor = times["floor"]
        self.compact = times["compact"]
        self.summary = times["summary"]
        self.notes = notes

    def per_message_us(self, seconds: float) -> float:
        return seconds / self.size * 1e6


def run_size(
    size: int, seed: int, repeat: int, budget_fraction: float, clock: Callable[[], float]
) -> SizeResult:
    messages = build_conversation(size, seed)
    counts = [ctx_compact.estimate_tokens(m) for m in messages]
    total = sum(counts)
    budget = max(1, int(total * budget_fraction))
    # Untimed checks: the floor's settings reproduce the library's counts, and
    # one call of each function does what the timed calls will do.
    floor_agrees = counts == [spec_tokens(m) for m in messages]
    plain = ctx_compact.compact(messages, max_tokens=budget)
    summed = ctx_compact.compact_with_summary(messages, max_tokens=budget, summarize=digest)
    if plain.tokens_before != total or len(plain.messages) + len(plain.dropped) != size:
        raise SystemExit(f"unexpected compact result at {size:,} messages")
    non_ascii = sum(not json.dumps(m, ensure_ascii=False).isascii() for m in messages)
    tool_related = sum(m["role"] == "tool" or "tool_calls" in m for m in messages)
    plain_dropped, plain_fits = len(plain.dropped), plain.fits
    summed_dropped, summed_fits = len(summed.dropped), summed.fits
    summary_chars = len(summed.summary or "")
    del plain, summed

    loops = max(1, -(-MIN_MESSAGES_PER_REPEAT // size))
    times = best_of(
        {
            "floor": lambda: json_floor(messages),
            "compact": lambda: ctx_compact.compact(messages, max_tokens=budget),
            "summary": lambda: ctx_compact.compact_with_summary(
                messages, max_tokens=budget, summarize=digest
            ),
        },
        loops,
        repeat,
        clock,
    )
    notes = (
        f"{size:>9,}  {total:,} tokens, budget {budget:,}; "
        f"{tool_related / size:.0%} tool calls/results, {non_ascii / size:.0%} non-ASCII; "
        f"floor counts {'match' if floor_agrees else 'DIFFER FROM'} estimate_tokens\n"
        f"{'':>9}  compact drops {plain_dropped:,} ({'fits' if plain_fits else 'does not fit'}); "
        f"with summary drops {summed_dropped:,}, summary {summary_chars:,} chars "
        f"({'fits' if summed_fits else 'does not fit'})"
    )
    return SizeResult(size, times, notes)


def report(results: List[SizeResult]) -> None:
    header = (
        f"{'messages':>9}  {'floor s':>9}  {'compact s':>9}  {'x floor':>7}  "
        f"{'with-summary s':>14}  {'x floor':>7}  "
        f"{'us/msg floor':>12}  {'compact':>7}  {'w-summ':>7}"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        print(
            f"{r.size:>9,}  {r.floor:>9.4f}  {r.compact:>9.4f}  {r.compact / r.floor:>6.2f}x  "
            f"{r.summary:>14.4f}  {r.summary / r.floor:>6.2f}x  "
            f"{r.per_message_us(r.floor):>12.2f}  {r.per_message_us(r.compact):>7.2f}  "
            f"{r.per_message_us(r.summary):>7.2f}"
        )
    print()
    for r in results:
        print(r.notes)
    print()

    small, large = results[0], results[-1]
    if large.size > small.size:

        def growth(attr: str) -> float:
            ratio: float = (getattr(large, attr) / large.size) / (getattr(small, attr) / small.size)
            return ratio

        floor_growth = growth("floor")
        compact_growth = growth("compact")
        summary_growth = growth("summary")
        linear = max(compact_growth, summary_growth) <= floor_growth * LINEARITY_SLACK
        print(
            f"linearity (time per message at {large.size:,} / at {small.size:,}): "
            f"floor {floor_growth:.2f}x, compact {compact_growth:.2f}x, "
            f"compact_with_summary {summary_growth:.2f}x -> "
            f"{'linear' if linear else 'NOT linear'} "
            f"(within {LINEARITY_SLACK}x of the floor's own growth)"
        )
    else:
        print("linearity: needs at least two sizes")

    print(
        f"at {large.size:,} messages: compact {large.compact / large.floor:.2f}x the floor, "
        f"compact_with_summary {large.summary / large.floor:.2f}x"
    )


def parse_sizes(text: str) -> List[int]:
    try:
        sizes = sorted({int(part.replace("_", "")) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None
    if not sizes or sizes[0] < 10:
        raise argparse.ArgumentTypeError("sizes must be integers of at least 10")
    return sizes


def parse_fraction(text: str) -> float:
    value = float(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError("the budget fraction must be between 0 and 1")
    return value


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes",
        type=parse_sizes,
        default=parse_sizes("1000,10000,100000"),
        help="comma-separated conversation lengths (default: 1000,10000,100000)",
    )
    parser.add_argument(
        "--repeat", type=int, default=5, help="timed rounds; the best is kept (default: 5)"
    )
    parser.add_argument("--seed", type=int, default=0, help="data seed (default: 0)")
    parser.add_argument(
        "--clock",
        choices=sorted(CLOCKS),
        default="wall",
        help="wall: time.perf_counter; cpu: time.process_time, the process's CPU time, "
        "steadier on a shared machine (default: wall)",
    )
    parser.add_argument(
        "--budget-fraction",
        type=parse_fraction,
        default=0.05,
        help="max_tokens as a share of each conversation's tokens (default: 0.05)",
    )
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")

    print(
        f"ctx-compact {ctx_compact.__version__} core benchmark: "
        f"{platform.python_implementation()} {platform.python_version()} on {platform.machine()}"
    )
    print(
        f"best of {args.repeat} rounds (each round at least {MIN_MESSAGES_PER_REPEAT:,} messages), "
        f"{args.clock} clock, gc off while timing, seed {args.seed}; "
        f"max_tokens = {args.budget_fraction:.0%} of the estimated total, keep_head=1, keep_tail=4"
    )
    print(
        'floor: json.dumps(m, separators=(",", ":"), ensure_ascii=False) for every message; '
        "summary: one '<role>: <first 60 chars>' line per dropped message"
    )
    print()
    results = []
    for size in args.sizes:
        results.append(
            run_size(size, args.seed, args.repeat, args.budget_fraction, CLOCKS[args.clock])
        )
        gc.collect()
    report(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
