"""Prompt-cache hits and cost of one agent's calls spread over a fleet of worker processes.

Replays a tool-using agent of ``--turns`` model calls (a turn is one call; the
history is rebuilt per request from its JSON, as a stateless server does) whose
calls go round robin to W worker processes (``--workers``, default 1,2,4). Each
worker is a real process holding its own decorated function, so its own
middleware state; it is given turn i's whole history as JSON and returns, as
JSON, the prompt it would send. The provider's cache is global, so each call is
compared with the previous prompt of the conversation whichever worker sent it.

For every strategy and W it prints the share of calls that hit the cache and
the cost relative to plain dropping in one process, at the providers' cache
prices (see ``Accounts`` for the exact definitions), checks every call (never
over ``max_tokens`` by the same counter, ``ctx_compact.check_pairing`` empty).
With W = 1 the table answers the question of one process: what ``target_tokens``,
clearing and summaries buy in cache hits over plain dropping. It is a
measurement: the exit status is 0 whatever the figures.

Usage: python benchmarks/bench_fleet.py [--quick] [--turns 240] [--workers 1,2,4] [--jobs 2]
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import random
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

import middleware
from ctx_compact import check_pairing, estimate_tokens
from middleware import CompactionEvent, budgeted

MAX_TOKENS = 24_000
TARGET_SHARE = 0.6
# The shortest prefix a provider caches (OpenAI and Anthropic's Sonnet and Opus: 1,024).
MIN_CACHEABLE = 1_024
CACHE_READ_PRICE = 0.1
CACHE_WRITE_PRICE = 1.25
# The summarizer keeps the last lines of its digest, so a summary stays a few hundred tokens.
SUMMARY_LINES = 30
# The share of tool results that are large (whole files, test logs).
LARGE_RESULTS = 0.07

TOOLS = ("read_file", "search_code", "run_tests", "list_dir", "http_get", "query_db")
_VOCABULARY = """
cache config handler request response retry timeout session token budget worker queue
schema index migration parser buffer stream client server route payload header status
error warning latency shard replica commit branch module import export value default
option record column filter batch offset cursor limit encode decode digest manifest
"""
WORDS = tuple(_VOCABULARY.split())
VERDICTS = ("PASSED", "PASSED", "PASSED", "FAILED", "SKIPPED")


# --- the workload ---------------------------------------------------------------------------


def _words(rng: random.Random, count: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(count))


def _tool_result(rng: random.Random, tool: str) -> str:
    """A tool's output: mostly 15 to 250 tokens, 7% of them 1,000 to 4,000 (a file, a test log)."""
    low, high = (1_000, 4_000) if rng.random() < LARGE_RESULTS else (15, 250)
    tokens = int(math.exp(rng.uniform(math.log(low), math.log(high))))
    lines: List[str] = []
    size = 0
    n = 0
    while size < tokens * 4:
        n += 1
        a, b = rng.choice(WORDS), rng.choice(WORDS)
        if tool == "read_file":
            line = f"{n:>4}  def {a}_{b}(self, {_words(rng, 3).replace(' ', ', ')}):"
        elif tool == "run_tests":
            line = f"tests/test_{a}.py::test_{b}_{n} {rng.choice(VERDICTS)}"
        elif tool == "query_db":
            line = json.dumps({"id": rng.randrange(10**6), a: _words(rng, 4)})
        elif tool == "search_code":
            line = f"src/{a}/{b}.py:{rng.randrange(1, 900)}: {_words(rng, 7)}"
        else:
            line = _words(rng, 10)
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)


def agent_conversation(turns: int, seed: int) -> Tuple[List[Dict[str, Any]], List[int]]:
    """A deterministic agent's history and the history length of each of its ``turns`` calls.

    A system prompt, then tasks: a user prompt, one to four rounds of an assistant
    message with one to three parallel ``tool_calls`` (Chat Completions format)
    and one ``tool`` result per call, then an assistant answer. The model is
    called after the user prompt and after each round's results; what it returns
    is the next message of the history.
    """
    rng = random.Random(seed)
    history: List[Dict[str, Any]] = [
        {
            "role": "system",
            "content": "You are a coding agent working in a large repository. " + _words(rng, 220),
        }
    ]
    calls: List[int] = []
    call_number = 0
    while len(calls) < turns:
        task = f"Task {len(calls)}: " + _words(rng, rng.randrange(15, 120))
        history.append({"role": "user", "content": task})
        for _ in range(rng.randrange(1, 5)):
            calls.append(len(history))
            tool_calls: List[Dict[str, Any]] = []
            for _ in range(rng.choice((1, 1, 1, 1, 1, 1, 2, 2, 2, 3))):
                tool = rng.choice(TOOLS)
                tool_calls.append(
                    {
                        "id": f"call_{call_number}",
                        "type": "function",
                        "function": {
                            "name": tool,
                            "arguments": json.dumps({"query": _words(rng, rng.randrange(2, 12))}),
                        },
                    }
                )
                call_number += 1
            thought = _words(rng, rng.randrange(5, 40)) if rng.random() < 0.4 else None
            history.append({"role": "assistant", "content": thought, "tool_calls": tool_calls})
            for tool_call in tool_calls:
                history.append(
                    {
                        "role": "tool",
                        "tool_call_id": tool_call["id"],
                        "content": _tool_result(rng, tool_call["function"]["name"]),
                    }
                )
        calls.append(len(history))
        history.append({"role": "assistant", "content": _words(rng, rng.randrange(30, 300))})
    return history, calls[:turns]


# --- the strategies, as each worker builds them ---------------------------------------------


def _digest_lines(dropped: Sequence[Dict[str, Any]]) -> List[str]:
    lines = []
    for m in dropped:
        if m["role"] == "tool":
            lines.append(f"- result {m['tool_call_id']}: {len(m['content'] or '')} chars")
        elif m.get("tool_calls"):
            names = ", ".join(c["function"]["name"] for c in m["tool_calls"])
            lines.append(f"- called {names}")
        else:
            lines.append(f"- {m['role']}: {' '.join(str(m['content']).split()[:8])}")
    return lines


def _summary(lines: List[str]) -> str:
    return "Summary of the earlier conversation:\n" + "\n".join(lines[-SUMMARY_LINES:])


class FakeSummarizer:
    """A deterministic summarizer that counts the messages it is fed.

    The rolling one's text for (previous, new) is the plain one's for all the
    dropped messages, so both are a pure function of the dropped prefix.
    """

    def __init__(self) -> None:
        self.fed = 0
        self.calls = 0

    def plain(self, dropped: List[Any]) -> str:
        self.fed += len(dropped)
        self.calls += 1
        return _summary(_digest_lines(dropped))

    def rolling(self, dropped: List[Any], previous: Optional[str] = None) -> str:
        self.fed += len(dropped)
        self.calls += 1
        before = previous.split("\n")[1:] if previous else []
        return _summary(before + _digest_lines(dropped))


STRATEGIES = (
    "plain dropping",
    "target_tokens",
    "clear_tool_results + target_tokens",
    "summarize= + target_tokens",
    "rolling summary + SQLiteStore + target_tokens",
)
SUMMARIES = STRATEGIES[3:]


def build(strategy: str, store_path: str, summarizer: FakeSummarizer) -> Dict[str, Any]:
    """The options of ``@budgeted`` for a strategy."""
    target = MAX_TOKENS * TARGET_SHARE
    if strategy == "plain dropping":
        return {}
    if strategy == "target_tokens":
        return {"target_tokens": target}
    if strategy == "clear_tool_results + target_tokens":
        return {"target_tokens": target, "clear_tool_results": True}
    if strategy == "summarize= + target_tokens":
        return {"target_tokens": target, "summarize": summarizer.plain}
    store = middleware.SQLiteStore(store_path)
    return {"target_tokens": target, "summarize": summarizer.rolling, "store": store}


def worker(strategy: str, store_path: str, connection: Any) -> None:
    """One worker process: compact each history it is sent and send back the prompt."""
    summarizer = FakeSummarizer()
    events: List[CompactionEvent] = []

    @budgeted(MAX_TOKENS, **build(strategy, store_path, summarizer), on_compact=events.append)
    def call_model(messages: List[Any]) -> List[Any]:
        return messages

    while True:
        request = connection.recv()
        if request is None:
            break
        fed = summarizer.fed
        prompt = call_model(json.loads(request))
        event = events.pop()
        connection.send(
            (
                json.dumps(prompt),
                {
                    "fed": summarizer.fed - fed,
                    "summarized": summarizer.calls,
                    "dropped": len(event.dropped),
                    "summary": event.summary,
                    # The event field of failing summarizers, where the middleware has it.
                    "summary_error": getattr(event, "summary_error", None) is not None,
                },
            )
        )
    connection.close()


# --- the accounts ---------------------------------------------------------------------------


@dataclass
class Accounts:
    """What one strategy's calls cost over a fleet of W workers.

    Per call, with tokens counted by ``estimate_tokens`` (the counter the budget uses):

    - ``shared``: the tokens of the longest run of leading messages equal to those of
      the previous prompt sent for the conversation, by any worker (message by
      message: the first message that differs ends the match);
    - ``cached``: ``shared`` when it is at least ``MIN_CACHEABLE`` tokens, else 0;
    - a **hit**: ``cached > 0``;
    - **cost**: ``(size - cached) * 1.0 + cached * 0.1`` (uncached input, cache reads);
    - **cost with writes** (Anthropic): ``cached * 0.1 + (size - cached) * 1.25``, the
      part beyond the cached prefix being written to the cache, for a prompt of
      at least ``MIN_CACHEABLE`` tokens (a shorter one is not cached: 1.0x).
    """

    calls: int = 0
    hits: int = 0
    sent: int = 0
    cost: float = 0.0
    cost_writes: float = 0.0
    over: int = 0
    unpaired: int = 0
    fed: int = 0
    summarizer_calls: int = 0
    last_dropped: int = 0
    short_misses: int = 0
    short_summaries: int = 0
    previous_size: int = 0
    summary_errors: int = 0
    summaries: Dict[int, Set[str]] = field(default_factory=dict)
    seconds: float = 0.0

    def add(
        self, prompt: List[Any], previous: List[Any], history: List[Any], info: Dict[str, Any]
    ) -> None:
        """Account for one call's ``prompt`` for ``history``, sent after ``previous``."""
        tokens = [estimate_tokens(m) for m in prompt]
        size = sum(tokens)
        shared = 0
        for i, (a, b) in enumerate(zip(previous, prompt)):
            if a != b:
                break
            shared += tokens[i]
        cached = shared if shared >= MIN_CACHEABLE else 0
        self.calls += 1
        self.hits += cached > 0
        # A miss after a prompt too short to be cached: no strategy could have hit.
        self.short_misses += cached == 0 and self.previous_size < MIN_CACHEABLE
        self.previous_size = size
        self.sent += size
        self.cost += (size - cached) + CACHE_READ_PRICE * cached
        if size >= MIN_CACHEABLE:
            self.cost_writes += CACHE_WRITE_PRICE * (size - cached) + CACHE_READ_PRICE * cached
        else:
            self.cost_writes += size
        self.over += size > MAX_TOKENS
        self.unpaired += check_pairing(prompt) != []
        self.fed += info["fed"]
        self.last_dropped = info["dropped"]
        self.summary_errors += info["summary_error"]
        if info["summary"] is not None:
            # The prompt is the head (one message), the summary, then history[cut:].
            cut = len(history) - (len(prompt) - 2)
            text = prompt[1]["content"]
            self.summaries.setdefault(cut, set()).add(text)
            # The fake summarizer's last line is the last message it summarised.
            self.short_summaries += text.split("\n")[-1] != _digest_lines([history[cut - 1]])[0]

    @property
    def same_summaries(self) -> bool:
        return all(len(texts) == 1 for texts in self.summaries.values())


def replay(
    strategy: str, workers: int, history: List[Dict[str, Any]], calls: List[int], method: str
) -> Accounts:
    """The calls of the conversation, turn i to worker i % W, one after the other."""
    context: Any = multiprocessing.get_context(method)
    parts = [json.dumps(m) for m in history]
    accounts = Accounts()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        store_path = os.path.join(tmp, "summaries.sqlite3")
        pipes = []
        processes = []
        for _ in range(workers):
            here, there = context.Pipe()
            process = context.Process(
                target=worker, args=(strategy, store_path, there), daemon=True
            )
            process.start()
            there.close()
            pipes.append(here)
            processes.append(process)
        previous: List[Any] = []
        summarized = [0] * workers
        try:
            for turn, end in enumerate(calls):
                pipe = pipes[turn % workers]
                pipe.send("[" + ",".join(parts[:end]) + "]")
                text, info = pipe.recv()
                prompt = json.loads(text)
                accounts.add(prompt, previous, history[:end], info)
                summarized[turn % workers] = info["summarized"]
                previous = prompt
        finally:
            for pipe in pipes:
                pipe.send(None)
                pipe.close()
            for process in processes:
                process.join(10)
    accounts.summarizer_calls = sum(summarized)
    accounts.seconds = time.perf_counter() - started
    return accounts


# --- the report -----------------------------------------------------------------------------

Done = Dict[Tuple[str, int], Accounts]


def fed_ratio(a: Accounts) -> float:
    """Messages fed to the summarizer over the run, per message dropped by the last call."""
    return a.fed / a.last_dropped if a.last_dropped else math.inf


def print_table(done: Done, fleets: List[int]) -> None:
    base = done[("plain dropping", 1)]
    print("hits, cost (cache reads at 0.1x) / cost (also cache writes at 1.25x),")
    print("each cost relative to plain dropping in one process at the same prices")
    print()
    print("| strategy | " + " | ".join(f"W = {w}" for w in fleets) + " |")
    print("|---" * (len(fleets) + 1) + "|")
    for strategy in STRATEGIES:
        cells = []
        for w in fleets:
            a = done[(strategy, w)]
            cost, writes = a.cost / base.cost, a.cost_writes / base.cost_writes
            cells.append(f"{a.hits / a.calls:.0%}, {cost:.2f}x / {writes:.2f}x")
        print(f"| {strategy} | " + " | ".join(cells) + " |")


def print_checks(done: Done) -> None:
    print("every call (tokens by estimate_tokens, pairing by check_pairing):")
    for (strategy, w), a in done.items():
        print(
            f"  {strategy}, W = {w}: {a.over} over max_tokens, {a.unpaired} unpaired; "
            f"{a.calls - a.hits} misses, {a.short_misses} of them after a prompt under "
            f"{MIN_CACHEABLE:,} tokens; {a.sent:,} tokens sent; {a.seconds:.1f} s"
        )


def print_summaries(done: Done, fleets: List[int]) -> None:
    print("summaries (fed: messages given to the summarizer, over the run and the fleet):")
    for strategy in SUMMARIES:
        for w in fleets:
            a = done[(strategy, w)]
            print(
                f"  {strategy}, W = {w}: {a.summarizer_calls} summarizer calls, fed {a.fed:,} "
                f"messages, the last call dropped {a.last_dropped} ({fed_ratio(a):.2f}x); "
                f"{len(a.summaries)} cuts, one text per cut: {a.same_summaries}; "
                f"{a.short_summaries} calls whose summary stops before their cut; "
                f"{a.summary_errors} failed summaries"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=240, help="model calls of the agent")
    parser.add_argument("--workers", default="1,2,4", help="fleet sizes, comma-separated")
    parser.add_argument("--quick", action="store_true", help="W = 1 and 2 only")
    parser.add_argument("--seed", type=int, default=0, help="seed of the workload")
    parser.add_argument(
        "--jobs",
        type=int,
        default=os.cpu_count() or 1,
        help="replays run at once (the calls of each stay one after the other)",
    )
    parser.add_argument("--start-method", default="spawn", choices=("spawn", "fork", "forkserver"))
    args = parser.parse_args()
    fleets = [1, 2] if args.quick else [int(w) for w in args.workers.split(",")]

    history, calls = agent_conversation(args.turns, args.seed)
    running = 0
    first_over = None
    for number, message in enumerate(history[: calls[-1]]):
        running += estimate_tokens(message)
        if first_over is None and running > MAX_TOKENS:
            first_over = next(i for i, end in enumerate(calls) if end > number)
    over = "never" if first_over is None else f"from call {first_over}"
    print(
        f"agent: {len(calls)} calls, {calls[-1]} messages and {running:,} tokens at the last "
        f"call, over max_tokens ({MAX_TOKENS:,}) {over}; target_tokens "
        f"{MAX_TOKENS * TARGET_SHARE:,.0f}; W = {', '.join(map(str, fleets))} "
        f"({args.start_method})"
    )
    jobs = [(s, w) for s in STRATEGIES for w in fleets]
    if ("plain dropping", 1) not in jobs:
        jobs.insert(0, ("plain dropping", 1))
    started = time.perf_counter()
    with ThreadPoolExecutor(max(args.jobs, 1)) as pool:
        runs = pool.map(lambda job: replay(job[0], job[1], history, calls, args.start_method), jobs)
        done = dict(zip(jobs, runs))
    elapsed = time.perf_counter() - started

    print()
    print_table(done, fleets)
    print()
    print_checks(done)
    print()
    print_summaries(done, fleets)
    print(f"\n{len(done)} replays in {elapsed:.0f} s")


if __name__ == "__main__":
    main()
