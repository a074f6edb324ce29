"""Time the middleware: the decorator's overhead, and a chatbot re-sending its history.

(a) Overhead: a plain function called directly, against the same function
    decorated with ``@budgeted``, on a six-message list that already fits (so
    nothing is dropped; the difference is what the decorator costs a call).

(b) A chatbot whose history grows to 2,000 messages (user turns, tool
    exchanges of one to three calls, assistant replies; varied lengths, a
    quarter of them non-ASCII) and is re-sent to a ``@budgeted`` model function
    before every assistant turn, with a budget that forces compaction. The
    whole run is timed twice: inside ``with CompactingSession():`` (which
    remembers the counts of messages it has seen) and outside any session
    (compacting from scratch on every turn). Every turn's result is checked to
    be identical in both (token figures and the kept messages, by identity).
    The target is that the session run costs at most a tenth of the other.

Figures are printed, never asserted: the exit status is 0 either way. Run from
the repository root::

    python benchmarks/bench_middleware.py
    python benchmarks/bench_middleware.py --messages 2000 --repeat 3 --seed 0

Standard library and the project only. See benchmarks/README.md.
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
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

try:
    import ctx_compact
    import middleware
except ImportError:  # a checkout that was never installed: use the sources beside us
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import ctx_compact
    import middleware

from middleware import CompactingSession, CompactionEvent, budgeted

Message = Dict[str, Any]

SESSION_TARGET = 0.10  # the session run over the from-scratch run
EDGE_TURNS = 50  # turns averaged for "at the start" and "at the end"
MAX_TOKENS = 16_000
KEEP_HEAD = 1
KEEP_TAIL = 6

ASCII_WORDS = (
    "the", "request", "returned", "a", "result", "from", "cache", "index", "while",
    "vector", "search", "ranked", "each", "token", "budget", "query", "against", "recent",
    "context", "window", "and", "planner", "retried", "with", "backoff", "after", "timeout",
    "so", "worker", "wrote", "its", "report", "to", "storage", "rows", "errors", "latency",
)  # fmt: skip
OTHER_WORDS = (
    "café", "naïve", "Zürich", "São", "Paulo", "Kraków", "résumé", "jalapeño", "Ångström",
    "東京", "大阪", "数据", "検索結果", "한국어", "서울", "天气", "🚀", "✅", "👍🏽", "🇫🇷", "🐍",
)  # fmt: skip
TOOL_NAMES = ("search_docs", "read_file", "run_sql", "get_weather", "http_get")
NON_ASCII_SHARE = 0.25
TOOL_SHARE = 0.5  # user turns answered with a tool exchange first


# --- the conversation --------------------------------------------------------------


class Words:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def text(self, low: int, high: int) -> str:
        """About ``log_uniform(low, high)`` characters; non-ASCII in a quarter of the texts."""
        rng = self.rng
        length = round(math.exp(rng.uniform(math.log(low), math.log(high))))
        mixed = rng.random() < NON_ASCII_SHARE
        parts: List[str] = []
        size = 0
        while size < length:
            pool = OTHER_WORDS if mixed and rng.random() < 0.3 else ASCII_WORDS
            word = rng.choice(pool)
            parts.append(word)
            size += len(word) + 1
        return " ".join(parts)


def build_chat(size: int, seed: int) -> Tuple[List[Message], List[int]]:
    """The whole conversation, and where the model is called.

    Returns:
        ``(messages, calls)``: ``calls[i]`` is the length of the history re-sent
        at the ``i``-th model call, made before every assistant message.
    """
    rng = random.Random(seed)
    words = Words(rng)
    messages: List[Message] = [{"role": "system", "content": words.text(400, 1200)}]
    calls: List[int] = []
    call_number = 0
    while len(messages) < size:
        messages.append({"role": "user", "content": words.text(20, 600)})
        if rng.random() < TOOL_SHARE:
            tool_calls = []
            for _ in range(rng.randint(1, 3)):
                call_number += 1
                arguments = json.dumps({"query": words.text(5, 120)}, ensure_ascii=False)
                tool_calls.append(
                    {
                        "id": f"call_{call_number:06d}",
                        "type": "function",
                        "function": {"name": rng.choice(TOOL_NAMES), "arguments": arguments},
                    }
                )
            calls.append(len(messages))
            messages.append({"role": "assistant", "content": None, "tool_calls": tool_calls})
            for call in tool_calls:
                result = json.dumps({"result": words.text(20, 2000)}, ensure_ascii=False)
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
        calls.append(len(messages))
        messages.append({"role": "assistant", "content": words.text(40, 1500)})
    # Every model call sends the history as it stood; the last reply may overshoot `size`.
    return messages, [n for n in calls if n <= size]


# --- (a) overhead ------------------------------------------------------------------


def send(messages: List[Message], model: str = "gpt-4o") -> int:
    """Stands in for a provider call: as cheap as possible, so the overhead shows."""
    return len(messages)


def best_ns_per_call(fn: Callable[[], object], loops: int, repeat: int) -> float:
    best = math.inf
    for _ in range(repeat):
        gc.collect()
        gc.disable()
        try:
            start = time.perf_counter_ns()
            for _ in range(loops):
                fn()
            elapsed = time.perf_counter_ns() - start
        finally:
            gc.enable()
        best = min(best, elapsed / loops)
    return best


def overhead(repeat: int) -> None:
    short = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What is the weather in Denver?"},
        {"role": "assistant", "content": "It is 72F in Denver."},
        {"role": "user", "content": "And in Austin?"},
        {"role": "assistant", "content": "It is 88F in Austin."},
        {"role": "user", "content": "Thanks!"},
    ]
    decorated = budgeted(max_tokens=8000, keep_tail=4)(send)
    if decorated(short) != 6 or ctx_compact.compact(short, max_tokens=8000).dropped:
        raise SystemExit("the short list was expected to fit")
    loops = 20_000
    plain_ns = best_ns_per_call(lambda: send(short), loops, repeat)
    decorated_ns = best_ns_per_call(lambda: decorated(short), loops, repeat)
    core_ns = best_ns_per_call(
        lambda: ctx_compact.compact(short, max_tokens=8000, keep_tail=4), loops, repeat
    )
    with CompactingSession():
        session_ns = best_ns_per_call(lambda: decorated(short), loops, repeat)
    print("(a) decorator overhead, a 6-message list that fits (nothing dropped)")
    rows = (
        ("plain function, called directly", plain_ns),
        ("@budgeted", decorated_ns),
        ("@budgeted, inside a CompactingSession", session_ns),
    )
    for label, ns in rows:
        extra = f"   (+{ns - plain_ns:,.0f} ns)" if ns is not plain_ns else ""
        print(f"    {label:<40}{ns:>9,.0f} ns per call{extra}")
    print(
        f"    for reference, ctx_compact.compact alone on the list: {core_ns:,.0f} ns "
        f"(counting the six messages is most of it); @budgeted adds "
        f"{decorated_ns - core_ns:,.0f} ns on top"
    )
    print()


# --- (b) the chatbot -----------------------------------------------------------------

Outcome = Tuple[int, int, bool, List[int]]


def run_chat(
    messages: List[Message], calls: List[int], in_session: bool
) -> Tuple[List[float], List[Outcome]]:
    """Replay the conversation: grow the history, call the model before each reply.

    Returns:
        The seconds each model call took, and each call's outcome (tokens
        before and after, fits, and the ids of the messages passed on).
    """
    events: List[CompactionEvent] = []

    @budgeted(
        max_tokens=MAX_TOKENS, keep_head=KEEP_HEAD, keep_tail=KEEP_TAIL, on_compact=events.append
    )
    def model(messages: List[Message]) -> List[Message]:
        return messages

    history: List[Message] = []
    received: List[List[Message]] = []
    times: List[float] = []
    clock = time.perf_counter
    session = CompactingSession() if in_session else None
    gc.collect()
    if session is not None:
        session.__enter__()
    try:
        for n in calls:
            history.extend(messages[len(history) : n])
            start = clock()
            sent = model(history)
            times.append(clock() - start)
            received.append(sent)
    finally:
        if session is not None:
            session.__exit__(None, None, None)
    if session is not None and session.stats.calls != len(calls):
        raise SystemExit("the session did not record every call")
    outcomes = [
        (e.tokens_before, e.tokens_after, e.fits, [id(m) for m in sent])
        for e, sent in zip(events, received)
    ]
    return times, outcomes


def mean_us(times: Sequence[float]) -> float:
    return sum(times) / len(times) * 1e6


def chatbot(size: int, seed: int, repeat: int) -> None:
    messages, calls = build_chat(size, seed)
    total_tokens = sum(ctx_compact.estimate_tokens(m) for m in messages[: calls[-1]])
    non_ascii = sum(not json.dumps(m, ensure_ascii=False).isascii() for m in messages)
    tools = sum(m["role"] == "tool" or "tool_calls" in m for m in messages)

    best: Dict[bool, Tuple[float, List[float]]] = {}
    reference: Optional[List[Outcome]] = None
    identical = True
    for _ in range(repeat):
        for in_session in (False, True):
            times, outcomes = run_chat(messages, calls, in_session)
            if reference is None:
                reference = outcomes
            elif outcomes != reference:
                identical = False
            total = sum(times)
            if in_session not in best or total < best[in_session][0]:
                best[in_session] = (total, times)
    assert reference is not None
    compacted = sum(after < before for before, after, _, _ in reference)
    fits = all(fit for _, _, fit, _ in reference)

    scratch_total, scratch_times = best[False]
    session_total, session_times = best[True]
    ratio = session_total / scratch_total
    edge = min(EDGE_TURNS, len(calls))
    print(
        f"(b) a chatbot re-sending its history before every assistant turn: "
        f"{len(calls):,} model calls, history growing to {calls[-1]:,} messages"
    )
    print(
        f"    {total_tokens:,} tokens in the last history; budget {MAX_TOKENS:,} "
        f"(keep_head={KEEP_HEAD}, keep_tail={KEEP_TAIL}); {compacted:,} calls compacted, "
        f"{'all fit' if fits else 'NOT ALL FIT'}; "
        f"{tools / len(messages):.0%} tool messages, {non_ascii / len(messages):.0%} non-ASCII"
    )
    print(
        f"    results identical on every turn (tokens and kept messages by identity): "
        f"{'yes' if identical else 'NO'}"
    )
    print()
    header = (
        f"    {'':<36}{'total s':>9}  {'first ' + str(edge) + ' turns':>16}  "
        f"{'last ' + str(edge) + ' turns':>15}"
    )
    print(header)
    for label, total, times in (
        ("from scratch on every turn", scratch_total, scratch_times),
        ("through a CompactingSession", session_total, session_times),
    ):
        print(
            f"    {label:<36}{total:>9.3f}  {mean_us(times[:edge]):>10,.0f} us/turn  "
            f"{mean_us(times[-edge:]):>9,.0f} us/turn"
        )
    print()
    print(
        f"    session / from scratch: {ratio:.3f} (target <= {SESSION_TARGET:.2f}) -> "
        f"{'met' if ratio <= SESSION_TARGET and identical else 'NOT met'}"
    )


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--messages", type=int, default=2000, help="final history length (default: 2000)"
    )
    parser.add_argument(
        "--repeat", type=int, default=3, help="timed runs of each; the best is kept (default: 3)"
    )
    parser.add_argument("--seed", type=int, default=0, help="data seed (default: 0)")
    args = parser.parse_args(argv)
    if args.repeat < 1 or args.messages < 10:
        parser.error("--repeat must be at least 1 and --messages at least 10")

    print(
        f"ctx-compact {ctx_compact.__version__} middleware benchmark "
        f"({middleware.__name__}): {platform.python_implementation()} "
        f"{platform.python_version()} on {platform.machine()}; best of {args.repeat}, "
        f"seed {args.seed}"
    )
    print()
    overhead(args.repeat)
    chatbot(args.messages, args.seed, args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
