"""Anthropic Messages in the kit: ``POST /v1/messages`` (``?beta=true`` too), plain and streamed.

The validator checks a request as Anthropic does and answers a broken one with
Anthropic's own 400 wording. Tool pairing is checked message by message, as
Anthropic's errors say ("in the next message"), even where consecutive messages
of one role form one turn: the ``tool_result`` blocks of a user message must
answer ``tool_use`` blocks of the assistant message just before, and each
``tool_use`` that ends an assistant message must be answered at the start of the
next message (results split over two user messages are refused).
``input_tokens`` is the sum of ``count_tokens`` over ``messages`` plus
``count_tokens(system)`` when a top-level ``system`` is given; over
``context_limit`` the request gets Anthropic's "prompt is too long".

With the prompt cache on, the prompt is cached at its ``cache_control``
breakpoints (on a tool, a system block or a message's content block; in that
order), by Anthropic's rule (``_cache.breakpoint_split``): ``usage`` splits that
sum into ``cache_read_input_tokens``, ``cache_creation_input_tokens`` and
``input_tokens``, the rest. A prefix that ends inside a message counts that
message with its content cut after the breakpoint's block; tools are not
billed, so a breakpoint on a tool alone caches nothing. The cached messages are
cached under the request's ``tool_choice`` and ``thinking``: a request that
changes either reads at most the tools and the system prompt from the cache.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterator, List, Optional, Sequence, Set, Tuple

from ._api import (
    Answer,
    Json,
    Model,
    Reply,
    RequestRejected,
    Route,
    Target,
    Tool,
    ToolCall,
    count_tokens,
    output_tokens,
    pieces,
    sse,
)
from ._billing import anthropic_part, billed
from ._cache import PromptCache, breakpoint_split, unit_key

PATH = "/v1/messages"

MISSING_TOOL_RESULTS = (
    "messages.{index}: `tool_use` ids were found without `tool_result` blocks immediately "
    "after: {ids}. Each `tool_use` block must have a corresponding `tool_result` block in the "
    "next message."
)
UNEXPECTED_TOOL_RESULT = (
    "messages.{index}.content.{block}: unexpected `tool_use_id` found in `tool_result` blocks: "
    "{id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous "
    "message."
)
CONTEXT_LENGTH = "prompt is too long: {tokens} tokens > {limit} maximum"
EMPTY_CONTENT = (
    "messages.{index}: all messages must have non-empty content except for the optional final "
    "assistant message"
)


def anthropic_error(
    message: str, *, status: int = 400, error_type: str = "invalid_request_error"
) -> RequestRejected:
    """Anthropic's error envelope around ``message``."""
    return RequestRejected(
        status, {"type": "error", "error": {"type": error_type, "message": message}}
    )


class AnthropicEnvelope:
    """Anthropic's errors outside the Messages rules; its SDK sends ``anthropic-version``."""

    request_id_header: Optional[str] = "request-id"
    sdk_header: Optional[str] = "anthropic-version"

    def framing_error(self, message: str, status: int) -> RequestRejected:
        if status == 413:
            return anthropic_error(message, status=413, error_type="request_too_large")
        return anthropic_error(message, status=status)

    def not_found(self, method: str, path: str) -> RequestRejected:
        return anthropic_error("Not Found", status=404, error_type="not_found_error")

    def unparseable(self) -> RequestRejected:
        return anthropic_error("There was an error parsing the body of your request.")

    def failed(self, message: str) -> RequestRejected:
        return anthropic_error(message, status=500, error_type="api_error")

    def identified(self, body: Json, request_id: str) -> Json:
        # Anthropic repeats the request id inside an error body.
        if body.get("type") == "error":
            return {**body, "request_id": request_id}
        return body


ENVELOPE = AnthropicEnvelope()


# --- the request --------------------------------------------------------------


def validate_messages(body: Any) -> Tuple[List[Json], Any]:
    """Check a Messages request as Anthropic does; return its messages and system.

    Raises:
        RequestRejected: With Anthropic's error envelope, for the first problem found.
    """
    if not isinstance(body, dict):
        raise anthropic_error("Input should be a valid dictionary")
    for field in ("model", "max_tokens", "messages"):
        if field not in body:
            raise anthropic_error(f"{field}: Field required")
    messages = body["messages"]
    if not isinstance(messages, list):
        raise anthropic_error("messages: Input should be a valid list")
    if not messages:
        raise anthropic_error("messages: at least one message is required")
    for index, message in enumerate(messages):
        _check_message(messages, index, message)
    _check_tool_pairing(messages)
    return messages, body.get("system")


def blocks(content: Any) -> List[Json]:
    """A message's content as blocks: a string is one text block."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content)


def _check_message(messages: Sequence[Any], index: int, message: Any) -> None:
    if not isinstance(message, dict):
        raise anthropic_error(f"messages.{index}: Input should be a valid dictionary")
    role = message.get("role")
    if role not in ("user", "assistant", "system"):
        raise anthropic_error(
            f"messages.{index}.role: Input should be 'user', 'assistant' or 'system'"
        )
    # A mid-conversation system message is accepted where Claude documents it:
    # straight after a user turn. This wording is the fake's own.
    if role == "system" and (index == 0 or messages[index - 1].get("role") != "user"):
        raise anthropic_error(
            f"messages.{index}: a `system` message must immediately follow a `user` message"
        )
    content = message.get("content")
    if not isinstance(content, (str, list)):
        raise anthropic_error(f"messages.{index}.content: Field required")
    is_final_assistant = role == "assistant" and index == len(messages) - 1
    if not content and not is_final_assistant:
        raise anthropic_error(EMPTY_CONTENT.format(index=index))
    for block_index, block in enumerate(blocks(content)):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise anthropic_error(
                f"messages.{index}.content.{block_index}: Input should be a valid dictionary"
            )
        if block["type"] == "text" and isinstance(content, list) and not block.get("text"):
            raise anthropic_error("messages: text content blocks must be non-empty")


@dataclass
class _Turn:
    """One message's role and blocks, as tool pairing reads them."""

    role: str
    blocks: List[Tuple[int, int, Json]]  # (message index, block index, block)


def _turns(messages: Sequence[Json]) -> List[_Turn]:
    return [
        _Turn(
            message["role"], [(i, k, block) for k, block in enumerate(blocks(message["content"]))]
        )
        for i, message in enumerate(messages)
    ]


def _check_tool_pairing(messages: Sequence[Json]) -> None:
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
            raise anthropic_error(
                UNEXPECTED_TOOL_RESULT.format(
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
        raise anthropic_error(MISSING_TOOL_RESULTS.format(index=missing[0][0], ids=ids))


def first_tool(tools: Any, choice: Any = None) -> Optional[Tool]:
    """The first client tool a request offers, as ``{"name", "input_schema"}``;
    ``None`` when its ``tool_choice`` is ``{"type": "none"}``."""
    if isinstance(choice, dict) and choice.get("type") == "none":
        return None
    for tool in tools if isinstance(tools, list) else []:
        if isinstance(tool, dict) and "input_schema" in tool:
            return Tool(str(tool.get("name")), tool["input_schema"])
    return None


def tool_results_since_prompt(messages: Sequence[Json]) -> int:
    """How many ``tool_result`` blocks follow the last user message that is not only results."""
    count = 0
    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        found = blocks(message.get("content"))
        results = sum(1 for b in found if isinstance(b, dict) and b.get("type") == "tool_result")
        count += results
        if results < len(found):
            return count
    return count


# --- the reply ----------------------------------------------------------------


def _content(reply: Reply) -> List[Json]:
    if isinstance(reply, ToolCall):
        arguments = json.loads(reply.arguments)
        return [{"type": "tool_use", "id": reply.call_id, "name": reply.name, "input": arguments}]
    return [{"type": "text", "text": reply}]


@dataclass(frozen=True)
class Split:
    """A prompt's input tokens as Anthropic's ``usage`` splits them."""

    input_tokens: int  # neither read from nor written to the cache
    cache_read: int = 0
    cache_write: int = 0


def _uncached(block: Any) -> Any:
    # A breakpoint marks where to cache; it is not part of what is cached.
    if isinstance(block, dict) and "cache_control" in block:
        return {key: value for key, value in block.items() if key != "cache_control"}
    return block


def _marked(block: Any) -> bool:
    return isinstance(block, dict) and block.get("cache_control") is not None


def cache_split(
    cache: PromptCache, name: str, body: Json, messages: List[Json], counts: List[int]
) -> Split:
    """Split a prompt of ``sum(counts)`` tokens (``counts``: each message as billed) by cache."""
    system = body.get("system")
    tools: List[Any] = body["tools"] if isinstance(body.get("tools"), list) else []
    system_blocks = blocks(system) if isinstance(system, (str, list)) else []
    system_tokens = count_tokens(system) if system is not None else 0
    keys: List[str] = []
    breakpoints: List[int] = []
    # Where each unit ends: ("tool", 0, 0), ("system", 0, block) or ("message", index, block).
    ends: List[Tuple[str, int, int]] = []

    # Anthropic documents that a change of tool_choice or of the thinking settings
    # invalidates the cached messages, not the cached tools and system prompt.
    settings = (body.get("tool_choice") or {"type": "auto"}, body.get("thinking") or {})

    def add(block: Any, end: Tuple[str, int, int], role: Any = None) -> None:
        held = settings if end[0] == "message" else None
        keys.append(unit_key(*end, role, held, _uncached(block)))
        ends.append(end)
        if _marked(block):
            breakpoints.append(len(keys))

    for tool in tools:
        add(tool, ("tool", 0, 0))
    for k, block in enumerate(system_blocks):
        add(block, ("system", 0, k))
    for index, entry in enumerate(messages):
        for k, block in enumerate(blocks(entry["content"])):
            add(block, ("message", index, k), entry["role"])
    before = [0]
    for count in counts:
        before.append(before[-1] + count)

    def through(n: int) -> int:
        part, index, k = ends[n - 1]
        if part == "tool":
            return 0
        if part == "system":  # a string is one block, so a cut one is a list
            return count_tokens(system if k + 1 == len(system_blocks) else system_blocks[: k + 1])
        content = messages[index]["content"]
        if k + 1 == len(blocks(content)):  # the whole message (a string is one block)
            return system_tokens + before[index + 1]
        cut = {**messages[index], "content": content[: k + 1]}
        return system_tokens + before[index] + billed(cut, anthropic_part, count_tokens)

    read, write = breakpoint_split(cache, f"messages:{name}", keys, breakpoints, through)
    return Split(before[-1] + system_tokens - read - write, read, write)


def message(message_id: str, model: str, reply: Reply, split: Split) -> Json:
    """A ``message`` object holding ``reply``, with its ``usage``."""
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": _content(reply),
        "stop_reason": "tool_use" if isinstance(reply, ToolCall) else "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": split.input_tokens,
            "output_tokens": output_tokens(reply),
            "cache_creation_input_tokens": split.cache_write,
            "cache_read_input_tokens": split.cache_read,
            "service_tier": "standard",
        },
    }


def message_events(message_id: str, model: str, reply: Reply, split: Split) -> Iterator[bytes]:
    """``reply`` as a Messages stream: ``message_start``, one content block, ``message_stop``."""
    start = message(message_id, model, "", split)
    start["content"] = []
    start["stop_reason"] = None
    start["usage"]["output_tokens"] = 1
    yield sse({"type": "message_start", "message": start}, "message_start")
    if isinstance(reply, ToolCall):
        block: Json = {"type": "tool_use", "id": reply.call_id, "name": reply.name, "input": {}}
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in pieces(reply.arguments)]
    else:
        block = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": piece} for piece in pieces(reply)]
    yield sse(
        {"type": "content_block_start", "index": 0, "content_block": block}, "content_block_start"
    )
    yield sse({"type": "ping"}, "ping")
    for delta in deltas:
        yield sse(
            {"type": "content_block_delta", "index": 0, "delta": delta}, "content_block_delta"
        )
    yield sse({"type": "content_block_stop", "index": 0}, "content_block_stop")
    stop_reason = "tool_use" if isinstance(reply, ToolCall) else "end_turn"
    yield sse(
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            # Cumulative, as Anthropic documents: the input figures repeat message_start's.
            "usage": {
                "input_tokens": split.input_tokens,
                "cache_creation_input_tokens": split.cache_write,
                "cache_read_input_tokens": split.cache_read,
                "output_tokens": output_tokens(reply),
            },
        },
        "message_delta",
    )
    yield sse({"type": "message_stop"}, "message_stop")


def serve(body: Any, model: Model, target: Target) -> Answer:
    """Answer one Messages request, or raise its ``RequestRejected`` (its path names nothing)."""
    messages, system = validate_messages(body)
    counts = [billed(message, anthropic_part, count_tokens) for message in messages]
    input_tokens = sum(counts)
    if system is not None:
        input_tokens += count_tokens(system)
    limit = model.context_limit
    if limit is not None and input_tokens > limit:
        raise anthropic_error(CONTEXT_LENGTH.format(tokens=input_tokens, limit=limit))
    reply = model.answer(
        messages,
        first_tool(body.get("tools"), body.get("tool_choice")),
        tool_results_since_prompt(messages),
        "toolu_fake",
    )
    message_id = model.new_id("msg_fake")
    name = str(body["model"])
    split = Split(input_tokens)
    if model.prompt_cache is not None:
        split = cache_split(model.prompt_cache, name, body, messages, counts)
    model.bill(name, input_tokens, output_tokens(reply), split.cache_read, split.cache_write)
    if body.get("stream"):
        return message_events(message_id, name, reply, split)
    return message(message_id, name, reply, split)


ROUTE = Route(PATH, ENVELOPE, serve)
