"""What cutting one oversized tool result costs, against counting the history once.

    python benchmarks/bench_truncation.py [--megabytes 10] [--cap 2000] [--rounds 5]

A short agent conversation whose last tool result is ``--megabytes`` of log text, in four
shapes: a Chat ``tool`` message, an Anthropic ``tool_result`` block list, a Gemini
``function_response`` object and a Bedrock ``toolResult`` of a ``json`` block. For each it prints
the time to count the history once with the default estimator (what every compaction pays,
``estimate_tokens`` on each message) and the time ``truncate_tool_results`` takes to cut the
result to ``--cap`` tokens (its own counting included), best of ``--rounds`` runs of CPU time,
and their ratio. The figure to hold: cutting a 10 MB result costs at most 2x counting it.
The exit status is 0 whatever the figures.
"""

from __future__ import annotations

import argparse
import time
from typing import Any, Callable, Dict, List

from ctx_compact import estimate_tokens, truncate_tool_results

Message = Dict[str, Any]


def log_text(megabytes: float) -> str:
    line = "2026-12-06T02:11:25Z worker-3 INFO request 48213 served in 12 ms\n"
    return line * int(megabytes * 1_000_000 / len(line))


def chat(text: str) -> List[Message]:
    call = {"id": "call_1", "type": "function", "function": {"name": "read_log", "arguments": "{}"}}
    return [
        {"role": "system", "content": "You are a careful operator."},
        {"role": "user", "content": "Why is the service slow?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": text},
    ]


def anthropic(text: str) -> List[Message]:
    use = {"type": "tool_use", "id": "toolu_1", "name": "read_log", "input": {}}
    result = {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": [{"type": "text", "text": text}],
    }
    return [
        {"role": "user", "content": "Why is the service slow?"},
        {"role": "assistant", "content": [use]},
        {"role": "user", "content": [result]},
    ]


def gemini(text: str) -> List[Message]:
    response = {"name": "read_log", "response": {"output": text, "lines": text.count("\n")}}
    return [
        {"role": "user", "parts": [{"text": "Why is the service slow?"}]},
        {"role": "model", "parts": [{"function_call": {"name": "read_log", "args": {}}}]},
        {"role": "user", "parts": [{"function_response": response}]},
    ]


def bedrock(text: str) -> List[Message]:
    use = {"toolUse": {"toolUseId": "tu_1", "name": "read_log", "input": {}}}
    half = len(text) // 2
    rows = {"json": {"first": text[:half], "second": text[half:]}}
    result = {"toolResult": {"toolUseId": "tu_1", "content": [rows]}}
    return [
        {"role": "user", "content": [{"text": "Why is the service slow?"}]},
        {"role": "assistant", "content": [use]},
        {"role": "user", "content": [result]},
    ]


SHAPES: Dict[str, Callable[[str], List[Message]]] = {
    "Chat tool message": chat,
    "Anthropic block list": anthropic,
    "Gemini response object": gemini,
    "Bedrock json block": bedrock,
}


def best(rounds: int, run: Callable[[], object]) -> float:
    times = []
    for _ in range(rounds):
        start = time.process_time()
        run()
        times.append(time.process_time() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=10.0)
    parser.add_argument("--cap", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    text = log_text(options.megabytes)
    size = len(text) / 1e6
    print(
        f"one result of {size:.1f} MB cut to {options.cap} tokens; best of {options.rounds}, CPU s"
    )
    print(f"{'shape':<24} {'count':>8} {'cut':>8} {'ratio':>7}  tokens before -> after")
    for name, shape in SHAPES.items():
        messages = shape(text)
        counting = best(options.rounds, lambda m=messages: [estimate_tokens(x) for x in m])
        cutting = best(
            options.rounds,
            lambda m=messages: truncate_tool_results(m, max_result_tokens=options.cap),
        )
        [cut] = truncate_tool_results(messages, max_result_tokens=options.cap).cleared
        print(
            f"{name:<24} {counting:8.3f} {cutting:8.3f} {cutting / counting:6.2f}x"
            f"  {cut.tokens_before:,} -> {cut.tokens_after:,}"
        )


if __name__ == "__main__":
    main()
