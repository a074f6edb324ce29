"""Bedrock Runtime's Converse API in the kit: ``converse`` and ``converse-stream``.

``validate_messages`` reads ``messages`` as Bedrock does and lists what it
rejects, in Bedrock's words: a role it does not know, a message with no content
blocks, a conversation that does not start with a user message or whose roles
do not alternate, ``toolResult`` blocks that outnumber the ``toolUse`` blocks of
the assistant message before them, and ``toolUse`` ids the next message does not
answer with a ``toolResult``.

The routes are ``POST /model/{modelId}/converse`` and ``/converse-stream``
(its events in AWS's event-stream framing, ``_eventstream``), for any model id.
A refusal is a ``ValidationException``: HTTP 400, ``{"message": ...}`` and the
``x-amzn-ErrorType`` header boto3 reads. A request whose messages hold tool
blocks needs a ``toolConfig``, as Bedrock's does. ``inputTokens`` is the sum over
``messages`` of each one's ``count_tokens`` (its image and document blocks
billed at Claude's prices instead, ``_billing``) plus ``count_tokens(system)``
when a ``system`` list is given (``input_tokens``); over ``context_limit`` the request
gets Bedrock's "Input is too long for requested model.".

With the prompt cache on, a ``cachePoint`` block (in ``toolConfig.tools``, the
``system`` list or a message's content; in that order) is a breakpoint ending
the prefix at the unit before it, cached by Anthropic's rule
(``_cache.breakpoint_split``): ``usage`` splits ``inputTokens`` into
``cacheReadInputTokens``, ``cacheWriteInputTokens`` and ``inputTokens``, the rest.
"""

from __future__ import annotations

import json
import time
from typing import Any, Iterator, List, Optional, Sequence, Tuple

from . import _eventstream
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
from ._billing import bedrock_part, billed
from ._cache import PromptCache, breakpoint_split, unit_key

INVALID_ROLE = (
    "1 validation error detected: Value '{role}' at 'messages.{index}.member.role' failed to "
    "satisfy constraint: Member must satisfy enum value set: [user, assistant]"
)
EMPTY_CONTENT = (
    "The content field in the Message object at messages.{index} is empty. Add a ContentBlock "
    "object to the content field and try again."
)
START_WITH_USER = (
    "A conversation must start with a user message. Try again with a conversation that starts "
    "with a user message."
)
ALTERNATE = (
    "A conversation must alternate between user and assistant roles. Make sure the "
    "conversation alternates between user and assistant roles and try again."
)
EXCESS_RESULTS = (
    "The number of toolResult blocks at messages.{index}.content exceeds the number of toolUse "
    "blocks of previous turn."
)
MISSING_RESULTS = (
    "Expected toolResult blocks at messages.{index}.content for the following Ids: {ids}"
)
CONTEXT_LENGTH = "Input is too long for requested model."
TOOL_CONFIG_REQUIRED = (
    "The toolConfig field must be defined when using toolUse and toolResult content blocks."
)
ROLES = ("user", "assistant")


def blocks(message: Any) -> List[Any]:
    """A message's content blocks, or none when it has none (or is not an object)."""
    found = message.get("content") if isinstance(message, dict) else None
    return list(found) if isinstance(found, list) else []


def _of_kind(message: Any, kind: str) -> List[Json]:
    return [
        block[kind]
        for block in blocks(message)
        if isinstance(block, dict) and isinstance(block.get(kind), dict)
    ]


def tool_uses(message: Any) -> List[Json]:
    """A message's ``toolUse`` blocks (their inner objects), in order."""
    return _of_kind(message, "toolUse")


def tool_results(message: Any) -> List[Json]:
    """A message's ``toolResult`` blocks (their inner objects), in order."""
    return _of_kind(message, "toolResult")


# --- the request --------------------------------------------------------------


def validate_messages(messages: Any) -> List[Problem]:
    """List what Bedrock's Converse API rejects in ``messages``, in order, in its own words.

    Args:
        messages: A ``converse`` request's ``messages``, as decoded JSON.

    Returns:
        Every problem found: the fields' first, then the roles', then the tool
        blocks', each in message order; empty when Bedrock accepts ``messages``.
        A request is answered with the first.
    """
    if not isinstance(messages, list) or not messages:
        return [Problem(None, START_WITH_USER)]
    problems: List[Problem] = []
    for index, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role not in ROLES:
            problems.append(Problem(index, INVALID_ROLE.format(role=role, index=index)))
        elif not blocks(message):
            problems.append(Problem(index, EMPTY_CONTENT.format(index=index)))
    if problems:
        # The fields are checked before the conversation is read.
        return problems
    if messages[0]["role"] != "user":
        problems.append(Problem(0, START_WITH_USER))
    for index in range(1, len(messages)):
        if messages[index]["role"] == messages[index - 1]["role"]:
            problems.append(Problem(index, ALTERNATE))
    for index, message in enumerate(messages):
        problems += _check_tool_pairing(messages, index, message)
    return problems


def _check_tool_pairing(messages: Sequence[Json], index: int, message: Json) -> List[Problem]:
    problems: List[Problem] = []
    previous = messages[index - 1] if index else None
    results = tool_results(message)
    if results:
        uses = tool_uses(previous) if previous is not None else []
        if len(results) > len(uses):
            problems.append(Problem(index, EXCESS_RESULTS.format(index=index)))
    uses = tool_uses(message)
    if uses:
        # The answers are in the next message; none follows an unanswered call at the end.
        following = messages[index + 1] if index + 1 < len(messages) else None
        answered = [r.get("toolUseId") for r in tool_results(following)]
        missing = [str(u.get("toolUseId")) for u in uses if u.get("toolUseId") not in answered]
        if missing:
            ids = ", ".join(dict.fromkeys(missing))
            problems.append(Problem(index + 1, MISSING_RESULTS.format(index=index + 1, ids=ids)))
    return problems


def message_tokens(messages: Sequence[Any]) -> List[int]:
    """Each message as billed (``_billing``)."""
    return [billed(message, bedrock_part, count_tokens) for message in messages]


def input_tokens(
    messages: Sequence[Any], system: Any = None, counts: Optional[Sequence[int]] = None
) -> int:
    """``inputTokens``: each message as billed (or ``counts``), plus the ``system`` list's."""
    total = sum(message_tokens(messages) if counts is None else counts)
    if system is not None:
        total += count_tokens(system)
    return total


def bedrock_error(
    message: str, *, error_type: str = "ValidationException", status: int = 400
) -> RequestRejected:
    """AWS's REST-JSON error: ``{"message": ...}``, its type in ``x-amzn-ErrorType``."""
    return RequestRejected(status, {"message": message}, {"x-amzn-ErrorType": error_type})


class BedrockEnvelope:
    """AWS's errors outside the Converse rules; boto3 signs with ``X-Amz-Date``."""

    request_id_header: Optional[str] = "x-amzn-RequestId"
    sdk_header: Optional[str] = "x-amz-date"

    def framing_error(self, message: str, status: int) -> RequestRejected:
        return bedrock_error(message, status=status)

    def not_found(self, method: str, path: str) -> RequestRejected:
        return bedrock_error(
            f"Unknown operation: {method} {path}",
            error_type="UnknownOperationException",
            status=404,
        )

    def unparseable(self) -> RequestRejected:
        return bedrock_error(
            "Unable to parse the request body.", error_type="SerializationException"
        )

    def failed(self, message: str) -> RequestRejected:
        return bedrock_error(message, error_type="InternalServerException", status=500)

    def identified(self, body: Json, request_id: str) -> Json:
        return body


ENVELOPE = BedrockEnvelope()


def validate_request(body: Any) -> Tuple[List[Json], Any]:
    """Check a ``converse`` request as Bedrock does; return its messages and system.

    Raises:
        RequestRejected: A ``ValidationException`` for the first problem found.
    """
    if not isinstance(body, dict):
        raise bedrock_error(
            "Unable to parse the request body.", error_type="SerializationException"
        )
    problems = validate_messages(body.get("messages"))
    if problems:
        raise bedrock_error(problems[0].message)
    messages: List[Json] = body["messages"]
    has_tool_blocks = any(tool_uses(m) or tool_results(m) for m in messages)
    if has_tool_blocks and not isinstance(body.get("toolConfig"), dict):
        raise bedrock_error(TOOL_CONFIG_REQUIRED)
    return messages, body.get("system")


def first_tool(tool_config: Any) -> Optional[Tool]:
    """The first tool a request offers: ``toolConfig.tools[].toolSpec``, ``inputSchema.json``."""
    tools = tool_config.get("tools") if isinstance(tool_config, dict) else None
    for tool in tools if isinstance(tools, list) else []:
        spec = tool.get("toolSpec") if isinstance(tool, dict) else None
        if isinstance(spec, dict) and spec.get("name"):
            schema = spec.get("inputSchema")
            return Tool(str(spec["name"]), schema.get("json") if isinstance(schema, dict) else {})
    return None


def tool_results_since_prompt(messages: Sequence[Json]) -> int:
    """How many ``toolResult`` blocks follow the last user message that is not only those."""
    count = 0
    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        results = len(tool_results(message))
        count += results
        if results < len(blocks(message)):
            return count
    return count


# --- the reply ----------------------------------------------------------------


def cache_split(
    cache: PromptCache, name: str, body: Json, messages: List[Json], counts: List[int]
) -> Tuple[int, int]:
    """``(cacheReadInputTokens, cacheWriteInputTokens)`` of a prompt with ``cachePoint`` blocks.

    ``counts`` is each message as billed; a prefix that ends inside a message
    counts it with its content cut after the prefix's last block.
    """
    config = body.get("toolConfig")
    tools = config.get("tools") if isinstance(config, dict) else None
    system = body.get("system")
    system_blocks: List[Any] = system if isinstance(system, list) else []
    system_tokens = count_tokens(system) if system is not None else 0
    keys: List[str] = []
    breakpoints: List[int] = []
    # Where each unit ends: ("tool", 0, 0), ("system", 0, block) or ("message", index, block).
    ends: List[Tuple[str, int, int]] = []

    def add(block: Any, end: Tuple[str, int, int], role: Any = None) -> None:
        if isinstance(block, dict) and "cachePoint" in block:
            if keys:  # a breakpoint at the unit before it
                breakpoints.append(len(keys))
            return
        keys.append(unit_key(*end, role, block))
        ends.append(end)

    for tool in tools if isinstance(tools, list) else []:
        add(tool, ("tool", 0, 0))
    for k, block in enumerate(system_blocks):
        add(block, ("system", 0, k))
    for index, entry in enumerate(messages):
        for k, block in enumerate(blocks(entry)):
            add(block, ("message", index, k), entry.get("role"))
    before = [0]
    for count in counts:
        before.append(before[-1] + count)

    def through(n: int) -> int:
        part, index, k = ends[n - 1]
        if part == "tool":  # tools are not billed
            return 0
        if part == "system":
            return count_tokens(system_blocks[: k + 1])
        content = blocks(messages[index])
        if k + 1 == len(content):
            return system_tokens + before[index + 1]
        cut = {**messages[index], "content": content[: k + 1]}
        return system_tokens + before[index] + billed(cut, bedrock_part, count_tokens)

    return breakpoint_split(cache, f"converse:{name}", keys, breakpoints, through)


def usage(input_tokens: int, output_tokens: int, read: int = 0, write: int = 0) -> Json:
    """The Converse API's ``usage``: ``inputTokens`` leaves out what the cache read or wrote."""
    figures: Json = {
        "inputTokens": input_tokens - read - write,
        "outputTokens": output_tokens,
        "totalTokens": input_tokens + output_tokens,
    }
    if read or write:
        figures["cacheReadInputTokens"] = read
        figures["cacheWriteInputTokens"] = write
    return figures


def _stop_reason(reply: Reply) -> str:
    return "tool_use" if isinstance(reply, ToolCall) else "end_turn"


def _block(reply: Reply) -> Json:
    if isinstance(reply, ToolCall):
        return {
            "toolUse": {
                "toolUseId": reply.call_id,
                "name": reply.name,
                "input": json.loads(reply.arguments),
            }
        }
    return {"text": reply}


def converse_response(
    reply: Reply, input_tokens: int, latency_ms: int, cached: Tuple[int, int] = (0, 0)
) -> Json:
    """A ``converse`` response: ``output.message``, ``stopReason``, ``usage``, ``metrics``.

    ``cached`` is what the cache read and wrote of the ``input_tokens``.
    """
    return {
        "output": {"message": {"role": "assistant", "content": [_block(reply)]}},
        "stopReason": _stop_reason(reply),
        "usage": usage(input_tokens, output_tokens(reply), *cached),
        "metrics": {"latencyMs": latency_ms},
    }


def stream_events(
    reply: Reply, input_tokens: int, latency_ms: int, cached: Tuple[int, int] = (0, 0)
) -> Iterator[bytes]:
    """``reply`` as ``converse-stream`` events, AWS event-stream framed.

    ``messageStart``; for a tool call a ``contentBlockStart`` naming it; the
    deltas; ``contentBlockStop``; ``messageStop``; ``metadata`` with the usage.
    """
    yield _eventstream.event("messageStart", {"role": "assistant"})
    where: Json = {"contentBlockIndex": 0}
    if isinstance(reply, ToolCall):
        start = {"toolUse": {"toolUseId": reply.call_id, "name": reply.name}}
        yield _eventstream.event("contentBlockStart", {**where, "start": start})
        deltas: List[Json] = [{"toolUse": {"input": p}} for p in pieces(reply.arguments)]
    else:
        deltas = [{"text": piece} for piece in pieces(reply)] or [{"text": ""}]
    for delta in deltas:
        yield _eventstream.event("contentBlockDelta", {**where, "delta": delta})
    yield _eventstream.event("contentBlockStop", where)
    yield _eventstream.event("messageStop", {"stopReason": _stop_reason(reply)})
    metadata = {
        "usage": usage(input_tokens, output_tokens(reply), *cached),
        "metrics": {"latencyMs": latency_ms},
    }
    yield _eventstream.event("metadata", metadata)


def _answer(body: Any, model: Model, target: Target) -> Tuple[Reply, int, int, Tuple[int, int]]:
    started = time.monotonic()
    messages, system = validate_request(body)
    counts = message_tokens(messages)
    tokens = input_tokens(messages, system, counts)
    limit = model.context_limit
    if limit is not None and tokens > limit:
        raise bedrock_error(CONTEXT_LENGTH)
    tool = first_tool(body.get("toolConfig"))
    reply = model.answer(messages, tool, tool_results_since_prompt(messages), "tooluse_fake")
    name = str(target.params.get("modelId"))
    cached = (0, 0)
    if model.prompt_cache is not None:
        cached = cache_split(model.prompt_cache, name, body, messages, counts)
    model.bill(name, tokens, output_tokens(reply), *cached)
    return reply, tokens, int((time.monotonic() - started) * 1000), cached


def serve_converse(body: Any, model: Model, target: Target) -> Answer:
    """Answer one ``converse`` request (any ``modelId``), or raise its ``RequestRejected``."""
    reply, tokens, latency_ms, cached = _answer(body, model, target)
    return converse_response(reply, tokens, latency_ms, cached)


def serve_converse_stream(body: Any, model: Model, target: Target) -> Answer:
    """Answer one ``converse-stream`` request with an event stream, or raise before it starts."""
    reply, tokens, latency_ms, cached = _answer(body, model, target)
    events = stream_events(reply, tokens, latency_ms, cached)
    return Stream(events, "application/vnd.amazon.eventstream")


ROUTES = (
    Route("/model/{modelId}/converse", ENVELOPE, serve_converse),
    Route("/model/{modelId}/converse-stream", ENVELOPE, serve_converse_stream),
)
