"""What does the ready summarizer cost a fleet, with the provider's prompt cache?

Replays ``bench_fleet.py``'s agent (``--turns`` model calls, the history rebuilt
from JSON for every request) over W worker processes (``--workers``, default
1,2,4), each calling the testing kit's provider through the real ``openai``
client inside its own ``CompactingSession(intercept="openai")``. Every request,
the user's calls and the summarizer's, goes to one ``FakeProvider`` with its
prompt-cache accounting, so the cached figures are the kit's: a request's
``cached_tokens`` is the longest prefix it shares with any earlier request of
the run (at least 1,024 tokens, in steps of 128), as OpenAI bills it.

Strategies: plain dropping (the baseline), and ``llm_summarizer`` rolling over a
shared ``SQLiteStore`` with ``target_tokens``, with and without cache-aligned
requests. For each it prints the summarization requests' uncached share of
their input, the run's cost relative to plain dropping in one process (main
calls plus summaries; cache reads at 0.1x, output left out), how many messages
the summarizer was fed per message the last call dropped, and checks every call
(within ``max_tokens`` by the kit's count, pairing accepted by the kit).

Usage: python benchmarks/bench_summarizer.py [--quick] [--turns 240] [--workers 1,2,4]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_fleet import MAX_TOKENS, TARGET_SHARE, agent_conversation

from ctx_compact.testing import FakeProvider

CACHE_READ_PRICE = 0.1
MODEL = "gpt-4o"
STRATEGIES = (
    "plain dropping",
    "llm_summarizer + SQLiteStore + target_tokens",
    "the same, cache_aligned=False",
)
# What the kit's model answers a summarization request: a short summary, the same for
# the same request (so every worker would write the same text for one cut).
SUMMARY_WORDS = 60


def reply(messages: List[Any]) -> str:
    """The kit's model: a summary for a summarization request, a word for any other."""
    text = json.dumps(messages)
    if "## Goal and standing instructions" not in text:
        return "Done."
    return "Summary of the earlier work. " + " ".join(["detail"] * SUMMARY_WORDS)


def worker(strategy: str, url: str, store_path: str, connection: Any) -> None:
    """One worker process: each history it is sent goes to the provider through its session."""
    import openai

    import middleware
    from middleware import CompactingSession, llm_summarizer

    client = openai.OpenAI(base_url=url, api_key="test", max_retries=0)
    fed = [0]
    options: Dict[str, Any] = {}
    if strategy != "plain dropping":
        ready = llm_summarizer(client, cache_aligned=strategy == STRATEGIES[1])

        def summarize(
            dropped: List[Any], *, previous: Optional[str] = None, request: Any = None
        ) -> str:
            fed[0] += len(dropped)
            return ready(dropped, previous=previous, request=request)  # type: ignore[no-any-return]

        options = {
            "target_tokens": MAX_TOKENS * TARGET_SHARE,
            "summarize": summarize,
            "store": middleware.SQLiteStore(store_path),
        }
    events: List[Any] = []
    with CompactingSession(
        max_tokens=MAX_TOKENS, intercept="openai", on_compact=events.append, **options
    ):
        while True:
            request = connection.recv()
            if request is None:
                break
            before = fed[0]
            try:
                response = client.chat.completions.create(model=MODEL, messages=json.loads(request))
            except openai.BadRequestError:  # over the kit's context limit, or unpaired
                response = None
            event = events.pop()
            usage = response.usage if response is not None else None
            details = usage.prompt_tokens_details if usage is not None else None
            summary = event.summary_usage
            connection.send(
                {
                    "refused": response is None,
                    "input": usage.prompt_tokens if usage is not None else 0,
                    "cached": (details.cached_tokens or 0) if details else 0,
                    "summary_input": summary.input_tokens if summary else 0,
                    "summary_cached": summary.cached_input_tokens if summary else 0,
                    "summary_requests": summary.requests if summary else 0,
                    "fed": fed[0] - before,
                    "dropped": len(event.dropped),
                    "fits": event.fits,
                    "summary_error": event.summary_error,
                }
            )
    connection.close()


@dataclass
class Accounts:
    """One strategy's run over W workers; costs in input-token units."""

    calls: int = 0
    main_input: int = 0
    main_cached: int = 0
    summary_input: int = 0
    summary_cached: int = 0
    summary_requests: int = 0
    fed: int = 0
    last_dropped: int = 0
    over: int = 0
    summary_errors: int = 0
    refused: int = 0
    seconds: float = 0.0

    def add(self, info: Dict[str, Any]) -> None:
        self.calls += 1
        self.refused += info["refused"]
        self.main_input += info["input"]
        self.main_cached += info["cached"]
        self.summary_input += info["summary_input"]
        self.summary_cached += info["summary_cached"]
        self.summary_requests += info["summary_requests"]
        self.fed += info["fed"]
        self.last_dropped = info["dropped"]
        self.over += info["input"] > MAX_TOKENS
        self.summary_errors += info["summary_error"] is not None

    @property
    def cost(self) -> float:
        cached = self.main_cached + self.summary_cached
        return self.main_input + self.summary_input - cached + CACHE_READ_PRICE * cached

    @property
    def summary_uncached(self) -> float:
        if not self.summary_input:
            return 0.0
        return (self.summary_input - self.summary_cached) / self.summary_input


def replay(strategy: str, workers: int, history: List[Any], calls: List[int]) -> Accounts:
    """The conversation's calls, turn i to worker i % W, one after the other."""
    context: Any = multiprocessing.get_context("spawn")
    parts = [json.dumps(m) for m in history]
    accounts = Accounts()
    started = time.perf_counter()
    with (
        tempfile.TemporaryDirectory() as tmp,
        FakeProvider(reply=reply, context_limit=MAX_TOKENS) as provider,
    ):
        store_path = os.path.join(tmp, "summaries.sqlite3")
        pipes: List[Any] = []
        processes: List[Any] = []
        for _ in range(workers):
            here, there = context.Pipe()
            process = context.Process(
                target=worker,
                args=(strategy, provider.openai_url, store_path, there),
                daemon=True,
            )
            process.start()
            there.close()
            pipes.append(here)
            processes.append(process)
        try:
            for turn, end in enumerate(calls):
                pipe = pipes[turn % workers]
                pipe.send("[" + ",".join(parts[:end]) + "]")
                accounts.add(pipe.recv())
        finally:
            for pipe in pipes:
                pipe.send(None)
                pipe.close()
            for process in processes:
                process.join(10)
    accounts.seconds = time.perf_counter() - started
    return accounts


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--turns", type=int, default=240, help="model calls of the agent")
    parser.add_argument("--workers", default="1,2,4", help="fleet sizes, comma-separated")
    parser.add_argument("--quick", action="store_true", help="80 turns, W = 1 and 2")
    parser.add_argument("--seed", type=int, default=0, help="seed of the workload")
    args = parser.parse_args()
    turns = 80 if args.quick else args.turns
    fleets = [1, 2] if args.quick else [int(w) for w in args.workers.split(",")]
    history, calls = agent_conversation(turns, args.seed)
    print(
        f"agent: {len(calls)} calls, {calls[-1]} messages at the last; max_tokens "
        f"{MAX_TOKENS:,}, target_tokens {MAX_TOKENS * TARGET_SHARE:,.0f}; W = "
        f"{', '.join(map(str, fleets))}"
    )
    done: Dict[Tuple[str, int], Accounts] = {}
    for strategy in STRATEGIES:
        for w in fleets if strategy != "plain dropping" else [1]:
            done[(strategy, w)] = replay(strategy, w, history, calls)
    base = done[("plain dropping", 1)]
    print()
    print("| strategy | W | summary requests | their uncached input | run cost | fed / dropped |")
    print("|---|---:|---:|---:|---:|---:|")
    for (strategy, w), a in done.items():
        fed = f"{a.fed / a.last_dropped:.2f}x" if a.last_dropped else "-"
        print(
            f"| {strategy} | {w} | {a.summary_requests} | {a.summary_uncached:.0%} | "
            f"{a.cost / base.cost:.2f}x | {fed} |"
        )
    print()
    for (strategy, w), a in done.items():
        print(
            f"  {strategy}, W = {w}: {a.calls} calls, {a.over} over max_tokens, "
            f"{a.refused} refused by the provider, {a.summary_errors} failed summaries; "
            f"main input {a.main_input:,} ({a.main_cached:,} cached), summaries "
            f"{a.summary_input:,} ({a.summary_cached:,} cached); {a.seconds:.0f} s"
        )


if __name__ == "__main__":
    main()
