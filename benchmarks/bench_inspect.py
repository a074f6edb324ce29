"""How long does ``ctx-compact inspect`` take on a dataset, against ``ctx-compact --stats``?

    python benchmarks/bench_inspect.py [--conversations 10000] [--rounds 3]
                                       [--memory 10000,100000] [--max-tokens 4000]

Builds a JSONL dataset of agent conversations in five wire formats (Chat Completions, Anthropic
with thinking, Responses with reasoning items, Gemini, Bedrock Converse): a task, then rounds of
tool calls (one to three at a time) and their results (a file excerpt, query rows or an error),
and answers. Times ``ctx-compact --jsonl --stats`` (which compacts every line and writes it) and
``ctx-compact inspect --jsonl`` (the dataset's figures) at the same budget, each in a fresh
process, in turns round after round, and keeps each one's best CPU time (user + system), which
a shared machine disturbs less than wall time; with orjson installed (which the command then
reads and writes JSON with), again with the standard library (``CTX_COMPACT_JSON=stdlib``).
Then measures the peak resident memory of ``inspect`` at the two ``--memory`` sizes: a reader
that streams holds about the same at both.
Run it from the root of the tree to measure: ``python -m ctx_compact`` imports the package from
the current directory first. The exit status is 0 whatever the figures: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

Message = Dict[str, Any]
WORDS = (
    "the", "request", "returned", "a", "result", "from", "cache", "index", "while", "vector",
    "search", "ranked", "each", "token", "budget", "query", "against", "recent", "context",
    "window", "and", "planner", "retried", "with", "backoff", "after", "timeout", "so", "worker",
    "wrote", "its", "report", "to", "storage", "rows", "errors", "latency", "deploy", "branch",
    "merge", "commit", "test", "failed", "passed", "file", "line", "function", "module", "café",
)  # fmt: skip
TOOLS = ("read_file", "run_tests", "search_code", "list_dir", "http_get", "sql_query")


def text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def output(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.45:  # a file or a log excerpt
        return "\n".join(
            f"{n:4d}  {text(rng, rng.randint(3, 12))}" for n in range(rng.randint(3, 40))
        )
    if kind < 0.85:  # rows from a query or an API
        rows = [
            {"id": rng.randint(1, 10**6), "name": text(rng, 2)} for _ in range(rng.randint(1, 15))
        ]
        return json.dumps({"status": "ok", "rows": rows})
    return json.dumps({"error": text(rng, rng.randint(4, 15)), "code": rng.randint(400, 599)})


def rounds(rng: random.Random) -> List[List[Tuple[str, str, Dict[str, Any], str]]]:
    """An agent's work, in no format: turns of tool rounds, each (id, tool, input, output)."""
    work = []
    n = 0
    for _ in range(rng.randint(1, 4)):
        turn = []
        for _ in range(rng.randint(0, 4)):
            calls = []
            for _ in range(rng.randint(1, 3)):
                n += 1
                args = {"path": f"src/{rng.choice(WORDS)}.py", "limit": rng.randint(1, 99)}
                calls.append((f"call_{n:05d}", rng.choice(TOOLS), args, output(rng)))
            turn.append(calls)
        work.append(turn)
    return work


def chat(rng: random.Random) -> List[Message]:
    messages: List[Message] = [{"role": "system", "content": text(rng, rng.randint(20, 80))}]
    for turn in rounds(rng):
        messages.append({"role": "user", "content": text(rng, rng.randint(5, 50))})
        for calls in turn:
            messages.append(
                {
                    "role": "assistant",
                    "content": text(rng, rng.randint(0, 20)) or None,
                    "tool_calls": [
                        {
                            "id": i,
                            "type": "function",
                            "function": {"name": t, "arguments": json.dumps(a)},
                        }
                        for i, t, a, _ in calls
                    ],
                }
            )
            messages += [{"role": "tool", "tool_call_id": i, "content": o} for i, _, _, o in calls]
        messages.append({"role": "assistant", "content": text(rng, rng.randint(10, 120))})
    return messages


def anthropic(rng: random.Random) -> List[Message]:
    messages: List[Message] = []
    for turn in rounds(rng):
        messages.append({"role": "user", "content": text(rng, rng.randint(5, 50))})
        for calls in turn:
            thought = {
                "type": "thinking",
                "thinking": text(rng, rng.randint(10, 60)),
                "signature": "c2ln" * 30,
            }
            uses = [{"type": "tool_use", "id": i, "name": t, "input": a} for i, t, a, _ in calls]
            messages.append({"role": "assistant", "content": [thought, *uses]})
            results = [
                {"type": "tool_result", "tool_use_id": i, "content": o} for i, _, _, o in calls
            ]
            messages.append({"role": "user", "content": results})
        messages.append({"role": "assistant", "content": [{"type": "text", "text": text(rng, 60)}]})
    return messages


def responses(rng: random.Random) -> List[Message]:
    messages: List[Message] = [{"role": "developer", "content": text(rng, rng.randint(20, 80))}]
    for turn in rounds(rng):
        messages.append({"role": "user", "content": text(rng, rng.randint(5, 50))})
        for calls in turn:
            summary = [{"type": "summary_text", "text": text(rng, rng.randint(5, 30))}]
            messages.append({"type": "reasoning", "id": f"rs_{calls[0][0]}", "summary": summary})
            for i, t, a, _ in calls:
                messages.append(
                    {
                        "type": "function_call",
                        "id": f"fc_{i}",
                        "call_id": i,
                        "name": t,
                        "arguments": json.dumps(a),
                    }
                )
            messages += [
                {"type": "function_call_output", "call_id": i, "output": o} for i, _, _, o in calls
            ]
        messages.append({"role": "assistant", "content": text(rng, rng.randint(10, 120))})
    return messages


def gemini(rng: random.Random) -> List[Message]:
    messages: List[Message] = []
    for turn in rounds(rng):
        messages.append({"role": "user", "parts": [{"text": text(rng, rng.randint(5, 50))}]})
        for calls in turn:
            messages.append(
                {
                    "role": "model",
                    "parts": [{"function_call": {"name": t, "args": a}} for _, t, a, _ in calls],
                }
            )
            answers = [
                {"function_response": {"name": t, "response": {"output": o}}}
                for _, t, _, o in calls
            ]
            messages.append({"role": "user", "parts": answers})
        messages.append({"role": "model", "parts": [{"text": text(rng, rng.randint(10, 120))}]})
    return messages


def bedrock(rng: random.Random) -> List[Message]:
    messages: List[Message] = []
    for turn in rounds(rng):
        messages.append({"role": "user", "content": [{"text": text(rng, rng.randint(5, 50))}]})
        for calls in turn:
            uses = [{"toolUse": {"toolUseId": i, "name": t, "input": a}} for i, t, a, _ in calls]
            messages.append({"role": "assistant", "content": uses})
            results = [
                {"toolResult": {"toolUseId": i, "content": [{"text": o}], "status": "success"}}
                for i, _, _, o in calls
            ]
            messages.append({"role": "user", "content": results})
        messages.append(
            {"role": "assistant", "content": [{"text": text(rng, rng.randint(10, 120))}]}
        )
    return messages


FORMATS: Tuple[Callable[[random.Random], List[Message]], ...] = (
    chat,
    anthropic,
    responses,
    gemini,
    bedrock,
)
DISTINCT = 1000


def write_dataset(path: Path, count: int, seed: int) -> None:
    """``count`` lines cycling over ``DISTINCT`` conversations (building them is the slow part),
    the formats in turn; half bare arrays, half line objects with an id."""
    rng = random.Random(seed)
    texts = [
        json.dumps(FORMATS[n % len(FORMATS)](rng), ensure_ascii=False)
        for n in range(min(count, DISTINCT))
    ]
    with path.open("w", encoding="utf-8", newline="\n") as out:
        for n in range(count):
            line = texts[n % len(texts)]
            out.write(f'{{"id": {n}, "messages": {line}}}\n' if n % 2 else line + "\n")


def cpu(command: Sequence[str], env: Optional[Dict[str, str]] = None) -> float:
    """CPU seconds (user + system) of one child run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(
        command, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def has_orjson() -> bool:
    try:
        import orjson  # noqa: F401
    except ImportError:
        return False
    return True


def peak_rss(command: Sequence[str]) -> int:
    """Peak RSS (KiB) of one run, measured in a child so earlier children do not count."""
    probe = (
        "import resource, subprocess, sys;"
        "subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL,"
        " stderr=subprocess.DEVNULL, check=True);"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, *command], capture_output=True, check=True, text=True
    )
    return int(done.stdout.strip())


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--conversations", type=int, default=10_000, help="the timed dataset's lines"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--memory", default="10000,100000", help="two sizes whose peak memory is compared"
    )
    parser.add_argument("--max-tokens", default="4000")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    sizes = [int(n) for n in args.memory.split(",")]
    base = [sys.executable, "-m", "ctx_compact"]
    budget = ["--jsonl", "--max-tokens", args.max_tokens]

    def commands(data: Path) -> Dict[str, List[str]]:
        return {
            "--stats": [*base, *budget, "--stats", "--no-progress", "-o", os.devnull, str(data)],
            "inspect": [*base, "inspect", *budget, str(data)],
        }

    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load {os.getloadavg()}")
    with tempfile.TemporaryDirectory(prefix="bench_inspect.") as tmp:
        data = Path(tmp) / "data.jsonl"
        write_dataset(data, args.conversations, args.seed)
        lines = [json.loads(line) for line in data.open(encoding="utf-8")]
        messages = sum(len(v if isinstance(v, list) else v["messages"]) for v in lines)
        del lines
        print(
            f"{args.conversations:,} conversations in {len(FORMATS)} formats,"
            f" {messages:,} messages, {data.stat().st_size / 2**20:.1f} MiB;"
            f" budget {args.max_tokens}; best of {args.rounds}"
        )
        # The command reads and writes JSON with orjson when it is installed (the default
        # here), else with the standard library: both are timed when both can be.
        backends = {"orjson": None, "stdlib": dict(os.environ, CTX_COMPACT_JSON="stdlib")}
        if not has_orjson():
            backends = {"stdlib": None}
        timed: Dict[Tuple[str, str], List[float]] = {}
        for _ in range(args.rounds):  # in turns, so a drifting machine favours neither
            for backend, env in backends.items():
                for label, command in commands(data).items():
                    timed.setdefault((backend, label), []).append(cpu(command, env))
        best = {key: min(runs) for key, runs in timed.items()}
        print(f"{'JSON':8}{'--stats s':>10}{'inspect s':>11}  inspect / --stats (CPU)")
        for backend in backends:
            stats, inspect = best[backend, "--stats"], best[backend, "inspect"]
            print(f"{backend:8}{stats:10.2f}{inspect:11.2f}  {inspect / stats:.2f}x")

        peaks = []
        for n in sizes:
            write_dataset(data, n, args.seed)
            peaks.append(peak_rss(commands(data)["inspect"]))
        print(
            f"inspect's peak RSS: {peaks[0] / 1024:.1f} MiB at {sizes[0]:,} conversations,"
            f" {peaks[1] / 1024:.1f} MiB at {sizes[1]:,} ({peaks[1] / peaks[0]:.2f}x)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
