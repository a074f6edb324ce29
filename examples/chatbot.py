"""A chatbot loop that keeps a long, tool-using conversation inside its budget.

Run it from the repository root, with no network and no arguments::

    python examples/chatbot.py

The "model" is a stand-in function (seeded, so every run prints the same
figures) that sometimes asks for a tool call, as a real one would. The whole
history is re-sent on every call, and it soon outgrows the budget: a
``CompactingSession`` wraps the model call, drops the oldest turns (never a
tool call without its result) and reports each call through its hook. At the
end it prints the session's totals.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any, Dict, List

try:
    from ctx_compact import estimate_tokens
    from middleware import CompactingSession, CompactionEvent
except ImportError:  # a checkout that was never installed: use the sources beside us
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from ctx_compact import estimate_tokens
    from middleware import CompactingSession, CompactionEvent

Message = Dict[str, Any]

MAX_TOKENS = 1200  # a small budget, so that compaction starts after a few turns
KEEP_TAIL = 6
USER_TURNS = 30
SEED = 7

CITIES = ("Denver", "Austin", "Zürich", "São Paulo", "Kraków", "東京", "Oslo", "Nairobi")
QUESTIONS = (
    "What is the weather in {city}?",
    "Should I pack an umbrella for {city} tomorrow?",
    "Compare {city} with {other} for a weekend trip.",
    "Tell me something about the food in {city}.",
)
REMARKS = (
    "Travel tip: mornings are quieter, and most museums open at ten.",
    "Local trains are reliable; a day pass pays for itself after three rides.",
    "The old town is walkable, but good shoes matter on the cobblestones.",
    "Booking a table a day ahead is wise on weekends.",
    "Most places take cards, though a little cash helps at markets.",
)


def get_weather(city: str) -> Dict[str, Any]:
    """A stand-in tool: a deterministic forecast from the city's name."""
    code = sum(map(ord, city))
    return {"city": city, "tempC": code % 35, "rain_chance": code % 100 / 100}


class StandInModel:
    """Answers like a chat model, without one: tool calls first, then a reply."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.calls = 0
        self.largest_prompt = 0

    def __call__(self, messages: List[Message]) -> Message:
        # What a provider would bill: the history as it arrives, after compaction.
        self.largest_prompt = max(self.largest_prompt, sum(map(estimate_tokens, messages)))
        last = messages[-1]
        if last["role"] == "user" and self.rng.random() < 0.6:
            cities = [c for c in CITIES if c in last["content"]] or [self.rng.choice(CITIES)]
            self.calls += 1
            return {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{self.calls}_{i}",
                        "type": "function",
                        "function": {
                            "name": "get_weather",
                            "arguments": json.dumps({"city": city}, ensure_ascii=False),
                        },
                    }
                    for i, city in enumerate(cities)
                ],
            }
        if last["role"] == "tool":
            results = []  # the results that answer the latest tool calls
            for message in reversed(messages):
                if message["role"] != "tool":
                    break
                results.append(json.loads(message["content"]))
            text = " ".join(
                f"In {r['city']} it is {r['tempC']}°C with a {r['rain_chance']:.0%} chance of rain."
                for r in reversed(results)
            )
        else:
            text = "Happy to help."
        remarks = self.rng.sample(REMARKS, self.rng.randint(1, 4))
        return {"role": "assistant", "content": " ".join([text, *remarks])}


def run_tool(call: Dict[str, Any]) -> Message:
    arguments = json.loads(call["function"]["arguments"])
    result = get_weather(arguments["city"])
    return {"role": "tool", "tool_call_id": call["id"], "content": json.dumps(result)}


class Report:
    """The session's hook: one line per model call, figures only."""

    def __init__(self) -> None:
        self.turn = 0
        self.calls = 0

    def __call__(self, event: CompactionEvent) -> None:
        self.calls += 1
        line = (
            f"turn {self.turn:>2}, call {self.calls:>2}: "
            f"{event.messages_before:>3} -> {len(event.messages):>2} "
            f"messages, {event.tokens_before:>5,} -> {event.tokens_after:>5,} tokens"
        )
        if event.compacted:
            line += f", {len(event.dropped)} dropped"
        print(line + ("" if event.fits else "  (does not fit)"))


def main() -> int:
    rng = random.Random(SEED)
    model = StandInModel(SEED)
    history: List[Message] = [
        {"role": "system", "content": "You are a concise travel assistant with a weather tool."}
    ]
    report = Report()
    print(f"budget {MAX_TOKENS:,} tokens, keep_tail={KEEP_TAIL}, {USER_TURNS} user turns")
    with CompactingSession(
        max_tokens=MAX_TOKENS, keep_tail=KEEP_TAIL, on_compact=report
    ) as session:
        complete = session.wrap(model)
        for report.turn in range(1, USER_TURNS + 1):
            city, other = rng.sample(CITIES, 2)
            question = rng.choice(QUESTIONS).format(city=city, other=other)
            history.append({"role": "user", "content": question})
            while True:  # until the model answers instead of calling a tool
                reply = complete(history)
                history.append(reply)
                if not reply.get("tool_calls"):
                    break
                history.extend(run_tool(call) for call in reply["tool_calls"])

    stats = session.stats
    total = sum(map(estimate_tokens, history))
    print(
        f"history: {len(history)} messages, {total:,} tokens; "
        f"largest prompt the model received: {model.largest_prompt:,} tokens"
    )
    print(
        f"session: {stats.calls} calls, {stats.compactions} compacted, "
        f"{stats.messages_dropped:,} messages dropped, "
        f"{stats.tokens_before:,} -> {stats.tokens_after:,} tokens ({stats.tokens_saved:,} saved)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
