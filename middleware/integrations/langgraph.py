"""LangGraph's prebuilt agent: ``pre_model_hook(...)`` for ``create_react_agent``.

The hook compacts the state's ``messages`` before every model call, as
``llm_input_messages`` or, with ``rewrite_state=True``, in the state itself.
See docs/integrations/langgraph.md.

Requires ``langgraph``: the ``langgraph`` extra (``python -m pip install ".[langgraph]"`` in
a checkout), or ``pip install langgraph``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Union

from ._common import Compactor, HookOptions, changed, missing

try:
    from langchain_core.messages import SystemMessage
    from langchain_core.runnables import RunnableLambda
    from langgraph.prebuilt import ToolNode
except ImportError as exc:  # pragma: no cover - the message is tested without langgraph
    raise missing("langgraph", "pip install 'langgraph'", exc) from exc

from ._langchain_messages import native, replacing
from ._langchain_wire import measured, openai_tools

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["pre_model_hook"]


def _schemas(tools: Any) -> List[Any]:
    if isinstance(tools, ToolNode):
        tools = list(tools.tools_by_name.values())
    if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Sequence):
        raise TypeError(
            "'tools' must be the list of tools (or the ToolNode) given to the agent "
            f"(got {tools!r})"
        )
    return openai_tools(tools)


def _system(prompt: Any) -> Optional[SystemMessage]:
    if prompt is None:
        return None
    if isinstance(prompt, str):
        return SystemMessage(content=prompt)
    if isinstance(prompt, SystemMessage):
        return prompt
    raise TypeError(
        "'prompt' must be the agent's prompt as a string or a SystemMessage, so it can be "
        f"counted; a prompt function's output cannot be (got {prompt!r})"
    )


def _messages(state: Any) -> Any:
    if isinstance(state, Mapping):
        return state["messages"]
    return state.messages  # a pydantic state schema


def pre_model_hook(
    max_tokens: float,
    *,
    prompt: Optional[Union[str, Any]] = None,
    tools: Any = (),
    model: Any = None,
    rewrite_state: bool = False,
    **options: Unpack[HookOptions],
) -> Any:
    """A ``pre_model_hook`` that keeps every model call of the agent inside ``max_tokens``.

    The hook is a runnable with a sync and an async path, for ``invoke`` and
    ``ainvoke``, ``stream`` and ``astream``. Each model call reports one
    ``CompactionEvent`` to ``on_compact`` and to every active ``CompactingSession``.

    Args:
        max_tokens: The budget of each model call: the messages, the prompt and
            the tools' schemas (counted as ``model`` sends them).
        prompt: The ``prompt`` given to ``create_react_agent`` (a string or a
            ``SystemMessage``), counted against the budget.
        tools: The tools given to ``create_react_agent`` (or its ``ToolNode``),
            whose schemas are counted against the budget.
        model: The chat model given to ``create_react_agent`` (or a binding of
            it): a ``ChatAnthropic``, ``ChatGoogleGenerativeAI``,
            ``ChatBedrockConverse`` or ``ChatOllama`` has the messages, the
            prompt and the tools counted as it sends them. Without it, or for
            another class, they are counted as ``ChatOpenAI`` sends them.
        rewrite_state: ``False`` (the default) returns ``llm_input_messages``,
            so only what the model sees changes; ``True`` returns ``messages``
            that replace the stored history with what the model is sent, when
            compaction changed anything.
        **options: ``budgeted``'s options (``keep_head``, ``summarize``,
            ``on_compact``, ``clear_tool_results``, ...), with the same
            meanings; ``on_overflow`` is ``"call"`` or ``"raise"``. An async
            ``summarize`` or hook needs the agent's async API.

    Returns:
        The hook, for ``create_react_agent(..., pre_model_hook=...)``.

    Raises:
        TypeError, ValueError: A bad option, naming it.
    """
    if not isinstance(rewrite_state, bool):
        raise TypeError(f"'rewrite_state' must be True or False (got {rewrite_state!r})")
    compactor = Compactor(
        "pre_model_hook", "langgraph pre_model_hook", max_tokens, options, wraps_call=False
    )
    system, schemas = _system(prompt), _schemas(tools)
    key = "messages" if rewrite_state else "llm_input_messages"

    def update(given: Any, kept: List[Any]) -> Dict[str, Any]:
        sent = native(kept, given)
        if not rewrite_state:
            return {key: sent}
        return {key: replacing(sent) if changed(sent, given) else []}

    def hook(state: Any) -> Dict[str, Any]:
        given = _messages(state)
        counted, beside = measured(compactor, model, given, system, schemas)
        return update(given, compactor.compacted(given, beside, counted=counted))

    async def ahook(state: Any) -> Dict[str, Any]:
        given = _messages(state)
        counted, beside = measured(compactor, model, given, system, schemas)
        return update(given, await compactor.acompacted(given, beside, counted=counted))

    return RunnableLambda(hook, afunc=ahook, name="pre_model_hook")
