"""A tool-using chat through the Anthropic SDK, kept inside its budget by ``@budgeted``.

Run it from anywhere with ctx-compact installed (it needs the ``anthropic`` package)::

    python examples/anthropic_messages.py

With no arguments it starts the local test server (ctx_compact.testing.FakeProvider) in
this process. The server stands in for the Anthropic API: it rejects a request
whose ``tool_use`` and ``tool_result`` blocks are not paired, with Anthropic's
own 400, and reports ``usage.input_tokens``. To talk to the real API instead,
give its URL (the key defaults to ``$ANTHROPIC_API_KEY``)::

    python examples/anthropic_messages.py --base-url https://api.anthropic.com

Every turn the user asks about one to three cities. The app looks the forecasts
up and records them as one tool exchange (an assistant message with parallel
``tool_use`` blocks, then a user message opening with the ``tool_result``
blocks), then asks the model, whose reply goes into the history the usual way:
``{"role": "assistant", "content": response.content}``, the SDK's own blocks.
When the model asks for the tool itself, the loop runs it. The whole history is
re-sent on every call and soon outgrows the budget: ``@budgeted`` sends the
newest part that fits, never a ``tool_use`` without its results. One line per
call shows the messages and estimated tokens before and after, and the prompt
size the provider reported (the top-level system prompt included); the
session's totals come last.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

ROOT = Path(__file__).resolve().parent.parent

try:
    from ctx_compact import estimate_tokens
    from middleware import CompactingSession, CompactionEvent, budgeted
except ImportError:  # a checkout that was never installed: use the sources beside us
    sys.path.insert(0, str(ROOT))
    from ctx_compact import estimate_tokens
    from middleware import CompactingSession, CompactionEvent, budgeted

Message = Dict[str, Any]

MAX_TOKENS = 1000  # small, so that compaction starts after a few turns
KEEP_TAIL = 6
TURNS = 12
REPLY_TOKENS = 512
SYSTEM = "You are a concise travel assistant with a weather tool."
CITIES = ("Denver", "Zürich", "São Paulo", "Kraków", "東京", "Austin", "Reykjavík", "Nairobi")
TOOLS = [
    {
        "name": "get_weather",
        "description": "Today's forecast for a city.",
        "input_schema": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    }
]


def get_weather(city: str) -> Dict[str, Any]:
    """A stand-in tool: a deterministic forecast from the city's name."""
    code = sum(map(ord, city))
    return {
        "city": city,
        "tempC": code % 35,
        "rain_chance": code % 100 / 100,
        "wind": f"{code % 40} km/h from the {('north', 'east', 'south', 'west')[code % 4]}",
    }


def tool_result(tool_use_id: str, city: str) -> Message:
    return {
        "type": "tool_result",
        "tool_use_id": tool_use_id,
        "content": json.dumps(get_weather(city), ensure_ascii=False),
    }


def looked_up(turn: int, cities: Sequence[str]) -> List[Message]:
    """The app's own lookups, recorded as a tool exchange with parallel ``tool_use``."""
    ids = [f"toolu_t{turn}_{i}" for i in range(len(cities))]
    uses = [
        {"type": "tool_use", "id": tool_id, "name": "get_weather", "input": {"city": city}}
        for tool_id, city in zip(ids, cities)
    ]
    return [
        {"role": "assistant", "content": uses},
        {"role": "user", "content": [tool_result(i, city) for i, city in zip(ids, cities)]},
    ]


def print_call(label: str, event: CompactionEvent) -> None:
    provider = "n/a" if event.provider_tokens is None else f"{event.provider_tokens:,}"
    print(
        f"{label}: {event.messages_before:>3} -> {len(event.messages):>2} messages, "
        f"{event.tokens_before:>5,} -> {event.tokens_after:>5,} tokens, provider {provider}"
    )


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", help="the Anthropic API's URL (default: local server)")
    parser.add_argument("--api-key", help="the API key (default: $ANTHROPIC_API_KEY)")
    parser.add_argument(
        "--model", default="claude-sonnet-4-6", help="the model (default: claude-sonnet-4-6)"
    )
    args = parser.parse_args(argv)
    try:
        import anthropic
    except ImportError:
        print("this example needs the anthropic package: pip install anthropic", file=sys.stderr)
        return 2

    server = None
    if args.base_url is None:
        # The local test server stands in for the Anthropic API; no network is used.
        from ctx_compact.testing import FakeProvider

        server = FakeProvider().start()
        args.base_url, args.api_key = server.base_url, "test"
    client = anthropic.Anthropic(base_url=args.base_url, api_key=args.api_key, max_retries=0)

    @budgeted(max_tokens=MAX_TOKENS, keep_tail=KEEP_TAIL)
    def ask(messages: List[Any]) -> Any:
        return client.messages.create(
            model=args.model,
            max_tokens=REPLY_TOKENS,
            system=SYSTEM,  # top-level: not part of the messages, so never dropped
            tools=TOOLS,
            messages=messages,
        )

    history: List[Any] = []
    where = "the local test server" if server else args.base_url
    print(f"budget {MAX_TOKENS:,} tokens, keep_tail={KEEP_TAIL}, {TURNS} turns, {where}")
    try:
        # The session records every call and learns the provider's token figure,
        # which includes the system prompt: the budget then covers it too.
        with client, CompactingSession(calibrate=True) as session:
            for turn in range(1, TURNS + 1):
                cities = [CITIES[(turn + 3 * k) % len(CITIES)] for k in range(1 + turn % 3)]
                history.append(
                    {"role": "user", "content": f"What is the weather in {' and '.join(cities)}?"}
                )
                history.extend(looked_up(turn, cities))
                label = f"turn {turn:>2}"
                while True:
                    response = ask(history)
                    print_call(label, session.events[-1])
                    # The SDK's own content blocks, as they came.
                    history.append({"role": "assistant", "content": response.content})
                    uses = [b for b in response.content if b.type == "tool_use"]
                    if not uses:
                        break
                    # The model asked for the tool itself: answer every tool_use at once.
                    history.append(
                        {
                            "role": "user",
                            "content": [tool_result(b.id, b.input["city"]) for b in uses],
                        }
                    )
                    label = f"turn {turn:>2}+"
    finally:
        if server is not None:
            server.close()

    stats = session.stats
    counted = [e.provider_tokens for e in session.events if e.provider_tokens is not None]
    print(
        f"history: {len(history)} messages, {sum(map(estimate_tokens, history)):,} tokens; "
        f"largest request: {max(e.tokens_after for e in session.events):,} tokens estimated, "
        f"{max(counted, default=0):,} counted by the provider"
    )
    print(
        f"session: {stats.calls} calls, {stats.compactions} compacted, "
        f"{stats.messages_dropped:,} messages dropped, "
        f"{stats.tokens_before:,} -> {stats.tokens_after:,} tokens ({stats.tokens_saved:,} saved), "
        f"calibration {session.calibration:.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
