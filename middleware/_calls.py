"""Running intercepted calls: compaction options bound to one callable, in its own shape.

A call's sequence (compact, summarise, call, report, one retry after a refusal for
length) is written once, in ``Interceptor.sequence``, as a generator of the steps that
may wait; the sync and async shells carry them out and differ only in how they wait.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
from typing import (
    Any,
    Callable,
    ContextManager,
    Dict,
    Generator,
    List,
    NamedTuple,
    Optional,
    Protocol,
    Sequence,
    Tuple,
    Union,
)

import anyio
import anyio.to_thread

from ._call_run import CallRun
from ._callables import ArgSpec, Arguments, Kind, Located
from ._events import CompactionEvent, Hook, adispatch, dispatch, logger
from ._observe import Pending, observe, primed
from ._options import CompactionOptions, check_awaitables
from ._overflow import overflow_of
from ._state import ExclusiveCall, SessionState, SummarizerCall, active_states
from ._summaries import Step, Summaries, Summarize, Visit
from ._summary_usage import UsageSink
from ._usage import with_response


class Site(Protocol):
    """Where a call carries its messages: ``ArgSpec``, or an SDK request's ``RequestSite``."""

    def locate(
        self, instance: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]
    ) -> Optional[Located]:
        """The call's messages and how to replace them, or ``None`` when it carries none."""


class Invoke(NamedTuple):
    """Make the call with ``arguments``; the reply is what it returned (awaited on async paths)."""

    arguments: Arguments


class Report(NamedTuple):
    """Record ``event`` in ``states`` and hand it to the hooks; ``shield``: even if cancelled."""

    event: CompactionEvent
    states: Tuple[SessionState, ...]
    shield: bool = False


CallStep = Union[Step, Invoke, Report]
# A call's sequence: the steps that may wait, each answered with its reply; it
# returns what the call returns.
CallFlow = Generator[CallStep, Any, Any]


class _Steps:
    """``for step in steps: with steps: steps.reply = ...``: each step is answered with
    ``reply`` or with what its ``with`` block raised; ``result`` is what the flow returned."""

    __slots__ = ("failure", "flow", "reply", "result")

    def __init__(self, flow: CallFlow) -> None:
        self.flow = flow
        self.reply: Any = None
        self.failure: Optional[BaseException] = None
        self.result: Any = None

    def __iter__(self) -> _Steps:
        return self

    def __next__(self) -> CallStep:
        reply, failure = self.reply, self.failure
        self.reply = self.failure = None
        try:
            return self.flow.send(reply) if failure is None else self.flow.throw(failure)
        except StopIteration as done:
            self.result = done.value
            raise StopIteration from None

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, failure: Optional[BaseException], traceback: Any) -> bool:
        self.failure = failure
        return failure is not None


def _sink(step: Step) -> Optional[UsageSink]:
    """Where a summary step's usage is counted: its call's sink (a store's step has none)."""
    return step.usage if isinstance(step, Summarize) else None


def _with_usage(event: CompactionEvent, usage: UsageSink) -> CompactionEvent:
    """``event`` with the summarizer's usage in the call, when it reported any."""
    total = usage.total
    return event if total is None else dataclasses.replace(event, summary_usage=total)


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
            call pass through (``_state.ExclusiveCall``).
        site: Where a call carries its messages, when not in ``fn``'s
            ``messages_arg`` argument (an SDK request's body).
        stream: Whether ``fn`` returns a stream of responses whatever its class
            (``sdks.Point.stream``): observed for usage, and a sync generator
            primed inside the call (``_observe.primed``).

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
        stream: bool = False,
    ) -> None:
        check_awaitables(kind, name, options.summarize, hooks)
        self.options = options
        self.hooks = tuple(hooks)
        self.is_async = kind.is_async
        self.name = name
        self.stream = stream
        self._callee: Callable[[], ContextManager[Any]] = (
            ExclusiveCall if exclusive else contextlib.nullcontext
        )
        self.primes = stream and kind is Kind.GENERATOR
        # Summaries outlive the call too: kept by cut, in options.store or in memory.
        self.summaries = (
            Summaries(options.summarize, options.summary_role, options.store)
            if options.summarize is not None
            else None
        )
        self.site: Site = site if site is not None else ArgSpec.of(fn, options.messages_arg, name)
        # The wrapper function for this kind, chosen once.
        self.handle = {Kind.ASYNC: self.acall, Kind.ASYNC_GENERATOR: self.agenerator}.get(
            kind, self.call
        )

    def begin(
        self, instance: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]
    ) -> Optional[CallFlow]:
        """One call's ``sequence``, its messages compacted; ``None`` when it carries no
        messages (it passes through)."""
        states = active_states()
        located = self.site.locate(instance, args, kwargs)
        if located is None:
            return None
        return self.sequence(CallRun(self.options, self.name, located, states), states)

    def sequence(self, run: CallRun, states: Tuple[SessionState, ...]) -> CallFlow:
        """One call, written once for every shell: summary, call, report, one retry.

        ``run`` has compacted the messages. The flow yields the steps that may
        wait (the summaries' ``Lookup``/``Summarize``/``Keep``, ``Invoke``,
        ``Report``); a shell carries each out and sends back its reply, or
        throws in what it raised. It returns what the call returns (an SDK
        stream or raw response behind a proxy that reports once usage is known).
        """
        # The store's one deadline covers the call, its retry included.
        visit = self.summaries.visit(run.function) if self.summaries is not None else None
        event = yield from self._event(run, states, visit)
        try:
            result = yield Invoke(run.arguments(event))
        except Exception as err:
            retry = self._retry(run, event, err, states)
            if retry is None:
                yield Report(event, states, shield=True)
                raise
            # The retry's event stands for the request: one request, one event. Made
            # while the refusal is handled, so that the retry's failure chains it.
            event = yield from self._event(retry, states, visit)
            try:
                result = yield Invoke(retry.arguments(event))
            except BaseException:
                yield Report(event, states, shield=True)
                raise
        except BaseException:
            # Reported even when the call was cancelled: hooks are quick, and the
            # sessions' figures must not lose the call.
            yield Report(event, states, shield=True)
            raise
        if not (self.hooks or states):
            return result  # nobody to report to: the callee's own object, never a proxy
        observed = observe(result, lambda: self._pending(event, states), self.is_async, self.stream)
        if observed is not None:
            return observed
        yield Report(with_response(event, result), states)
        return result

    def _event(
        self, run: CallRun, states: Tuple[SessionState, ...], visit: Optional[Visit]
    ) -> Generator[CallStep, Any, CompactionEvent]:
        """The call's event, with its summary when it needs one; a summarizer's wrong result
        is reported, then raised.

        A summarizer that raises is not: the summaries' flow turns it into ``summary_error``,
        and what went wrong with the store into ``store_error``.
        """
        if not run.needs_summary:
            return run.event(None)
        summaries = self.summaries
        assert summaries is not None
        assert visit is not None
        covered = run.plan.cut
        usage = UsageSink()
        try:
            while True:
                given = run.summary_input(covered)
                summary, error = yield from summaries.flow(
                    *given, visit, run.summary_request, usage
                )
                if summary is None:
                    break
                # The summary's own tokens may push the cut further: then the summary
                # sent is that of the further cut (rolled on from this one), so a cut
                # always goes out with its own summary, the same in every process.
                cut = run.summary_cut(summary, covered)
                if cut <= covered:
                    break
                covered = cut
        except BaseException:
            failed = _with_usage(run.event(None, store_error=visit.error), usage)
            yield Report(failed, states, shield=True)
            raise
        return _with_usage(run.event(summary, error, covered, visit.error), usage)

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
        return CallRun(self.options, self.name, run.located, states, budget, retried=True)

    def _pending(self, event: CompactionEvent, states: Tuple[SessionState, ...]) -> Pending:
        return Pending(
            event,
            lambda done: self._report(done, states),
            lambda done: self._areport(done, states),
        )

    # -- the shells: each carries out the sequence's steps, differing only in how it waits --

    def call(self, wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        """A sync call (or a generator function's): its sequence, each step carried out here."""
        flow = self.begin(instance, args, kwargs)
        if flow is None:
            return wrapped(*args, **kwargs)
        steps = _Steps(flow)
        for step in steps:
            with steps:
                if isinstance(step, Invoke):
                    steps.reply = self._invoke(wrapped, step.arguments)
                elif isinstance(step, Report):
                    self._report(step.event, step.states)
                else:
                    function, given, _ = self._summaries().task(step)
                    with SummarizerCall(_sink(step)):
                        steps.reply = function(*given)
        return steps.result

    async def acall(self, wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        """An async call: its sequence, each step awaited here."""
        flow = self.begin(instance, args, kwargs)
        if flow is None:
            return await wrapped(*args, **kwargs)
        return await self._adrive(flow, wrapped, True)

    async def _adrive(self, flow: CallFlow, wrapped: Any, awaited: bool) -> Any:
        """Carry out ``flow``'s steps on an async path; ``awaited``: the callee's result is."""
        steps = _Steps(flow)
        for step in steps:
            with steps:
                if isinstance(step, Invoke):
                    if awaited:
                        steps.reply = await self._ainvoke(wrapped, step.arguments)
                    else:
                        steps.reply = self._invoke(wrapped, step.arguments)
                elif isinstance(step, Report):
                    with anyio.CancelScope(shield=step.shield):
                        await self._areport(step.event, step.states)
                else:
                    # A store that may block or a sync summarizer (often an LLM call)
                    # runs on a worker thread; an async summarizer is awaited.
                    # Its model call passes through the sessions' interceptions.
                    function, given, blocking = self._summaries().task(step)
                    with SummarizerCall(_sink(step)):
                        if blocking:
                            reply = await anyio.to_thread.run_sync(function, *given)
                        else:
                            reply = function(*given)
                        if isinstance(step, Summarize) and inspect.isawaitable(reply):
                            reply = await reply
                    steps.reply = reply
        return steps.result

    def _summaries(self) -> Summaries:
        assert self.summaries is not None  # only a summarizer's calls have summary steps
        return self.summaries

    def _invoke(self, wrapped: Any, arguments: Arguments) -> Any:
        args, kwargs = arguments
        with self._callee():
            result = wrapped(*args, **kwargs)
            return primed(result) if self.primes else result

    async def _ainvoke(self, wrapped: Any, arguments: Arguments) -> Any:
        args, kwargs = arguments
        with self._callee():
            return await wrapped(*args, **kwargs)

    def _recorded(
        self, event: CompactionEvent, states: Tuple[SessionState, ...]
    ) -> List[Sequence[Hook]]:
        """The hooks to call with ``event``, once ``states`` recorded it."""
        for state in states:
            state.record(event)
        return [self.hooks, *(state.hooks for state in states)]

    def _report(self, event: CompactionEvent, states: Tuple[SessionState, ...]) -> None:
        for hooks in self._recorded(event, states):
            dispatch(hooks, event)

    async def _areport(self, event: CompactionEvent, states: Tuple[SessionState, ...]) -> None:
        for hooks in self._recorded(event, states):
            await adispatch(hooks, event)

    async def agenerator(self, wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        """An async generator function: its sequence before its body starts, then delegate.

        The wrapped body would not start before the first iteration either, so
        compaction (which may await an async summarizer) happens then. Calling
        the function only makes the generator: that call is the sequence's ``Invoke``.
        """
        flow = self.begin(instance, args, kwargs)
        if flow is None:
            inner = wrapped(*args, **kwargs)
        else:
            inner = await self._adrive(flow, wrapped, False)
        try:
            sent: Any = None
            thrown: Optional[BaseException] = None
            while True:
                try:
                    item = await (inner.athrow(thrown) if thrown is not None else inner.asend(sent))
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
