"""CompactingSession: a conversation's or a request's compaction scope."""

from __future__ import annotations

import contextvars
import dataclasses
import threading
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Type, TypeVar

from ctx_compact._engine import CountTokens

from ._cache import CountCache
from ._calls import kind_of, qualified_name
from ._context import Entries, active
from ._events import CompactionEvent, Hooks
from ._intercept import Target, acquire, release
from ._policy import Budget, Policy

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class SessionStats:
    """Totals over the events a session recorded.

    Attributes:
        calls: Intercepted calls.
        compactions: Calls whose messages were compacted (something dropped).
        messages_dropped: Messages left out, over all calls.
        tokens_before: Estimated tokens the callers passed, over all calls.
        tokens_after: Estimated tokens passed on, over all calls.
    """

    calls: int = 0
    compactions: int = 0
    messages_dropped: int = 0
    tokens_before: int = 0
    tokens_after: int = 0

    @property
    def tokens_saved(self) -> int:
        """``tokens_before - tokens_after``."""
        return self.tokens_before - self.tokens_after


class CompactingSession:
    """A scope that records, and can apply, compaction for the calls made inside it.

    Use it as ``with CompactingSession(...) as session:`` or ``async with``.
    While active it records every ``@budgeted`` (or ``session.wrap``-ped, or
    intercepted) call made in its context, including from tasks started inside
    it and worker threads started through anyio (they inherit the context);
    calls made elsewhere are not recorded. When sessions are nested, an event
    reaches every active session. A ``@budgeted`` function keeps its own options
    inside a session; the session's options govern the calls it wraps or
    intercepts. Inside a session, counts of messages seen before are reused,
    so re-sending a growing history costs work for the new messages only.

    Args:
        max_tokens: The budget for wrapped and intercepted calls. May be left
            out when the session only observes ``@budgeted`` calls.
        keep_head, keep_tail, count_tokens, summarize, summary_role,
        messages_arg, on_overflow: As for ``budgeted``.
        on_compact: A hook or hooks called with every event the session records.
            Async hooks are awaited for async calls; for sync calls they are
            skipped and the skip is logged.
        validate: As for ``budgeted``, for the calls the session wraps or intercepts.
        intercept: Methods to intercept while the session is active, as
            ``"package.module.Class.method"`` or ``(Class, "method")``.
        calibrate: Learn, from the prompt sizes providers report in their
            responses, the factor between the estimate and the provider's count,
            and compact the calls made in this session's context (when it is the
            innermost calibrating one) to ``max_tokens / factor`` in estimated
            tokens, so a heuristic budget converges on the real one.

    Raises:
        TypeError, ValueError: A bad option, at construction.
    """

    def __init__(
        self,
        *,
        max_tokens: Optional[float] = None,
        keep_head: int = 1,
        keep_tail: int = 4,
        count_tokens: Optional[CountTokens] = None,
        summarize: Optional[Callable[[List[Any]], Any]] = None,
        summary_role: str = "user",
        messages_arg: str = "messages",
        on_compact: Hooks = None,
        on_overflow: str = "call",
        validate: Optional[str] = None,
        intercept: Sequence[Target] = (),
        calibrate: bool = False,
    ) -> None:
        self.policy = Policy.build(
            max_tokens=max_tokens,
            keep_head=keep_head,
            keep_tail=keep_tail,
            count_tokens=count_tokens,
            summarize=summarize,
            summary_role=summary_role,
            messages_arg=messages_arg,
            on_compact=on_compact,
            on_overflow=on_overflow,
            validate=validate,
            budget_optional=True,
        )
        if not isinstance(calibrate, bool):
            raise TypeError(f"calibrate must be True or False, got {calibrate!r}")
        self._calibrate = calibrate
        self._provider_total = 0
        self._estimate_total = 0
        single = isinstance(intercept, str) or (
            isinstance(intercept, tuple)
            and len(intercept) == 2
            and not isinstance(intercept[0], str)
        )
        # One target, or a list of them.
        self._targets: List[Target] = [intercept] if single else list(intercept)  # type: ignore[list-item]
        self._lock = threading.Lock()
        self._events: List[CompactionEvent] = []
        self._stats = SessionStats()
        self._caches: Dict[int, CountCache] = {}
        self._intercepted: Dict[Tuple[int, str], Budget] = {}
        self._patches: List[Any] = []
        self._entry: Optional[object] = None
        self._token: Optional[contextvars.Token[Entries]] = None

    # -- the scope -------------------------------------------------------------------

    def __enter__(self) -> CompactingSession:
        if self._token is not None:
            raise RuntimeError("this CompactingSession is already active")
        try:
            for target in self._targets:
                self._intercept(target)
        except BaseException:
            self._release_all()
            raise
        entry = object()
        self._token = active.set((*active.get(), (self, entry)))
        self._entry = entry
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        token, self._token = self._token, None
        self._entry = None
        try:
            if token is not None:
                active.reset(token)
        finally:
            self._release_all()

    async def __aenter__(self) -> CompactingSession:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.__exit__(exc_type, exc, tb)

    @property
    def active(self) -> bool:
        """Whether the session is between enter and exit."""
        return self._token is not None

    # -- what it records -------------------------------------------------------------

    @property
    def events(self) -> List[CompactionEvent]:
        """The events recorded so far, in the order they were produced (a copy)."""
        with self._lock:
            return list(self._events)

    @property
    def stats(self) -> SessionStats:
        """Totals over the recorded events."""
        with self._lock:
            return self._stats

    @property
    def calibration(self) -> float:
        """Provider tokens per estimated token over the calls that reported usage.

        ``1.0`` until a response reports its prompt size. Recorded whether or not
        the session calibrates; applied only when it does.
        """
        with self._lock:
            if self._estimate_total <= 0 or self._provider_total <= 0:
                return 1.0
            return self._provider_total / self._estimate_total

    def _record(self, event: CompactionEvent) -> None:
        with self._lock:
            self._events.append(event)
            if event.provider_tokens is not None and event.tokens_after > 0:
                self._provider_total += event.provider_tokens
                self._estimate_total += event.tokens_after
            s = self._stats
            self._stats = SessionStats(
                calls=s.calls + 1,
                compactions=s.compactions + (1 if event.compacted else 0),
                messages_dropped=s.messages_dropped + len(event.dropped),
                tokens_before=s.tokens_before + event.tokens_before,
                tokens_after=s.tokens_after + event.tokens_after,
            )

    def _cache(self, count_tokens: Optional[CountTokens]) -> CountCache:
        with self._lock:
            cache = self._caches.get(id(count_tokens))
            if cache is None or cache.count_tokens is not count_tokens:
                cache = self._caches[id(count_tokens)] = CountCache(count_tokens)
            return cache

    # -- what it applies -------------------------------------------------------------

    def wrap(self, fn: F) -> F:
        """Return ``fn`` with this session's options applied, for any kind of callable.

        Raises:
            TypeError: The session has no ``max_tokens``, or ``fn`` cannot take
                the messages argument, or async helpers meet a sync callable.
        """
        from ._decorator import apply

        wrapped = apply(fn, self._applied())
        # The session's hooks are not in the applied policy, so check them here.
        self.policy.check_kind(kind_of(fn), qualified_name(fn))
        return wrapped

    def _applied(self) -> Policy:
        # The session's own hooks are called when it records an event; left in
        # the policy it applies, they would be called a second time as the
        # wrapped function's hooks.
        return dataclasses.replace(self.policy, on_compact=())

    def intercept(self, target: Target) -> None:
        """Intercept ``target`` until the session exits (the session must be active).

        Raises:
            RuntimeError: The session is not active.
            TypeError, LookupError: ``target`` cannot be resolved or wrapped.
        """
        if self._token is None:
            raise RuntimeError("intercept() needs an active session; pass intercept=[...] instead")
        self._intercept(target)

    def _intercept(self, target: Target) -> None:
        patch = acquire(target)
        try:
            budget = Budget(self._applied(), patch.descriptor, patch.kind, patch.name)
            self.policy.check_kind(patch.kind, patch.name)
        except BaseException:
            release(patch)
            raise
        if patch.key in self._intercepted:
            release(patch)
            return
        self._patches.append(patch)
        self._intercepted[patch.key] = budget

    def _release_all(self) -> None:
        patches, self._patches = self._patches, []
        self._intercepted = {}
        for patch in reversed(patches):
            release(patch)
