"""Ollama's native chat (``/api/chat``) in the kit: how its id-less tool messages pair.

Ollama's ``tool_calls`` carry no ``id`` and its ``tool`` messages no
``tool_call_id``: the ``tool`` messages right after an assistant message answer
its calls in order, each one naming its tool in ``tool_name`` when it can.
Ollama itself answers every such request with a 200, since it only renders the
messages into the model's prompt; what this validator reports is what the model
would then read wrongly (a result with no call before it, a call with no
result), in the kit's own words. It is a second reading, independent of
ctx-compact's own rules, for tests that compaction never produces either.

Calls with an ``id`` (Ollama's OpenAI-compatible shape) are left to
``openai_chat``; here a ``tool`` message with a ``tool_call_id`` answers the call
with that id, and a call with an ``id`` needs such a message.
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence

from ._api import Json, Problem

ROLES = ("system", "user", "assistant", "tool")
NO_CALL = "tool message {index} answers no tool call of the assistant message before it"
NO_RESULT = "assistant message {index}: tool call {call} has no tool message answering it"


def _name(call: Any) -> Optional[str]:
    function = call.get("function") if isinstance(call, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    return name if isinstance(name, str) else None


def validate_messages(messages: Sequence[Json]) -> List[Problem]:
    """Every place where the model would read a tool result or call without its partner.

    Args:
        messages: The request's ``messages``, as decoded JSON.

    Returns:
        The problems in message order; an empty list for a well-paired request.
    """
    problems: List[Problem] = []
    calls_at = -1
    by_order: List[Optional[str]] = []  # names of the open id-less calls, in order
    by_id: List[Any] = []  # ids of the open calls that have one
    for index, message in enumerate(messages):
        role = message.get("role")
        if role not in ROLES:
            problems.append(Problem(index, f"message {index}: unknown role {role!r}"))
        if role == "tool":
            call_id = message.get("tool_call_id")
            tool_name = message.get("tool_name")
            if calls_at < 0:
                problems.append(Problem(index, NO_CALL.format(index=index)))
            elif call_id is not None:
                if call_id in by_id:
                    by_id.remove(call_id)
                else:
                    problems.append(Problem(index, NO_CALL.format(index=index)))
            else:
                match = [k for k, name in enumerate(by_order) if tool_name in (None, name)]
                if match:
                    del by_order[match[0]]
                else:
                    problems.append(Problem(index, NO_CALL.format(index=index)))
            continue
        problems.extend(_unanswered(calls_at, by_order, by_id))
        calls_at, by_order, by_id = -1, [], []
        calls = message.get("tool_calls") if role == "assistant" else None
        if calls:
            calls_at = index
            by_order = [_name(c) for c in calls if c.get("id") is None]
            by_id = [c.get("id") for c in calls if c.get("id") is not None]
    problems.extend(_unanswered(calls_at, by_order, by_id))
    return problems


def _unanswered(at: int, by_order: List[Optional[str]], by_id: List[Any]) -> List[Problem]:
    left = [str(name) for name in by_order] + [str(call_id) for call_id in by_id]
    return [Problem(at, NO_RESULT.format(index=at, call=call)) for call in left]
