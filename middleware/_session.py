"""CompactingSession: a conversation's or a request's compaction scope.

The public front over a ``SessionState``, which owns everything the session
holds; this module turns the options into that state and the scope into its
activation.
"""

from __future__ import annotations

import dataclasses
from types import TracebackType
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Sequence, Type, TypeVar, Union

from ctx_compact import Breakdown
from ctx_compact._contract import check_flag, check_keep, must

from ._callables import kind_of, qualified_name
from ._events import CompactionEvent, Hooks, check_hooks
from ._options import (
    INHERIT,
    CompactionOptions,
    Options,
    check_awaitables,
    check_options,
    spelled_out,
)
from ._patching import Target, intercept, is_target, release
from ._state import DEFAULT_MAX_EVENTS, SessionState, SessionStats
from ._wrapped import wrap_callable
from .sdks import SDK_NAMES, SdkTarget, is_sdk_name, sdk_targets

if TYPE_CHECKING:
    from typing_extensions import Unpack

F = TypeVar("F", bound=Callable[..., Any])


# What intercept takes, as its errors word it.
_INTERCEPTABLE = (
    f"an SDK ({', '.join(map(repr, SDK_NAMES))}), a target "
    "('package.module.Class.method' or (Class, 'method'))"
)


def _targets(intercept: Union[Target, Sequence[Target]]) -> List[Union[Target, SdkTarget]]:
    # One target, or a list of them; each checked now rather than at entry.
    one = is_sdk_name(intercept) or is_target(intercept)
    if not one and (
        isinstance(intercept, (str, bytes)) or not isinstance(intercept, (list, tuple))
    ):
        raise must("intercept", _INTERCEPTABLE + " or a list of them", intercept)
    targets: List[Union[Target, SdkTarget]] = []
    for target in [intercept] if one else intercept:
        if is_sdk_name(target):
            targets.extend(sdk_targets(target))  # type: ignore[arg-type]
        elif is_target(target):
            targets.append(target)  # type: ignore[arg-type]
        else:
            raise must("intercept", "a list of " + _INTERCEPTABLE.replace("an SDK", "SDKs"), target)
    return targets


class CompactingSession:
    """A scope that records, and can apply, compaction for the calls made inside it.

    Use it as ``with CompactingSession(...) as session:`` or ``async with``.
    Sessions may be exited in any order, and in another task or thread than
    the one that entered them: a session stops intercepting and recording
    everywhere as soon as it exits.
    While active it records every ``@budgeted`` (or ``session.wrap``-ped, or
    intercepted) call made in its context, including from tasks started inside
    it and worker threads started through anyio (they inherit the context);
    calls made elsewhere are not recorded. When sessions are nested, an event
    reaches every active session. A ``@budgeted`` function keeps its own options
    inside a session; the session's compaction options (``Options``, as for
    ``budgeted``) govern the calls it wraps or intercepts (without a ``store``,
    each of them keeps its recent summaries in memory for this session).

    Args:
        max_tokens: The budget for wrapped and intercepted calls. May be left
            out when the session only observes ``@budgeted`` calls; it then
            holds no compaction options (``options`` is ``None``).
        on_compact: A hook or hooks called with every event the session records.
            Async hooks are awaited for async calls; for sync calls they are
            skipped and the skip is logged.
        intercept: What to intercept while the session is active: a whole SDK
            (``"openai"``, ``"anthropic"``, ``"litellm"``, ``"gemini"`` for
            google-genai, ``"bedrock"`` for boto3's Bedrock Runtime: every request
            it sends inside the block, whichever route and client; see
            docs/sdk-interception.md), methods as ``"package.module.Class.method"``
            or ``(Class, "method")``, or a list mixing both.
        calibrate: Learn, from the prompt sizes providers report in their
            responses, the factor between the estimate and the provider's count,
            and compact the calls made in this session's context (when it is the
            innermost calibrating one) to ``max_tokens / factor`` in estimated
            tokens, so a heuristic budget converges on the real one. The factor
            follows the worst of the recent figures (see ``calibration``);
            implausible figures are ignored and logged.
        max_events: How many of the most recent events ``events`` keeps
            (10,000 by default; ``None`` keeps all). ``stats`` stay exact over
            every call. A session keeps nothing else per call.

    Raises:
        TypeError, ValueError: A bad option (an unknown one, a bad value, or an
            ``intercept`` entry that is not a target), at construction.
    """

    @spelled_out()
    def __init__(
        self,
        *,
        max_tokens: Optional[float] = None,
        on_compact: Hooks = None,
        intercept: Union[Target, Sequence[Target]] = (),
        calibrate: bool = False,
        max_events: Optional[int] = DEFAULT_MAX_EVENTS,
        **options: Unpack[Options],
    ) -> None:
        hooks = check_hooks(on_compact)
        self._options: Optional[CompactionOptions] = None
        if max_tokens is None:
            check_options("CompactingSession", options)
        else:
            self._options = CompactionOptions.build("CompactingSession", max_tokens, options)
        check_flag(calibrate, "calibrate")
        if max_events is not None:
            check_keep(max_events, "max_events")
        self._targets = _targets(intercept)
        self._state = SessionState(hooks, calibrate, max_events)

    # -- the scope -------------------------------------------------------------------

    def __enter__(self) -> CompactingSession:
        if self._state.active:
            raise RuntimeError("this CompactingSession is already active")
        try:
            for target in self._targets:
                self._intercept(target)
        except BaseException:
            self._release_all()
            raise
        self._state.activate()
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        try:
            self._state.deactivate()
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
        return self._state.active

    @property
    def options(self) -> Optional[CompactionOptions]:
        """The compaction options for wrapped and intercepted calls; ``None`` without a budget."""
        return self._options

    # -- what it records -------------------------------------------------------------

    @property
    def events(self) -> List[CompactionEvent]:
        """The most recent ``max_events`` events, in the order they were produced (a copy).

        ``stats`` count every event, also those no longer kept.
        """
        return self._state.events

    @property
    def stats(self) -> SessionStats:
        """Totals over the recorded events."""
        return self._state.stats

    def breakdown(self) -> Breakdown:
        """Where the tokens of the last request the session compacted went: that call's
        ``CompactionEvent.breakdown()``, also when ``max_events`` keeps no events.

        Raises:
            LookupError: The session has compacted no call yet.
        """
        last = self._state.last
        if last is None:
            raise LookupError("this CompactingSession has compacted no call yet")
        return last.breakdown()

    @property
    def calibration(self) -> float:
        """Provider tokens per estimated token over the calls that reported usage.

        ``1.0`` until a response reports its prompt size. Recorded whether or not
        the session calibrates; applied only when it does.
        """
        return self._state.calibration

    # -- what it applies -------------------------------------------------------------

    @spelled_out(inherit=True)
    def wrap(self, fn: F, *, max_tokens: float = INHERIT, **options: Unpack[Options]) -> F:
        """Return ``fn`` with this session's options applied, for any kind of callable.

        The session's own hooks are called when it records the event, so the
        wrapper calls none of its own.

        Args:
            fn: The callable whose messages argument is compacted.
            max_tokens: This callable's budget; by default (``INHERIT``) the session's.
            **options: The compaction options (``Options``) that differ from the session's.

        Returns:
            The wrapped callable, of the same kind as ``fn``.

        Raises:
            TypeError: Neither the session nor the call gives ``max_tokens``,
                ``fn`` cannot take the messages argument, or async helpers meet
                a sync callable.
            ValueError: A bad option value.
        """
        wrapped = wrap_callable(fn, self._wrap_options(fn, max_tokens, options), ())
        # The session's hooks are not the wrapper's, so check them against fn here.
        kind = kind_of(fn)
        check_awaitables(kind, qualified_name(fn), None, self._state.hooks)
        return wrapped

    def intercept(self, target: Target) -> None:
        """Intercept ``target`` (or an SDK by name) until the session exits.

        Raises:
            RuntimeError: The session is not active.
            TypeError, LookupError: ``target`` cannot be resolved or wrapped.
        """
        if not self._state.active:
            raise RuntimeError("intercept() needs an active session; pass intercept=[...] instead")
        for one in _targets(target):
            self._intercept(one)

    def _wrap_options(self, fn: Any, max_tokens: Any, overrides: Options) -> CompactionOptions:
        if max_tokens is INHERIT and (self._options is None or not overrides):
            return self._required_options(fn)
        # The session's checked options, with the given ones checked again on top.
        fields = dataclasses.fields(self._options) if self._options is not None else ()
        own = {f.name: getattr(self._options, f.name) for f in fields}
        inherited = own.pop("max_tokens", INHERIT)
        budget = inherited if max_tokens is INHERIT else max_tokens
        return CompactionOptions.build("wrap", budget, {**own, **overrides})

    def _required_options(self, what: Any) -> CompactionOptions:
        if self._options is None:
            raise TypeError(f"max_tokens is required to compact the calls of {what!r}")
        return self._options

    def _intercept(self, target: Union[Target, SdkTarget]) -> None:
        intercept(target, self._state, self._required_options(target))

    def _release_all(self) -> None:
        for patch in self._state.release_all():
            release(patch, self._state)
