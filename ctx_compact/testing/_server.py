"""The local provider: a stand-in for the OpenAI and Anthropic HTTP APIs, on 127.0.0.1.

The real ``openai`` and ``anthropic`` SDKs can be pointed at it, so tests prove
that a compacted message list is one the providers accept, without a network::

    with FakeProvider() as provider:
        client = openai.OpenAI(base_url=provider.base_url + "/v1", api_key="test", max_retries=0)
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
        provider.requests[-1].body["messages"]

It serves ``/v1/chat/completions``, ``/v1/responses`` and ``/v1/messages`` (also
as ``/v1/messages?beta=true``, where ``client.beta.messages`` posts), plain and
streamed. It validates tool pairing the way each provider does and answers a
broken conversation with the provider's own 400 envelope and wording, as the
providers document them in their API references and error-code guides and as
their SDKs surface them. With ``context_limit`` it rejects a prompt over the
limit with the provider's context-length error. With ``tool_calls=N`` it is a
scripted model: while fewer than N tool results follow the last user prompt and
the request offers a tool, it answers with a call to the first tool offered, so
a framework runs a real tool loop. Nothing else is modelled: no sampling, no
authentication (any headers are accepted and recorded). A body whose framing is
broken (a ``Content-Length`` that is not a number, a bad chunk size) gets a 400
and its connection is closed; one over ``MAX_BODY_BYTES`` (32 MiB, Anthropic's
documented limit) gets a 413 from its headers, before any of it is read.

Token figures are deterministic. Every message costs ``count_tokens(message)``:
its compact JSON (``separators=(",", ":")``, ``ensure_ascii=False``), measured in
UTF-16 code units, divided by 4 and rounded up, which is also ctx-compact's
default estimator. ``prompt_tokens`` (OpenAI) is the sum over ``messages``;
``input_tokens`` (Anthropic) is the sum over ``messages`` plus
``count_tokens(system)`` when a top-level ``system`` is given; ``input_tokens``
(Responses) is the sum over the ``input`` items (or ``count_tokens(input)`` for a
string) plus ``count_tokens(instructions)`` when given. Tool definitions are not
counted. A text reply costs ``count_tokens(reply_text)``, a tool call
``count_tokens(arguments)``.

Standard library only, Python 3.9+. Run ``python -m ctx_compact.testing
[--port N]`` to serve in the foreground for the examples.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import re
import socket
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Set, Tuple, Union
from urllib.parse import urlsplit

__all__ = ["FakeProvider", "RecordedRequest", "RequestRejected", "count_tokens", "main"]

CHAT_COMPLETIONS_PATH = "/v1/chat/completions"
MESSAGES_PATH = "/v1/messages"
RESPONSES_PATH = "/v1/responses"
PATHS = (CHAT_COMPLETIONS_PATH, RESPONSES_PATH, MESSAGES_PATH)

# OpenAI's wording, its own misspelling ("preceeding") included.
OPENAI_ORPHAN_TOOL = (
    "Invalid parameter: messages with role 'tool' must be a response to a preceeding message "
    "with 'tool_calls'."
)
OPENAI_MISSING_TOOL_RESPONSES = (
    "An assistant message with 'tool_calls' must be followed by tool messages responding to "
    "each 'tool_call_id'. The following tool_call_ids did not have response messages: {ids}"
)
OPENAI_UNKNOWN_TOOL_CALL_ID = (
    "Invalid parameter: 'tool_call_id' of '{id}' not found in 'tool_calls' of previous message."
)
OPENAI_ROLES = ("system", "assistant", "user", "function", "tool", "developer")
OPENAI_CONTEXT_LENGTH = (
    "This model's maximum context length is {limit} tokens. However, your messages resulted in "
    "{tokens} tokens. Please reduce the length of the messages."
)

# The Responses API names neither figure in its context-length error.
RESPONSES_CONTEXT_LENGTH = (
    "Your input exceeds the context window of this model. Please adjust your input and try again."
)
RESPONSES_ORPHAN_OUTPUT = "No tool call found for function call output with call_id {id}."
RESPONSES_MISSING_OUTPUT = "No tool output found for function call {id}."
RESPONSES_ROLES = ("assistant", "system", "developer", "user")

ANTHROPIC_MISSING_TOOL_RESULTS = (
    "messages.{index}: `tool_use` ids were found without `tool_result` blocks immediately "
    "after: {ids}. Each `tool_use` block must have a corresponding `tool_result` block in the "
    "next message."
)
ANTHROPIC_UNEXPECTED_TOOL_RESULT = (
    "messages.{index}.content.{block}: unexpected `tool_use_id` found in `tool_result` blocks: "
    "{id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous "
    "message."
)
ANTHROPIC_CONTEXT_LENGTH = "prompt is too long: {tokens} tokens > {limit} maximum"
ANTHROPIC_EMPTY_CONTENT = (
    "messages.{index}: all messages must have non-empty content except for the optional final "
    "assistant message"
)

Json = Dict[str, Any]

# The largest request body read, as Anthropic documents for its Messages API (32 MB);
# a larger one is refused from its headers with 413, before any of it is read.
MAX_BODY_BYTES = 32 * 1024 * 1024
_MAX_LINE = 4096  # a chunk-size or trailer line
_MAX_TRAILERS = 64


def count_tokens(value: Any) -> int:
    """Return the fake provider's token count for one JSON value.

    Args:
        value: A message, a system prompt or a reply text, as decoded JSON.

    Returns:
        ``ceil(utf16_len(json.dumps(value, separators=(",", ":"), ensure_ascii=False)) / 4)``.
    """
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    # surrogatepass: a lone surrogate decoded from a \\uD83D escape counts as one unit.
    units = len(text.encode("utf-16-le", "surrogatepass")) // 2
    return -(-units // 4)


@dataclass(frozen=True)
class RecordedRequest:
    """One request the fake provider received.

    Attributes:
        method: The HTTP method, e.g. ``"POST"``.
        path: The URL path without the query string, e.g. ``"/v1/messages"``.
        headers: The request headers, names lower-cased.
        body: The decoded JSON body, or ``None`` when it was empty or not JSON.
        query: The query string without its ``?``, e.g. ``"beta=true"``.
    """

    method: str
    path: str
    headers: Dict[str, str]
    body: Any
    query: str = ""


class RequestRejected(Exception):
    """A request the provider answers with an error status and a JSON body."""

    def __init__(self, status: int, body: Json) -> None:
        super().__init__(f"{status}: {json.dumps(body)}")
        self.status = status
        self.body = body


def _openai_error(
    message: str,
    *,
    param: Optional[str] = None,
    code: Optional[str] = None,
    status: int = 400,
    error_type: str = "invalid_request_error",
) -> RequestRejected:
    return RequestRejected(
        status, {"error": {"message": message, "type": error_type, "param": param, "code": code}}
    )


def _anthropic_error(
    message: str, *, status: int = 400, error_type: str = "invalid_request_error"
) -> RequestRejected:
    return RequestRejected(
        status, {"type": "error", "error": {"type": error_type, "message": message}}
    )


def _json_type(value: Any) -> str:
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return "null"


# --- OpenAI Chat Completions --------------------------------------------------


def _expect_body_object(body: Any) -> None:
    """OpenAI's 400 for a request body that is not a JSON object."""
    if not isinstance(body, dict):
        raise _openai_error(
            f"Invalid type for body: expected an object, but got {_json_type(body)} instead."
        )


def _expect_object(field: str, index: int, value: Any) -> None:
    """OpenAI's 400 for an entry of an array parameter that is not a JSON object."""
    if not isinstance(value, dict):
        raise _openai_error(
            f"Invalid type for '{field}[{index}]': expected an object, but got "
            f"{_json_type(value)} instead.",
            param=f"{field}[{index}]",
            code="invalid_type",
        )


def validate_chat_completions(body: Any) -> List[Json]:
    """Check a Chat Completions request as OpenAI does and return its messages.

    Raises:
        RequestRejected: With OpenAI's error envelope, for the first problem found.
    """
    _expect_body_object(body)
    if "model" not in body:
        raise _openai_error("you must provide a model parameter")
    messages = body.get("messages")
    if messages is None:
        raise _openai_error(
            "Missing required parameter: 'messages'.",
            param="messages",
            code="missing_required_parameter",
        )
    if not isinstance(messages, list):
        raise _openai_error(
            "Invalid type for 'messages': expected an array of objects, but got "
            f"{_json_type(messages)} instead.",
            param="messages",
            code="invalid_type",
        )
    if not messages:
        raise _openai_error(
            "Invalid 'messages': empty array. Expected an array with minimum length 1, but got "
            "an empty array instead.",
            param="messages",
            code="empty_array",
        )
    for index, message in enumerate(messages):
        _expect_object("messages", index, message)
        role = message.get("role")
        if role not in OPENAI_ROLES:
            supported = ", ".join(f"'{r}'" for r in OPENAI_ROLES[:-1])
            raise _openai_error(
                f"Invalid value: '{role}'. Supported values are: {supported}, and "
                f"'{OPENAI_ROLES[-1]}'.",
                param=f"messages[{index}].role",
                code="invalid_value",
            )
        if role == "tool" and "tool_call_id" not in message:
            raise _openai_error(
                f"Missing required parameter: 'messages[{index}].tool_call_id'.",
                param=f"messages[{index}].tool_call_id",
                code="missing_required_parameter",
            )
        if role == "tool" and not isinstance(message["tool_call_id"], str):
            raise _openai_error(
                f"Invalid type for 'messages[{index}].tool_call_id': expected a string, but got "
                f"{_json_type(message['tool_call_id'])} instead.",
                param=f"messages[{index}].tool_call_id",
                code="invalid_type",
            )
    _check_openai_tool_pairing(messages)
    return messages


def _tool_call_ids(message: Json) -> List[Any]:
    calls = message.get("tool_calls") or []
    return [call.get("id") for call in calls if isinstance(call, dict)]


def _check_openai_tool_pairing(messages: Sequence[Json]) -> None:
    # `answerable` is the tool_calls of the assistant message that opened the
    # current run of tool messages; `unanswered` what is still owed to it.
    answerable: Set[Any] = set()
    unanswered: List[Any] = []
    in_tool_run = False
    for index, message in enumerate(messages):
        if message["role"] == "tool":
            if not in_tool_run:
                raise _openai_error(OPENAI_ORPHAN_TOOL, param=f"messages.[{index}].role")
            call_id = message["tool_call_id"]
            if call_id not in answerable:
                raise _openai_error(
                    OPENAI_UNKNOWN_TOOL_CALL_ID.format(id=call_id),
                    param=f"messages.[{index}].tool_call_id",
                )
            if call_id in unanswered:
                unanswered.remove(call_id)
            continue
        if unanswered:
            raise _openai_error(
                OPENAI_MISSING_TOOL_RESPONSES.format(ids=", ".join(map(str, unanswered))),
                param=f"messages.[{index}].role",
            )
        ids = _tool_call_ids(message) if message["role"] == "assistant" else []
        in_tool_run = bool(ids)
        answerable = set(ids)
        unanswered = list(dict.fromkeys(ids))
    if unanswered:
        # Nothing follows the calls: OpenAI names the whole list, not an index.
        raise _openai_error(
            OPENAI_MISSING_TOOL_RESPONSES.format(ids=", ".join(map(str, unanswered))),
            param="messages",
        )


# --- Anthropic Messages -------------------------------------------------------


def validate_messages(body: Any) -> Tuple[List[Json], Any]:
    """Check a Messages request as Anthropic does; return its messages and system.

    Raises:
        RequestRejected: With Anthropic's error envelope, for the first problem found.
    """
    if not isinstance(body, dict):
        raise _anthropic_error("Input should be a valid dictionary")
    for field in ("model", "max_tokens", "messages"):
        if field not in body:
            raise _anthropic_error(f"{field}: Field required")
    messages = body["messages"]
    if not isinstance(messages, list):
        raise _anthropic_error("messages: Input should be a valid list")
    if not messages:
        raise _anthropic_error("messages: at least one message is required")
    for index, message in enumerate(messages):
        _check_anthropic_message(messages, index, message)
    _check_anthropic_tool_pairing(messages)
    return messages, body.get("system")


def _blocks(content: Any) -> List[Json]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content)


def _check_anthropic_message(messages: Sequence[Any], index: int, message: Any) -> None:
    if not isinstance(message, dict):
        raise _anthropic_error(f"messages.{index}: Input should be a valid dictionary")
    role = message.get("role")
    if role not in ("user", "assistant", "system"):
        raise _anthropic_error(
            f"messages.{index}.role: Input should be 'user', 'assistant' or 'system'"
        )
    # A mid-conversation system message is accepted where Claude documents it:
    # straight after a user turn. This wording is the fake's own.
    if role == "system" and (index == 0 or messages[index - 1].get("role") != "user"):
        raise _anthropic_error(
            f"messages.{index}: a `system` message must immediately follow a `user` message"
        )
    content = message.get("content")
    if not isinstance(content, (str, list)):
        raise _anthropic_error(f"messages.{index}.content: Field required")
    is_final_assistant = role == "assistant" and index == len(messages) - 1
    if not content and not is_final_assistant:
        raise _anthropic_error(ANTHROPIC_EMPTY_CONTENT.format(index=index))
    for block_index, block in enumerate(_blocks(content)):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise _anthropic_error(
                f"messages.{index}.content.{block_index}: Input should be a valid dictionary"
            )
        if block["type"] == "text" and isinstance(content, list) and not block.get("text"):
            raise _anthropic_error("messages: text content blocks must be non-empty")


@dataclass
class _Turn:
    """Consecutive messages of one role, which Anthropic combines into one turn."""

    role: str
    blocks: List[Tuple[int, int, Json]]  # (message index, block index, block)


def _turns(messages: Sequence[Json]) -> List[_Turn]:
    turns: List[_Turn] = []
    for index, message in enumerate(messages):
        role = message["role"]
        blocks = [(index, k, block) for k, block in enumerate(_blocks(message["content"]))]
        if turns and turns[-1].role == role and role != "system":
            turns[-1].blocks.extend(blocks)
        else:
            turns.append(_Turn(role, blocks))
    return turns


def _check_anthropic_tool_pairing(messages: Sequence[Json]) -> None:
    turns = _turns(messages)
    for position, turn in enumerate(turns):
        previous = turns[position - 1] if position else None
        following = turns[position + 1] if position + 1 < len(turns) else None
        if turn.role == "user":
            _check_results_have_uses(turn, previous)
        elif turn.role == "assistant":
            _check_uses_have_results(turn, following)


def _check_results_have_uses(turn: _Turn, previous: Optional[_Turn]) -> None:
    allowed: Set[Any] = set()
    if previous is not None and previous.role == "assistant":
        allowed = {b.get("id") for _, _, b in previous.blocks if b["type"] == "tool_use"}
    for index, block_index, block in turn.blocks:
        if block["type"] == "tool_result" and block.get("tool_use_id") not in allowed:
            raise _anthropic_error(
                ANTHROPIC_UNEXPECTED_TOOL_RESULT.format(
                    index=index, block=block_index, id=block.get("tool_use_id")
                )
            )


def _check_uses_have_results(turn: _Turn, following: Optional[_Turn]) -> None:
    uses = [(index, block) for index, _, block in turn.blocks if block["type"] == "tool_use"]
    if not uses:
        return
    # Only the tool_use blocks that end the turn are "immediately" followed by
    # the next message: a text block after a tool_use leaves that call unanswered.
    trailing: Set[Any] = set()
    for _, _, block in reversed(turn.blocks):
        if block["type"] != "tool_use":
            break
        trailing.add(block.get("id"))
    # The answers are the tool_result blocks at the start of the next user turn.
    answered: Set[Any] = set()
    if following is not None and following.role == "user":
        for _, _, block in following.blocks:
            if block["type"] != "tool_result":
                break
            answered.add(block.get("tool_use_id"))
    missing = [
        (index, block.get("id"))
        for index, block in uses
        if block.get("id") not in answered or block.get("id") not in trailing
    ]
    if missing:
        ids = ", ".join(str(i) for i in dict.fromkeys(call_id for _, call_id in missing))
        raise _anthropic_error(ANTHROPIC_MISSING_TOOL_RESULTS.format(index=missing[0][0], ids=ids))


# --- OpenAI Responses ---------------------------------------------------------


def _item_type(item: Json) -> Any:
    # A message item may leave out its type: {"role": "user", "content": "hi"}.
    return item.get("type", "message" if "role" in item else None)


def validate_responses(body: Any) -> Tuple[Any, Any]:
    """Check a Responses request as OpenAI does; return its input and instructions.

    Raises:
        RequestRejected: With OpenAI's error envelope, for the first problem found.
    """
    _expect_body_object(body)
    if "model" not in body:
        raise _openai_error(
            "Missing required parameter: 'model'.", param="model", code="missing_required_parameter"
        )
    previous = body.get("previous_response_id")
    if previous is not None:
        # The fake keeps no responses, so no earlier one can be found.
        raise _openai_error(
            f"Previous response with id '{previous}' not found.", param="previous_response_id"
        )
    items = body.get("input")
    if items is None:
        raise _openai_error(
            "Missing required parameter: 'input'.", param="input", code="missing_required_parameter"
        )
    if isinstance(items, str):
        return items, body.get("instructions")
    if not isinstance(items, list):
        raise _openai_error(
            f"Invalid type for 'input': expected one of a string or an array of input items, "
            f"but got {_json_type(items)} instead.",
            param="input",
            code="invalid_type",
        )
    for index, item in enumerate(items):
        _expect_object("input", index, item)
        if _item_type(item) == "message" and item.get("role") not in RESPONSES_ROLES:
            supported = ", ".join(f"'{r}'" for r in RESPONSES_ROLES[:-1])
            raise _openai_error(
                f"Invalid value: '{item.get('role')}'. Supported values are: {supported}, and "
                f"'{RESPONSES_ROLES[-1]}'.",
                param=f"input[{index}].role",
                code="invalid_value",
            )
    _check_responses_tool_pairing(items)
    return items, body.get("instructions")


def _check_responses_tool_pairing(items: Sequence[Json]) -> None:
    # Unlike Chat Completions, an output need not follow its call at once: each
    # output needs an earlier call with its call_id, each call an output.
    called: Set[Any] = set()
    answered: Set[Any] = set()
    for item in items:
        kind = _item_type(item)
        if kind == "function_call":
            called.add(item.get("call_id"))
        elif kind == "function_call_output":
            call_id = item.get("call_id")
            if call_id not in called:
                raise _openai_error(RESPONSES_ORPHAN_OUTPUT.format(id=call_id), param="input")
            answered.add(call_id)
    for item in items:
        if _item_type(item) == "function_call" and item.get("call_id") not in answered:
            raise _openai_error(
                RESPONSES_MISSING_OUTPUT.format(id=item.get("call_id")), param="input"
            )


# --- the scripted model -------------------------------------------------------


@dataclass(frozen=True)
class _ToolCall:
    """A call to one of the request's tools, which the reply makes instead of text."""

    call_id: str
    name: str
    arguments: str  # JSON text, as OpenAI sends it; Anthropic gets it decoded


def _sample(schema: Any) -> Any:
    """A value that a JSON schema accepts, for a tool call's required arguments."""
    if not isinstance(schema, dict):
        return "fake"
    if schema.get("enum"):
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            return _sample(schema[key][0])
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    samples = {"integer": 1, "number": 1, "boolean": True, "array": [], "null": None}
    if kind in samples:
        return samples[kind]
    if kind == "object" or "properties" in schema:
        return _sample_arguments(schema)
    return "fake"


def _sample_arguments(schema: Any) -> Json:
    if not isinstance(schema, dict):
        return {}
    properties = schema.get("properties") or {}
    return {name: _sample(properties.get(name)) for name in schema.get("required") or []}


def _first_tool(tools: Any, api: str) -> Optional[Tuple[str, Json]]:
    """The name and parameter schema of the first function tool a request offers."""
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, dict):
            continue
        if api == "chat" and isinstance(tool.get("function"), dict):
            return str(tool["function"].get("name")), tool["function"].get("parameters") or {}
        if api == "responses" and tool.get("type") == "function":
            return str(tool.get("name")), tool.get("parameters") or {}
        if api == "messages" and "input_schema" in tool:
            return str(tool.get("name")), tool["input_schema"]
    return None


def _tool_results_since_prompt(messages: Sequence[Json], api: str) -> int:
    """How many tool results follow the last user prompt (not a tool result)."""
    count = 0
    for message in reversed(messages):
        if api == "responses":
            kind = _item_type(message)
            if kind == "function_call_output":
                count += 1
            elif kind == "message" and message.get("role") == "user":
                return count
            continue
        if api == "chat":
            if message.get("role") == "tool":
                count += 1
            elif message.get("role") == "user":
                return count
            continue
        if message.get("role") != "user":
            continue
        blocks = _blocks(message.get("content"))
        results = sum(1 for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result")
        count += results
        if results < len(blocks):
            return count
    return count


# --- replies ------------------------------------------------------------------


Reply = Union[str, _ToolCall]


def _pieces(text: str) -> List[str]:
    """Split a reply into the word-sized deltas a stream sends."""
    return re.findall(r"\s*\S+|\s+\Z", text)


def _sse(data: Any, event: Optional[str] = None) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    prefix = f"event: {event}\n" if event else ""
    return f"{prefix}data: {payload}\n\n".encode()


def _openai_usage(prompt_tokens: int, completion_tokens: int) -> Json:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def _output_tokens(reply: Reply) -> int:
    return count_tokens(reply.arguments if isinstance(reply, _ToolCall) else reply)


def _chat_message(reply: Reply) -> Json:
    if isinstance(reply, _ToolCall):
        function = {"name": reply.name, "arguments": reply.arguments}
        return {
            "role": "assistant",
            "content": None,
            "refusal": None,
            "annotations": [],
            "tool_calls": [{"id": reply.call_id, "type": "function", "function": function}],
        }
    return {"role": "assistant", "content": reply, "refusal": None, "annotations": []}


def _chat_completion(
    completion_id: str, model: str, reply: Reply, prompt_tokens: int, created: int
) -> Json:
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": _chat_message(reply),
                "logprobs": None,
                "finish_reason": "tool_calls" if isinstance(reply, _ToolCall) else "stop",
            }
        ],
        "usage": _openai_usage(prompt_tokens, _output_tokens(reply)),
        "service_tier": "default",
        "system_fingerprint": "fp_fake",
    }


def _chat_completion_chunks(
    completion_id: str,
    model: str,
    reply: Reply,
    prompt_tokens: int,
    created: int,
    include_usage: bool,
) -> Iterator[bytes]:
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

    if isinstance(reply, _ToolCall):
        function = {"name": reply.name, "arguments": ""}
        call = {"index": 0, "id": reply.call_id, "type": "function", "function": function}
        yield _sse(chunk({"role": "assistant", "content": None, "tool_calls": [call]}, None))
        for piece in _pieces(reply.arguments):
            arguments = {"index": 0, "function": {"arguments": piece}}
            yield _sse(chunk({"tool_calls": [arguments]}, None))
        yield _sse(chunk({}, "tool_calls"))
    else:
        yield _sse(chunk({"role": "assistant", "content": "", "refusal": None}, None))
        for piece in _pieces(reply):
            yield _sse(chunk({"content": piece}, None))
        yield _sse(chunk({}, "stop"))
    if include_usage:
        last = chunk({}, None)
        last["choices"] = []
        last["usage"] = _openai_usage(prompt_tokens, _output_tokens(reply))
        yield _sse(last)
    yield _sse("[DONE]")


def _responses_usage(input_tokens: int, output_tokens: int) -> Json:
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input_tokens + output_tokens,
    }


def _responses_item(item_id: str, reply: Reply, done: bool = True) -> Json:
    status = "completed" if done else "in_progress"
    if isinstance(reply, _ToolCall):
        return {
            "type": "function_call",
            "id": item_id,
            "call_id": reply.call_id,
            "name": reply.name,
            "arguments": reply.arguments if done else "",
            "status": status,
        }
    content = [{"type": "output_text", "text": reply, "annotations": [], "logprobs": []}]
    return {
        "type": "message",
        "id": item_id,
        "status": status,
        "role": "assistant",
        "content": content if done else [],
    }


def _response(
    response_id: str,
    body: Json,
    created: int,
    output: List[Json],
    usage: Optional[Json],
    status: str = "completed",
) -> Json:
    return {
        "id": response_id,
        "object": "response",
        "created_at": created,
        "status": status,
        "background": False,
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "model": str(body["model"]),
        "output": output,
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "service_tier": "default",
        "store": body.get("store", True),
        "temperature": body.get("temperature", 1.0),
        "text": {"format": {"type": "text"}, "verbosity": "medium"},
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools") or [],
        "top_p": body.get("top_p", 1.0),
        "truncation": "disabled",
        "usage": usage,
        "user": None,
        "metadata": body.get("metadata") or {},
    }


def _responses_events(
    response_id: str, item_id: str, body: Json, created: int, reply: Reply, input_tokens: int
) -> Iterator[bytes]:
    numbers = itertools.count()

    def event(kind: str, **fields: Any) -> bytes:
        return _sse({"type": kind, "sequence_number": next(numbers), **fields}, kind)

    started = _response(response_id, body, created, [], None, status="in_progress")
    yield event("response.created", response=started)
    yield event("response.in_progress", response=started)
    yield event(
        "response.output_item.added", output_index=0, item=_responses_item(item_id, reply, False)
    )
    where = {"item_id": item_id, "output_index": 0}
    if isinstance(reply, _ToolCall):
        for piece in _pieces(reply.arguments):
            yield event("response.function_call_arguments.delta", **where, delta=piece)
        yield event("response.function_call_arguments.done", **where, arguments=reply.arguments)
    else:
        part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        yield event("response.content_part.added", **where, content_index=0, part=part)
        for piece in _pieces(reply):
            yield event(
                "response.output_text.delta", **where, content_index=0, delta=piece, logprobs=[]
            )
        yield event("response.output_text.done", **where, content_index=0, text=reply, logprobs=[])
        yield event(
            "response.content_part.done", **where, content_index=0, part={**part, "text": reply}
        )
    item = _responses_item(item_id, reply)
    yield event("response.output_item.done", output_index=0, item=item)
    usage = _responses_usage(input_tokens, _output_tokens(reply))
    yield event("response.completed", response=_response(response_id, body, created, [item], usage))


def _message_content(reply: Reply) -> List[Json]:
    if isinstance(reply, _ToolCall):
        arguments = json.loads(reply.arguments)
        return [{"type": "tool_use", "id": reply.call_id, "name": reply.name, "input": arguments}]
    return [{"type": "text", "text": reply}]


def _message(message_id: str, model: str, reply: Reply, input_tokens: int) -> Json:
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": _message_content(reply),
        "stop_reason": "tool_use" if isinstance(reply, _ToolCall) else "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": _output_tokens(reply),
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "service_tier": "standard",
        },
    }


def _message_events(
    message_id: str, model: str, reply: Reply, input_tokens: int
) -> Iterator[bytes]:
    start = _message(message_id, model, "", input_tokens)
    start["content"] = []
    start["stop_reason"] = None
    start["usage"]["output_tokens"] = 1
    yield _sse({"type": "message_start", "message": start}, "message_start")
    if isinstance(reply, _ToolCall):
        block: Json = {"type": "tool_use", "id": reply.call_id, "name": reply.name, "input": {}}
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in _pieces(reply.arguments)]
    else:
        block = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": piece} for piece in _pieces(reply)]
    yield _sse(
        {"type": "content_block_start", "index": 0, "content_block": block}, "content_block_start"
    )
    yield _sse({"type": "ping"}, "ping")
    for delta in deltas:
        yield _sse(
            {"type": "content_block_delta", "index": 0, "delta": delta}, "content_block_delta"
        )
    yield _sse({"type": "content_block_stop", "index": 0}, "content_block_stop")
    stop_reason = "tool_use" if isinstance(reply, _ToolCall) else "end_turn"
    yield _sse(
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            # Cumulative, as Anthropic documents; the input figure is in message_start.
            "usage": {"output_tokens": _output_tokens(reply)},
        },
        "message_delta",
    )
    yield _sse({"type": "message_stop"}, "message_stop")


# --- HTTP ---------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # A test suite's burst of parallel clients must find room in the accept queue:
    # with socketserver's 5, the kernel drops the SYNs beyond it and those clients
    # wait a second or more to try again.
    request_queue_size = 128
    provider: FakeProvider

    def __init__(self, address: Tuple[str, int], handler: Any) -> None:
        # Each open connection and the thread serving it, so close() can end them.
        self._connections: Dict[socket.socket, threading.Thread] = {}
        self._connections_lock = threading.Lock()
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        # ThreadingMixIn's, except that the thread is remembered with its connection.
        thread = threading.Thread(
            target=self.process_request_thread,
            args=(request, client_address),
            name="fake-provider-connection",
            daemon=True,
        )
        with self._connections_lock:
            self._connections[request] = thread
        thread.start()

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.pop(request, None)
        super().shutdown_request(request)

    def close_connections(self, grace: float = 2.0) -> None:
        """End every open connection; a request being answered is answered first.

        Shutting a connection for reading makes its handler see the end of the
        stream once the response in hand is written. One whose handler is still
        busy after ``grace`` seconds (a stream its client does not read) is cut.
        """
        with self._connections_lock:
            connections = list(self._connections.items())
        for connection, _ in connections:
            _shutdown(connection, socket.SHUT_RD)
        deadline = time.monotonic() + grace
        for connection, thread in connections:
            if thread is threading.current_thread():
                continue  # close() called from a reply callable
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                _shutdown(connection, socket.SHUT_RDWR)
                thread.join(1.0)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up mid-stream is normal; anything else is a bug.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def _shutdown(connection: socket.socket, how: int) -> None:
    with contextlib.suppress(OSError):  # already closed by its handler
        connection.shutdown(how)


def _size(length: Optional[int], before: int = 0) -> int:
    """``length``, unless with the ``before`` bytes already read it is over the limit."""
    # None: too many digits to be worth converting (int() refuses 4,300 and more).
    if length is None or before + length > MAX_BODY_BYTES:
        raise _FramingError(
            f"Request exceeds the maximum allowed number of bytes ({MAX_BODY_BYTES}).", 413
        )
    return length


class _FramingError(Exception):
    """A request body whose length cannot be known, or is over the limit, from its headers."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "FakeProvider/1.0"
    # Idle keep-alive connections end on their own instead of pinning a thread.
    timeout = 10
    # A response goes out in one send: headers and body are buffered together and
    # flushed after each request (a stream flushes each event). Written apart, the
    # body waited for the client's delayed ACK of the headers, about 40 ms a request.
    # No Nagle either, so a stream's events are not held back behind one another.
    wbufsize = 64 * 1024
    disable_nagle_algorithm = True
    server: _Server
    _streaming = False  # set once a stream's headers are sent

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self._serve("POST")

    def do_GET(self) -> None:
        self._serve("GET")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def handle_expect_100(self) -> bool:
        answered = super().handle_expect_100()
        self.wfile.flush()  # wfile is buffered, and the client waits for this to send the body
        return answered

    def _read_body(self) -> bytes:
        """The request body, as its headers frame it; never more than ``MAX_BODY_BYTES``.

        Raises:
            _FramingError: For framing that cannot be trusted (the connection is then
                closed, as where the next request starts is unknown) or a body over the limit.
        """
        coding = self.headers.get("Transfer-Encoding")
        lengths = self.headers.get_all("Content-Length") or []
        if coding is not None:
            if coding.strip().lower() != "chunked":
                raise _FramingError(f"Unsupported Transfer-Encoding: {coding!r}.")
            if lengths:
                raise _FramingError("A request must not have both Content-Length and chunks.")
            return self._read_chunks()
        if not lengths:
            return b""
        if len(set(lengths)) > 1:
            raise _FramingError(f"Conflicting Content-Length headers: {', '.join(lengths)}.")
        text = lengths[0].strip()
        if not re.fullmatch("[0-9]+", text):
            raise _FramingError(f"Invalid Content-Length header: {text[:40]!r}.")
        length = _size(int(text) if len(text) <= 12 else None)
        data = self._read_exactly(length)
        if len(data) < length:
            raise _FramingError(f"The request body ended after {len(data)} of {length} bytes.")
        return data

    def _read_chunks(self) -> bytes:
        parts: List[bytes] = []
        total = 0
        while True:
            line = self._read_line("chunk size")
            size = line.split(b";", 1)[0].strip()
            if not re.fullmatch(b"[0-9A-Fa-f]+", size):
                raise _FramingError(f"Invalid chunk size: {size[:40]!r}.")
            length = _size(int(size, 16) if len(size) <= 12 else None, total)
            if length == 0:
                break
            chunk = self._read_exactly(length)
            if len(chunk) < length or self.rfile.readline(3) != b"\r\n":
                raise _FramingError("A chunk of the request body did not end as its size said.")
            parts.append(chunk)
            total += length
        # Trailer fields, if any, up to the empty line that ends the body.
        for _ in range(_MAX_TRAILERS):
            if self._read_line("trailer") == b"":
                return b"".join(parts)
        raise _FramingError(f"More than {_MAX_TRAILERS} trailer fields.")

    def _read_line(self, what: str) -> bytes:
        line = self.rfile.readline(_MAX_LINE + 1)
        if len(line) > _MAX_LINE or not line.endswith(b"\n"):
            raise _FramingError(f"The request body's {what} line is too long or unterminated.")
        return line.rstrip(b"\r\n")

    def _read_exactly(self, length: int) -> bytes:
        # In pieces, so what is held is what arrived, not what the headers announced.
        parts: List[bytes] = []
        remaining = length
        while remaining:
            piece = self.rfile.read(min(remaining, 1 << 20))
            if not piece:
                break
            parts.append(piece)
            remaining -= len(piece)
        return b"".join(parts)

    def _serve(self, method: str) -> None:
        self._streaming = False  # a keep-alive connection reuses the handler
        provider = self.server.provider
        url = urlsplit(self.path)
        path = url.path
        headers = {name.lower(): value for name, value in self.headers.items()}
        anthropic = path == MESSAGES_PATH if path in PATHS else "anthropic-version" in headers
        try:
            raw = self._read_body()
        except _FramingError as broken:
            provider._record(RecordedRequest(method, path, headers, None, url.query))
            if not anthropic:
                error = _openai_error(str(broken), status=broken.status)
            elif broken.status == 413:
                error = _anthropic_error(str(broken), status=413, error_type="request_too_large")
            else:
                error = _anthropic_error(str(broken))
            self._send_json(error.status, error.body, anthropic, close=True)
            return
        try:
            body: Any = json.loads(raw) if raw else None
            parsed = True
        except (ValueError, RecursionError):  # RecursionError: arrays nested too deep
            body, parsed = None, False
        provider._record(RecordedRequest(method, path, headers, body, url.query))
        try:
            if method != "POST" or path not in PATHS:
                raise self._not_found(method, path, anthropic)
            if not parsed:
                raise self._unparseable(anthropic)
            if path == CHAT_COMPLETIONS_PATH:
                self._chat_completions(provider, body)
            elif path == RESPONSES_PATH:
                self._responses(provider, body)
            else:
                self._messages(provider, body)
        except RequestRejected as rejected:
            self._send_json(rejected.status, rejected.body, anthropic)
        except Exception as exc:
            # A shape the validators did not foresee: answer 500 rather than
            # hang up, so the test sees what broke. Mid-stream, headers are gone.
            if self._streaming:
                raise
            message = f"fake provider failed: {exc!r}"
            if anthropic:
                error = _anthropic_error(message, status=500, error_type="api_error")
            else:
                error = _openai_error(message, status=500, error_type="server_error")
            self._send_json(error.status, error.body, anthropic)

    @staticmethod
    def _not_found(method: str, path: str, anthropic: bool) -> RequestRejected:
        if anthropic:
            return _anthropic_error("Not Found", status=404, error_type="not_found_error")
        return _openai_error(f"Invalid URL ({method} {path})", status=404)

    @staticmethod
    def _unparseable(anthropic: bool) -> RequestRejected:
        if anthropic:
            return _anthropic_error("There was an error parsing the body of your request.")
        return _openai_error(
            "We could not parse the JSON body of your request. (HINT: This likely means you "
            "aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, "
            "but what was sent was not valid JSON.)"
        )

    def _chat_completions(self, provider: FakeProvider, body: Any) -> None:
        messages = validate_chat_completions(body)
        prompt_tokens = sum(count_tokens(message) for message in messages)
        limit = provider.context_limit
        if limit is not None and prompt_tokens > limit:
            message = OPENAI_CONTEXT_LENGTH.format(limit=limit, tokens=prompt_tokens)
            raise _openai_error(message, param="messages", code="context_length_exceeded")
        reply = provider._answer(messages, body.get("tools"), "chat")
        completion_id = provider._new_id("chatcmpl-fake")
        created = int(time.time())
        model = str(body["model"])
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            self._send_events(
                _chat_completion_chunks(
                    completion_id, model, reply, prompt_tokens, created, include_usage
                ),
                anthropic=False,
            )
        else:
            completion = _chat_completion(completion_id, model, reply, prompt_tokens, created)
            self._send_json(200, completion, anthropic=False)

    def _responses(self, provider: FakeProvider, body: Any) -> None:
        items, instructions = validate_responses(body)
        if isinstance(items, str):
            input_tokens = count_tokens(items)
            items = [{"role": "user", "content": items}]
        else:
            input_tokens = sum(count_tokens(item) for item in items)
        if instructions is not None:
            input_tokens += count_tokens(instructions)
        limit = provider.context_limit
        if limit is not None and input_tokens > limit:
            raise _openai_error(
                RESPONSES_CONTEXT_LENGTH, param="input", code="context_length_exceeded"
            )
        reply = provider._answer(items, body.get("tools"), "responses")
        response_id = provider._new_id("resp_fake")
        item_id = provider._new_id("fc_fake" if isinstance(reply, _ToolCall) else "msg_fake")
        created = int(time.time())
        if body.get("stream"):
            events = _responses_events(response_id, item_id, body, created, reply, input_tokens)
            self._send_events(events, anthropic=False)
        else:
            output = [_responses_item(item_id, reply)]
            usage = _responses_usage(input_tokens, _output_tokens(reply))
            response = _response(response_id, body, created, output, usage)
            self._send_json(200, response, anthropic=False)

    def _messages(self, provider: FakeProvider, body: Any) -> None:
        messages, system = validate_messages(body)
        input_tokens = sum(count_tokens(message) for message in messages)
        if system is not None:
            input_tokens += count_tokens(system)
        limit = provider.context_limit
        if limit is not None and input_tokens > limit:
            raise _anthropic_error(
                ANTHROPIC_CONTEXT_LENGTH.format(tokens=input_tokens, limit=limit)
            )
        reply = provider._answer(messages, body.get("tools"), "messages")
        message_id = provider._new_id("msg_fake")
        model = str(body["model"])
        if body.get("stream"):
            self._send_events(
                _message_events(message_id, model, reply, input_tokens), anthropic=True
            )
        else:
            self._send_json(200, _message(message_id, model, reply, input_tokens), anthropic=True)

    def _request_id_header(self, anthropic: bool) -> Tuple[str, str]:
        request_id = self.server.provider._new_id("req_fake")
        return ("request-id" if anthropic else "x-request-id", request_id)

    def _send_json(self, status: int, body: Json, anthropic: bool, close: bool = False) -> None:
        name, request_id = self._request_id_header(anthropic)
        if anthropic and body.get("type") == "error":
            body = {**body, "request_id": request_id}
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header(name, request_id)
        if close:
            self.send_header("Connection", "close")  # also ends the handler's loop
        self.end_headers()
        self.wfile.write(data)  # sent with the headers when the stdlib flushes wfile

    def _send_events(self, events: Iterator[bytes], anthropic: bool) -> None:
        name, request_id = self._request_id_header(anthropic)
        self._streaming = True
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header(name, request_id)
        self.end_headers()
        for event in events:
            self.wfile.write(b"%X\r\n%s\r\n" % (len(event), event))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class FakeProvider:
    """A fake OpenAI + Anthropic HTTP server on a background thread.

    Use it as a context manager; it listens from construction and serves once
    started:

        with FakeProvider() as provider:
            ...  # point a client at provider.base_url

    Args:
        host: The address to bind; loopback by default.
        port: The port to bind; 0 picks a free one.
        reply: The assistant text of every reply, or a callable given the
            request's messages (Responses input items, a string input as one
            user message). By default ``"Fake reply to N messages."``.
        tool_calls: How many tool calls the model makes after each user
            prompt before it answers with text: while fewer than this many tool
            results follow the last user prompt and the request offers a
            function tool, the reply calls the first one offered, with a value
            for each required argument of its schema.
        context_limit: The most input tokens a request may hold; a request
            over it gets the provider's context-length error. ``None`` (the
            default) sets no limit.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        reply: str | Callable[[List[Json]], str] | None = None,
        tool_calls: int = 0,
        context_limit: Optional[int] = None,
    ) -> None:
        self._host = host
        self._server = _Server((host, port), _Handler)
        self._server.provider = self
        self._reply_setting = reply
        self.tool_calls = tool_calls
        self.context_limit = context_limit
        self._lock = threading.Lock()
        self._requests: List[RecordedRequest] = []
        self._ids = itertools.count(1)
        self._thread: Optional[threading.Thread] = None

    @property
    def port(self) -> int:
        """The port the server listens on."""
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT``; OpenAI clients add ``/v1``, Anthropic clients do not."""
        return f"http://{self._host}:{self.port}"

    @property
    def openai_url(self) -> str:
        """The ``base_url`` an OpenAI client takes: ``http://HOST:PORT/v1``."""
        return self.base_url + "/v1"

    @property
    def anthropic_url(self) -> str:
        """The ``base_url`` an Anthropic client takes: ``http://HOST:PORT``."""
        return self.base_url

    @property
    def requests(self) -> List[RecordedRequest]:
        """A snapshot of every request received so far, oldest first."""
        with self._lock:
            return list(self._requests)

    def clear(self) -> None:
        """Forget the recorded requests."""
        with self._lock:
            self._requests.clear()

    def start(self) -> FakeProvider:
        """Serve on a daemon thread; return ``self``."""
        if self._thread is None:
            # A short poll interval keeps close() quick: shutdown() waits for one poll.
            self._thread = threading.Thread(
                target=self._server.serve_forever,
                kwargs={"poll_interval": 0.02},
                name="fake-provider",
                daemon=True,
            )
            self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve on the calling thread until interrupted (the command line uses this)."""
        self._server.serve_forever()

    def close(self) -> None:
        """Stop serving and release the port. Safe to call more than once."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        self._server.server_close()
        # Keep-alive connections opened earlier would otherwise go on being served.
        self._server.close_connections()

    def __enter__(self) -> FakeProvider:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def _new_id(self, prefix: str) -> str:
        with self._lock:
            return f"{prefix}{next(self._ids):06d}"

    def _answer(self, messages: List[Json], tools: Any, api: str) -> Reply:
        tool = _first_tool(tools, api)
        if tool is not None and _tool_results_since_prompt(messages, api) < self.tool_calls:
            name, schema = tool
            prefix = {"chat": "call_fake", "responses": "call_fake", "messages": "toolu_fake"}[api]
            arguments = json.dumps(_sample_arguments(schema))
            return _ToolCall(self._new_id(prefix), name, arguments)
        return self._reply(messages)

    def _reply(self, messages: List[Json]) -> str:
        if self._reply_setting is None:
            return f"Fake reply to {len(messages)} messages."
        if callable(self._reply_setting):
            return self._reply_setting(messages)
        return self._reply_setting


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Serve in the foreground, printing the base URL, until Ctrl-C."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback)")
    parser.add_argument("--port", type=int, default=0, help="port to bind (default: a free one)")
    args = parser.parse_args(argv)
    provider = FakeProvider(args.host, args.port)
    print(provider.base_url, flush=True)
    try:
        provider.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        provider.close()
    return 0
