"""LlamaIndex: ``CompactingMemory``, a chat memory that gives the history compacted.

The memory keeps every message in its chat store and returns, from
``get``/``aget``, the history compacted with the system prompt and the tools'
schemas counted beside it. See docs/integrations/llama-index.md.

Requires ``llama-index-core``: the ``llama-index`` extra (``python -m pip install
".[llama-index]"`` in a checkout), or ``pip install llama-index-core``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, cast

from .._callables import Beside
from ._common import Compactor, HookOptions, missing

try:
    from llama_index.core.base.llms.types import ChatMessage, MessageRole
    from llama_index.core.llms import LLM
    from llama_index.core.memory.types import DEFAULT_CHAT_STORE_KEY, BaseChatStoreMemory
    from llama_index.core.storage.chat_store import BaseChatStore, SimpleChatStore
    from llama_index.core.tools import BaseTool, FunctionTool
    from pydantic import PrivateAttr
except ImportError as exc:  # pragma: no cover - the message is tested without llama-index
    raise missing("llama_index", "pip install 'llama-index-core'", exc) from exc

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["CompactingMemory"]


def _schema(tool: Any) -> Any:
    # A LlamaIndex tool, or a function an agent makes a FunctionTool of, as
    # llama-index-llms-openai sends it to a function-calling model: with "strict"
    # and "additionalProperties" set (other LLMs send about as much, or less).
    if not isinstance(tool, BaseTool):
        tool = FunctionTool.from_defaults(tool)
    spec: Dict[str, Any] = tool.metadata.to_openai_tool(skip_length_check=True)
    function = spec.get("function")
    if isinstance(function, dict):
        function["strict"] = False
        parameters = function.get("parameters")
        if isinstance(parameters, dict):
            parameters["additionalProperties"] = False
    return spec


def _native(message: Any) -> ChatMessage:
    # The caller's own message, or one made from the Chat form of a summary or cleared copy.
    if not isinstance(message, Mapping):
        return cast(ChatMessage, message)
    extra = {k: v for k, v in message.items() if k not in ("role", "content")}
    return ChatMessage(
        role=message.get("role"), content=message.get("content"), additional_kwargs=extra
    )


class CompactingMemory(BaseChatStoreMemory):  # type: ignore[misc]
    """A LlamaIndex memory whose history is kept inside ``max_tokens`` at every read.

    Each ``get``/``aget`` reports one ``CompactionEvent`` (``function`` is
    ``"llama_index memory.get"``) to ``on_compact`` and to every active
    ``CompactingSession``. A ``FunctionAgent`` reads its memory once before each
    model call and once more when a run ends (to hand the history to its
    structured output), so a run of N model calls reports N + 1 events. An
    async ``summarize`` or hook is awaited by ``aget`` (a sync one runs on a
    worker thread); ``get`` refuses them.

    What the memory does not hold is not compacted: a ``FunctionAgent`` keeps a
    run's own tool calls and results apart (its scratchpad) until the run ends,
    and sends them after the memory's history, so leave room in ``max_tokens``
    for one run's tool calls (or compact the whole request at the SDK with
    ``CompactingSession(intercept="openai")``).

    Build it with ``CompactingMemory.from_defaults(max_tokens=...)`` or
    ``CompactingMemory(max_tokens, ...)``.

    Args:
        max_tokens: The budget of the history, the system prompt and the tools'
            schemas (counted as ``llama-index-llms-openai`` sends them).
        system_prompt: The agent's system prompt, counted against the budget.
        tools: The agent's tools (LlamaIndex tools or plain functions),
            counted against the budget.
        chat_store: Where the messages are kept (a new ``SimpleChatStore`` by default).
        chat_store_key: The key of this memory's messages in the store.
        **options: ``budgeted``'s options (``keep_head``, ``summarize``,
            ``on_compact``, ``clear_tool_results``, ...), with the same meanings.
            ``on_overflow="retry"`` is refused: the memory gives the history
            but does not make the call.

    Raises:
        TypeError, ValueError: A bad option, naming it (a ``summary_role`` that
            is no ``MessageRole`` among them).
    """

    _compactor: Compactor = PrivateAttr()
    _beside: Beside = PrivateAttr()

    def __init__(
        self,
        max_tokens: float,
        *,
        system_prompt: Optional[str] = None,
        tools: Sequence[Any] = (),
        chat_store: Optional[BaseChatStore] = None,
        chat_store_key: str = DEFAULT_CHAT_STORE_KEY,
        **options: Unpack[HookOptions],
    ) -> None:
        compactor = Compactor(
            "CompactingMemory", "llama_index memory.get", max_tokens, options, wraps_call=False
        )
        roles = [role.value for role in MessageRole]
        if compactor.options.summary_role not in roles:
            raise ValueError(
                f"summary_role must be one of LlamaIndex's roles ({', '.join(roles)}), got "
                f"{compactor.options.summary_role!r}"
            )
        system = [{"role": "system", "content": system_prompt}] if system_prompt else []
        beside = compactor.beside(system, tools=[_schema(tool) for tool in tools])
        super().__init__(chat_store=chat_store or SimpleChatStore(), chat_store_key=chat_store_key)
        self._compactor = compactor
        self._beside = beside

    @classmethod
    def class_name(cls) -> str:
        """The class's name in LlamaIndex's serialisation."""
        return "CompactingMemory"

    @classmethod
    def from_defaults(
        cls,
        chat_history: Optional[List[ChatMessage]] = None,
        llm: Optional[LLM] = None,
        *,
        max_tokens: Optional[float] = None,
        **kwargs: Any,
    ) -> CompactingMemory:
        """A ``CompactingMemory`` holding ``chat_history``.

        Args:
            chat_history: The messages it starts with.
            llm: Without ``max_tokens``, the model whose context window
                (``llm.metadata.context_window``) is the budget.
            max_tokens: The budget.
            **kwargs: The other arguments of ``CompactingMemory``.

        Raises:
            TypeError: Neither ``max_tokens`` nor ``llm`` is given, or a bad option.
        """
        if max_tokens is None:
            if llm is None:
                raise TypeError("CompactingMemory.from_defaults() needs max_tokens or an llm")
            max_tokens = llm.metadata.context_window
        memory = cls(max_tokens, **kwargs)
        if chat_history is not None:
            memory.set(chat_history)
        return memory

    def get(self, input: Optional[str] = None, **kwargs: Any) -> List[ChatMessage]:
        """The history, compacted to the budget (``input`` is not used)."""
        given = self.chat_store.get_messages(self.chat_store_key, **kwargs)
        return [_native(m) for m in self._compactor.compacted(given, self._beside)]

    async def aget(self, input: Optional[str] = None, **kwargs: Any) -> List[ChatMessage]:
        """The history, compacted to the budget (``input`` is not used)."""
        given = await self.chat_store.aget_messages(self.chat_store_key, **kwargs)
        kept = await self._compactor.acompacted(given, self._beside)
        return [_native(m) for m in kept]
