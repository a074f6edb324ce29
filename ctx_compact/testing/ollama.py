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

The route is ``POST /api/chat``, as the ``ollama`` client (and so langchain-ollama's
``ChatOllama``) calls it with ``base_url=provider.base_url``: one JSON reply, or
with ``"stream": true`` newline-delimited JSON objects, the last one ``done``.
``prompt_eval_count`` is the sum of ``count_tokens`` over ``messages`` (tool
definitions are not counted). Where Ollama itself would answer a 200, the kit
refuses with a 400 ``{"error": ...}`` in its own words, so that a test sees
it: a request ``validate_messages`` finds problems in, and a prompt over
``context_limit`` (Ollama would cut the prompt to its context window).
"""

from __future__ import annotations

import json
import time
from typing import Any, Iterator, List, Optional, Sequence

from ._api import (
    Answer,
    Json,
    Model,
    Problem,
    Reply,
    RequestRejected,
    Route,
    Stream,
    Target,
    Tool,
    ToolCall,
    count_tokens,
    output_tokens,
    pieces,
)

ROLES = ("system", "user", "assistant", "tool")
NO_CALL = "tool message {index} answers no tool call of the assistant message before it"
NO_RESULT = "assistant message {index}: tool call {call} has no tool message answering it"
PATH = "/api/chat"
# The kit's own words: Ollama cuts a long prompt to its context window instead.
CONTEXT_LENGTH = "the prompt holds {tokens} tokens, more than the context limit of {limit}"


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


# --- the route ----------------------------------------------------------------


def ollama_error(message: str, *, status: int = 400) -> RequestRejected:
    """Ollama's error body: ``{"error": message}``."""
    return RequestRejected(status, {"error": message})


class OllamaEnvelope:
    """Ollama's errors outside the chat rules; its client sends no header of its own."""

    request_id_header: Optional[str] = None
    sdk_header: Optional[str] = None

    def framing_error(self, message: str, status: int) -> RequestRejected:
        return ollama_error(message, status=status)

    def not_found(self, method: str, path: str) -> RequestRejected:
        return ollama_error("404 page not found", status=404)

    def unparseable(self) -> RequestRejected:
        return ollama_error("invalid character in request body")

    def failed(self, message: str) -> RequestRejected:
        return ollama_error(message, status=500)

    def identified(self, body: Json, request_id: str) -> Json:
        return body


ENVELOPE = OllamaEnvelope()


def validate_request(body: Any) -> List[Json]:
    """Check a ``/api/chat`` request; return its messages.

    Raises:
        RequestRejected: ``{"error": ...}`` for the first problem found.
    """
    if not isinstance(body, dict):
        raise ollama_error("invalid request body: expected an object")
    if not body.get("model"):
        raise ollama_error("model is required")
    messages = body.get("messages") or []
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise ollama_error("messages must be an array of objects")
    problems = validate_messages(messages)
    if problems:
        raise ollama_error(problems[0].message)
    return messages


def first_tool(tools: Any) -> Optional[Tool]:
    """The first function tool a request offers, as ``{"function": {"name", "parameters"}}``."""
    for tool in tools if isinstance(tools, list) else []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and function.get("name"):
            return Tool(str(function["name"]), function.get("parameters") or {})
    return None


def tool_results_since_prompt(messages: Sequence[Json]) -> int:
    """How many ``tool`` messages follow the last ``user`` message."""
    count = 0
    for message in reversed(messages):
        if message.get("role") == "user":
            break
        count += message.get("role") == "tool"
    return count


def _message(reply: Reply) -> Json:
    if isinstance(reply, ToolCall):
        function = {"name": reply.name, "arguments": json.loads(reply.arguments)}
        return {"role": "assistant", "content": "", "tool_calls": [{"function": function}]}
    return {"role": "assistant", "content": reply}


def _done(reply: Reply, prompt_tokens: int) -> Json:
    return {
        "done": True,
        "done_reason": "stop",
        "total_duration": 1000,
        "load_duration": 0,
        "prompt_eval_count": prompt_tokens,
        "prompt_eval_duration": 500,
        "eval_count": output_tokens(reply),
        "eval_duration": 500,
    }


def _lines(name: str, reply: Reply, prompt_tokens: int, created: str) -> Iterator[bytes]:
    def line(value: Json) -> bytes:
        return json.dumps({"model": name, "created_at": created, **value}).encode() + b"\n"

    if isinstance(reply, ToolCall):
        yield line({"message": _message(reply), "done": False})
    else:
        for piece in pieces(reply):
            yield line({"message": {"role": "assistant", "content": piece}, "done": False})
    yield line({"message": {"role": "assistant", "content": ""}, **_done(reply, prompt_tokens)})


def serve(body: Any, model: Model, target: Target) -> Answer:
    """Answer one ``/api/chat`` request, or raise its rejection."""
    messages = validate_request(body)
    prompt_tokens = sum(count_tokens(message) for message in messages)
    limit = model.context_limit
    if limit is not None and prompt_tokens > limit:
        raise ollama_error(CONTEXT_LENGTH.format(tokens=prompt_tokens, limit=limit))
    reply = model.answer(
        messages, first_tool(body.get("tools")), tool_results_since_prompt(messages), "call_fake"
    )
    name = str(body["model"])
    model.bill(name, prompt_tokens, output_tokens(reply))
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    if body.get("stream", True):
        return Stream(_lines(name, reply, prompt_tokens, created), "application/x-ndjson")
    return {
        "model": name,
        "created_at": created,
        "message": _message(reply),
        **_done(reply, prompt_tokens),
    }


ROUTE = Route(PATH, ENVELOPE, serve)
