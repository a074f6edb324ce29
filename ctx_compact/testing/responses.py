"""OpenAI Responses in the kit: ``POST /v1/responses``, plain and streamed.

The validator checks a request as OpenAI does and answers a broken one with
OpenAI's own 400 wording: each ``function_call_output`` needs an earlier
``function_call`` with its ``call_id``, each call an output (not necessarily
next), and a ``reasoning`` item needs the item the model produced after it (a
call or an assistant message) next to it. ``previous_response_id`` is refused,
as the kit keeps no responses.
``input_tokens`` is the sum of ``count_tokens`` over the ``input`` items (or
``count_tokens(input)`` for a string) plus ``count_tokens(instructions)`` when
given; over ``context_limit`` the request gets the Responses API's
context-window error, which names neither figure. With the prompt cache on,
``input_tokens_details.cached_tokens`` is the prefix shared with an earlier
request to the model, in whole units (the tools, the instructions, then each
input item), by OpenAI's rule (``_cache.openai_cached``).
"""

from __future__ import annotations

import itertools
import time
from typing import Any, Iterator, List, Optional, Sequence, Set, Tuple

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
from ._billing import billed, responses_part
from ._cache import openai_cached, unit_key
from ._openai import openai_error

PATH = "/v1/responses"

CONTEXT_LENGTH = (
    "Your input exceeds the context window of this model. Please adjust your input and try again."
)
ORPHAN_OUTPUT = "No tool call found for function call output with call_id {id}."
MISSING_OUTPUT = "No tool output found for function call {id}."
REASONING_ALONE = (
    "Item '{id}' of type 'reasoning' was provided without its required following item."
)
ROLES = ("assistant", "system", "developer", "user")


# --- the request --------------------------------------------------------------


def item_type(item: Json) -> Any:
    """An input item's type; a message item may leave it out: ``{"role": "user", ...}``."""
    return item.get("type", "message" if "role" in item else None)


def validate_responses(body: Any) -> Tuple[Any, Any]:
    """Check a Responses request as OpenAI does; return its input and instructions.

    Raises:
        RequestRejected: With OpenAI's error envelope, for the first problem found.
    """
    _openai.expect_body_object(body)
    if "model" not in body:
        raise openai_error(
            "Missing required parameter: 'model'.", param="model", code="missing_required_parameter"
        )
    previous = body.get("previous_response_id")
    if previous is not None:
        # The fake keeps no responses, so no earlier one can be found.
        raise openai_error(
            f"Previous response with id '{previous}' not found.", param="previous_response_id"
        )
    items = body.get("input")
    if items is None:
        raise openai_error(
            "Missing required parameter: 'input'.", param="input", code="missing_required_parameter"
        )
    if isinstance(items, str):
        return items, body.get("instructions")
    if not isinstance(items, list):
        raise openai_error(
            f"Invalid type for 'input': expected one of a string or an array of input items, "
            f"but got {json_type(items)} instead.",
            param="input",
            code="invalid_type",
        )
    for index, item in enumerate(items):
        _openai.expect_object("input", index, item)
        if item_type(item) == "message" and item.get("role") not in ROLES:
            supported = ", ".join(f"'{r}'" for r in ROLES[:-1])
            raise openai_error(
                f"Invalid value: '{item.get('role')}'. Supported values are: {supported}, and "
                f"'{ROLES[-1]}'.",
                param=f"input[{index}].role",
                code="invalid_value",
            )
    _check_tool_pairing(items)
    return items, body.get("instructions")


def _check_tool_pairing(items: Sequence[Json]) -> None:
    # Unlike Chat Completions, an output need not follow its call at once: each
    # output needs an earlier call with its call_id, each call an output.
    called: Set[Any] = set()
    answered: Set[Any] = set()
    for item in items:
        kind = item_type(item)
        if kind == "function_call":
            called.add(item.get("call_id"))
        elif kind == "function_call_output":
            call_id = item.get("call_id")
            if call_id not in called:
                raise openai_error(ORPHAN_OUTPUT.format(id=call_id), param="input")
            answered.add(call_id)
    for item in items:
        if item_type(item) == "function_call" and item.get("call_id") not in answered:
            raise openai_error(MISSING_OUTPUT.format(id=item.get("call_id")), param="input")
    for index, item in enumerate(items):
        if item_type(item) == "reasoning" and not _produced(items[index + 1 : index + 2]):
            raise openai_error(REASONING_ALONE.format(id=item.get("id")), param="input")


def _produced(following: Sequence[Json]) -> bool:
    """Whether ``following`` is one item the model could have produced after reasoning:
    not the end, nor a message of the user's side, nor a tool's output or an approval."""
    if not following:
        return False
    kind, role = item_type(following[0]), following[0].get("role")
    if kind == "message":
        return role == "assistant"
    return isinstance(kind, str) and not kind.endswith(("_output", "_response"))


def first_tool(tools: Any, choice: Any = None) -> Optional[Tool]:
    """The first function tool a request offers, as ``{"type": "function", "name", ...}``;
    ``None`` when its ``tool_choice`` is ``"none"``."""
    if choice == "none":
        return None
    for tool in tools if isinstance(tools, list) else []:
        if isinstance(tool, dict) and tool.get("type") == "function":
            return Tool(str(tool.get("name")), tool.get("parameters") or {})
    return None


def tool_results_since_prompt(items: Sequence[Json]) -> int:
    """How many ``function_call_output`` items follow the last user message item."""
    count = 0
    for item in reversed(items):
        kind = item_type(item)
        if kind == "function_call_output":
            count += 1
        elif kind == "message" and item.get("role") == "user":
            return count
    return count


# --- the reply ----------------------------------------------------------------


def usage(input_tokens: int, output_tokens: int, cached_tokens: int = 0) -> Json:
    """The Responses API's ``usage``, with the detail objects the SDK reads."""
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": cached_tokens},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input_tokens + output_tokens,
    }


def output_item(item_id: str, reply: Reply, done: bool = True) -> Json:
    """``reply`` as an output item: a ``function_call`` or an assistant ``message``."""
    status = "completed" if done else "in_progress"
    if isinstance(reply, ToolCall):
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


def response(
    response_id: str,
    body: Json,
    created: int,
    output: List[Json],
    usage: Optional[Json],
    status: str = "completed",
) -> Json:
    """A ``response`` object echoing the request's settings, as the API does."""
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


def response_events(
    response_id: str,
    item_id: str,
    body: Json,
    created: int,
    reply: Reply,
    input_tokens: int,
    cached_tokens: int = 0,
) -> Iterator[bytes]:
    """``reply`` as the typed, numbered events of a Responses stream."""
    numbers = itertools.count()

    def event(kind: str, **fields: Any) -> bytes:
        return sse({"type": kind, "sequence_number": next(numbers), **fields}, kind)

    started = response(response_id, body, created, [], None, status="in_progress")
    yield event("response.created", response=started)
    yield event("response.in_progress", response=started)
    yield event(
        "response.output_item.added", output_index=0, item=output_item(item_id, reply, False)
    )
    where = {"item_id": item_id, "output_index": 0}
    if isinstance(reply, ToolCall):
        for piece in pieces(reply.arguments):
            yield event("response.function_call_arguments.delta", **where, delta=piece)
        yield event("response.function_call_arguments.done", **where, arguments=reply.arguments)
    else:
        part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        yield event("response.content_part.added", **where, content_index=0, part=part)
        for piece in pieces(reply):
            yield event(
                "response.output_text.delta", **where, content_index=0, delta=piece, logprobs=[]
            )
        yield event("response.output_text.done", **where, content_index=0, text=reply, logprobs=[])
        yield event(
            "response.content_part.done", **where, content_index=0, part={**part, "text": reply}
        )
    item = output_item(item_id, reply)
    yield event("response.output_item.done", output_index=0, item=item)
    figures = usage(input_tokens, output_tokens(reply), cached_tokens)
    yield event(
        "response.completed", response=response(response_id, body, created, [item], figures)
    )


def serve(body: Any, model: Model, target: Target) -> Answer:
    """Answer one Responses request, or raise its ``RequestRejected`` (its path names nothing)."""
    items, instructions = validate_responses(body)
    # What is sent, in order, each with its tokens: the tools (not billed), the
    # instructions, then the input (a string is one unit).
    units = [(unit_key("tools", body.get("tools")), 0)]
    if instructions is not None:
        units.append((unit_key("instructions", instructions), count_tokens(instructions)))
    if isinstance(items, str):
        units.append((unit_key(items), count_tokens(items)))
        items = [{"role": "user", "content": items}]
    else:
        units += [(unit_key(item), billed(item, responses_part, count_tokens)) for item in items]
    input_tokens = sum(count for _, count in units)
    limit = model.context_limit
    if limit is not None and input_tokens > limit:
        raise openai_error(CONTEXT_LENGTH, param="input", code="context_length_exceeded")
    reply = model.answer(
        items,
        first_tool(body.get("tools"), body.get("tool_choice")),
        tool_results_since_prompt(items),
        "call_fake",
    )
    response_id = model.new_id("resp_fake")
    item_id = model.new_id("fc_fake" if isinstance(reply, ToolCall) else "msg_fake")
    created = int(time.time())
    name = str(body["model"])
    cached = 0
    if model.prompt_cache is not None:
        cached = openai_cached(model.prompt_cache, f"responses:{name}", units)
    model.bill(name, input_tokens, output_tokens(reply), cached)
    if body.get("stream"):
        return response_events(response_id, item_id, body, created, reply, input_tokens, cached)
    figures = usage(input_tokens, output_tokens(reply), cached)
    return response(response_id, body, created, [output_item(item_id, reply)], figures)


ROUTE = Route(PATH, _openai.ENVELOPE, serve)
