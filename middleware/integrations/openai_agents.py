"""openai-agents: ``input_filter(...)`` for ``RunConfig(call_model_input_filter=...)``.

``Runner.run(agent, items, run_config=RunConfig(call_model_input_filter=input_filter(
max_tokens=...)))`` runs the filter before every model call of the run: it
compacts the input items (each function call kept with its output, reasoning
items with what they reasoned about) so that they, the agent's instructions and
its tools' schemas fit ``max_tokens``, and returns them as the call's
``ModelInputData``. Only what the model is sent changes: the run's items, and
``to_input_list()``, stay whole.

The filter only prepares the model's input: the model call is the runner's, so
the events carry no ``provider_tokens`` and ``on_overflow="retry"`` is refused
(intercept the SDK in a ``CompactingSession`` for both).

Requires ``openai-agents``: the ``openai-agents`` extra (``python -m pip install
".[openai-agents]"`` in a checkout), or ``pip install openai-agents``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Awaitable, Callable, Dict, List

from ._common import Compactor, HookOptions, missing

try:
    from agents import Agent, FunctionTool, Handoff, handoff
    from agents.models.chatcmpl_converter import Converter
    from agents.run_config import CallModelData, ModelInputData
except ImportError as exc:  # pragma: no cover - the message is tested without openai-agents
    raise missing("openai_agents", "pip install 'openai-agents'", exc) from exc

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["input_filter"]


def _schemas(agent: Any) -> List[Dict[str, Any]]:
    """The agent's tools and handoffs as the Chat Completions model sends them.

    The Responses model sends the same schemas with one level of nesting less, so
    they are counted a few tokens high there; a hosted tool (web search, file
    search, ...) is counted by its name only.
    """
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
    compactor = Compactor(
        "input_filter",
        "openai-agents call_model_input_filter",
        max_tokens,
        options,
        wraps_call=False,
    )

    async def compact_input(data: CallModelData) -> ModelInputData:
        instructions = data.model_data.instructions
        system = [{"role": "system", "content": instructions}] if instructions else []
        agent: Agent = data.agent
        fixed = compactor.fixed_tokens(system, _schemas(agent))
        kept = await compactor.acompacted(data.model_data.input, fixed)
        return ModelInputData(input=kept, instructions=instructions)

    return compact_input
