"""strands-agents: ``CompactingConversationManager``, a conversation manager that compacts.

``Agent(..., conversation_manager=CompactingConversationManager(max_tokens=...))``:
before every model call of the agent (strands' ``BeforeModelCallEvent``) the
agent's ``messages`` are compacted in place, as strands' own conversation
managers edit them, so that they, the system prompt and the tools' specs
together fit ``max_tokens``. A tool use is never kept without its result, the
history still starts with a user message and its roles alternate (Bedrock
Converse's rules, which the messages are written in whatever the model
provider), and a summary, when ``summarize`` is given, is a user message in
the dropped messages' place.

Requires ``strands-agents``: the ``strands`` extra (``python -m pip install ".[strands]"`` in
a checkout), or ``pip install strands-agents``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from ctx_compact._contract import MEDIA_AWARE, default_count_tokens

from .._events import CompactionEvent, check_hooks
from ._common import Compactor, HookOptions, missing

try:
    from strands.agent.conversation_manager import ConversationManager
    from strands.hooks import BeforeModelCallEvent, HookRegistry
except ImportError as exc:  # pragma: no cover - the message is tested without strands
    raise missing("strands", "pip install 'strands-agents'", exc) from exc

if TYPE_CHECKING:
    from strands import Agent
    from typing_extensions import Unpack

__all__ = ["CompactingConversationManager", "sent_tokens"]

_SENT = ("role", "content")
_ROLES = ("user", "assistant")


def _sent(message: Any) -> Any:
    if isinstance(message, Mapping) and "content" in message:
        return {key: message[key] for key in _SENT if key in message}
    return message


def sent_tokens(message: Any) -> int:
    """The default estimate of a strands message as the model is sent it: its role and content.

    Strands keeps each assistant message's usage figures (``metadata``) and a
    ``tracking_id`` beside them, which no model provider sends; counted, they
    would make the history look about a third bigger than it is. The rest is
    the middleware's default counting, media-aware (an image at its billed
    tokens, ``ctx_compact.media_aware_counter``).
    """
    return MEDIA_AWARE(_sent(message))


def _sent_spec_tokens(message: Any) -> int:
    # sent_tokens with count_media=False: the specification's estimator throughout.
    return default_count_tokens(_sent(message))


class CompactingConversationManager(ConversationManager):  # type: ignore[misc]
    """Keep every model call of a strands agent inside ``max_tokens``.

    Each model call reports one ``CompactionEvent`` (``function`` is
    ``"strands BeforeModelCallEvent"``) to ``on_compact`` and to every active
    ``CompactingSession``. What was dropped leaves ``agent.messages`` (and is
    added to ``removed_message_count``), as with strands'
    ``SlidingWindowConversationManager``; cleared tool results and a summary
    take their place there. The hook is async, so an async ``summarize`` or
    hook is awaited and a sync one runs on a worker thread, for ``agent(...)``
    and ``await agent.invoke_async(...)`` alike.

    ``on_overflow="retry"`` is refused: the manager prepares the history but
    does not make the call; when the provider still refuses a request for its
    length, ``reduce_context`` raises the provider's error (see there).

    Args:
        max_tokens: The budget of each model call: the messages, the system
            prompt and the tools' specs (counted as Bedrock Converse sends them).
        **options: ``budgeted``'s options (``keep_head``, ``summarize``,
            ``on_compact``, ``clear_tool_results``, ...), with the same meanings;
            ``count_tokens`` defaults to ``sent_tokens`` (the specification's
            estimator on what is sent with ``count_media=False``).

    Raises:
        TypeError, ValueError: A bad option, naming it (a ``summary_role``
            other than ``"user"`` and ``"assistant"`` among them).
    """

    def __init__(self, max_tokens: float, **options: Unpack[HookOptions]) -> None:
        super().__init__()
        given: Dict[str, Any] = dict(options)
        # Counted as sent unless the caller counts: then the spec and prompt are
        # the estimator's too, not the content of a system message.
        self._estimated = given.get("count_tokens") is None
        if self._estimated:
            media = given.get("count_media", True)
            given["count_tokens"] = sent_tokens if media is True else _sent_spec_tokens
        # The manager notes each event too, for removed_message_count.
        given["on_compact"] = [self._note, *check_hooks(given.get("on_compact"))]
        self._compactor = Compactor(
            "CompactingConversationManager",
            "strands BeforeModelCallEvent",
            max_tokens,
            given,
            wraps_call=False,
        )
        if self._compactor.options.summary_role not in _ROLES:
            raise ValueError(
                "summary_role must be 'user' or 'assistant' (a strands message's roles), got "
                f"{self._compactor.options.summary_role!r}"
            )
        self._dropped = 0

    def _note(self, event: CompactionEvent) -> None:
        self._dropped = len(event.dropped)

    def register_hooks(self, registry: HookRegistry, **kwargs: Any) -> None:
        """Register the compaction before each model call (and strands' own hooks)."""
        super().register_hooks(registry, **kwargs)
        registry.add_callback(BeforeModelCallEvent, self._before_model_call)

    def _fixed(self, agent: Agent) -> int:
        # Sent beside the messages, as Bedrock Converse takes them: the system
        # prompt's blocks and one {"toolSpec": ...} per tool.
        system: Optional[List[Any]] = agent.system_prompt_content
        if system is None and agent.system_prompt:
            system = [{"text": agent.system_prompt}]
        parts: List[Any] = [system] if system else []
        parts += [{"toolSpec": spec} for spec in agent.tool_registry.get_all_tool_specs()]
        if self._estimated:
            return sum(map(default_count_tokens, parts))
        return self._compactor.fixed_tokens(parts=parts)

    async def _before_model_call(self, event: BeforeModelCallEvent) -> None:
        agent = event.agent
        messages = agent.messages
        self._dropped = 0
        kept = await self._compactor.acompacted(messages, self._fixed(agent))
        if len(kept) != len(messages) or any(a is not b for a, b in zip(kept, messages)):
            self.removed_message_count += self._dropped
            messages[:] = kept

    def apply_management(self, agent: Agent, **kwargs: Any) -> None:
        """Nothing to do after a run: the history is compacted before each model call."""

    def reduce_context(self, agent: Agent, e: Optional[Exception] = None, **kwargs: Any) -> None:
        """Raise ``e``: the provider refused a history already compacted to ``max_tokens``.

        The history was compacted to the budget before the call; a refusal for
        length means the budget is above the model's window (or the estimate
        below the provider's count), which dropping more now would only hide.
        Lower ``max_tokens``, or let a ``CompactingSession(intercept=...,
        on_overflow="retry")`` retry at the SDK with the provider's own figures.
        Without ``e`` (strands' proactive compression, which this manager does
        not enable) there is nothing to do.

        Raises:
            Exception: ``e``, when given.
        """
        if e is not None:
            raise e
