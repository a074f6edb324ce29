"""A tool-using chat through LiteLLM's ``completion``, kept inside its budget by ``@budgeted``.

Run it from anywhere with ctx-compact installed (it needs the ``litellm`` package)::

    python examples/litellm_completion.py

With no arguments it starts the local test server (ctx_compact.testing.FakeProvider) in
this process and reaches it as an OpenAI-compatible endpoint
(``model="openai/gpt-4o"``, ``api_base=...``). The server stands in for the
provider: it rejects a request whose tool calls and results are not paired,
with OpenAI's own 400, and reports ``usage.prompt_tokens``. To talk to a real
endpoint instead, give its URL and a LiteLLM model name (``--api-key KEY``, or
LiteLLM's own lookup of ``$OPENAI_API_KEY`` and the like)::

    python examples/litellm_completion.py --base-url https://api.openai.com/v1 --model openai/gpt-4o

Every turn the user asks about one to three cities. The app looks the forecasts
up and records them as one tool exchange (an assistant message with parallel
``tool_calls`` and a ``tool`` message per call), then asks the model, whose
reply (LiteLLM's own ``Message``) goes into the history as it is. When the
model asks for the tool itself, the loop runs it. ``@budgeted`` sends the
newest part of the history that fits, never a call without its results. One
line per call shows the messages and estimated tokens before and after, and the
prompt size the provider reported; the session's totals come last.
"""

from __future__ import annotations

import argparse
import json
import os
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
CITIES = ("Denver", "Zürich", "São Paulo", "Kraków", "東京", "Austin", "Reykjavík", "Nairobi")
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Today's forecast for a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
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


def tool_message(call_id: str, city: str) -> Message:
    return {
        "role": "tool",
        "tool_call_id": call_id,
        "content": json.dumps(get_weather(city), ensure_ascii=False),
    }


def looked_up(turn: int, cities: Sequence[str]) -> List[Message]:
    """The app's own lookups, recorded as a tool exchange with parallel calls."""
    ids = [f"call_t{turn}_{i}" for i in range(len(cities))]
    calls = [
        {
            "id": call_id,
            "type": "function",
            "function": {
                "name": "get_weather",
                "arguments": json.dumps({"city": city}, ensure_ascii=False),
            },
        }
        for call_id, city in zip(ids, cities)
    ]
    return [
        {"role": "assistant", "content": None, "tool_calls": calls},
        *(tool_message(call_id, city) for call_id, city in zip(ids, cities)),
    ]


def print_call(label: str, event: CompactionEvent) -> None:
    provider = "n/a" if event.provider_tokens is None else f"{event.provider_tokens:,}"
    print(
        f"{label}: {event.messages_before:>3} -> {len(event.messages):>2} messages, "
        f"{event.tokens_before:>5,} -> {event.tokens_after:>5,} tokens, provider {provider}"
    )


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", help="the endpoint's URL (default: local server)")
    parser.add_argument("--api-key", help="the endpoint's key (default: LiteLLM's own lookup)")
    parser.add_argument(
        "--model", default="openai/gpt-4o", help="a LiteLLM model name (default: openai/gpt-4o)"
    )
    args = parser.parse_args(argv)
    # LiteLLM fetches its model price list from the network on import unless told
    # to use the copy it ships.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        import litellm
    except ImportError:
        print("this example needs the litellm package: pip install litellm", file=sys.stderr)
        return 2

    server = None
    if args.base_url is None:
        # The local test server stands in for the provider; no network is used.
        from ctx_compact.testing import FakeProvider

        server = FakeProvider().start()
        args.base_url, args.api_key = server.base_url + "/v1", "test"

    @budgeted(max_tokens=MAX_TOKENS, keep_tail=KEEP_TAIL)
    def ask(messages: List[Any]) -> Any:
        return litellm.completion(
            model=args.model,
            messages=messages,
            tools=TOOLS,
            api_base=args.base_url,
            api_key=args.api_key,
        )

    history: List[Any] = [
        {"role": "system", "content": "You are a concise travel assistant with a weather tool."}
    ]
    where = "the local test server" if server else args.base_url
    print(f"budget {MAX_TOKENS:,} tokens, keep_tail={KEEP_TAIL}, {TURNS} turns, {where}")
    try:
        # The session records every call and learns the provider's token figure.
        with CompactingSession(calibrate=True) as session:
            for turn in range(1, TURNS + 1):
                cities = [CITIES[(turn + 3 * k) % len(CITIES)] for k in range(1 + turn % 3)]
                history.append(
                    {"role": "user", "content": f"What is the weather in {' and '.join(cities)}?"}
                )
                history.extend(looked_up(turn, cities))
                label = f"turn {turn:>2}"
                while True:
                    reply = ask(history).choices[0].message
                    print_call(label, session.events[-1])
                    history.append(reply)  # LiteLLM's Message, as it came
                    if not reply.tool_calls:
                        break
                    for call in reply.tool_calls:  # the model asked for the tool itself
                        city = json.loads(call.function.arguments).get("city", "")
                        history.append(tool_message(call.id, city))
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
