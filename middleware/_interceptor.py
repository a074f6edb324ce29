"""The interceptor: compaction options bound to one callable, in the callable's own shape.

``Interceptor.wrap`` decides the wrapper's shape once (plain, coroutine,
generator, async generator); each call then finds its messages, compacts them
through a ``CallRun``, makes the call and reports the event to the hooks and to
every active session.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, TypeVar, cast

import anyio
import anyio.to_thread
import wrapt

from ctx_compact._engine import check_summary

from ._call_run import CallRun
from ._callables import ArgSpec, Kind, is_async_callable, kind_of, qualified_name
from ._events import CompactionEvent, Hook, adispatch, dispatch
from ._options import CompactionOptions, check_awaitables
from ._state import active_states
from ._usage import with_response

F = TypeVar("F", bound=Callable[..., Any])


def wrap_callable(fn: F, options: CompactionOptions, hooks: Sequence[Hook]) -> F:
    """``fn`` wrapped with ``options`` and ``hooks``, in the shape of its kind, decided here once.

    Raises:
        TypeError: ``fn`` is not callable or cannot take the messages argument,
            or an async summarizer or hook meets a sync callable.
    """
    if not callable(fn) and not isinstance(fn, (classmethod, staticmethod)):
        raise TypeError(f"budgeted can only wrap a callable, not {type(fn).__name__}")
    interceptor = Interceptor(options, hooks, fn, kind_of(fn), qualified_name(fn))
    return cast(F, wrapt.FunctionWrapper(fn, interceptor.handle))


class Interceptor:
    """Compaction options bound to one callable: where its messages are, what it is called.

    Args:
        options: The checked options.
        hooks: Hooks called with every event of this callable (a session's own
            hooks are called by the session instead).
        fn: The callable as it was given (function, method, classmethod, ...).
        kind: Its kind, decided once.
        name: Its qualified name, for events.

    Raises:
        TypeError: ``fn`` cannot take the messages argument, or an async
            summarizer or hook meets a sync callable.
    """

    def __init__(
        self,
        options: CompactionOptions,
        hooks: Sequence[Hook],
        fn: Any,
        kind: Kind,
        name: str,
    ) -> None:
        check_awaitables(kind.is_async, kind.value, name, options.summarize, hooks)
        self.options = options
        self.hooks = tuple(hooks)
        self.kind = kind
        self.name = name
        self.arg = ArgSpec.of(fn, options.messages_arg, name)
        # The wrapper function for this kind, chosen once.
        self.handle = {
            Kind.SYNC: self.call,
            Kind.ASYNC: self.acall,
            Kind.GENERATOR: self.generator,
            Kind.ASYNC_GENERATOR: self.agenerator,
        }[kind]

    def start(
        self, instance: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]
    ) -> Optional[CallRun]:
        """Start the work for one call, or ``None`` when it carries no messages."""
        found, value, index = self.arg.find(instance, args, kwargs)
        if not found or value is None:
            return None
        if isinstance(value, str) and self.arg.name != "messages":
            # APIs whose input may be one string (the Responses API's input="...",
            # Gemini's contents) have nothing to compact there. A string as
            # `messages` is a mistake, reported by CallRun before the call.
            return None
        return CallRun(self.options, self.name, value, index, args, kwargs)

    def call(self, wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        """Compact a sync call's messages, make the call, and report the event."""
        run = self.start(instance, args, kwargs)
        if run is None:
            return wrapped(*args, **kwargs)
        summary = None
        if run.needs_summary:
            summary = check_summary(self.options.summarize(run.plan.dropped))  # type: ignore[misc]
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
        run = self.start(instance, args, kwargs)
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

    async def _asummary(self, run: CallRun) -> Optional[str]:
        if not run.needs_summary:
            return None
        summarize = self.options.summarize
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
        states = active_states()
        for state in states:
            state.record(event)
        dispatch(self.hooks, event)
        for state in states:
            dispatch(state.hooks, event)

    async def _areport(self, event: CompactionEvent) -> None:
        states = active_states()
        for state in states:
            state.record(event)
        await adispatch(self.hooks, event)
        for state in states:
            await adispatch(state.hooks, event)

    def generator(self, wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        """A generator function: compact when the call is made, return its generator."""
        return self.call(wrapped, instance, args, kwargs)

    async def agenerator(self, wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        """An async generator function: compact before its body starts, then delegate.

        The wrapped body would not start before the first iteration either, so
        compaction (which may await an async summarizer) happens then.
        """
        run = self.start(instance, args, kwargs)
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
