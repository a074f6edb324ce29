"""A local stand-in for the OpenAI Chat Completions and Anthropic Messages APIs.

The real ``openai`` and ``anthropic`` SDKs can be pointed at it, so tests prove
that a compacted message list is one the providers accept, without a network::

    with FakeProvider() as provider:
        client = openai.OpenAI(base_url=provider.base_url + "/v1", api_key="test", max_retries=0)
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
        provider.requests[-1].body["messages"]

It validates tool pairing the way each provider does and answers a broken
conversation with the provider's own 400 envelope and wording (sources in
/work/notes/sdk_research.md). It does not model anything else: no sampling, no
tools in the reply, no authentication (any headers are accepted and recorded).

Token figures are deterministic. Every message costs ``count_tokens(message)``:
its compact JSON (``separators=(",", ":")``, ``ensure_ascii=False``), measured in
UTF-16 code units, divided by 4 and rounded up, which is also ctx-compact's
default estimator. ``prompt_tokens`` (OpenAI) is the sum over ``messages``;
``input_tokens`` (Anthropic) is the sum over ``messages`` plus
``count_tokens(system)`` when a top-level ``system`` is given. The reply costs
``count_tokens(reply_text)``.

Standard library only, Python 3.9+. Run ``python tests/fake_provider.py
[--port N]`` to serve in the foreground for the examples.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Set, Tuple
from urllib.parse import urlsplit

__all__ = ["FakeProvider", "RecordedRequest", "RequestRejected", "count_tokens", "main"]

CHAT_COMPLETIONS_PATH = "/v1/chat/completions"
MESSAGES_PATH = "/v1/messages"

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
ANTHROPIC_EMPTY_CONTENT = (
    "messages.{index}: all messages must have non-empty content except for the optional final "
    "assistant message"
)

Json = Dict[str, Any]


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
    """

    method: str
    path: str
    headers: Dict[str, str]
    body: Any


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


def validate_chat_completions(body: Any) -> List[Json]:
    """Check a Chat Completions request as OpenAI does and return its messages.

    Raises:
        RequestRejected: With OpenAI's error envelope, for the first problem found.
    """
    if not isinstance(body, dict):
        raise _openai_error(
            f"Invalid type for body: expected an object, but got {_json_type(body)} instead."
        )
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
        if not isinstance(message, dict):
            raise _openai_error(
                f"Invalid type for 'messages[{index}]': expected an object, but got "
                f"{_json_type(message)} instead.",
                param=f"messages[{index}]",
                code="invalid_type",
            )
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


# --- replies ------------------------------------------------------------------


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


def _chat_completion(
    completion_id: str, model: str, text: str, prompt_tokens: int, created: int
) -> Json:
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": text,
                    "refusal": None,
                    "annotations": [],
                },
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": _openai_usage(prompt_tokens, count_tokens(text)),
        "service_tier": "default",
        "system_fingerprint": "fp_fake",
    }


def _chat_completion_chunks(
    completion_id: str,
    model: str,
    text: str,
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

    yield _sse(chunk({"role": "assistant", "content": "", "refusal": None}, None))
    for piece in _pieces(text):
        yield _sse(chunk({"content": piece}, None))
    yield _sse(chunk({}, "stop"))
    if include_usage:
        last = chunk({}, None)
        last["choices"] = []
        last["usage"] = _openai_usage(prompt_tokens, count_tokens(text))
        yield _sse(last)
    yield _sse("[DONE]")


def _message(message_id: str, model: str, text: str, input_tokens: int) -> Json:
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": count_tokens(text),
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "service_tier": "standard",
        },
    }


def _message_events(message_id: str, model: str, text: str, input_tokens: int) -> Iterator[bytes]:
    start = _message(message_id, model, "", input_tokens)
    start["content"] = []
    start["stop_reason"] = None
    start["usage"]["output_tokens"] = 1
    yield _sse({"type": "message_start", "message": start}, "message_start")
    yield _sse(
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        "content_block_start",
    )
    yield _sse({"type": "ping"}, "ping")
    for piece in _pieces(text):
        delta = {"type": "text_delta", "text": piece}
        yield _sse(
            {"type": "content_block_delta", "index": 0, "delta": delta}, "content_block_delta"
        )
    yield _sse({"type": "content_block_stop", "index": 0}, "content_block_stop")
    yield _sse(
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": count_tokens(text)},
        },
        "message_delta",
    )
    yield _sse({"type": "message_stop"}, "message_stop")


# --- HTTP ---------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    provider: FakeProvider

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up mid-stream is normal; anything else is a bug.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "FakeProvider/1.0"
    # Idle keep-alive connections end on their own instead of pinning a thread.
    timeout = 10
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

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _serve(self, method: str) -> None:
        self._streaming = False  # a keep-alive connection reuses the handler
        provider = self.server.provider
        path = urlsplit(self.path).path
        raw = self._read_body()
        headers = {name.lower(): value for name, value in self.headers.items()}
        try:
            body: Any = json.loads(raw) if raw else None
            parsed = True
        except ValueError:
            body, parsed = None, False
        provider._record(RecordedRequest(method, path, headers, body))
        if path in (CHAT_COMPLETIONS_PATH, MESSAGES_PATH):
            anthropic = path == MESSAGES_PATH
        else:
            anthropic = "anthropic-version" in headers
        try:
            if method != "POST" or path not in (CHAT_COMPLETIONS_PATH, MESSAGES_PATH):
                raise self._not_found(method, path, anthropic)
            if not parsed:
                raise self._unparseable(anthropic)
            if path == CHAT_COMPLETIONS_PATH:
                self._chat_completions(provider, body)
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
        text = provider._reply(messages)
        completion_id = provider._new_id("chatcmpl-fake")
        created = int(time.time())
        model = str(body["model"])
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            self._send_events(
                _chat_completion_chunks(
                    completion_id, model, text, prompt_tokens, created, include_usage
                ),
                anthropic=False,
            )
        else:
            reply = _chat_completion(completion_id, model, text, prompt_tokens, created)
            self._send_json(200, reply, anthropic=False)

    def _messages(self, provider: FakeProvider, body: Any) -> None:
        messages, system = validate_messages(body)
        input_tokens = sum(count_tokens(message) for message in messages)
        if system is not None:
            input_tokens += count_tokens(system)
        text = provider._reply(messages)
        message_id = provider._new_id("msg_fake")
        model = str(body["model"])
        if body.get("stream"):
            self._send_events(
                _message_events(message_id, model, text, input_tokens), anthropic=True
            )
        else:
            self._send_json(200, _message(message_id, model, text, input_tokens), anthropic=True)

    def _request_id_header(self, anthropic: bool) -> Tuple[str, str]:
        request_id = self.server.provider._new_id("req_fake")
        return ("request-id" if anthropic else "x-request-id", request_id)

    def _send_json(self, status: int, body: Json, anthropic: bool) -> None:
        name, request_id = self._request_id_header(anthropic)
        if anthropic and body.get("type") == "error":
            body = {**body, "request_id": request_id}
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header(name, request_id)
        self.end_headers()
        self.wfile.write(data)

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
    started::

        with FakeProvider() as provider:
            ...  # point a client at provider.base_url

    Args:
        host: The address to bind; loopback by default.
        port: The port to bind; 0 picks a free one.
        reply: The assistant text of every reply, or a callable given the
            request's messages. By default ``"Fake reply to N messages."``.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        reply: str | Callable[[List[Json]], str] | None = None,
    ) -> None:
        self._host = host
        self._server = _Server((host, port), _Handler)
        self._server.provider = self
        self._reply_setting = reply
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


if __name__ == "__main__":
    sys.exit(main())
