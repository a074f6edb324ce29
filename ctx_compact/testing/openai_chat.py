"""OpenAI Chat Completions in the kit: ``POST /v1/chat/completions``, plain and streamed.

The validator checks a request as OpenAI does and answers a broken one with
OpenAI's own 400 wording: a ``tool`` message must answer the ``tool_calls`` of
the assistant message that opens its run, and every call must be answered
before the next message. ``prompt_tokens`` is the sum of ``count_tokens`` over
``messages`` (tool definitions are not counted); over ``context_limit`` the
request gets OpenAI's ``context_length_exceeded``. With the prompt cache on,
``prompt_tokens_details.cached_tokens`` is the prefix shared with an earlier
request to the model, in whole units (the tools, then each message), by
OpenAI's rule (``_cache.openai_cached``); ``prompt_tokens`` still includes it.
"""

from __future__ import annotations

import time
from typing import Any, Iterator, List, Optional, Sequence, Set

from . import _openai
from ._api import (
    Answer,
    Json,
    Model,
    Reply,
    Route,
    Target,
    Tool,
    ToolCall,
    count_tokens,
    json_type,
    output_tokens,
    pieces,
    sse,
)
from ._billing import billed, openai_chat_part
from ._cache import openai_cached, unit_key
from ._openai import openai_error

PATH = "/v1/chat/completions"

# OpenAI's wording, its own misspelling ("preceeding") included.
ORPHAN_TOOL = (
    "Invalid parameter: messages with role 'tool' must be a response to a preceeding message "
    "with 'tool_calls'."
)
MISSING_TOOL_RESPONSES = (
    "An assistant message with 'tool_calls' must be followed by tool messages responding to "
    "each 'tool_call_id'. The following tool_call_ids did not have response messages: {ids}"
)
UNKNOWN_TOOL_CALL_ID = (
    "Invalid parameter: 'tool_call_id' of '{id}' not found in 'tool_calls' of previous message."
)
ROLES = ("system", "assistant", "user", "function", "tool", "developer")
CONTEXT_LENGTH = (
    "This model's maximum context length is {limit} tokens. However, your messages resulted in "
    "{tokens} tokens. Please reduce the length of the messages."
)


# --- the request --------------------------------------------------------------


def validate_chat_completions(body: Any) -> List[Json]:
    """Check a Chat Completions request as OpenAI does and return its messages.

    Raises:
        RequestRejected: With OpenAI's error envelope, for the first problem found.
    """
    _openai.expect_body_object(body)
    if "model" not in body:
        raise openai_error("you must provide a model parameter")
    messages = body.get("messages")
    if messages is None:
        raise openai_error(
            "Missing required parameter: 'messages'.",
            param="messages",
            code="missing_required_parameter",
        )
    if not isinstance(messages, list):
        raise openai_error(
            "Invalid type for 'messages': expected an array of objects, but got "
            f"{json_type(messages)} instead.",
            param="messages",
            code="invalid_type",
        )
    if not messages:
        raise openai_error(
            "Invalid 'messages': empty array. Expected an array with minimum length 1, but got "
            "an empty array instead.",
            param="messages",
            code="empty_array",
        )
    for index, message in enumerate(messages):
        _openai.expect_object("messages", index, message)
        role = message.get("role")
        if role not in ROLES:
            supported = ", ".join(f"'{r}'" for r in ROLES[:-1])
            raise openai_error(
                f"Invalid value: '{role}'. Supported values are: {supported}, and '{ROLES[-1]}'.",
                param=f"messages[{index}].role",
                code="invalid_value",
            )
        if role == "tool" and "tool_call_id" not in message:
            raise openai_error(
                f"Missing required parameter: 'messages[{index}].tool_call_id'.",
                param=f"messages[{index}].tool_call_id",
                code="missing_required_parameter",
            )
        if role == "tool" and not isinstance(message["tool_call_id"], str):
            raise openai_error(
                f"Invalid type for 'messages[{index}].tool_call_id': expected a string, but got "
                f"{json_type(message['tool_call_id'])} instead.",
                param=f"messages[{index}].tool_call_id",
                code="invalid_type",
            )
    _check_tool_pairing(messages)
    return messages


def _tool_call_ids(message: Json) -> List[Any]:
    calls = message.get("tool_calls") or []
    return [call.get("id") for call in calls if isinstance(call, dict)]


def _check_tool_pairing(messages: Sequence[Json]) -> None:
    # `answerable` is the tool_calls of the assistant message that opened the
    # current run of tool messages; `unanswered` what is still owed to it.
    answerable: Set[Any] = set()
    unanswered: List[Any] = []
    in_tool_run = False
    for index, message in enumerate(messages):
        if message["role"] == "tool":
            if not in_tool_run:
                raise openai_error(ORPHAN_TOOL, param=f"messages.[{index}].role")
            call_id = message["tool_call_id"]
            if call_id not in answerable:
                raise openai_error(
                    UNKNOWN_TOOL_CALL_ID.format(id=call_id),
                    param=f"messages.[{index}].tool_call_id",
                )
            if call_id in unanswered:
                unanswered.remove(call_id)
            continue
        if unanswered:
            raise openai_error(
                MISSING_TOOL_RESPONSES.format(ids=", ".join(map(str, unanswered))),
                param=f"messages.[{index}].role",
            )
        ids = _tool_call_ids(message) if message["role"] == "assistant" else []
        in_tool_run = bool(ids)
        answerable = set(ids)
        unanswered = list(dict.fromkeys(ids))
    if unanswered:
        # Nothing follows the calls: OpenAI names the whole list, not an index.
        raise openai_error(
            MISSING_TOOL_RESPONSES.format(ids=", ".join(map(str, unanswered))),
            param="messages",
        )


def first_tool(tools: Any, choice: Any = None) -> Optional[Tool]:
    """The first function tool a request offers, as ``{"function": {"name", "parameters"}}``;
    ``None`` when its ``tool_choice`` is ``"none"``."""
    if choice == "none":
        return None
    for tool in tools if isinstance(tools, list) else []:
        if isinstance(tool, dict) and isinstance(tool.get("function"), dict):
            return Tool(str(tool["function"].get("name")), tool["function"].get("parameters") or {})
    return None


def tool_results_since_prompt(messages: Sequence[Json]) -> int:
    """How many ``tool`` messages follow the last ``user`` message."""
    count = 0
    for message in reversed(messages):
        if message.get("role") == "tool":
            count += 1
        elif message.get("role") == "user":
            return count
    return count


# --- the reply ----------------------------------------------------------------


def usage(prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> Json:
    """Chat Completions' ``usage``, with the detail objects the SDK reads."""
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached_tokens, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def _message(reply: Reply) -> Json:
    if isinstance(reply, ToolCall):
        function = {"name": reply.name, "arguments": reply.arguments}
        return {
            "role": "assistant",
            "content": None,
            "refusal": None,
            "annotations": [],
            "tool_calls": [{"id": reply.call_id, "type": "function", "function": function}],
        }
    return {"role": "assistant", "content": reply, "refusal": None, "annotations": []}


def completion(
    completion_id: str,
    model: str,
    reply: Reply,
    prompt_tokens: int,
    created: int,
    cached_tokens: int = 0,
) -> Json:
    """A ``chat.completion`` object holding ``reply``."""
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": _message(reply),
                "logprobs": None,
                "finish_reason": "tool_calls" if isinstance(reply, ToolCall) else "stop",
            }
        ],
        "usage": usage(prompt_tokens, output_tokens(reply), cached_tokens),
        "service_tier": "default",
        "system_fingerprint": "fp_fake",
    }


def completion_chunks(
    completion_id: str,
    model: str,
    reply: Reply,
    prompt_tokens: int,
    created: int,
    include_usage: bool,
    cached_tokens: int = 0,
) -> Iterator[bytes]:
    """``reply`` as ``chat.completion.chunk`` events, a usage chunk if asked, then ``[DONE]``."""

    def chunk(delta: Json, finish_reason: Optional[str]) -> Json:
        data: Json = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "service_tier": "default",
            "system_fingerprint": "fp_fake",
            "choices": [
                {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            ],
        }
        if include_usage:
            data["usage"] = None
        return data

    if isinstance(reply, ToolCall):
        function = {"name": reply.name, "arguments": ""}
        call = {"index": 0, "id": reply.call_id, "type": "function", "function": function}
        yield sse(chunk({"role": "assistant", "content": None, "tool_calls": [call]}, None))
        for piece in pieces(reply.arguments):
            arguments = {"index": 0, "function": {"arguments": piece}}
            yield sse(chunk({"tool_calls": [arguments]}, None))
        yield sse(chunk({}, "tool_calls"))
    else:
        yield sse(chunk({"role": "assistant", "content": "", "refusal": None}, None))
        for piece in pieces(reply):
            yield sse(chunk({"content": piece}, None))
        yield sse(chunk({}, "stop"))
    if include_usage:
        last = chunk({}, None)
        last["choices"] = []
        last["usage"] = usage(prompt_tokens, output_tokens(reply), cached_tokens)
        yield sse(last)
    yield sse("[DONE]")


def serve(body: Any, model: Model, target: Target) -> Answer:
    """Answer one Chat Completions request (its path names nothing), or raise its rejection."""
    messages = validate_chat_completions(body)
    counts = [billed(message, openai_chat_part, count_tokens) for message in messages]
    prompt_tokens = sum(counts)
    limit = model.context_limit
    if limit is not None and prompt_tokens > limit:
        message = CONTEXT_LENGTH.format(limit=limit, tokens=prompt_tokens)
        raise openai_error(message, param="messages", code="context_length_exceeded")
    reply = model.answer(
        messages,
        first_tool(body.get("tools"), body.get("tool_choice")),
        tool_results_since_prompt(messages),
        "call_fake",
    )
    completion_id = model.new_id("chatcmpl-fake")
    created = int(time.time())
    name = str(body["model"])
    cached = 0
    if model.prompt_cache is not None:
        # The tools come first and are not billed, but a change to them breaks the prefix.
        units = [(unit_key("tools", body.get("tools")), 0)]
        units += [(unit_key(message), count) for message, count in zip(messages, counts)]
        cached = openai_cached(model.prompt_cache, f"chat:{name}", units)
    model.bill(name, prompt_tokens, output_tokens(reply), cached)
    if body.get("stream"):
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        return completion_chunks(
            completion_id, name, reply, prompt_tokens, created, include_usage, cached
        )
    return completion(completion_id, name, reply, prompt_tokens, created, cached)


ROUTE = Route(PATH, _openai.ENVELOPE, serve)
