"""LangChain v1 agents: ``CompactionMiddleware`` for ``create_agent(..., middleware=[...])``.

The middleware wraps each model call of the agent and compacts ``request.messages``,
counting the system message (which LangChain keeps out of them, but sends and bills) and the
bound tools' schemas beside them; ``rewrite_state=True`` also makes the stored ``messages``
what the model saw. See docs/integrations/langchain.md.

Requires ``langchain>=1``: the ``langchain`` extra (``python -m pip install ".[langchain]"``
in a checkout), or ``pip install 'langchain>=1'``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Awaitable, Callable, List, Optional, Tuple, Union

from .._callables import Beside
from ._common import Answered, Compactor, Counted, HookOptions, changed, missing

try:
    from langchain.agents.middleware import (
        AgentMiddleware,
        ExtendedModelResponse,
        ModelRequest,
        ModelResponse,
    )
    from langchain_core.messages import AIMessage, BaseMessage
    from langgraph.types import Command
except ImportError as exc:  # pragma: no cover - the message is tested without langchain
    raise missing("langchain", "pip install 'langchain>=1'", exc) from exc

from ._langchain_messages import native, replacing
from ._langchain_wire import measured, openai_tools

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["CompactionMiddleware"]

ModelCallResult = Union[ModelResponse, AIMessage, ExtendedModelResponse]


def _answered(reply: Any) -> Answered:
    # The reply with the first usage_metadata["input_tokens"] of its messages.
    response = reply.model_response if isinstance(reply, ExtendedModelResponse) else reply
    messages = response.result if isinstance(response, ModelResponse) else [response]
    found = ((getattr(m, "usage_metadata", None) or {}).get("input_tokens") for m in messages)
    return Answered(reply, next((tokens for tokens in found if type(tokens) is int), None))


class CompactionMiddleware(AgentMiddleware):  # type: ignore[misc]
    """Keep every model call of a LangChain agent inside ``max_tokens``.

    ``create_agent(model, tools, system_prompt=..., middleware=[CompactionMiddleware(
    max_tokens=...)])``: each model call's messages are compacted (tool calls kept
    with their results, as ``ctx_compact.compact`` does) with the system message
    and the tools counted against the budget, for ``invoke`` and ``ainvoke``,
    ``stream`` and ``astream`` alike. Each model call reports one
    ``CompactionEvent`` to ``on_compact`` and to every active
    ``CompactingSession`` (``provider_tokens`` is the reply's
    ``usage_metadata["input_tokens"]`` when the model reports it; a session
    intercepting the SDK underneath records no second event for the call), and
    ``on_overflow="retry"`` retries a call the provider refuses for length once,
    compacted to the provider's own figures.

    Args:
        max_tokens: The budget of each model call: messages, system message and
            tools' schemas, counted as the request's model sends them (a
            ``ChatAnthropic``, ``ChatGoogleGenerativeAI``, ``ChatBedrockConverse``
            or ``ChatOllama`` in its provider's form, any other model as
            ``ChatOpenAI`` sends them); never under what is sent, so it may be
            the model's context window.
        rewrite_state: ``False`` (the default) changes only what the model is
            sent; ``True`` also makes the agent's ``messages`` state what the
            model was sent (the dropped messages removed, a summary or cleared
            results in their place), when compaction changed anything.
        **options: ``budgeted``'s options (``keep_head``, ``summarize``,
            ``on_compact``, ``on_overflow``, ``clear_tool_results``, ...), with
            the same meanings. An async ``summarize`` or hook needs the agent's
            async API (``ainvoke``, ``astream``).

    Raises:
        TypeError, ValueError: A bad option, naming it.
    """

    def __init__(
        self,
        max_tokens: float,
        *,
        rewrite_state: bool = False,
        **options: Unpack[HookOptions],
    ) -> None:
        super().__init__()
        if not isinstance(rewrite_state, bool):
            raise TypeError(f"'rewrite_state' must be True or False (got {rewrite_state!r})")
        self.rewrite_state = rewrite_state
        self._compactor = Compactor(
            "CompactionMiddleware",
            "langchain wrap_model_call",
            max_tokens,
            options,
            wraps_call=True,
        )

    def _measured(self, request: ModelRequest) -> Tuple[Optional[Counted], Beside]:
        tools = openai_tools(request.tools)
        return measured(
            self._compactor, request.model, request.messages, request.system_message, tools
        )

    def _result(self, request: ModelRequest, sent: List[BaseMessage], result: Any) -> Any:
        if not self.rewrite_state or not changed(sent, request.messages):
            return result
        inner = None
        if isinstance(result, ExtendedModelResponse):  # an inner middleware's own update
            result, inner = result.model_response, result.command
        response = result if isinstance(result, ModelResponse) else ModelResponse([result])
        update = {"messages": replacing([*sent, *response.result])}
        if inner is not None:
            if not isinstance(inner.update, dict) or "messages" in inner.update or inner.goto:
                raise TypeError(
                    "CompactionMiddleware(rewrite_state=True) rewrites the messages, so a "
                    "middleware inside it cannot return a Command that updates them too"
                )
            update = {**inner.update, **update}
        return ExtendedModelResponse(model_response=response, command=Command(update=update))

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Any]
    ) -> ModelCallResult:
        """Compact the request's messages, then call the model (LangChain's sync hook)."""
        sent: List[BaseMessage] = []

        def send(kept: List[Any]) -> Any:
            sent[:] = native(kept, request.messages)
            return _answered(handler(request.override(messages=list(sent))))

        counted, beside = self._measured(request)
        answered = self._compactor.run(request.messages, beside, send, counted=counted)
        return self._result(request, sent, answered.reply)

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[Any]]
    ) -> ModelCallResult:
        """Compact the request's messages, then await the model (LangChain's async hook)."""
        sent: List[BaseMessage] = []

        async def send(kept: List[Any]) -> Any:
            sent[:] = native(kept, request.messages)
            return _answered(await handler(request.override(messages=list(sent))))

        counted, beside = self._measured(request)
        answered = await self._compactor.arun(request.messages, beside, send, counted=counted)
        return self._result(request, sent, answered.reply)
