"""strands-agents: ``CompactingConversationManager``, a conversation manager that compacts.

Before every model call the agent's ``messages`` are compacted in place,
counted as the agent's model sends them (Chat Completions messages for an
OpenAI-compatible model, Converse form for any other); a session manager
restores the very history the agent held. See docs/integrations/strands.md.

Requires ``strands-agents``: the ``strands`` extra (``python -m pip install ".[strands]"`` in
a checkout), or ``pip install strands-agents``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from ctx_compact._contract import MEDIA_AWARE

from .._callables import Beside
from ._common import Compactor, HookOptions, changed, missing

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
_STATE = "prepend_messages"  # the live messages before the session record's end


def _sent(message: Any) -> Any:
    if isinstance(message, Mapping) and "content" in message:
        return {key: message[key] for key in _SENT if key in message}
    return message


def sent_tokens(message: Any) -> int:
    """The default estimate of a strands message as a Converse model is sent it: role and content.

    Strands keeps each assistant message's usage figures (``metadata``) and a
    ``tracking_id`` beside them, which no model provider sends; counted, they
    would make the history look about a third bigger than it is. The rest is
    the middleware's default counting, media-aware (an image at its billed
    tokens, ``ctx_compact.media_aware_counter``). An OpenAI-compatible model
    sends other messages: ``CompactingConversationManager`` counts those.
    """
    return MEDIA_AWARE(_sent(message))


def _converse(message: Any) -> List[Any]:
    return [_sent(message)]


def _chat_writer(model: Any) -> Any:
    # strands' OpenAI-compatible models (OpenAIModel and its subclasses) write their
    # request's Chat Completions messages with it, one strands message at a time.
    writer = getattr(model, "format_request_messages", None)
    return writer if callable(writer) else None


def _chat_tool(spec: Mapping[str, Any]) -> Dict[str, Any]:
    # A tool spec as an OpenAI-compatible model sends it.
    function = {
        "name": spec["name"],
        "description": spec["description"],
        "parameters": spec["inputSchema"]["json"],
    }
    return {"type": "function", "function": function}


class CompactingConversationManager(ConversationManager):  # type: ignore[misc]
    """Keep every model call of a strands agent inside ``max_tokens``.

    Each model call reports one ``CompactionEvent`` (``function`` is
    ``"strands BeforeModelCallEvent"``) to ``on_compact`` and to every active
    ``CompactingSession``. What was dropped leaves ``agent.messages``, as with
    strands' ``SlidingWindowConversationManager``; cleared tool results and a
    summary take their place there. The hook is async, so an async
    ``summarize`` or hook is awaited and a sync one runs on a worker thread,
    for ``agent(...)`` and ``await agent.invoke_async(...)`` alike.

    A session manager restores the history the agent held: ``get_state`` holds
    the messages before the last ones the session recorded as they are (the
    kept first messages, a summary, cleared copies), which
    ``restore_from_session`` gives back to be put first, and
    ``removed_message_count`` is where in the session's record those last
    messages start (so it also counts the kept first messages, which the state
    holds).

    ``on_overflow="retry"`` is refused: the manager prepares the history but
    does not make the call; when the provider still refuses a request for its
    length, ``reduce_context`` raises the provider's error (see there).

    Args:
        max_tokens: The budget of each model call: the messages, the system
            prompt and the tools' specs, counted as the agent's model sends
            them (Chat Completions messages for an OpenAI-compatible model,
            Converse form for any other).
        **options: ``budgeted``'s options (``keep_head``, ``summarize``,
            ``on_compact``, ``clear_tool_results``, ...), with the same meanings;
            a ``count_tokens`` given is handed each strands message as it is.

    Raises:
        TypeError, ValueError: A bad option, naming it (a ``summary_role``
            other than ``"user"`` and ``"assistant"`` among them).
    """

    removed_message_count: int  # strands' ConversationManager sets it

    def __init__(self, max_tokens: float, **options: Unpack[HookOptions]) -> None:
        super().__init__()
        caller, function = "CompactingConversationManager", "strands BeforeModelCallEvent"
        self._compactor = functools.partial(
            Compactor, caller, function, max_tokens, dict(options), wraps_call=False
        )
        # One compactor per way of sending (a model's class), each counting as that
        # model sends; built here for the Converse form, so a bad option raises now.
        self._compactors: Dict[Any, Compactor] = {None: self._compactor(sent=_converse)}
        self._compactors[None].check_summary_role(
            ("user", "assistant"), "a strands message's roles"
        )
        self._prepend: List[Any] = []

    def _compactor_for(self, model: Any) -> Compactor:
        writer = _chat_writer(model)
        if writer is not None and type(model) not in self._compactors:
            one_at_a_time = self._compactor(sent=lambda message: writer([message]))
            self._compactors[type(model)] = one_at_a_time
        return self._compactors[None if writer is None else type(model)]

    def register_hooks(self, registry: HookRegistry, **kwargs: Any) -> None:
        """Register the compaction before each model call (and strands' own hooks)."""
        super().register_hooks(registry, **kwargs)
        registry.add_callback(BeforeModelCallEvent, self._before_model_call)

    def get_state(self) -> Dict[str, Any]:
        """strands' state of a conversation manager, with the messages to put first on restoring."""
        state: Dict[str, Any] = super().get_state()
        state[_STATE] = list(self._prepend)
        return state

    def restore_from_session(self, state: Dict[str, Any]) -> Optional[List[Any]]:
        """Take back the state ``get_state`` gave; return the messages to put first.

        Raises:
            ValueError: The state is another conversation manager's (strands' check).
        """
        super().restore_from_session(state)
        self._prepend = list(state.get(_STATE) or ())
        return list(self._prepend) or None

    def _beside(self, agent: Agent, compactor: Compactor) -> Beside:
        # Sent beside the messages as the model sends them: an OpenAI-compatible
        # model's system messages and function tools, or Converse's system blocks
        # and one {"toolSpec": ...} per tool.
        specs = agent.tool_registry.get_all_tool_specs()
        writer = _chat_writer(agent.model)
        if writer is not None:
            content = agent.system_prompt_content
            parts = [*writer([], agent.system_prompt, system_prompt_content=content)]
            return compactor.beside(system=parts, tools=[_chat_tool(spec) for spec in specs])
        system: Optional[List[Any]] = agent.system_prompt_content
        if system is None and agent.system_prompt:
            system = [{"text": agent.system_prompt}]
        tools = [{"toolSpec": spec} for spec in specs]
        return compactor.beside(system=[system] if system else [], tools=tools)

    async def _before_model_call(self, event: BeforeModelCallEvent) -> None:
        agent = event.agent
        messages = agent.messages
        compactor = self._compactor_for(agent.model)
        kept = await compactor.acompacted(messages, self._beside(agent, compactor))
        if changed(kept, messages):
            self._note_kept(messages, kept)
            messages[:] = kept

    def _note_kept(self, before: List[Any], kept: List[Any]) -> None:
        # Which of ``kept`` a session restores from its record, and which from the state:
        # the messages after the state's are the record's last ones (each appended message
        # is recorded as it is), so ``kept`` ends with the longest run of them still the
        # record's end, untouched; what comes before that run is the state's.
        recorded = before[len(self._prepend) :]
        end = self.removed_message_count + len(recorded)
        at = {id(message): end - len(recorded) + i for i, message in enumerate(recorded)}
        start = len(kept)
        while start and at.get(id(kept[start - 1])) == end - (len(kept) - start) - 1:
            start -= 1
        self._prepend = kept[:start]
        self.removed_message_count = end - (len(kept) - start)

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
