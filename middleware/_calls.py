"""Running intercepted calls: compaction options bound to one callable, in its own shape.

``Interceptor.wrap`` decides the wrapper's shape once (plain, coroutine,
generator, async generator); each call then finds its messages, compacts them
through a ``CallRun``, makes the call and reports the event to the hooks and to
every active session.
"""

from __future__ import annotations

import inspect
import sys
from typing import Any, Callable, Dict, Optional, Protocol, Sequence, Tuple, TypeVar, cast

import anyio
import anyio.to_thread
import wrapt

from ._call_run import CallRun
from ._callables import (
    ArgSpec,
    Arguments,
    Kind,
    Located,
    is_async_callable,
    kind_of,
    qualified_name,
)
from ._events import CompactionEvent, Hook, adispatch, dispatch, logger
from ._observe import Pending, observe
from ._options import CompactionOptions, check_awaitables
from ._overflow import overflow_of
from ._state import SessionState, active_states, enter_exclusive_call, leave_exclusive_call
from ._summaries import Flow, Keep, Lookup, Outcome, Step, Summaries
from ._usage import with_response

F = TypeVar("F", bound=Callable[..., Any])


class Site(Protocol):
    """Where a call carries its messages: ``ArgSpec``, or an SDK request's ``RequestSite``."""

    def locate(
        self, instance: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]
    ) -> Optional[Located]:
        """The call's messages and how to replace them, or ``None`` when it carries none."""


def wrap_callable(fn: F, options: CompactionOptions, hooks: Sequence[Hook]) -> F:
    """``fn`` wrapped with ``options`` and ``hooks``, in the shape of its kind, decided here once.

    Raises:
        TypeError: ``fn`` is not callable or cannot take the messages argument,
            or an async summarizer or hook meets a sync callable.
    """
    if not callable(fn) and not isinstance(fn, (classmethod, staticmethod)):
        raise TypeError(f"budgeted can only wrap a callable, not {type(fn).__name__}")
    interceptor = Interceptor(options, hooks, fn, kind_of(fn), qualified_name(fn))
    return cast(F, BudgetedFunction(fn, interceptor))


def _load(module: str, qualname: str) -> Any:
    return wrapt.resolve_path(module, qualname)[2]


class BoundBudgetedFunction(wrapt.BoundFunctionWrapper):  # type: ignore[misc]
    """A ``BudgetedFunction`` method as read off its class or an instance."""

    def __reduce_ex__(self, protocol: Any) -> Any:
        parent = self._self_parent
        if self._self_instance is None:  # read off the class: the function itself
            return parent.__reduce_ex__(protocol)
        # A bound method pickles as the attribute of its instance, as Python's own do.
        return getattr, (self._self_instance, parent.__name__)

    def __reduce__(self) -> Any:
        return self.__reduce_ex__(2)


class BudgetedFunction(wrapt.FunctionWrapper):  # type: ignore[misc]
    """A callable wrapped by an ``Interceptor``: what ``budgeted`` and ``session.wrap`` return.

    It pickles and copies like the function it wraps: by reference where the
    function can be imported under its name (a module-level function or a
    method), so the copy is this very object; by value otherwise (a function
    defined in ``__main__`` or a notebook, shipped by cloudpickle to a worker),
    so the copy carries the same options and hooks.
    """

    __bound_function_wrapper__ = BoundBudgetedFunction

    if sys.version_info >= (3, 10):
        # Honest about its class, where wrapt would report the function's: pickle
        # extensions (cloudpickle) that recognise a function by isinstance would
        # otherwise serialise the bare function and silently lose the budget.
        # From Python 3.10 inspect.iscoroutinefunction and the rest still see
        # through it; Python 3.9's inspect would not, so there it keeps wrapt's.
        @property  # type: ignore[misc]
        def __class__(self) -> type:
            return type(self)

    def __init__(self, fn: Any, interceptor: Interceptor) -> None:
        super().__init__(fn, interceptor.handle)
        self._self_interceptor = interceptor

    def __reduce_ex__(self, protocol: Any) -> Any:
        fn = self.__wrapped__
        module = getattr(fn, "__module__", None)
        qualname = getattr(fn, "__qualname__", None)
        if (
            isinstance(module, str)
            and isinstance(qualname, str)
            and module != "__main__"
            and "<locals>" not in qualname
        ):
            try:
                found = _load(module, qualname)
            except (ImportError, AttributeError):
                found = None
            if found is self:
                return _load, (module, qualname)
        interceptor = self._self_interceptor
        return wrap_callable, (fn, interceptor.options, interceptor.hooks)

    def __reduce__(self) -> Any:
        return self.__reduce_ex__(2)

    def __copy__(self) -> Any:
        return self

    def __deepcopy__(self, memo: Any) -> Any:
        return self


class Interceptor:
    """Compaction options bound to one callable: where its messages are, what it is called.

    Args:
        options: The checked options.
        hooks: Hooks called with every event of this callable (a session's own
            hooks are called by the session instead).
        fn: The callable as it was given (function, method, classmethod, ...).
        kind: Its kind, decided once.
        name: Its qualified name, for events.
        exclusive: Whether other exclusive interceptors reached inside the
            call pass through (see ``_state.inside_exclusive_call``).
        site: Where a call carries its messages, when not in ``fn``'s
            ``messages_arg`` argument (an SDK request's body).

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
        exclusive: bool = False,
        site: Optional[Site] = None,
    ) -> None:
        check_awaitables(kind.is_async, kind.value, name, options.summarize, hooks)
        self.options = options
        self.hooks = tuple(hooks)
        self.kind = kind
        self.is_async = kind.is_async
        self.name = name
        self.exclusive = exclusive
        # Summaries outlive the call too: kept by cut, in options.store or in memory.
        self.summaries = (
            Summaries(options.summarize, options.summary_role, options.store)
            if options.summarize is not None
            else None
        )
        self.site: Site = site if site is not None else ArgSpec.of(fn, options.messages_arg, name)
        # Whether a call outside any session makes an event nobody receives: no
        # hooks, and none of the options that act on the event (a retry, a
        # summary, pairing checks). Such a call skips the event.
        self.quiet = (
            not self.hooks
            and options.summarize is None
            and options.validate is None
            and options.on_overflow != "retry"
        )
        # The wrapper function for this kind, chosen once.
        self.handle = {
            Kind.SYNC: self.call,
            Kind.ASYNC: self.acall,
            Kind.GENERATOR: self.generator,
            Kind.ASYNC_GENERATOR: self.agenerator,
        }[kind]

    def start(
        self,
        instance: Any,
        args: Tuple[Any, ...],
        kwargs: Dict[str, Any],
        states: Tuple[SessionState, ...],
    ) -> Optional[CallRun]:
        """Start the work for one call, or ``None`` when it carries no messages."""
        located = self.site.locate(instance, args, kwargs)
        if located is None:
            return None
        return CallRun(self.options, self.name, located, states)

    def call(self, wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        """Compact a sync call's messages, make the call, and report the event."""
        states = active_states()
        run = self.start(instance, args, kwargs, states)
        if run is None:
            return wrapped(*args, **kwargs)
        if self.quiet and not states:
            arguments = run.quiet_arguments()
            if arguments is not None:
                return self._invoke(wrapped, arguments)
        event = self._event(run, states)
        try:
            result = self._invoke(wrapped, run.arguments(event))
        except Exception as err:
            retry = self._retry(run, event, err, states)
            if retry is None:
                self._report(event, states)
                raise
            # The retry's event stands for the request: one request, one event.
            event = self._event(retry, states)
            try:
                result = self._invoke(wrapped, retry.arguments(event))
            except BaseException:
                self._report(event, states)
                raise
        except BaseException:
            self._report(event, states)
            raise
        observed = observe(result, lambda: self._pending(event, states), self.is_async)
        if observed is not None:
            return observed
        self._report(with_response(event, result), states)
        return result

    async def acall(self, wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        """Compact an async call's messages, await the call, and report the event."""
        states = active_states()
        run = self.start(instance, args, kwargs, states)
        if run is None:
            return await wrapped(*args, **kwargs)
        if self.quiet and not states:
            arguments = run.quiet_arguments()
            if arguments is not None:
                return await self._ainvoke(wrapped, arguments)
        event = await self._aevent(run, states)
        try:
            result = await self._ainvoke(wrapped, run.arguments(event))
        except Exception as err:
            retry = self._retry(run, event, err, states)
            if retry is None:
                with anyio.CancelScope(shield=True):
                    await self._areport(event, states)
                raise
            event = await self._aevent(retry, states)
            try:
                result = await self._ainvoke(wrapped, retry.arguments(event))
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await self._areport(event, states)
                raise
        except BaseException:
            # Report even when the call was cancelled: hooks are quick, and the
            # sessions' figures must not lose the call.
            with anyio.CancelScope(shield=True):
                await self._areport(event, states)
            raise
        observed = observe(result, lambda: self._pending(event, states), self.is_async)
        if observed is not None:
            return observed
        await self._areport(with_response(event, result), states)
        return result

    def _invoke(self, wrapped: Any, arguments: Arguments) -> Any:
        args, kwargs = arguments
        if not self.exclusive:
            return wrapped(*args, **kwargs)
        token = enter_exclusive_call()
        try:
            return wrapped(*args, **kwargs)
        finally:
            leave_exclusive_call(token)

    async def _ainvoke(self, wrapped: Any, arguments: Arguments) -> Any:
        args, kwargs = arguments
        if not self.exclusive:
            return await wrapped(*args, **kwargs)
        token = enter_exclusive_call()
        try:
            return await wrapped(*args, **kwargs)
        finally:
            leave_exclusive_call(token)

    def _retry(
        self,
        run: CallRun,
        event: CompactionEvent,
        err: Exception,
        states: Tuple[SessionState, ...],
    ) -> Optional[CallRun]:
        """With ``on_overflow="retry"``, the compaction for retrying a call refused for length.

        The sessions learn the provider's count of the refused prompt.
        """
        if self.options.on_overflow != "retry" or run.retried:
            return None
        overflow = overflow_of(err)
        if overflow is None:
            return None
        if overflow.tokens is not None:
            for state in states:
                state.learn(overflow.tokens, event.tokens_after, event.function)
        logger.info(
            "%s: the provider refused %d estimated tokens for length (%s); retrying once",
            event.function,
            event.tokens_after,
            f"{overflow.tokens} tokens > {overflow.limit} maximum"
            if overflow.tokens is not None
            else "no figures",
        )
        budget = overflow.retry_budget(event.tokens_after)
        return CallRun(
            self.options,
            self.name,
            run.located,
            states,
            budget=budget,
            retried=True,
        )

    def _pending(self, event: CompactionEvent, states: Tuple[SessionState, ...]) -> Pending:
        return Pending(
            event,
            lambda done: self._report(done, states),
            lambda done: self._areport(done, states),
        )

    def _event(self, run: CallRun, states: Tuple[SessionState, ...]) -> CompactionEvent:
        """The call's event with its summary; a summarizer's wrong result is reported, then raised.

        A summarizer that raises is not: the flow turns it into ``summary_error``.
        """
        if not run.needs_summary:
            return run.event(None)
        try:
            summary, error = self._summary(run)
        except BaseException:
            self._report(run.event(None), states)
            raise
        return run.event(summary, error)

    def _flow(self, run: CallRun) -> Tuple[Summaries, Flow]:
        summaries = self.summaries
        assert summaries is not None
        prefix, head_end, boundaries = run.summary_input
        return summaries, summaries.flow(prefix, head_end, boundaries, run.function)

    def _summary(self, run: CallRun) -> Outcome:
        summaries, flow = self._flow(run)
        reply: Any = None
        failure: Optional[Exception] = None
        while True:
            try:
                step: Step = flow.throw(failure) if failure is not None else flow.send(reply)
            except StopIteration as done:
                return cast(Outcome, done.value)
            failure = None
            try:
                if isinstance(step, Lookup):
                    reply = summaries.fetch(step.keys)
                elif isinstance(step, Keep):
                    reply = summaries.keep(step.key, step.summary)
                else:
                    reply = summaries.call(step.dropped, step.previous)
            except Exception as exc:
                failure = exc

    async def _aevent(self, run: CallRun, states: Tuple[SessionState, ...]) -> CompactionEvent:
        """The async ``_event``: the same flow, awaiting where the sync one blocks."""
        if not run.needs_summary:
            return run.event(None)
        try:
            summary, error = await self._asummary(run)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self._areport(run.event(None), states)
            raise
        return run.event(summary, error)

    async def _asummary(self, run: CallRun) -> Outcome:
        summaries, flow = self._flow(run)
        # Only the waiting differs from _summary: a slow store or summarizer (often an
        # LLM call) runs on a worker thread, an async summarizer is awaited.
        blocking = summaries.blocking
        is_async = is_async_callable(summaries.summarize)
        reply: Any = None
        failure: Optional[Exception] = None
        while True:
            try:
                step: Step = flow.throw(failure) if failure is not None else flow.send(reply)
            except StopIteration as done:
                return cast(Outcome, done.value)
            failure = None
            try:
                if isinstance(step, Lookup):
                    reply = (
                        await anyio.to_thread.run_sync(summaries.fetch, step.keys)
                        if blocking
                        else summaries.fetch(step.keys)
                    )
                elif isinstance(step, Keep):
                    reply = (
                        await anyio.to_thread.run_sync(summaries.keep, step.key, step.summary)
                        if blocking
                        else summaries.keep(step.key, step.summary)
                    )
                else:
                    if is_async:
                        reply = summaries.call(step.dropped, step.previous)
                    else:
                        reply = await anyio.to_thread.run_sync(
                            summaries.call, step.dropped, step.previous
                        )
                    if inspect.isawaitable(reply):
                        reply = await reply
            except Exception as exc:
                failure = exc

    def _report(self, event: CompactionEvent, states: Tuple[SessionState, ...]) -> None:
        for state in states:
            state.record(event)
        dispatch(self.hooks, event)
        for state in states:
            dispatch(state.hooks, event)

    async def _areport(self, event: CompactionEvent, states: Tuple[SessionState, ...]) -> None:
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
        states = active_states()
        run = self.start(instance, args, kwargs, states)
        if run is not None:
            event = await self._aevent(run, states)
            try:
                args, kwargs = run.arguments(event)
            finally:
                await self._areport(event, states)
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
