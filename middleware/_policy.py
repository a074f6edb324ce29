"""A compaction policy (the checked options) and how it is applied to one call.

The work that does not wait on anything is written once (``_Run``); the sync
and async entry points differ only in how the summary is obtained and how the
hooks are called.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

import anyio
import anyio.to_thread

from ctx_compact import check_pairing
from ctx_compact._engine import (
    Compaction,
    CountTokens,
    check_callable,
    check_keep,
    check_max_tokens,
    check_messages,
    check_summary,
    check_summary_role,
    measure,
)

from ._calls import ArgSpec, Kind, replace
from ._context import active_sessions, cache_for, calibration
from ._events import (
    BudgetExceededError,
    CompactionEvent,
    Hook,
    Hooks,
    UnpairedMessagesError,
    adispatch,
    check_hooks,
    dispatch,
    is_async_callable,
    with_response,
)

OVERFLOW_CHOICES = ("call", "raise")
VALIDATE_CHOICES = (None, "raise", "report")


@dataclass(frozen=True)
class Policy:
    """The options of ``budgeted`` or ``CompactingSession``, checked once.

    ``max_tokens`` is ``None`` only for a session that just observes.
    """

    max_tokens: Optional[float]
    keep_head: int
    keep_tail: int
    count_tokens: Optional[CountTokens]
    summarize: Optional[Callable[[List[Any]], Any]]
    summary_role: str
    messages_arg: str
    on_compact: Tuple[Hook, ...]
    on_overflow: str
    validate: Optional[str] = None

    @classmethod
    def build(
        cls,
        *,
        max_tokens: Optional[float],
        keep_head: int = 1,
        keep_tail: int = 4,
        count_tokens: Optional[CountTokens] = None,
        summarize: Optional[Callable[[List[Any]], Any]] = None,
        summary_role: str = "user",
        messages_arg: str = "messages",
        on_compact: Hooks = None,
        on_overflow: str = "call",
        validate: Optional[str] = None,
        budget_optional: bool = False,
    ) -> Policy:
        """Check every option, raising ``TypeError``/``ValueError`` naming the bad one."""
        if not (budget_optional and max_tokens is None):
            max_tokens = check_max_tokens(max_tokens)
        check_callable(count_tokens, "count_tokens")
        check_callable(summarize, "summarize")
        if not isinstance(messages_arg, str) or not messages_arg.isidentifier():
            raise TypeError(f"messages_arg must be an argument name, got {messages_arg!r}")
        if on_overflow not in OVERFLOW_CHOICES:
            raise ValueError(f"on_overflow must be 'call' or 'raise', got {on_overflow!r}")
        if validate not in VALIDATE_CHOICES:
            raise ValueError(f"validate must be None, 'raise' or 'report', got {validate!r}")
        return cls(
            max_tokens=max_tokens,
            keep_head=check_keep(keep_head, "keep_head"),
            keep_tail=check_keep(keep_tail, "keep_tail"),
            count_tokens=count_tokens,
            summarize=summarize,
            summary_role=check_summary_role(summary_role),
            messages_arg=messages_arg,
            on_compact=check_hooks(on_compact),
            on_overflow=on_overflow,
            validate=validate,
        )

    def check_kind(self, kind: Kind, function_name: str) -> None:
        """Refuse, at wrapping time, async helpers that a sync callable could not await."""
        if kind.is_async:
            return
        if self.summarize is not None and is_async_callable(self.summarize):
            raise TypeError(
                f"{function_name} is a {kind.value} function, so it cannot await the async "
                f"summarize {self.summarize!r}; pass a plain function, or wrap an async function"
            )
        for hook in self.on_compact:
            if is_async_callable(hook):
                raise TypeError(
                    f"{function_name} is a {kind.value} function, so it cannot await the "
                    f"async on_compact hook {hook!r}; pass a plain function, or wrap an "
                    f"async function"
                )


class Budget:
    """A policy bound to one callable: where its messages are, what it is called.

    Args:
        policy: The checked options (``max_tokens`` must be set).
        fn: The callable as it was given (function, method, classmethod, ...).
        kind: Its kind, decided once.
        name: Its qualified name, for events.
    """

    def __init__(self, policy: Policy, fn: Any, kind: Kind, name: str) -> None:
        if policy.max_tokens is None:
            raise TypeError(f"max_tokens is required to compact the calls of {name}")
        policy.check_kind(kind, name)
        self.policy = policy
        self.kind = kind
        self.name = name
        self.arg = ArgSpec.of(fn, policy.messages_arg, name)

    def find(self, instance: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Optional[_Run]:
        """Start the work for one call, or ``None`` when it carries no messages."""
        found, value, index = self.arg.find(instance, args, kwargs)
        if not found or value is None:
            return None
        if isinstance(value, str) and self.arg.name != "messages":
            # APIs whose input may be one string (the Responses API's input="...",
            # Gemini's contents) have nothing to compact there. A string as
            # `messages` is a mistake, reported by _Run before the call.
            return None
        return _Run(self, value, index, args, kwargs)

    def call(self, wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        """Compact a sync call's messages, make the call, and report the event."""
        run = self.find(instance, args, kwargs)
        if run is None:
            return wrapped(*args, **kwargs)
        summary = None
        if run.needs_summary:
            summary = check_summary(self.policy.summarize(run.plan.dropped))  # type: ignore[misc]
        event = run.event(summary)
        try:
            new_args, new_kwargs = run.arguments(event)
            result = wrapped(*new_args, **new_kwargs)
        except BaseException:
            self._report(event)
            raise
        self._report(with_response(event, result))
        return result

    async def acall(self, wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        """Compact an async call's messages, await the call, and report the event."""
        run = self.find(instance, args, kwargs)
        if run is None:
            return await wrapped(*args, **kwargs)
        event = run.event(await self._asummary(run))
        try:
            new_args, new_kwargs = run.arguments(event)
            result = await wrapped(*new_args, **new_kwargs)
        except BaseException:
            # Report even when the call was cancelled: hooks are quick, and the
            # sessions' figures must not lose the call.
            with anyio.CancelScope(shield=True):
                await self._areport(event)
            raise
        await self._areport(with_response(event, result))
        return result

    async def _asummary(self, run: _Run) -> Optional[str]:
        if not run.needs_summary:
            return None
        summarize = self.policy.summarize
        assert summarize is not None
        if is_async_callable(summarize):
            result = summarize(run.plan.dropped)
        else:
            # A slow summarizer (often an LLM call) must not block the event loop.
            result = await anyio.to_thread.run_sync(summarize, run.plan.dropped)
        if inspect.isawaitable(result):
            result = await result
        return check_summary(result)

    def _report(self, event: CompactionEvent) -> None:
        sessions = active_sessions()
        for session in sessions:
            session._record(event)
        dispatch(self.policy.on_compact, event)
        for session in sessions:
            dispatch(session.policy.on_compact, event)

    async def _areport(self, event: CompactionEvent) -> None:
        sessions = active_sessions()
        for session in sessions:
            session._record(event)
        await adispatch(self.policy.on_compact, event)
        for session in sessions:
            await adispatch(session.policy.on_compact, event)

    def generator(self, wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        """A generator function: compact when the call is made, return its generator."""
        return self.call(wrapped, instance, args, kwargs)

    async def agenerator(self, wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        """An async generator function: compact before its body starts, then delegate.

        The wrapped body would not start before the first iteration either, so
        compaction (which may await an async summarizer) happens then.
        """
        run = self.find(instance, args, kwargs)
        if run is not None:
            event = run.event(await self._asummary(run))
            try:
                args, kwargs = run.arguments(event)
            finally:
                await self._areport(event)
        inner = wrapped(*args, **kwargs)
        try:
            sent: Any = None
            thrown: Optional[BaseException] = None
            while True:
                try:
                    if thrown is not None:
                        item = await inner.athrow(thrown)
                    else:
                        item = await inner.asend(sent)
                except StopAsyncIteration:
                    return
                thrown = None
                try:
                    sent = yield item
                except GeneratorExit:
                    raise
                except BaseException as exc:
                    thrown = exc
        finally:
            await inner.aclose()


class _Run:
    """One call's compaction: decided at construction, finished by ``event``."""

    __slots__ = ("args", "budget", "calibration", "index", "kwargs", "plan", "started")

    def __init__(
        self,
        budget: Budget,
        value: Any,
        index: Optional[int],
        args: Tuple[Any, ...],
        kwargs: Dict[str, Any],
    ) -> None:
        self.started = time.perf_counter()
        self.budget = budget
        self.index = index
        self.args = args
        self.kwargs = kwargs
        policy = budget.policy
        # A lone message (a mapping) is iterable too, but iterating it would yield its keys.
        if isinstance(value, (str, bytes, bytearray, Mapping)) or not isinstance(value, Iterable):
            check_messages(value)  # raises the core's TypeError
        messages = list(value)
        cache = cache_for(policy.count_tokens)
        if cache is not None:
            pre, bounds = cache.arrays(messages)
        else:
            pre, bounds = measure(messages, policy.count_tokens)
        self.calibration = calibration()
        self.plan = Compaction(
            messages,
            pre,
            bounds,
            # Calibrated: the estimate times the factor is what the provider will count.
            max_tokens=policy.max_tokens / self.calibration,  # type: ignore[operator]
            keep_head=policy.keep_head,
            keep_tail=policy.keep_tail,
            count_tokens=policy.count_tokens,
        )

    @property
    def needs_summary(self) -> bool:
        return self.budget.policy.summarize is not None and self.plan.cut > self.plan.head_end

    def event(self, summary: Optional[str]) -> CompactionEvent:
        policy = self.budget.policy
        result = self.plan.result_with_summary(summary, policy.summary_role)
        problems = tuple(check_pairing(result.messages)) if policy.validate else ()
        return CompactionEvent(
            function=self.budget.name,
            max_tokens=policy.max_tokens,  # type: ignore[arg-type]
            tokens_before=result.tokens_before,
            tokens_after=result.tokens_after,
            fits=result.fits,
            messages=result.messages,
            dropped=result.dropped,
            summary=result.summary,
            elapsed=time.perf_counter() - self.started,
            messages_before=len(self.plan.messages),
            problems=problems,
            calibration=self.calibration,
        )

    def arguments(self, event: CompactionEvent) -> Tuple[Tuple[Any, ...], Dict[str, Any]]:
        """The call's arguments with the compacted list, or the overflow or pairing error."""
        policy = self.budget.policy
        if not event.fits and policy.on_overflow == "raise":
            raise BudgetExceededError(event)
        if event.problems and policy.validate == "raise":
            raise UnpairedMessagesError(event)
        # The callee gets its own list, so it cannot change the event's.
        return replace(
            self.args, self.kwargs, self.budget.arg.name, self.index, list(event.messages)
        )
