"""openai-agents: ``input_filter(...)`` for ``RunConfig(call_model_input_filter=...)``.

The filter compacts each model call's input items, counted as the agent's
model sends them; the run's items stay whole. See docs/integrations/openai-agents.md.

Requires ``openai-agents``: the ``openai-agents`` extra (``python -m pip install
".[openai-agents]"`` in a checkout), or ``pip install openai-agents``.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Dict, List, Optional

from ._common import Compactor, HookOptions, Sent, missing

try:
    from agents import Agent, FunctionTool, Handoff, OpenAIChatCompletionsModel, handoff
    from agents.models.chatcmpl_converter import Converter
    from agents.run_config import CallModelData, ModelInputData
except ImportError as exc:  # pragma: no cover - the message is tested without openai-agents
    raise missing("openai_agents", "pip install 'openai-agents'", exc) from exc

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["input_filter"]


def _schemas(agent: Any) -> List[Dict[str, Any]]:
    # The agent's tools and handoffs as the Chat Completions model sends them (a few
    # tokens high for the Responses model); a hosted tool is counted by its name only.
    schemas: List[Dict[str, Any]] = []
    for tool in agent.tools:
        if isinstance(tool, FunctionTool):
            schemas.append(dict(Converter.tool_to_openai(tool)))
        else:
            schemas.append({"type": getattr(tool, "name", type(tool).__name__)})
    for target in agent.handoffs:
        made = target if isinstance(target, Handoff) else handoff(target)
        schemas.append(dict(Converter.convert_handoff_tool(made)))
    return schemas


def _chat_model(agent: Any) -> Optional[str]:
    # The agent's Chat Completions model's name; None for any other (a model the
    # run config sets, or one named by a string): its items count as Responses items.
    model = agent.model
    return model.model if isinstance(model, OpenAIChatCompletionsModel) else None


def _chat_sending(model: str) -> Sent:
    # Each item alone as the model converts it: items it merges (an assistant
    # message and the calls after it) are counted a few tokens high, never low.
    return lambda item: Converter.items_to_messages([item], model=model)


def input_filter(
    max_tokens: float, **options: Unpack[HookOptions]
) -> Callable[[CallModelData], Awaitable[ModelInputData]]:
    """A ``call_model_input_filter`` that keeps every model call of a run inside ``max_tokens``.

    Each model call reports one ``CompactionEvent`` to ``on_compact`` and to
    every active ``CompactingSession``. The instructions and tools counted are
    those of the agent making the call, so a handoff's agent is counted with
    its own.

    Args:
        max_tokens: The budget of each model call: the input items, the
            agent's instructions and its tools' schemas.
        **options: ``budgeted``'s options (``keep_head``, ``summarize``,
            ``on_compact``, ``clear_tool_results``, ``clear_thinking``, ...),
            with the same meanings; ``on_overflow`` is ``"call"`` or ``"raise"``.

    Returns:
        An async filter, for ``RunConfig(call_model_input_filter=...)``.

    Raises:
        TypeError, ValueError: A bad option, naming it.
    """
    function = "openai-agents call_model_input_filter"
    build = functools.partial(
        Compactor, "input_filter", function, max_tokens, options, wraps_call=False
    )
    # One compactor per way of sending: Responses items as they are (built now, so
    # a bad option raises here), each Chat Completions model's conversion.
    compactors: Dict[Optional[str], Compactor] = {None: build()}

    async def compact_input(data: CallModelData) -> ModelInputData:
        instructions = data.model_data.instructions
        agent: Agent = data.agent
        chat = _chat_model(agent)
        if chat is not None and chat not in compactors:
            compactors[chat] = build(sent=_chat_sending(chat))
        compactor = compactors[chat]
        schemas = _schemas(agent)
        if chat is None:
            # The Responses API's instructions field: a string beside the items.
            beside = compactor.beside(system=[instructions] if instructions else [], tools=schemas)
        else:
            system = [{"content": instructions, "role": "system"}] if instructions else []
            beside = compactor.beside(system, tools=schemas)
        kept = await compactor.acompacted(data.model_data.input, beside)
        return ModelInputData(input=kept, instructions=instructions)

    return compact_input
