"""Does an agent whose tools return 200 KB stay within its budget? Requests over it, per format.

    python benchmarks/bench_oversized_results.py [--turns 40] [--budget 8000] [--kilobytes 200]

A 40-turn agent in each of five wire formats (Chat Completions, Responses, Anthropic, Gemini,
Bedrock Converse): every turn a user question, a tool call, its result (1 KB, or 200 KB at turns
10 and 39, so the newest result is in the tail on the last turn) and an answer. Before each
model call, the history so far goes through ``@budgeted(max_tokens=8000)``: once with
``truncate_tool_results=False`` (dropping only, the old behaviour) and once with the default
(the last resort). For each it prints the requests over the budget (what the provider answers
with its context-length 400), the pairing problems in what was sent, and whether the newest
200 KB result's first and last lines were in the last request. The exit status is 0 whatever
the figures.
"""

from __future__ import annotations

import argparse
import json
from typing import Any, Callable, Dict, List

from ctx_compact import check_pairing
from middleware import CompactionEvent, budgeted

Message = Dict[str, Any]


def output(turn: int, big: bool, kilobytes: int) -> str:
    lines = [f"turn {turn} line {n}: worker-{n % 7} served a request" for n in range(100_000)]
    text = "\n".join(lines)
    return text[: kilobytes * 1000] if big else text[:1000]


def chat(turn: int, result: str) -> List[Message]:
    call = {"id": f"c{turn}", "type": "function", "function": {"name": "logs", "arguments": "{}"}}
    return [
        {"role": "user", "content": f"Turn {turn}: what do the logs say?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"c{turn}", "content": result},
        {"role": "assistant", "content": f"Turn {turn}: all served."},
    ]


def responses(turn: int, result: str) -> List[Message]:
    return [
        {"role": "user", "content": f"Turn {turn}: what do the logs say?"},
        {"type": "function_call", "call_id": f"f{turn}", "name": "logs", "arguments": "{}"},
        {"type": "function_call_output", "call_id": f"f{turn}", "output": result},
        {"role": "assistant", "content": f"Turn {turn}: all served."},
    ]


def anthropic(turn: int, result: str) -> List[Message]:
    use = {"type": "tool_use", "id": f"t{turn}", "name": "logs", "input": {}}
    answer = {"type": "tool_result", "tool_use_id": f"t{turn}", "content": result}
    return [
        {"role": "user", "content": f"Turn {turn}: what do the logs say?"},
        {"role": "assistant", "content": [use]},
        {"role": "user", "content": [answer]},
        {"role": "assistant", "content": f"Turn {turn}: all served."},
    ]


def gemini(turn: int, result: str) -> List[Message]:
    call = {"function_call": {"name": "logs", "args": {"turn": turn}}}
    answer = {"function_response": {"name": "logs", "response": {"output": result}}}
    return [
        {"role": "user", "parts": [{"text": f"Turn {turn}: what do the logs say?"}]},
        {"role": "model", "parts": [call]},
        {"role": "user", "parts": [answer]},
        {"role": "model", "parts": [{"text": f"Turn {turn}: all served."}]},
    ]


def bedrock(turn: int, result: str) -> List[Message]:
    use = {"toolUse": {"toolUseId": f"b{turn}", "name": "logs", "input": {}}}
    answer = {"toolResult": {"toolUseId": f"b{turn}", "content": [{"text": result}]}}
    return [
        {"role": "user", "content": [{"text": f"Turn {turn}: what do the logs say?"}]},
        {"role": "assistant", "content": [use]},
        {"role": "user", "content": [answer]},
        {"role": "assistant", "content": [{"text": f"Turn {turn}: all served."}]},
    ]


FORMATS: Dict[str, Callable[[int, str], List[Message]]] = {
    "Chat Completions": chat,
    "Responses": responses,
    "Anthropic": anthropic,
    "Gemini": gemini,
    "Bedrock Converse": bedrock,
}


def run(shape: Callable[[int, str], List[Message]], options: argparse.Namespace, last: bool) -> str:
    events: List[CompactionEvent] = []
    sent: List[List[Any]] = []
    call = budgeted(
        max_tokens=options.budget,
        truncate_tool_results=None if last else False,
        on_compact=events.append,
    )(lambda messages: sent.append(messages))
    history: List[Message] = []
    big_turns = {10, options.turns - 1}
    newest = ""
    for turn in range(options.turns):
        result = output(turn, turn in big_turns, options.kilobytes)
        question, calling, answer, reply = shape(turn, result)
        history.append(question)
        call(history)  # the model asks for the tool
        history += [calling, answer]
        call(history)  # the model reads its result
        history.append(reply)
        if turn in big_turns:
            newest = result
    over = sum(1 for e in events if e.tokens_after > options.budget)
    problems = sum(len(check_pairing(messages)) for messages in sent)
    text = json.dumps(sent[-1], ensure_ascii=False)
    first, last_line = newest.splitlines()[0], newest.splitlines()[-1]
    ends = first in text and last_line in text
    cut = sum(len(e.truncated_results) for e in events)
    return f"{len(events):>8} {over:>6} {problems:>9} {cut:>5}  {'yes' if ends else 'no'}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--budget", type=int, default=8000)
    parser.add_argument("--kilobytes", type=int, default=200)
    options = parser.parse_args()
    print(
        f"{options.turns} turns, {options.kilobytes} KB results at turns 10 and"
        f" {options.turns - 1}, budget {options.budget:,}"
    )
    print(f"{'format':<18} {'mode':<14} requests   over  problems   cut  newest ends sent")
    for name, shape in FORMATS.items():
        for label, last in (("dropping only", False), ("last resort", True)):
            print(f"{name:<18} {label:<14} {run(shape, options, last)}")


if __name__ == "__main__":
    main()
