"""Prompt-cache hits and cost: plain dropping against ``target_tokens``.

Replays a growing tool-using chatbot through ``@budgeted`` and prints, for plain
dropping and for ``target_tokens`` at several shares of the budget:

- hits: the share of calls whose prompt starts with the whole previous prompt;
- sent: the tokens sent over all calls;
- cost: what the calls cost when the longest prefix shared with the previous
  prompt is billed as a cache read at 0.1x, relative to plain dropping;
- over: calls whose prompt did not fit the budget.

Usage: python benchmarks/bench_prefix_cache.py [--messages 2000] [--quick]
"""

from __future__ import annotations

import argparse
import json
from typing import Any, Dict, List, Optional, Tuple

from ctx_compact import estimate_tokens
from middleware import CompactionEvent, budgeted

CACHE_READ_PRICE = 0.1


def conversation(messages: int) -> List[Dict[str, Any]]:
    """A system prompt, then turns of question, tool call, tool result and answer."""
    out: List[Dict[str, Any]] = [{"role": "system", "content": "You are a careful assistant."}]
    turn = 0
    while len(out) < messages:
        call_id = f"call_{turn}"
        out.append({"role": "user", "content": f"Question {turn}: " + "what about this? " * 6})
        out.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "search", "arguments": json.dumps({"q": turn})},
                    }
                ],
            }
        )
        out.append({"role": "tool", "tool_call_id": call_id, "content": "result " * 30})
        out.append({"role": "assistant", "content": f"Answer {turn}: " + "it is so. " * 10})
        turn += 1
    return out[:messages]


def replay(
    history: List[Dict[str, Any]], budget: int, target: Optional[float]
) -> Tuple[List[List[Any]], List[CompactionEvent]]:
    """Call the model after each user message and each tool result, as a chatbot does."""
    prompts: List[List[Any]] = []
    events: List[CompactionEvent] = []
    options: Dict[str, Any] = {"max_tokens": budget, "keep_tail": 1}
    if target is not None:
        options["target_tokens"] = target

    @budgeted(**options, on_compact=events.append)
    def call(messages: List[Any]) -> None:
        prompts.append(messages)

    for end in range(2, len(history) + 1):
        if history[end - 1]["role"] in ("user", "tool"):
            call(history[:end])
    return prompts, events


def figures(prompts: List[List[Any]], budget: int) -> Dict[str, float]:
    tokens = {id(m): estimate_tokens(m) for prompt in prompts for m in prompt}
    hits = sent = cost = over = 0.0
    previous: List[Any] = []
    for prompt in prompts:
        size = sum(tokens[id(m)] for m in prompt)
        shared = 0
        for a, b in zip(previous, prompt):
            if a is not b and a != b:
                break
            shared += tokens[id(b)]
        hits += len(prompt) >= len(previous) and shared == sum(tokens[id(m)] for m in previous)
        sent += size
        cost += CACHE_READ_PRICE * shared + (size - shared)
        over += size > budget
        previous = prompt
    return {"hits": hits / len(prompts), "sent": sent, "cost": cost, "over": over}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--quick", action="store_true", help="500 messages")
    args = parser.parse_args()
    count = 500 if args.quick else args.messages
    history = conversation(count)
    budget = sum(estimate_tokens(m) for m in history) // 4
    print(f"growing chatbot: {count} messages, budget {budget} tokens (a quarter of the whole)")
    plain_prompts, _ = replay(history, budget, None)
    plain = figures(plain_prompts, budget)
    header = ("strategy", "calls", "hits", "sent", "cost", "vs plain", "over")
    widths = (22, 7, 8, 12, 12, 10, 6)
    print(
        "".join(
            h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(header, widths))
        )
    )
    rows = [("plain dropping", plain_prompts, plain)]
    for share in (0.5, 0.6, 0.7, 0.8, 0.9):
        prompts, _ = replay(history, budget, budget * share)
        rows.append((f"target_tokens {share:.1f}", prompts, figures(prompts, budget)))
    for name, prompts, row in rows:
        print(
            f"{name:<22}{len(prompts):>7}{row['hits']:>8.1%}{row['sent']:>12,.0f}"
            f"{row['cost']:>12,.0f}{row['cost'] / plain['cost']:>9.2f}x{row['over']:>6.0f}"
        )
    at = {name: row for name, _, row in rows}["target_tokens 0.6"]
    print(
        f"target 0.6: hits {at['hits']:.1%} (target >= 90%), cost "
        f"{at['cost'] / plain['cost']:.2f}x of plain (target <= 0.35x), "
        f"{at['over']:.0f} over budget"
    )


if __name__ == "__main__":
    main()
