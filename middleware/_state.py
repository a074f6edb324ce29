"""What a session owns while it lives, and which sessions are active in this context.

``SessionState`` owns a ``CompactingSession``'s activation, events, figures, calibration
and interceptions. The active states are a context variable (``active_states()``), so
tasks and anyio worker threads started inside a session see them, and others do not.
"""

from __future__ import annotations

import contextvars
import statistics
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Deque, List, Optional, Tuple

from ._events import CompactionEvent, Hook, logger
from ._summary_usage import SummaryUsage, UsageSink

# Provider tokens per estimated token outside this range are not a real
# tokenizer's figure for the messages sent (a wrong usage object, a response
# for another request): they are ignored, with a log line.
PLAUSIBLE_RATIO = (0.1, 10.0)
# Calibration follows the worst of the most recent figures, so that a request
# is compacted for the provider's count as it is now, not as it was on average.
CALIBRATION_WINDOW = 16
# A figure this far above the window's median is an outlier and not followed.
OUTLIER_FACTOR = 1.5
DEFAULT_MAX_EVENTS = 10_000


@dataclass(frozen=True)
class SessionStats:
    """Totals over the events a session recorded.

    Attributes:
        calls: Intercepted calls.
        compactions: Calls whose messages were compacted (something dropped).
        messages_dropped: Messages left out, over all calls.
        tokens_before: Estimated tokens the callers passed, over all calls.
        tokens_after: Estimated tokens passed on, over all calls.
        summary_usage: What the summarizers' model calls reported, over all calls
            (``CompactionEvent.summary_usage``).
    """

    calls: int = 0
    compactions: int = 0
    messages_dropped: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    summary_usage: SummaryUsage = field(default_factory=SummaryUsage)

    @property
    def tokens_saved(self) -> int:
        """``tokens_before - tokens_after``."""
        return self.tokens_before - self.tokens_after

    def plus(self, event: CompactionEvent) -> SessionStats:
        """These totals with one more event counted."""
        return SessionStats(
            calls=self.calls + 1,
            compactions=self.compactions + (1 if event.compacted else 0),
            messages_dropped=self.messages_dropped + len(event.dropped),
            tokens_before=self.tokens_before + event.tokens_before,
            tokens_after=self.tokens_after + event.tokens_after,
            summary_usage=self.summary_usage
            if event.summary_usage is None
            else self.summary_usage.plus(event.summary_usage),
        )


# Each entry pairs a state with the marker of the activation that pushed it.
# A context copied into a task outlives the block that set it (a task started
# inside the session into an outer task group): only entries whose activation
# is still the state's current one count as active.
_Entries = Tuple[Tuple["SessionState", object], ...]
_active: contextvars.ContextVar[_Entries] = contextvars.ContextVar(
    "ctx_compact_sessions", default=()
)


class SessionState:
    """The state of one session: activation, recording, calibration, interceptions.

    Args:
        hooks: The session's own ``on_compact`` hooks, called for every event it records.
        calibrate: Whether the session's calibration factor is applied to calls.
        max_events: How many of the most recent events are kept (``None``: all).
    """

    def __init__(self, hooks: Tuple[Hook, ...], calibrate: bool, max_events: Optional[int]) -> None:
        self.hooks = hooks
        self.calibrate = calibrate
        self._lock = threading.RLock()  # record learns while holding it
        self._events: Deque[CompactionEvent] = deque(maxlen=max_events)
        self._last: Optional[CompactionEvent] = None  # kept also when max_events keeps none
        self._stats = SessionStats()
        self._ratios: Deque[float] = deque(maxlen=CALIBRATION_WINDOW)
        self._calibration = 1.0
        self._held: List[Any] = []
        self._activation: Optional[object] = None

    # -- activation ------------------------------------------------------------------

    @property
    def active(self) -> bool:
        """Whether the state is between ``activate`` and ``deactivate``."""
        return self._activation is not None

    def activate(self) -> None:
        """Make the state active in the current context.

        Raises:
            RuntimeError: It is already active.
        """
        if self._activation is not None:
            raise RuntimeError("this CompactingSession is already active")
        activation = object()
        _active.set((*_live(_active.get()), (self, activation)))
        self._activation = activation

    def deactivate(self) -> None:
        """End the activation everywhere at once (a no-op when the state is not active).

        Sessions may end in any order, and in another task or thread than the
        one that started them: the state stops counting as active in every
        context immediately. Its entry is removed from the current context's
        list here, and from another context's the next time that one starts or
        ends a session.
        """
        if self._activation is None:
            return
        self._activation = None
        entries = _active.get()
        live = _live(entries)
        if len(live) != len(entries):
            _active.set(live)

    # -- recording -------------------------------------------------------------------

    def record(self, event: CompactionEvent) -> None:
        """Count ``event`` in the figures and keep it."""
        with self._lock:
            self._events.append(event)
            self._last = event
            self._stats = self._stats.plus(event)
            if event.provider_tokens is not None:
                self.learn(event.provider_tokens, event.tokens_after, event.function)

    def learn(self, provider: int, estimate: int, function: str) -> None:
        """Learn from a prompt size the provider reported (in a response, or in its error)."""
        low, high = PLAUSIBLE_RATIO
        # Compared before dividing: a figure like 10**400 has no float ratio.
        if not (
            isinstance(provider, int)
            and estimate > 0
            and low * estimate <= provider <= high * estimate
        ):
            logger.warning(
                "%s: ignored the provider's prompt size %r for %r estimated tokens: "
                "not a plausible count of the messages sent",
                function,
                provider,
                estimate,
            )
            return
        with self._lock:
            self._ratios.append(provider / estimate)
            ratios = list(self._ratios)
            ceiling = statistics.median(ratios) * OUTLIER_FACTOR
            self._calibration = max(r for r in ratios if r <= ceiling)

    @property
    def events(self) -> List[CompactionEvent]:
        """The events recorded so far, in order (a copy)."""
        with self._lock:
            return list(self._events)

    @property
    def last(self) -> Optional[CompactionEvent]:
        """The latest event recorded, or ``None``."""
        with self._lock:
            return self._last

    @property
    def stats(self) -> SessionStats:
        """Totals over the recorded events."""
        with self._lock:
            return self._stats

    @property
    def calibration(self) -> float:
        """Provider tokens per estimated token: the worst of the recent plausible figures.

        ``1.0`` until a response reports its prompt size. The largest of the last
        ``CALIBRATION_WINDOW`` ratios, leaving out any above ``OUTLIER_FACTOR``
        times their median, so one stray figure cannot move it much.
        """
        with self._lock:
            return self._calibration

    # -- interceptions ----------------------------------------------------------------

    def hold(self, handle: Any) -> None:
        """Keep an interception handle until ``release_all``."""
        self._held.append(handle)

    def release_all(self) -> List[Any]:
        """Hand back every held handle, newest first, holding none afterwards."""
        held, self._held = self._held, []
        return held[::-1]


def _live(entries: _Entries) -> _Entries:
    return tuple(entry for entry in entries if entry[0]._activation is entry[1])


def active_states() -> Tuple[SessionState, ...]:
    """The session states active in the current context, outermost first."""
    return tuple(state for state, _ in _live(_active.get()))


def calibration_factor(states: Tuple[SessionState, ...]) -> float:
    """The factor from estimated to provider tokens of the innermost calibrating state.

    ``1.0`` when none of ``states`` (the active ones) calibrates or has provider figures yet.
    """
    for state in reversed(states):
        if state.calibrate:
            return state.calibration
    return 1.0


# Set while an exclusive (intercepted) call runs its callee, so that a patched
# method reached again inside it, such as a subclass's patch calling its base
# class's, passes through: one call is one compaction and one event.
_exclusive_call: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "ctx_compact_exclusive_call", default=False
)


def inside_exclusive_call() -> bool:
    """Whether the current context is inside an exclusive interceptor's callee."""
    return _exclusive_call.get()


class ExclusiveCall:
    """``with ExclusiveCall():`` the block runs inside an exclusive callee."""

    def __enter__(self) -> None:
        self._token = _exclusive_call.set(True)

    def __exit__(self, *exc: object) -> None:
        _exclusive_call.reset(self._token)


# Set while a summarizer runs, so that the model call it makes through an
# intercepted client passes through: it is neither compacted nor reported as a
# call of the user's. It holds where the summarizer's usage is counted.
_summarizer_call: contextvars.ContextVar[Optional[UsageSink]] = contextvars.ContextVar(
    "ctx_compact_summarizer_call", default=None
)


def inside_summarizer() -> bool:
    """Whether the current context is inside a summarizer's work."""
    return _summarizer_call.get() is not None


def report_usage(usage: SummaryUsage) -> None:
    """Count a summarizer's model call's ``usage`` for the call it summarizes, if any."""
    sink = _summarizer_call.get()
    if sink is not None:
        sink.add(usage)


class SummarizerCall:
    """``with SummarizerCall(sink):`` the block is a summarizer's work, its usage
    counted in ``sink``; without one, in the enclosing summarizer work's (or nowhere)."""

    def __init__(self, sink: Optional[UsageSink] = None) -> None:
        self._sink = sink

    def __enter__(self) -> None:
        sink = self._sink or _summarizer_call.get() or UsageSink()
        self._token = _summarizer_call.set(sink)

    def __exit__(self, *exc: object) -> None:
        _summarizer_call.reset(self._token)
