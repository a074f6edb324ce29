"""What every framework integration shares: its options, the call sequence, the events.

An integration turns its framework's hook into one call of a ``Compactor``:
``compacted``/``acompacted`` for a hook that prepares the model's input,
``run``/``arun`` for one that makes the model call (docs/development.md, "A
framework integration"). Each call reports one ``CompactionEvent``, through the
same ``Interceptor`` sequence as ``budgeted``.
"""

from __future__ import annotations

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
    cast,
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

from .._callables import Arguments, Beside, Kind, Located, is_async_callable
from .._calls import Interceptor
from .._events import Hooks, check_hooks
from .._options import CompactionOptions, SharedOptions

__all__ = ["Answered", "Compactor", "Counted", "HookOptions", "Sent", "changed", "missing"]

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
    """How an integration counts a call's messages, as its framework's model sends them.

    Attributes:
        counts: Each message's tokens; ``None``: each is counted by ``recount``.
        recount: Counts a message compaction makes from them (a summary, a
            cleared copy: a mapping in the form the core reads the framework's
            messages in) as the model would be sent it; ``None``: the options' counter.
    """

    counts: Optional[Sequence[int]]
    recount: Optional[CountTokens]


_AS_READ = Counted(None, None)  # counted by the options' counter, as the core reads them


def missing(integration: str, install: str, error: BaseException) -> ImportError:
    """The error an integration module raises when its framework cannot be imported.

    Args:
        integration: The module's name, ``"langchain"``.
        install: The command that installs the framework (``pip install 'langchain>=1'``),
            written out where it is used, so tests/test_install_commands.py reads it there.
        error: The ``ImportError`` met, whose text says what was missing (a
            framework too old to have a name is not a framework missing).
    """
    return ImportError(
        f"middleware.integrations.{integration} needs its framework, which cannot be "
        f"imported ({error}); install it with: {install}"
    )


def changed(kept: Sequence[Any], given: Sequence[Any]) -> bool:
    """Whether the compacted list is not the caller's list, object for object."""
    return len(kept) != len(given) or any(a is not b for a, b in zip(kept, given))


class Answered:
    """What a hook's ``send`` returns: the model's reply, and the prompt size its provider
    reported (an ``int``, else none) as ``usage``, for the call's event."""

    __slots__ = ("reply", "usage")

    def __init__(self, reply: Any, input_tokens: Any) -> None:
        self.reply = reply
        self.usage = {"input_tokens": input_tokens} if type(input_tokens) is int else None


def _rebuild(messages: List[Any]) -> Arguments:
    return (messages,), {}


class _HookSite:
    """Where a framework hook's messages are: the first argument of the compactor's call."""

    def __init__(self, function: str) -> None:
        self.function = function

    def locate(
        self, instance: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]
    ) -> Optional[Located]:
        messages, beside, (counts, recount) = args
        return Located(messages, _rebuild, beside, self.function, counts, recount)


class _SentCounter(SpecCounter):
    """A message's count: the sum of the default counts of the wire messages it is sent as.

    A ``SpecCounter``, so a value sent beside the messages is counted by the estimator.
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
            messages and what is sent beside them (``beside``).
        options: ``HookOptions`` by keyword (``on_compact`` among them).
        wraps_call: Whether the hook makes the model call (``run``/``arun``)
            and may make it again; without it ``on_overflow="retry"`` is refused.
        sent: How the framework sends a message (its view, as the core reads
            it), when not as that view: the default counting then counts the
            wire messages ``sent`` gives, for every call that brings no
            ``Counted`` of its own. A caller's ``count_tokens`` is still given the view.

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
        self._counted = _AS_READ
        if sent is not None and self.options.count_tokens is None:
            self._counted = Counted(None, _SentCounter(sent, self.options.count_media))
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
        awaited = (self.options.summarize, *hooks)  # a summarize of None is not async
        self._async_helpers = [helper for helper in awaited if is_async_callable(helper)]

    def check_summary_role(self, roles: Sequence[str], whose: str) -> None:
        """Refuse a ``summary_role`` the framework has no message for.

        Raises:
            ValueError: ``summary_role`` is not one of ``roles`` (``whose`` says whose they are).
        """
        role = self.options.summary_role
        if role not in roles:
            *first, last = map(repr, roles)
            listed = f"{', '.join(first)} or {last}"
            raise ValueError(f"summary_role must be {listed} ({whose}), got {role!r}")

    def beside(
        self, messages: Sequence[Any] = (), system: Sequence[Any] = (), tools: Sequence[Any] = ()
    ) -> Beside:
        """Tokens sent beside the compacted messages, counted with the options' counter.

        Args:
            messages: Messages that are sent but never dropped (a system
                message), counted as messages are.
            system: Other parts of the system prompt as sent (JSON values: a
                system block, the Responses API's ``instructions``).
            tools: The tool schemas as sent.

        Other values than messages are counted as the estimator counts any
        value, or by a custom ``count_tokens`` as the content of a system message.
        """
        counter = self._counted.recount or self.options.counter
        own = measure(list(messages), counter)[0][-1] if messages else 0
        return Beside(
            int(own + sum(count_value(part, counter) for part in system)),
            sum(count_value(part, counter) for part in tools),
        )

    def run(
        self,
        messages: Sequence[Any],
        beside: Beside,
        send: Callable[[List[Any]], Any],
        *,
        counted: Optional[Counted] = None,
    ) -> Any:
        """Compact ``messages`` and make the model call with ``send(compacted)``; report the event.

        ``counted``, when given, is how the integration counts this call's
        messages; otherwise they are counted as ``sent`` says, or as the core
        reads them.

        Returns:
            What ``send`` returned.

        Raises:
            BudgetExceededError, UnpairedMessagesError: As for ``budgeted``.
            TypeError: An async summarizer or hook on this sync call.
            InvalidMessageError: A message the core cannot read.
        """
        if self._async_helpers:
            raise TypeError(
                f"{self.caller} was given the async {self._async_helpers[0]!r}, which a sync "
                "model call cannot await: run the agent with its async API, or pass a plain "
                "function"
            )
        return self._interceptor.call(send, None, (messages, beside, counted or self._counted), {})

    async def arun(
        self,
        messages: Sequence[Any],
        beside: Beside,
        send: Callable[[List[Any]], Awaitable[Any]],
        *,
        counted: Optional[Counted] = None,
    ) -> Any:
        """``run`` for an async model call: ``await send(compacted)``."""
        args = (messages, beside, counted or self._counted)
        return await self._interceptor.acall(send, None, args, {})

    def compacted(
        self, messages: Sequence[Any], beside: Beside, *, counted: Optional[Counted] = None
    ) -> List[Any]:
        """The compacted list, for a hook that only prepares the model's input (sync)."""
        return cast(List[Any], self.run(messages, beside, _same, counted=counted))

    async def acompacted(
        self, messages: Sequence[Any], beside: Beside, *, counted: Optional[Counted] = None
    ) -> List[Any]:
        """The compacted list, for a hook that only prepares the model's input (async)."""
        return cast(List[Any], await self.arun(messages, beside, _asame, counted=counted))
