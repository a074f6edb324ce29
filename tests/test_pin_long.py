"""A pinned message survives 1,000 turns of an agent's history, in every format."""

from __future__ import annotations

from typing import Any, Callable, Dict, List

import pytest

from ctx_compact import check_pairing, compact, compact_with_summary
from ctx_compact.testing import anthropic, bedrock, gemini, ollama, openai_chat, responses

Message = Dict[str, Any]
RULE = "RULE: never delete files outside the workspace."
TOOLS = {"tools": [{"toolSpec": {"name": "run", "inputSchema": {"json": {"type": "object"}}}}]}


def chat_turn(n: int) -> List[Message]:
    call = {"id": f"c{n}", "type": "function", "function": {"name": "run", "arguments": "{}"}}
    return [
        {"role": "user", "content": f"Step {n}: " + "do this " * 8},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"c{n}", "content": "output " * 20},
        {"role": "assistant", "content": f"Step {n} done."},
    ]


def anthropic_turn(n: int) -> List[Message]:
    use = {"type": "tool_use", "id": f"t{n}", "name": "run", "input": {}}
    result = {"type": "tool_result", "tool_use_id": f"t{n}", "content": "output " * 20}
    return [
        {"role": "user", "content": f"Step {n}: " + "do this " * 8},
        {"role": "assistant", "content": [use]},
        {"role": "user", "content": [result]},
        {"role": "assistant", "content": f"Step {n} done."},
    ]


def responses_turn(n: int) -> List[Message]:
    return [
        {"role": "user", "content": f"Step {n}: " + "do this " * 8},
        {"type": "function_call", "call_id": f"f{n}", "name": "run", "arguments": "{}"},
        {"type": "function_call_output", "call_id": f"f{n}", "output": "output " * 20},
        {"role": "assistant", "content": f"Step {n} done."},
    ]


def gemini_turn(n: int) -> List[Message]:
    call = {"function_call": {"name": "run", "args": {"n": n}}}
    answer = {"function_response": {"name": "run", "response": {"out": "output " * 20}}}
    return [
        {"role": "user", "parts": [{"text": f"Step {n}: " + "do this " * 8}]},
        {"role": "model", "parts": [call]},
        {"role": "user", "parts": [answer]},
        {"role": "model", "parts": [{"text": f"Step {n} done."}]},
    ]


def bedrock_turn(n: int) -> List[Message]:
    use = {"toolUse": {"toolUseId": f"b{n}", "name": "run", "input": {}}}
    result = {"toolResult": {"toolUseId": f"b{n}", "content": [{"text": "output " * 20}]}}
    return [
        {"role": "user", "content": [{"text": f"Step {n}: " + "do this " * 8}]},
        {"role": "assistant", "content": [use]},
        {"role": "user", "content": [result]},
        {"role": "assistant", "content": [{"text": f"Step {n} done."}]},
    ]


def ollama_turn(n: int) -> List[Message]:
    return [
        {"role": "user", "content": f"Step {n}: " + "do this " * 8},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "run", "arguments": {}}}],
        },
        {"role": "tool", "tool_name": "run", "content": "output " * 20},
        {"role": "assistant", "content": f"Step {n} done."},
    ]


def rule(kind: str) -> Message:
    """The message to pin: a rule the user gave early on, as a user message of the format."""
    if kind == "gemini":
        return {"role": "user", "parts": [{"text": RULE}]}
    if kind == "bedrock":
        return {"role": "user", "content": [{"text": RULE}]}
    return {"role": "user", "content": RULE}


def acknowledged(kind: str) -> Message:
    text = "Understood."
    if kind == "gemini":
        return {"role": "model", "parts": [{"text": text}]}
    if kind == "bedrock":
        return {"role": "assistant", "content": [{"text": text}]}
    return {"role": "assistant", "content": text}


def accepted(kind: str, messages: List[Message]) -> None:
    """The request the provider's validator takes, or its 400."""
    if kind == "chat":
        openai_chat.validate_chat_completions({"model": "m", "messages": messages})
    elif kind == "anthropic":
        anthropic.validate_messages({"model": "m", "max_tokens": 10, "messages": messages})
    elif kind == "responses":
        responses.validate_responses({"model": "m", "input": messages})
    elif kind == "gemini":
        gemini.validate_request({"contents": messages})
    elif kind == "bedrock":
        bedrock.validate_request({"messages": messages, "toolConfig": TOOLS})
    else:
        ollama.validate_request({"model": "m", "messages": messages})


TURNS: Dict[str, Callable[[int], List[Message]]] = {
    "chat": chat_turn,
    "anthropic": anthropic_turn,
    "responses": responses_turn,
    "gemini": gemini_turn,
    "bedrock": bedrock_turn,
    "ollama": ollama_turn,
}


@pytest.mark.parametrize("target", [None, 1500])
@pytest.mark.parametrize("kind", sorted(TURNS))
def test_a_pinned_rule_survives_a_thousand_turns(kind: str, target: Any) -> None:
    pinned = rule(kind)
    turn = TURNS[kind]
    first = turn(0)
    # The first user turn is the head; the rule comes a turn later, then a thousand more.
    history: List[Message] = [*first, pinned, acknowledged(kind)]
    sent: List[Message] = list(history)  # what an agent that keeps the compacted list holds
    options: Dict[str, Any] = {"max_tokens": 2000, "target_tokens": target, "keep_tail": 4}

    def pin(message: Any) -> bool:
        return message is pinned

    for n in range(1, 1001):
        history.extend(turn(n))
        sent.extend(history[-4:])
        kept = compact(sent, **options, pin=pin)
        assert any(m is pinned for m in kept.messages), n
        assert kept.fits, n
        sent = kept.messages
        if n % 100 == 0:
            # The whole growing history, compacted from scratch, with a summary too.
            whole = compact_with_summary(
                history, **options, pin=pin, summarize=lambda d: "Earlier."
            )
            assert any(m is pinned for m in whole.messages), n
            assert whole.fits, n
            for messages in (sent, whole.messages):
                assert check_pairing(messages) == []
                accepted(kind, messages)
