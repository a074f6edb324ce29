"""What every framework integration shares: ``budgeted``'s options, the call sequence, the events.

An integration module (one per framework, ``middleware/integrations/<name>.py``)
turns its framework's hook into one call of a ``Compactor``, and nothing more:

1. Import the framework at the top of the module, inside ``try``/``except
   ImportError as exc: raise missing(name, install) from exc``, ``install``
   being the command that installs the framework, so that importing the module
   without the framework names that command, and nothing else (not the package)
   ever imports it.
2. Take ``(max_tokens, **options: Unpack[HookOptions])`` (``Unpack`` from
   ``typing_extensions`` under ``TYPE_CHECKING``: nothing needs it at run
   time) and build one
   ``Compactor(caller, function, max_tokens, options, wraps_call=...)`` when the
   hook is made: the options are checked there, as ``budgeted`` checks them,
   naming the bad one; ``function`` is what the events' ``function`` says
   (``"langchain wrap_model_call"``).
3. Say how a message is sent when the framework sends it in another form
   than the one the core reads it in (``sent=``: AutoGen's messages go out as
   Chat Completions messages, strands' as its model provider writes them), so
   that the default counting counts what the provider is sent. In the hook,
   count what the framework sends beside the messages and cannot drop (a
   system prompt, the tools' schemas) with ``fixed_tokens``, and hand the
   messages to the compactor (with ``counted=Counted(counts, recount)`` when
   the integration counts a whole request as the framework's model sends it,
   which one message at a time cannot: pydantic-ai):

   - a hook that makes the model call (LangChain's ``wrap_model_call``) passes
     ``send``, which makes it with the compacted list: ``compactor.run(messages,
     fixed, send)`` or ``await compactor.arun(messages, fixed, asend)``. The
     event then carries the provider's prompt size when the response has
     ``usage``, and ``on_overflow="retry"`` works (``wraps_call=True``);
   - a hook that only prepares the model's input (LangGraph's
     ``pre_model_hook``, pydantic-ai's history processors, openai-agents'
     ``call_model_input_filter``) takes ``compactor.compacted(messages, fixed)``
     or ``await compactor.acompacted(...)``: the compacted list
     (``wraps_call=False`` refuses ``on_overflow="retry"``, which needs the call
     made again; so does a hook that may make it only once).

4. Turn what comes back into the framework's own message objects: the
   compacted list holds the caller's objects, plus a summary as a
   ``{"role": summary_role, "content": text}`` dict and, with clearing,
   edited copies in the wire form the core reads the framework's messages in
   (``ctx_compact.formats.frameworks``), which the module converts back.

The compactor reports one ``CompactionEvent`` per model call, with the same
fields as ``@budgeted``'s, to its ``on_compact`` hooks and to every active
``CompactingSession`` (whose ``events`` and ``stats`` then include it), through
the same ``Interceptor`` sequence as ``budgeted``: summaries (kept in ``store``),
``validate``, ``on_overflow`` and ``calibrate`` behave exactly as there.
"""

from __future__ import annotations

import dataclasses
from typing import (
    Any,
    Awaitable,
    Callable,
    Dict,
    Iterable,
    List,
    Mapping,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
)

from ctx_compact._contract import (
    MEDIA_AWARE,
    CountTokens,
    SpecCounter,
    count_value,
    default_count_tokens,
    measure,
    message_views,
)

from .._callables import Arguments, Kind, Located, is_async_callable
from .._calls import Interceptor
from .._events import Hooks, check_hooks
from .._options import CompactionOptions, SharedOptions

__all__ = ["Compactor", "Counted", "HookOptions", "Sent", "missing"]

#: How a framework sends one message, seen as the core reads it: the wire messages
#: its client writes for it (none, one or several).
Sent = Callable[[Any], Iterable[Any]]


class HookOptions(SharedOptions, total=False):
    """``budgeted``'s options as an integration takes them: ``**options: Unpack[HookOptions]``.

    All but ``messages_arg``, since the framework hands an integration its messages.
    """

    on_compact: Hooks
    """A hook or a list of hooks called with each event, as for ``budgeted``."""


class Counted(NamedTuple):
    """Messages an integration counted itself, as its framework's model sends them.

    Attributes:
        counts: Each message's tokens.
        recount: Counts a message that compaction makes from them (a summary,
            a cleared copy: a mapping in the form the core reads the
            framework's messages in) as the model would be sent it.
    """

    counts: Sequence[int]
    recount: CountTokens


def missing(integration: str, install: str, error: Optional[BaseException] = None) -> ImportError:
    """The error an integration module raises when its framework cannot be imported.

    Args:
        integration: The module's name, ``"langchain"``.
        install: The command that installs the framework (``pip install 'langchain>=1'``),
            written out where it is used, so tests/test_install_commands.py reads it there.
        error: The ``ImportError`` met, whose text says what was missing (a
            framework too old to have a name is not a framework missing).
    """
    reason = f" ({error})" if error is not None else ""
    return ImportError(
        f"middleware.integrations.{integration} needs its framework, which cannot be "
        f"imported{reason}; install it with: {install}"
    )


def _rebuild(messages: List[Any]) -> Arguments:
    return (messages,), {}


class _HookSite:
    """Where a framework hook's messages are: the first argument of the compactor's call."""

    def __init__(self, function: str) -> None:
        self.function = function

    def locate(
        self, instance: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]
    ) -> Optional[Located]:
        messages, fixed, counted = args
        counts, recount = counted or (None, None)
        return Located(messages, _rebuild, fixed, self.function, counts, recount)


class _SentCounter(SpecCounter):
    """The default counting of the messages a framework sends for each message.

    A message's count is the sum of its wire messages' counts (media-aware
    unless ``count_media=False``). A value sent beside the messages (a tool's
    schema) is counted by the estimator, as the default counting counts it.
    """

    def __init__(self, sent: Sent, count_media: bool) -> None:
        self._sent = sent
        self._count: CountTokens = MEDIA_AWARE if count_media else default_count_tokens

    def __call__(self, message: Any) -> int:
        (view,) = message_views((message,))  # a framework object, or a summary's mapping
        return sum(map(self._count, self._sent(view)))


def _same(messages: List[Any]) -> List[Any]:
    return messages


async def _asame(messages: List[Any]) -> List[Any]:
    return messages


class Compactor:
    """``budgeted``'s options bound to one framework hook, compacting what it is handed.

    Args:
        caller: The integration's public name, for errors
            (``"CompactionMiddleware"``).
        function: The events' ``function`` (``"langchain wrap_model_call"``).
        max_tokens: The budget for everything the model call sends: the
            messages and the ``fixed_tokens`` beside them.
        options: ``HookOptions`` by keyword (``on_compact`` among them).
        wraps_call: Whether the hook makes the model call (``run``/``arun``)
            and may make it again; without it ``on_overflow="retry"`` is refused.
        sent: How the framework sends a message (its view, as the core reads
            it), when not as that view: the default counting then counts the
            wire messages ``sent`` gives. A caller's ``count_tokens`` is still
            given the view.

    Raises:
        TypeError, ValueError: A bad or unknown option, as ``budgeted`` raises.
    """

    def __init__(
        self,
        caller: str,
        function: str,
        max_tokens: object,
        options: Mapping[str, Any],
        *,
        wraps_call: bool,
        sent: Optional[Sent] = None,
    ) -> None:
        given = dict(options)
        if "messages_arg" in given:
            raise TypeError(
                f"{caller}() got an unexpected keyword argument 'messages_arg': the "
                "framework hands it the messages"
            )
        hooks = check_hooks(given.pop("on_compact", None))
        self.caller = caller
        self.options = CompactionOptions.build(caller, max_tokens, given)
        if sent is not None and self.options.count_tokens is None:
            counter = _SentCounter(sent, self.options.count_media)
            self.options = dataclasses.replace(self.options, count_tokens=counter)
        if not wraps_call and self.options.on_overflow == "retry":
            raise ValueError(
                f"{caller} does not make the model call a second time, so it cannot retry a "
                "call the provider refuses for length: on_overflow must be 'call' or 'raise' "
                "here (got 'retry')"
            )
        # Built as async: the sync paths check for async helpers themselves (below),
        # because a framework hook serves both a sync and an async agent.
        self._interceptor = Interceptor(
            self.options,
            hooks,
            None,
            Kind.ASYNC,
            function,
            exclusive=True,
            site=_HookSite(function),
        )
        awaited: List[Any] = [*hooks]
        if self.options.summarize is not None:
            awaited.insert(0, self.options.summarize)
        self._async_helpers = [helper for helper in awaited if is_async_callable(helper)]

    def fixed_tokens(self, messages: Sequence[Any] = (), parts: Sequence[Any] = ()) -> int:
        """Tokens sent beside the compacted messages, counted with the options' counter.

        Args:
            messages: Messages that are sent but never dropped (a system
                message), counted as messages are.
            parts: Other JSON values (a tool's schema), counted as the
                estimator counts any value, or by a custom ``count_tokens`` as
                the content of a system message.
        """
        counter = self.options.counter
        total = measure(list(messages), counter)[0][-1] if messages else 0
        for part in parts:
            total += count_value(part, counter)
        return int(total)

    def _check_sync(self) -> None:
        if self._async_helpers:
            raise TypeError(
                f"{self.caller} was given the async {self._async_helpers[0]!r}, which a sync "
                "model call cannot await: run the agent with its async API, or pass a plain "
                "function"
            )

    def run(
        self,
        messages: Sequence[Any],
        fixed: int,
        send: Callable[[List[Any]], Any],
        *,
        counted: Optional[Counted] = None,
    ) -> Any:
        """Compact ``messages`` and make the model call with ``send(compacted)``; report the event.

        ``counted``, when given, is the messages counted by the integration, as
        the framework's model sends them; otherwise the options' counter counts
        them as the core reads them.

        Returns:
            What ``send`` returned.

        Raises:
            BudgetExceededError, UnpairedMessagesError: As for ``budgeted``.
            TypeError: An async summarizer or hook on this sync call.
            InvalidMessageError: A message the core cannot read.
        """
        self._check_sync()
        return self._interceptor.call(send, None, (messages, fixed, counted), {})

    async def arun(
        self,
        messages: Sequence[Any],
        fixed: int,
        send: Callable[[List[Any]], Awaitable[Any]],
        *,
        counted: Optional[Counted] = None,
    ) -> Any:
        """``run`` for an async model call: ``await send(compacted)``."""
        return await self._interceptor.acall(send, None, (messages, fixed, counted), {})

    def compacted(
        self, messages: Sequence[Any], fixed: int, *, counted: Optional[Counted] = None
    ) -> List[Any]:
        """The compacted list, for a hook that only prepares the model's input (sync)."""
        self._check_sync()
        result: List[Any] = self._interceptor.call(_same, None, (messages, fixed, counted), {})
        return result

    async def acompacted(
        self, messages: Sequence[Any], fixed: int, *, counted: Optional[Counted] = None
    ) -> List[Any]:
        """The compacted list, for a hook that only prepares the model's input (async)."""
        result: List[Any] = await self._interceptor.acall(
            _asame, None, (messages, fixed, counted), {}
        )
        return result
