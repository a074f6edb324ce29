"""CompactionEvent, BudgetExceededError, hook dispatch and the ready logging hook."""

from __future__ import annotations

import inspect
import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, FrozenSet, List, Optional, Sequence, Tuple, Union

from anyio import to_thread

from ctx_compact import Breakdown, PairingError, PairingProblem
from ctx_compact._contract import CountTokens, group_bounds, message_views, must, tally

from ._callables import Beside, is_async_callable
from ._summary_usage import SummaryUsage

logger = logging.getLogger("ctx_compact.middleware")

Hook = Callable[["CompactionEvent"], Any]
Hooks = Union[None, Hook, Sequence[Hook]]


# The one line log_compaction logs and an event's repr shows: figures only, never content.
_SUMMARY = "%s: %d -> %d tokens (budget %s), %d of %d messages dropped%s, %s"


def _summary_args(event: CompactionEvent) -> Tuple[Any, ...]:
    return (
        event.function,
        event.tokens_before,
        event.tokens_after,
        event.max_tokens,
        len(event.dropped),
        event.messages_before,
        ", summary inserted" if event.summary is not None else "",
        "fits" if event.fits else "does not fit",
    )


@dataclass(frozen=True)
class Received:
    """The history a call received, as the call counted it: what ``breakdown`` reads.

    Attributes:
        messages: The caller's messages.
        pre: The prefix sums of their tokens, as the call counted them (the call's
            own list, never changed after).
        beside: The tokens sent beside them.
        counter: The options' ``count_tokens``, which apportions a message's count
            among its parts.
        dropped: The indices of the messages the call left out.
        pinned: The indices of the messages in a pinned group.
    """

    messages: Tuple[Any, ...]
    pre: Sequence[int]
    beside: Beside
    counter: Optional[CountTokens]
    dropped: FrozenSet[int]
    pinned: FrozenSet[int]


@dataclass(frozen=True, repr=False)
class CompactionEvent:
    """What happened to one intercepted call's messages (docs/events.md, a row per field).

    One event is produced for every call whose messages were intercepted, also
    when nothing had to be dropped, and also when the call was not made
    (``on_overflow="raise"``, ``validate="raise"``). Hooks and ``session.events``
    share one event object; its message sequences are tuples, so no hook can
    change what the others or the session see. Its ``repr`` (and so
    ``print(event)``) is the one line ``log_compaction`` logs, ``<CompactionEvent
    app.ask: 195 -> 124 tokens (budget 150), 3 of 10 messages dropped, fits>``,
    never the messages.

    Attributes:
        function: The qualified name of the called function.
        max_tokens: The budget the call was compacted to.
        tokens_before: Estimated tokens of the messages as the caller passed them.
        tokens_after: Estimated tokens of ``messages``, the list passed on.
        fits: ``tokens_after * calibration <= max_tokens``.
        messages: The messages passed on (the caller's own objects, plus the
            summary message if one was inserted); the function receives them as
            a new list.
        dropped: The caller's messages that were left out, in original order.
        summary: The inserted summary text, or ``None``.
        elapsed: Seconds spent compacting, the summarizer included.
        messages_before: How many messages the caller passed.
        problems: With ``validate=``, the ``PairingProblem``s of ``messages``.
        provider_tokens: The prompt size the provider reported, or ``None``.
        calibration: The factor a calibrating session applied (``1.0`` otherwise).
        cleared_results: With ``clear_tool_results=``, the ``ClearedToolResult``s.
        truncated_results: The ``TruncatedToolResult``s: results cut to their caps
            (``truncate_tool_results=``) or by the last resort.
        cleared_thinking: With ``clear_thinking=``, the ``ClearedThinking``s.
        cut_reused: With ``target_tokens=``, whether the prompt's prefix stood.
        retried: With ``on_overflow="retry"``, whether this is the retry's event.
        summary_error: With ``summarize=``, why the summarizer failed, or ``None``.
        repairs: With ``validate="repair"``, the ``RepairChange``s made.
        store_error: With ``summarize=``, what went wrong with the store, or ``None``.
        summary_usage: With a summarizer that reports it (``llm_summarizer``), the
            ``SummaryUsage`` of its model calls in this call; ``None`` when none was made.
    """

    function: str
    max_tokens: float
    tokens_before: int
    tokens_after: int
    fits: bool
    messages: Tuple[Any, ...]
    dropped: Tuple[Any, ...]
    summary: Optional[str]
    elapsed: float
    messages_before: int
    problems: Tuple[PairingProblem, ...] = ()
    provider_tokens: Optional[int] = None
    calibration: float = 1.0
    cleared_results: Tuple[Any, ...] = ()
    truncated_results: Tuple[Any, ...] = ()
    cleared_thinking: Tuple[Any, ...] = ()
    cut_reused: bool = False
    retried: bool = False
    summary_error: Optional[str] = None
    repairs: Tuple[Any, ...] = ()
    store_error: Optional[str] = None
    summary_usage: Optional[SummaryUsage] = None
    # The history the call received, for ``breakdown``; it stays in the process (not
    # pickled or copied): its messages may be large and its counter a closure.
    _received: Optional[Received] = field(default=None, compare=False)

    def __repr__(self) -> str:
        return f"<CompactionEvent {_SUMMARY % _summary_args(self)}>"

    def __getstate__(self) -> Dict[str, Any]:
        return {**self.__dict__, "_received": None}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)

    def breakdown(self) -> Breakdown:
        """Where the tokens of the history this call received went, and what the call did
        to each message (``ctx_compact.breakdown``'s result, computed now).

        Its ``tokens`` is the event's ``tokens_before`` (the messages as the call counted
        them, and what it sent beside them: ``system``, ``tools``); its rows' ``status``
        is what the call did: ``"kept"``, ``"dropped"``, ``"summarized"`` (dropped, and
        in the summary), ``"cleared"``, ``"truncated"`` or ``"pinned"``; its
        ``max_tokens``, ``tokens_after`` and ``fits`` are the event's. ``chart()``,
        ``html()`` and a notebook's inline display draw it.

        Raises:
            ValueError: The event is a copy or was unpickled: the history it received
                stays with the event the call reported.
        """
        received = self._received
        if received is None:
            raise ValueError(
                f"{self.function}: this event was copied or unpickled, and the history the "
                "call received stays with the event the call reported: call breakdown() "
                "on that one (in a hook, or on session.events)"
            )
        views = message_views(received.messages)
        restarts: List[int] = []
        bounds = group_bounds(views, 0, restarts)
        beside = {"system": received.beside.system, "tools": received.beside.tools}
        return tally(
            views,
            [received.pre[i + 1] - received.pre[i] for i in range(len(received.messages))],
            bounds,
            restarts,
            received.counter,
            {category: tokens for category, tokens in beside.items() if tokens},
            self._statuses(received),
            max_tokens=self.max_tokens,
            tokens_after=self.tokens_after,
            fits=self.fits,
        )

    def _statuses(self, received: Received) -> List[Tuple[str, str]]:
        edited = {
            entry.index: ("cleared", "its thinking cleared") for entry in self.cleared_thinking
        }
        edited.update(
            (entry.index, ("cleared", "its tool result cleared")) for entry in self.cleared_results
        )
        edited.update(
            (entry.index, ("truncated", f"its tool result cut to {entry.tokens_after:,} tokens"))
            for entry in self.truncated_results
        )
        gone = (
            ("dropped", "dropped to fit the budget")
            if self.summary is None
            else ("summarized", "dropped, and in the summary")
        )
        statuses: List[Tuple[str, str]] = []
        for i in range(len(received.messages)):
            if i in received.dropped:
                statuses.append(gone)
            elif i in edited:
                statuses.append(edited[i])
            elif i in received.pinned:
                statuses.append(("pinned", "in a pinned group"))
            else:
                statuses.append(("kept", "kept"))
        return statuses

    @property
    def compacted(self) -> bool:
        """Whether anything was dropped (and so the list passed on differs from the input)."""
        return bool(self.dropped)

    @property
    def tokens_saved(self) -> int:
        """``tokens_before - tokens_after``."""
        return self.tokens_before - self.tokens_after


class BudgetExceededError(RuntimeError):
    """Raised with ``on_overflow="raise"`` when even full compaction cannot fit.

    The call is not made. The event has already been reported to the hooks.

    Attributes:
        event: The ``CompactionEvent`` of the refused call.
    """

    def __reduce__(self) -> Any:
        return type(self), (self.event,)

    def __init__(self, event: CompactionEvent) -> None:
        self.event = event
        super().__init__(
            f"{event.function}: the messages need {event.tokens_after} tokens after "
            f"compaction, over the budget of {event.max_tokens}; the call was not made"
        )


class UnpairedMessagesError(PairingError):
    """Raised with ``validate="raise"`` when the list to be sent has pairing problems.

    It is a ``ctx_compact.PairingError`` (and so a ``ValueError``); the call is
    not made, and the event has already been reported to the hooks.

    Attributes:
        event: The ``CompactionEvent`` of the refused call; ``problems`` is
            ``event.problems``.
    """

    def __init__(self, event: CompactionEvent) -> None:
        self.event = event
        super().__init__(event.problems)

    def __reduce__(self) -> Any:
        return type(self), (self.event,)


def check_hooks(hooks: Hooks, name: str = "on_compact") -> Tuple[Hook, ...]:
    """Normalise ``None``, one hook or a list of hooks to a tuple, checking each."""
    if hooks is None:
        return ()
    items: Sequence[Any] = (hooks,) if callable(hooks) else hooks
    if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
        raise must(name, "a callable or a list of callables", hooks)
    for hook in items:
        if not callable(hook):
            raise must(name, "a callable or a list of callables", hook)
    return tuple(items)


def _report(hook: Hook, exc: BaseException) -> None:
    logger.error(
        "on_compact hook %r raised; the call goes on",
        hook,
        exc_info=(type(exc), exc, exc.__traceback__),
    )


def dispatch(hooks: Sequence[Hook], event: CompactionEvent) -> None:
    """Call every hook with ``event`` on a sync path. A failing hook is logged, never raised.

    An async hook cannot be awaited here: it is closed and logged instead.
    """
    for hook in hooks:
        try:
            result = hook(event)
        except Exception as exc:
            _report(hook, exc)
            continue
        if inspect.isawaitable(result):
            close = getattr(result, "close", None)
            if close is not None:
                close()
            logger.error(
                "on_compact hook %r is async but %s is a sync call; it was skipped",
                hook,
                event.function,
            )


async def adispatch(hooks: Sequence[Hook], event: CompactionEvent) -> None:
    """Call every hook with ``event`` on an async path, awaiting async hooks.

    Sync hooks run on a worker thread (so a slow one never blocks the event
    loop), except ``log_compaction``, which never blocks.
    """
    for hook in hooks:
        try:
            # Hooks that never block (log_compaction, trace_compaction) skip the worker-thread hop.
            if getattr(hook, "never_blocks", False) or is_async_callable(hook):
                result = hook(event)
            else:
                result = await to_thread.run_sync(hook, event)
            if inspect.isawaitable(result):
                await result
        except Exception as exc:
            _report(hook, exc)


def figures(event: CompactionEvent) -> Dict[str, Any]:
    """The figures ``log_compaction`` and ``trace_compaction`` both give, never content."""
    return {
        "function": event.function,
        "max_tokens": event.max_tokens,
        "tokens_before": event.tokens_before,
        "tokens_after": event.tokens_after,
        "tokens_saved": event.tokens_saved,
        "messages_before": event.messages_before,
        "messages_after": len(event.messages),
        "summarized": event.summary is not None,
        "fits": event.fits,
        "pairing_problems": len(event.problems),
    }


def log_compaction(event: CompactionEvent) -> None:
    """A ready ``on_compact`` hook: one log line per call, figures only, never content.

    Logs on the ``ctx_compact.middleware`` logger: ``WARNING`` when the result
    does not fit, ``INFO`` when messages were dropped, ``DEBUG`` otherwise. The
    figures are also attached as ``extra`` fields prefixed ``ctx_compact_``
    (``function``, ``max_tokens``, ``tokens_before``, ``tokens_after``,
    ``tokens_saved``, ``messages_before``, ``messages_after``, ``dropped``,
    ``summarized``, ``fits``, ``elapsed``, ``provider_tokens``,
    ``pairing_problems``), for structured log handlers.

    Args:
        event: The event to log.
    """
    if not event.fits:
        level = logging.WARNING
    elif event.compacted:
        level = logging.INFO
    else:
        level = logging.DEBUG
    if not logger.isEnabledFor(level):
        return
    extra = {
        **figures(event),
        "dropped": len(event.dropped),
        "elapsed": event.elapsed,
        "provider_tokens": event.provider_tokens,
    }
    extra = {f"ctx_compact_{name}": value for name, value in extra.items()}
    logger.log(level, _SUMMARY, *_summary_args(event), extra=extra)


log_compaction.never_blocks = True  # type: ignore[attr-defined]
