"""The conversations the SDK proofs send, and what the tests say about them.

``openai_history()`` and ``anthropic_history()`` are the same travel assistant's
tool-heavy conversation in each provider's format (parallel calls, results out
of order, non-ASCII text), over budget so that each request is compacted;
``responses_history()`` is the OpenAI one as Responses API input items;
``naive_trim`` is the hand-rolled "drop the oldest N" a provider rejects.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List

from ctx_compact import estimate_tokens

Message = Dict[str, Any]

OPENAI_BUDGET = 1200  # openai_history() is 3,297 estimated tokens in 81 messages
ANTHROPIC_BUDGET = 1700  # anthropic_history() is 4,870 estimated tokens in 81 messages

# OpenAI's wording, its own misspelling ("preceeding") included.
ORPHAN_TOOL = (
    "Invalid parameter: messages with role 'tool' must be a response to a preceeding message "
    "with 'tool_calls'."
)

# openai's AsyncStream stops reading at `data: [DONE]` with `break`, leaving its
# inner async generators (and httpx2's) unexhausted. asyncio closes them quietly;
# trio closes them too but warns (ResourceWarning) as they are collected.
TRIO_STREAM_WARNING = r"ignore:Async generator '(openai|httpx2?|httpcore2?)\.:ResourceWarning"

CITIES = ("Denver", "Zürich", "São Paulo", "Kraków", "東京", "Austin", "Reykjavík", "Nairobi")


def forecast(city: str, day: int) -> str:
    code = sum(map(ord, city)) + day
    return json.dumps(
        {
            "city": city,
            "day": day,
            "tempC": code % 35,
            "rain": code % 100 / 100,
            "summary": f"Mild in {city}, light wind from the west, clouds by evening.",
        },
        ensure_ascii=False,
    )


def openai_history(turns: int = 16) -> List[Message]:
    """81 messages: each turn asks for 1 to 3 cities, answered by parallel tool calls.

    Every other turn's results come back out of order; city names and replies
    hold non-ASCII text. The conversation is well formed.
    """
    messages: List[Message] = [
        {"role": "system", "content": "You are a travel assistant. Use get_weather for forecasts."}
    ]
    n = 0
    for turn in range(turns):
        cities = [CITIES[(turn + k * 3) % len(CITIES)] for k in range(1 + turn % 3)]
        messages.append(
            {"role": "user", "content": f"Turn {turn}: the weather in {' and '.join(cities)}?"}
        )
        calls = []
        for city in cities:
            n += 1
            arguments = json.dumps({"city": city, "day": turn}, ensure_ascii=False)
            calls.append(
                {
                    "id": f"call_{n:03d}",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": arguments},
                }
            )
        messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        results = [
            {"role": "tool", "tool_call_id": call["id"], "content": forecast(city, turn)}
            for call, city in zip(calls, cities)
        ]
        if turn % 2:
            results.reverse()
        messages.extend(results)
        messages.append({"role": "assistant", "content": f"Forecasts for {', '.join(cities)}. ☀️"})
    messages.append({"role": "user", "content": "Which city should I visit first? 🙂"})
    return messages


def responses_history(turns: int = 16) -> List[Message]:
    """``openai_history()`` as Responses input items (its system message left to
    ``instructions``): each turn's calls as ``function_call`` items after a
    ``reasoning`` item (with its encrypted content, as a stateless client sends it
    back), their ``function_call_output`` items, and the answer as an output message.
    """
    items: List[Message] = []
    for message in openai_history(turns)[1:]:
        if message.get("tool_calls"):
            first = message["tool_calls"][0]["id"]
            items.append(
                {
                    "type": "reasoning",
                    "id": f"rs_{first}",
                    "summary": [{"type": "summary_text", "text": "Look up each city."}],
                    "encrypted_content": f"gAAAA{first}",
                }
            )
            items.extend(
                {
                    "type": "function_call",
                    "call_id": call["id"],
                    "name": call["function"]["name"],
                    "arguments": call["function"]["arguments"],
                }
                for call in message["tool_calls"]
            )
        elif message["role"] == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message["tool_call_id"],
                    "output": message["content"],
                }
            )
        elif message["role"] == "assistant":
            text = {"type": "output_text", "text": message["content"], "annotations": []}
            items.append({"type": "message", "role": "assistant", "content": [text]})
        else:
            items.append(message)
    return items


def anthropic_history(turns: int = 20) -> List[Message]:
    """81 messages: each turn asks for 1 to 3 cities, answered by parallel ``tool_use``.

    Each calling assistant turn opens with a ``thinking`` block (and on odd turns
    a text block) before its ``tool_use`` blocks; the next user turn opens with
    the ``tool_result`` blocks (out of order on odd turns), sometimes followed by
    the user's text. Replies are a string or a text block; some text is non-ASCII.
    """
    messages: List[Message] = []
    n = 0
    for turn in range(turns):
        cities = [CITIES[(turn + k * 3) % len(CITIES)] for k in range(1 + turn % 3)]
        messages.append(
            {"role": "user", "content": f"Turn {turn}: the weather in {' and '.join(cities)}?"}
        )
        ids = []
        for _ in cities:
            n += 1
            ids.append(f"toolu_{n:03d}")
        content: List[Message] = [
            {
                "type": "thinking",
                "thinking": f"The user wants {len(cities)} forecasts; call the tool for each.",
                "signature": f"sig-{turn:03d}-" + "x" * 24,
            }
        ]
        if turn % 2:
            content.append({"type": "text", "text": "Let me check."})
        content += [
            {"type": "tool_use", "id": i, "name": "get_weather", "input": {"city": c, "day": turn}}
            for i, c in zip(ids, cities)
        ]
        messages.append({"role": "assistant", "content": content})
        results: List[Message] = [
            {"type": "tool_result", "tool_use_id": i, "content": forecast(c, turn)}
            for i, c in zip(ids, cities)
        ]
        if turn % 2:
            results.reverse()
        if turn % 3 == 2:
            results.append({"type": "text", "text": "Thanks! Summarise, please. 🙏"})
        messages.append({"role": "user", "content": results})
        summary = f"Forecasts for {', '.join(cities)}."
        if turn % 2:
            messages.append({"role": "assistant", "content": summary + " ☀️"})
        else:
            messages.append({"role": "assistant", "content": [{"type": "text", "text": summary}]})
    messages.append({"role": "user", "content": "Which city should I visit first? 🙂"})
    return messages


def naive_trim(messages: List[Any], max_tokens: int) -> List[Any]:
    """The hand-rolled trim: keep the first message, drop the oldest N after it until it fits."""
    for n in range(len(messages)):
        kept = [messages[0], *messages[1 + n :]]
        if sum(map(estimate_tokens, kept)) <= max_tokens:
            return kept
    raise AssertionError("nothing fits")
