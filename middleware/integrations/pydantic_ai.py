"""pydantic-ai agents: ``history_processor(...)`` and the ``CompactionCapability``.

The history processor compacts the run's history itself; the capability wraps
each model request and changes only what it sends. Both count a request as its
model sends it (``_pydantic_ai_wire``); neither retries (``on_overflow="retry"``).
See docs/integrations/pydantic-ai.md.

Requires ``pydantic-ai``: the ``pydantic-ai`` extra (``python -m pip install ".[pydantic-ai]"``
in a checkout), or ``pip install pydantic-ai-slim``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Dict, List, Optional, Sequence, Tuple

from .._callables import Beside
from ._common import Answered, Compactor, Counted, HookOptions, missing

try:
    from pydantic_ai import RunContext
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.messages import (
        InstructionPart,
        ModelMessage,
        ModelRequest,
        ModelResponse,
        SystemPromptPart,
        TextPart,
        UserPromptPart,
    )
    from pydantic_ai.models import ModelRequestParameters
    from pydantic_ai.tools import Tool, ToolDefinition

    from ._pydantic_ai_wire import Sent, chat_tool, sent
except ImportError as exc:  # pragma: no cover - the message is tested without pydantic-ai
    raise missing("pydantic_ai", "pip install 'pydantic-ai-slim'", exc) from exc

from ctx_compact._contract import count_all, message_views

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["CompactionCapability", "history_processor"]


# --- what is sent beside the messages --------------------------------------------


def _definition(tool: Any) -> Any:
    if isinstance(tool, ToolDefinition):
        return tool
    if isinstance(tool, Tool):
        return tool.tool_def
    if callable(tool):
        return Tool(tool).tool_def
    raise TypeError(
        "'tools' must hold the agent's tools (functions, Tool or ToolDefinition objects) "
        f"(got {tool!r})"
    )


def _measured(
    compactor: Compactor, model: Any, messages: Sequence[Any], parameters: Any, settings: Any
) -> Tuple[Optional[Counted], Beside]:
    # Counted as ``model`` sends the request; for a model class not followed, the messages
    # as the core reads them, the instructions and tools as the OpenAI chat model sends them.
    request = sent(model, messages, parameters, settings)
    if request is None:
        texts = [part.content for part in parameters.instruction_parts or ()]
        system = [{"role": "system", "content": "\n\n".join(texts)}] if texts else []
        tools = [chat_tool(t, True) for t in (*parameters.function_tools, *parameters.output_tools)]
        return None, compactor.beside(system, tools=tools)
    counter = compactor.options.counter
    counts = [sum(count_all(wire, counter)) for wire in request.messages]
    recount = _Recount(request, messages, counter)
    return Counted(counts, recount), compactor.beside(request.system, request.parts, request.tools)


class _Recount:
    """Counts a summary or cleared copy as the pydantic-ai message ``native`` makes of it.

    Anything else (a message ``validate="repair"`` made) is counted as it is.
    """

    def __init__(self, request: Sent, given: Sequence[Any], counter: Any) -> None:
        self._request = request
        self._given = given
        self._counter = counter
        self._skeletons: Optional[List[Tuple[Any, ...]]] = None

    def __call__(self, view: Any) -> int:
        message = self._message(view)
        wire = [view] if message is None else self._request.mapper.message(message)
        return sum(count_all(wire, self._counter))

    def _message(self, view: Any) -> Any:
        if not isinstance(view, Mapping):
            return None
        if isinstance(view.get("content"), str):
            return _summary(view)
        if self._skeletons is None:
            self._skeletons = [_skeleton(v) for v in message_views(self._given)]
        found = _index(self._skeletons, view, 0)
        return None if found is None else _edited(self._request.prepared[found], view)


def _instructions(value: Any) -> List[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, Sequence) and all(isinstance(v, str) for v in value):
        return list(value)
    raise TypeError(
        "'instructions' must be the agent's instructions as a string or a list of strings, "
        f"so they can be counted (got {value!r})"
    )


# --- pydantic-ai messages back from a compacted list ----------------------------------


def _skeleton(view: Mapping[str, Any]) -> Tuple[Any, ...]:
    """What clearing never changes in a message's view: its role, and its blocks' kinds,
    ids and texts (thinking blocks aside, which clearing removes)."""
    blocks = view.get("content")
    if not isinstance(blocks, list):
        return (view.get("role"), blocks)
    kept = tuple(
        (b.get("type"), b.get("id") or b.get("tool_use_id"), b.get("text"))
        for b in blocks
        if isinstance(b, Mapping) and b.get("type") != "thinking"
    )
    return (view.get("role"), kept)


def _edited(original: Any, copy: Mapping[str, Any]) -> Any:
    """``original`` (a ``ModelRequest`` or ``ModelResponse``) with the edits of its view."""
    blocks = {_key(b): b for b in copy.get("content") or () if isinstance(b, Mapping)}
    parts = [_part(part, blocks) for part in original.parts]
    return dataclasses.replace(original, parts=[part for part in parts if part is not None])


def _key(block: Mapping[str, Any]) -> Tuple[Any, Any]:
    # A block by its kind and what names its part: a call's id, a thinking's text.
    kind = block.get("type")
    return (kind, block.get(_NAMED_BY.get(kind, "tool_use_id")))


def _part(part: Any, blocks: Mapping[Any, Mapping[str, Any]]) -> Any:
    # A part with its block's edits: a cleared return or arguments; None for cleared thinking.
    kind = getattr(part, "part_kind", None)
    if kind == "thinking":
        return part if ("thinking", part.content) in blocks else None
    block = blocks.get((_BLOCKS[kind], part.tool_call_id)) if kind in _BLOCKS else None
    if block is None:
        return part
    if kind == "tool-call":
        arguments = block.get("input")
        edited = arguments != part.args_as_dict()
        return dataclasses.replace(part, args=arguments) if edited else part
    content = block.get("content")
    # Cleared: a placeholder (a return with files is a list of blocks until then).
    if isinstance(content, str) and content != part.model_response_str():
        return dataclasses.replace(part, content=content)
    return part


_BLOCKS = {"tool-return": "tool_result", "tool-call": "tool_use"}
_NAMED_BY: Dict[Any, str] = {"thinking": "thinking", "tool_use": "id"}


def _summary(message: Mapping[str, Any]) -> Any:
    role, text = message.get("role"), message["content"]
    if role == "assistant":
        return ModelResponse(parts=[TextPart(content=text)])
    if role in ("system", "developer"):
        return ModelRequest(parts=[SystemPromptPart(content=text)])
    return ModelRequest(parts=[UserPromptPart(content=text)])


def native(kept: Sequence[Any], given: Sequence[Any]) -> List[ModelMessage]:
    """``kept`` as pydantic-ai messages: the caller's own objects, and new ones for the rest.

    A summary becomes a new message (``_summary``); an edited copy (an Anthropic-form view)
    a copy of its original, found in order by what clearing leaves unchanged (``_skeleton``).
    """
    own = {id(message) for message in kept}
    candidates = [m for m in given if id(m) not in own]
    skeletons = [_skeleton(view) for view in message_views(candidates)]
    start = 0
    out: List[Any] = []
    for message in kept:
        if not isinstance(message, Mapping) or isinstance(message.get("content"), str):
            out.append(_summary(message) if isinstance(message, Mapping) else message)
            continue
        found = _index(skeletons, message, start)
        if found is None:
            raise ValueError(
                "an edited message of the compacted history has no original among the "
                f"agent's messages: {dict(message)!r}"
            )
        out.append(_edited(candidates[found], message))
        start = found + 1
    return out


def _index(skeletons: List[Tuple[Any, ...]], view: Mapping[str, Any], start: int) -> Optional[int]:
    # The first message from ``start`` on whose skeleton is ``view``'s: its original.
    wanted = _skeleton(view)
    return next((k for k in range(start, len(skeletons)) if skeletons[k] == wanted), None)


# --- the history processor ------------------------------------------------------------


def history_processor(
    max_tokens: float,
    *,
    instructions: Any = None,
    tools: Sequence[Any] = (),
    **options: Unpack[HookOptions],
) -> Callable[[RunContext[Any], List[ModelMessage]], Awaitable[List[ModelMessage]]]:
    """A history processor that keeps every model request of the agent inside ``max_tokens``.

    ``Agent(model, instructions=..., tools=[...], capabilities=[ProcessHistory(
    history_processor(max_tokens=..., instructions=..., tools=[...]))])``. Each model
    request reports one ``CompactionEvent`` to ``on_compact`` and to every active
    ``CompactingSession``.

    Args:
        max_tokens: The budget of each request: the messages, the instructions
            and the tools' definitions, counted as the run's model sends them.
        instructions: The agent's instructions (a string or a list of
            strings), counted against the budget.
        tools: The agent's tools (functions, ``Tool`` or ``ToolDefinition``
            objects), whose definitions are counted against the budget.
        **options: ``budgeted``'s options (``keep_head``, ``summarize``,
            ``on_compact``, ``clear_tool_results``, ...), with the same
            meanings; ``on_overflow`` is ``"call"`` or ``"raise"``.

    Returns:
        An async history processor taking the run's context and the messages,
        for ``pydantic_ai.capabilities.ProcessHistory`` (or an agent's
        ``history_processors``, in the pydantic-ai versions that have them).

    Raises:
        TypeError, ValueError: A bad option, naming it.
    """
    compactor = Compactor(
        "history_processor", "pydantic-ai history_processor", max_tokens, options, wraps_call=False
    )
    texts = _instructions(instructions)
    parameters = ModelRequestParameters(
        function_tools=[_definition(tool) for tool in tools],
        instruction_parts=[InstructionPart(content=text) for text in texts],
    )

    async def compact_history(
        ctx: RunContext[Any], messages: List[ModelMessage]
    ) -> List[ModelMessage]:
        counted, beside = _measured(compactor, ctx.model, messages, parameters, ctx.model_settings)
        return native(await compactor.acompacted(messages, beside, counted=counted), messages)

    return compact_history


# --- the capability -------------------------------------------------------------------


class CompactionCapability(AbstractCapability[Any]):  # type: ignore[misc]
    """A capability that keeps every model request of the agent inside ``max_tokens``.

    ``Agent(model, capabilities=[CompactionCapability(max_tokens=...)])``: each
    request's messages are compacted, with its instructions and tool
    definitions counted against the budget (all of it as the request's model
    sends it), for ``run``, ``run_sync`` and ``run_stream`` alike; only the
    request changes, not the run's history. Each
    request reports one ``CompactionEvent`` to ``on_compact`` and to every
    active ``CompactingSession``, with the response's ``usage.input_tokens`` as
    ``provider_tokens``.

    Args:
        max_tokens: The budget of each request.
        **options: ``budgeted``'s options, with the same meanings;
            ``on_overflow`` is ``"call"`` or ``"raise"``.

    Raises:
        TypeError, ValueError: A bad option, naming it.
    """

    def __init__(self, max_tokens: float, **options: Unpack[HookOptions]) -> None:
        super().__init__()
        self._compactor = Compactor(
            "CompactionCapability",
            "pydantic-ai wrap_model_request",
            max_tokens,
            options,
            wraps_call=False,
        )

    async def wrap_model_request(
        self, ctx: Any, *, request_context: Any, handler: Callable[[Any], Awaitable[Any]]
    ) -> Any:
        """Compact this request's messages, then make it (pydantic-ai's hook)."""
        given = list(request_context.messages)
        counted, beside = _measured(
            self._compactor,
            request_context.model,
            given,
            request_context.model_request_parameters,
            request_context.model_settings,
        )

        async def send(kept: List[Any]) -> Answered:
            compacted = dataclasses.replace(request_context, messages=native(kept, given))
            response = await handler(compacted)
            tokens = getattr(getattr(response, "usage", None), "input_tokens", None)
            return Answered(response, tokens or None)  # 0: the model reported no usage

        answered = await self._compactor.arun(given, beside, send, counted=counted)
        return answered.reply

    @classmethod
    def get_serialization_name(cls) -> Optional[str]:
        """``None``: the capability holds callables, so it is not written to agent specs."""
        return None
