"""Anthropic's SDK (``anthropic``): the Messages API, also under ``beta``.

Its requests pass through the base clients' ``request`` as OpenAI's do; the
system prompt is sent beside the messages and counted, never dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Dict, List, Optional, Tuple

from . import Alignment, Point, PromptMessages, Route, Sdk, SummaryApi, figures

_MESSAGES = Route("/v1/messages", "messages", ("system",))
_BREAKPOINT = {"type": "ephemeral"}
# The most cache_control breakpoints the API takes in one request.
_MOST_BREAKPOINTS = 4
# Blocks that cannot carry a breakpoint.
_UNMARKED = frozenset({"thinking", "redacted_thinking"})


def _summary_request(model: str, prompt: PromptMessages, max_tokens: int) -> Dict[str, Any]:
    # The system prompt is a parameter of its own, beside the messages.
    system = "\n\n".join(m["content"] for m in prompt if m["role"] == "system")
    messages = [m for m in prompt if m["role"] != "system"]
    return {"model": model, "system": system, "messages": messages, "max_tokens": max_tokens}


def _breakpoints(value: Any) -> int:
    """The cache_control breakpoints in a system prompt, a tool list or a message's content."""
    if not isinstance(value, list):
        return 0
    return sum(1 for item in value if isinstance(item, Mapping) and "cache_control" in item)


def _content(message: Any) -> Optional[List[Any]]:
    """A message's content as a new list of blocks (each mapping a copy); ``None`` for
    anything other than a user or assistant message with text or blocks."""
    if not isinstance(message, Mapping) or message.get("role") not in ("user", "assistant"):
        return None
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else None
    if not isinstance(content, list):
        return None
    return [dict(b) if isinstance(b, Mapping) else b for b in content]


def _unmarked_latest(messages: List[Any]) -> bool:
    """Take the breakpoint off the latest message block that has one (``messages`` is
    edited with a copy of that message); whether there was one."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        content = message.get("content") if isinstance(message, Mapping) else None
        if not _breakpoints(content):
            continue
        blocks = list(content or ())
        at = max(i for i, b in enumerate(blocks) if isinstance(b, Mapping) and "cache_control" in b)
        blocks[at] = {k: v for k, v in blocks[at].items() if k != "cache_control"}
        messages[index] = {**message, "content": blocks}
        return True
    return False


def _settings(body: Mapping[str, Any], max_tokens: int) -> Dict[str, Any]:
    """The aligned request's model, bound, system prompt, tools, tool_choice and thinking.

    A change of tool_choice or of the thinking settings would invalidate the cached
    messages: both stay as the call sent them, unless the call forces a tool (the
    instruction asks for no tool call; a reply without text falls back to the plain
    prompt).
    """
    request: Dict[str, Any] = {"model": body["model"], "max_tokens": max_tokens}
    system, tools = body.get("system"), body.get("tools")
    if isinstance(system, (str, list)) and system:
        request["system"] = system
    if isinstance(tools, list) and tools:
        request["tools"] = tools
        choice = body.get("tool_choice")
        forced = isinstance(choice, Mapping) and choice.get("type") not in ("auto", "none")
        if choice is not None:
            request["tool_choice"] = {"type": "none"} if forced else choice
    thinking = body.get("thinking")
    if isinstance(thinking, Mapping):
        request["thinking"] = thinking
        budget = thinking.get("budget_tokens")
        if isinstance(budget, int) and not isinstance(budget, bool):
            request["max_tokens"] = budget + max_tokens  # the bound must exceed the budget
    return request


def _end_prefix(request: Dict[str, Any], earlier: List[Any], blocks: List[Any], at: int) -> None:
    """Put a breakpoint on ``blocks[at]``, ending the repeated prefix: the request's own
    stay, and past the API's most the latest of the messages' own gives way to it
    (``earlier`` is edited with a copy of that message)."""
    mark = blocks[at]
    if "cache_control" in mark:
        return
    mark["cache_control"] = dict(_BREAKPOINT)
    used = _breakpoints(request.get("system")) + _breakpoints(request.get("tools"))
    used += sum(_breakpoints(m.get("content")) for m in earlier if isinstance(m, Mapping))
    used += _breakpoints(blocks)
    if used > _MOST_BREAKPOINTS and not _unmarked_latest(earlier):
        del mark["cache_control"]


def _aligned_request(made: Alignment) -> Optional[Dict[str, Any]]:
    if not made.messages:
        return None
    earlier, last = list(made.messages[:-1]), made.messages[-1]
    blocks = _content(last)
    marks = [
        i
        for i, b in enumerate(blocks or ())
        if isinstance(b, Mapping) and b.get("type") not in _UNMARKED and b.get("text") != ""
    ]
    if blocks is None or not marks:
        return None
    request = _settings(made.body, made.max_tokens)
    _end_prefix(request, earlier, blocks, marks[-1])
    instruction = made.instruction
    # Roles alternate: after a user message the instruction joins it as one more block.
    if last["role"] == "user":
        request["messages"] = [
            *earlier,
            {**last, "content": [*blocks, {"type": "text", "text": instruction}]},
        ]
    else:
        request["messages"] = [
            *earlier,
            {**last, "content": blocks},
            {"role": "user", "content": instruction},
        ]
    return request


def _summary_text(response: Any) -> str:
    # Text blocks only: a thinking block is not part of the summary.
    return "".join(
        block.text for block in response.content if getattr(block, "type", None) == "text"
    )


def _summary_usage(response: Any) -> Optional[Tuple[int, int, int]]:
    usage = response.usage
    if usage is None:
        return None
    # input_tokens leaves out the cached parts: added back, as for provider_tokens.
    read = usage.cache_read_input_tokens or 0
    written = usage.cache_creation_input_tokens or 0
    return usage.input_tokens + read + written, read, usage.output_tokens


SDK = Sdk(
    name="anthropic",
    points=(
        Point("anthropic._base_client", "SyncAPIClient.request", "anthropic"),
        Point("anthropic._base_client", "AsyncAPIClient.request", "anthropic"),
    ),
    routes=(_MESSAGES,),
    # The body holds an Omit for system, tools, stream, ... unless they are given.
    sentinels=("anthropic._types", ("NotGiven", "Omit")),
    streams=frozenset({"Stream"}),
    async_streams=frozenset({"AsyncStream"}),
    raw_responses=frozenset({"LegacyAPIResponse", "APIResponse", "AsyncAPIResponse"}),
    # usage.input_tokens leaves out the cached parts: added back.
    usage=(("input_tokens", ("cache_creation_input_tokens", "cache_read_input_tokens")),),
    # The message_start event holds the message with its usage.
    usage_holders=("message",),
    overflow_figures=(figures(r"prompt is too long: (\d+) tokens > (\d+) maximum", 1, 2),),
    summary=(
        SummaryApi(
            clients=frozenset({"Anthropic"}),
            async_clients=frozenset({"AsyncAnthropic"}),
            method="messages.create",
            request=_summary_request,
            text=_summary_text,
            usage=_summary_usage,
            aligned=_aligned_request,
            route=f"anthropic {_MESSAGES.path}",
        ),
    ),
)
