"""AutoGen: ``CompactingChatCompletionContext``, a model context that compacts what it gives.

The context keeps every message and hands the agent, at each model call, the
compacted list, counted as AutoGen's OpenAI client sends it. See
docs/integrations/autogen.md.

Requires ``autogen-core`` (``autogen-agentchat`` brings it): the ``autogen`` extra
(``python -m pip install ".[autogen]"`` in a checkout), or ``pip install autogen-core``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, cast

from ._common import Compactor, HookOptions, missing

try:
    from autogen_core import FunctionCall
    from autogen_core.model_context import ChatCompletionContext
    from autogen_core.models import (
        AssistantMessage,
        FunctionExecutionResult,
        FunctionExecutionResultMessage,
        LLMMessage,
        SystemMessage,
        UserMessage,
    )
except ImportError as exc:  # pragma: no cover - the message is tested without autogen
    raise missing("autogen", "pip install 'autogen-core'", exc) from exc

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["SUMMARY_SOURCE", "CompactingChatCompletionContext", "sent_messages"]

#: The ``source`` of a summary inserted as a ``UserMessage`` or ``AssistantMessage``.
SUMMARY_SOURCE = "ctx_compact"


def sent_messages(view: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """The messages AutoGen's OpenAI client sends for one message, from its Anthropic form.

    The core reads an AutoGen message in Anthropic Messages form
    (``ctx_compact.formats.frameworks``); the client sends a results message as
    one ``tool`` message per result, an ``AssistantMessage`` of calls as one
    message with ``tool_calls`` and its thought as content, and a
    ``UserMessage`` with its source as ``name``. A summary (a user message
    without a name) is sent with ``SUMMARY_SOURCE`` as its name. The default
    counting of ``CompactingChatCompletionContext`` counts these.

    Args:
        view: An AutoGen message's view, a cleared copy or a summary.

    Returns:
        New dicts, in the order the client sends them.
    """
    content = view.get("content")
    blocks = _blocks(content)
    results = [b for b in blocks if b.get("type") == "tool_result"]
    if results:
        return [
            {
                "content": _text(b.get("content")),
                "role": "tool",
                "tool_call_id": b.get("tool_use_id"),
            }
            for b in results
        ]
    if any(b.get("type") == "tool_use" for b in blocks):
        return [
            {"role": "assistant", "tool_calls": _sent_calls(blocks), "content": _thought(blocks)}
        ]
    if view.get("role") == "user":
        return [{"role": "user", "name": view.get("name", SUMMARY_SOURCE), "content": content}]
    return [dict(view)]


def _blocks(content: Any) -> List[Mapping[str, Any]]:
    return [b for b in content if isinstance(b, Mapping)] if isinstance(content, list) else []


def _thought(blocks: Sequence[Mapping[str, Any]]) -> Optional[str]:
    return "".join(b.get("text", "") for b in blocks if b.get("type") == "text") or None


def _sent_calls(blocks: Sequence[Mapping[str, Any]]) -> List[Dict[str, Any]]:
    return [
        {
            "id": b.get("id"),
            "function": {"arguments": _text(b.get("input")), "name": b.get("name")},
            "type": "function",
        }
        for b in blocks
        if b.get("type") == "tool_use"
    ]


def _text(value: Any) -> str:
    # A result's content and a call's arguments are text in AutoGen: the model's text as it
    # is, what clearing made written as JSON.
    return value if isinstance(value, str) else json.dumps(value)


def _schema(tool: Any) -> Any:
    # An AutoGen tool (BaseTool, FunctionTool) or its ToolSchema, as OpenAI's client sends it.
    schema = getattr(tool, "schema", tool)
    return {"type": "function", "function": dict(schema)}


class CompactingChatCompletionContext(ChatCompletionContext):  # type: ignore[misc]
    """A model context that keeps every model call of an AutoGen agent inside ``max_tokens``.

    Each ``get_messages`` (one per model call of ``AssistantAgent``) reports one
    ``CompactionEvent`` (``function`` is ``"autogen get_messages"``) to
    ``on_compact`` and to every active ``CompactingSession``; an async
    ``summarize`` or hook is awaited, a sync one runs on a worker thread. A
    summary is a ``UserMessage`` whose ``source`` is ``SUMMARY_SOURCE`` (a
    ``SystemMessage`` or ``AssistantMessage`` with ``summary_role="system"`` or
    ``"assistant"``); cleared tool results are copies of their
    ``FunctionExecutionResultMessage`` with the placeholder as content.

    The agent sends its system message and tools beside the context's
    messages, which the context does not see: pass them here to have them
    counted, as AutoGen's ``TokenLimitedChatCompletionContext`` takes
    ``tool_schema``.

    Args:
        max_tokens: The budget of each model call: the messages, the system
            message and the tools' schemas, counted as AutoGen's OpenAI
            client sends them (the messages as ``sent_messages`` gives them;
            a ``count_tokens`` given is handed each message's Anthropic view).
        system_message: The agent's system message, counted against the budget.
        tool_schema: The agent's tools (AutoGen tools or their ``ToolSchema``),
            counted against the budget.
        initial_messages: Messages the context starts with.
        **options: ``budgeted``'s options (``keep_head``, ``summarize``,
            ``on_compact``, ``clear_tool_results``, ...), with the same meanings.
            ``on_overflow="retry"`` is refused: the context gives the messages
            but does not make the call.

    Raises:
        TypeError, ValueError: A bad option, naming it (a ``summary_role``
            other than ``"user"``, ``"assistant"`` and ``"system"`` among them).
    """

    def __init__(
        self,
        max_tokens: float,
        *,
        system_message: Optional[str] = None,
        tool_schema: Optional[Sequence[Any]] = None,
        initial_messages: Optional[List[LLMMessage]] = None,
        **options: Unpack[HookOptions],
    ) -> None:
        super().__init__(initial_messages)
        self._compactor = Compactor(
            "CompactingChatCompletionContext",
            "autogen get_messages",
            max_tokens,
            options,
            wraps_call=False,
            sent=sent_messages,
        )
        self._compactor.check_summary_role(
            ("user", "assistant", "system"), "the AutoGen message a summary becomes"
        )
        system = [{"role": "system", "content": system_message}] if system_message else []
        tools = [_schema(tool) for tool in tool_schema or ()]
        self._beside = self._compactor.beside(system, tools=tools)

    async def get_messages(self) -> List[LLMMessage]:
        """The messages for the next model call, compacted to the budget."""
        given = list(self._messages)
        kept = await self._compactor.acompacted(given, self._beside)
        return [_native(message, given) for message in kept]


def _native(message: Any, given: Sequence[Any]) -> LLMMessage:
    # The caller's own message, or one made from the Anthropic form of a summary or cleared copy.
    if not isinstance(message, Mapping):
        return cast(LLMMessage, message)
    content = message.get("content")
    blocks = _blocks(content)
    if any(b.get("type") == "tool_result" for b in blocks):
        return _results(blocks, given)
    if any(b.get("type") == "tool_use" for b in blocks):
        return _calls(blocks, given)
    text = content if isinstance(content, str) else "".join(b.get("text", "") for b in blocks)
    if message.get("role") == "system":
        return SystemMessage(content=text)
    made = AssistantMessage if message.get("role") == "assistant" else UserMessage
    return made(content=text, source=SUMMARY_SOURCE)


def _originals(given: Sequence[Any]) -> Dict[Any, Any]:
    # Each call id of the caller's messages, to its FunctionCall or FunctionExecutionResult.
    found: Dict[Any, Any] = {}
    for message in given:
        result = isinstance(message, FunctionExecutionResultMessage)
        key = "call" if isinstance(message, AssistantMessage) else "result" if result else None
        for item in message.content if key and isinstance(message.content, list) else ():
            item_id = getattr(item, "id", None) or getattr(item, "call_id", None)
            found[(key, item_id)] = (message, item)
    return found


def _results(blocks: Sequence[Mapping[str, Any]], given: Sequence[Any]) -> LLMMessage:
    originals = _originals(given)
    results = []
    for block in blocks:
        call_id = block.get("tool_use_id")
        _, original = originals[("result", call_id)]
        text = _text(block.get("content"))
        result = FunctionExecutionResult(
            content=text, name=original.name, call_id=call_id, is_error=original.is_error
        )
        results.append(result)
    return FunctionExecutionResultMessage(content=results)


def _calls(blocks: Sequence[Mapping[str, Any]], given: Sequence[Any]) -> LLMMessage:
    originals = _originals(given)
    calls = []
    source = SUMMARY_SOURCE
    for block in blocks:
        if block.get("type") != "tool_use":
            continue
        message, _ = originals[("call", block.get("id"))]
        source = message.source
        calls.append(
            FunctionCall(id=block["id"], arguments=_text(block["input"]), name=block["name"])
        )
    return AssistantMessage(content=calls, thought=_thought(blocks), source=source)
