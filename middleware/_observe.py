"""Reporting a call's event once the provider's prompt size is known.

A plain response is reported when the call returns. A stream (known by its
class, its point or its key in the response) and a raw response are handed back
behind a ``wrapt.ObjectProxy`` that reads the usage from what the caller
iterates or parses, and reports once: when the stream ends, fails or is closed,
or when the proxy is collected (docs/sdk-interception.md).
"""

from __future__ import annotations

import dataclasses
import inspect
import itertools
import threading
from collections.abc import Mapping
from typing import Any, Awaitable, Callable, FrozenSet, Iterator, Optional, Tuple

import wrapt

from ._events import CompactionEvent
from ._usage import provider_prompt_tokens
from .sdks import (
    ALL_STREAMS,
    ASYNC_STREAMS,
    EITHER_STREAMS,
    RAW_RESPONSES,
    STREAM_KEYS,
    USAGE_HOLDERS,
    field,
    sdk_of_class,
)

Report = Callable[[CompactionEvent], None]
AReport = Callable[[CompactionEvent], Awaitable[None]]


def _sdk_class_names(obj: Any) -> FrozenSet[str]:
    """The names of ``obj``'s classes when it is an SDK's object, else none."""
    kind = type(obj)
    return frozenset(cls.__name__ for cls in kind.__mro__) if sdk_of_class(kind) else frozenset()


def _chunk_tokens(item: Any) -> Optional[int]:
    """The prompt size one stream event carries, if any."""
    # A Chat Completions or LiteLLM chunk; or held: response.completed, message_start,
    # Bedrock's metadata.
    for holder in itertools.chain((item,), (field(item, name) for name in USAGE_HOLDERS)):
        found = provider_prompt_tokens(holder)
        if found is not None:
            return found
    return None


class Pending:
    """One call's event, reported exactly once, with the provider's figure when it came."""

    def __init__(self, event: CompactionEvent, report: Report, areport: AReport) -> None:
        self._event = event
        self._report = report
        self._areport = areport
        self._tokens: Optional[int] = None
        self._done = False
        self._lock = threading.Lock()

    def seen(self, item: Any) -> None:
        """Read the prompt size off a stream event or a parsed response."""
        found = _chunk_tokens(item)
        if found is not None:
            self._tokens = found

    def _take(self) -> Optional[CompactionEvent]:
        with self._lock:
            if self._done:
                return None
            self._done = True
        if self._tokens is None:
            return self._event
        return dataclasses.replace(self._event, provider_tokens=self._tokens)

    def finish(self) -> None:
        """Report the event now, on a sync path (a no-op the second time)."""
        event = self._take()
        if event is not None:
            self._report(event)

    async def afinish(self) -> None:
        """Report the event now, on an async path (a no-op the second time)."""
        event = self._take()
        if event is not None:
            await self._areport(event)


class _Observed(wrapt.ObjectProxy):  # type: ignore[misc]
    def __init__(self, wrapped: Any, pending: Pending) -> None:
        super().__init__(wrapped)
        self._self_pending = pending
        # A raw response that parsed to a stream hands the event over to it.
        self._self_owns = True

    def __del__(self) -> None:
        # The caller dropped the result without finishing it: still counted.
        pending = getattr(self, "_self_pending", None)
        if pending is not None and self._self_owns:
            pending.finish()


class ObservedStream(_Observed):
    """A sync SDK stream whose events are read for usage as the caller iterates."""

    def __init__(self, wrapped: Any, pending: Pending) -> None:
        super().__init__(wrapped, pending)
        # An iterable that is no iterator (boto3's EventStream) is iterated once, here.
        self._self_items = wrapped if hasattr(wrapped, "__next__") else None

    def __iter__(self) -> Any:
        return self

    def __next__(self) -> Any:
        try:
            if self._self_items is None:
                self._self_items = iter(self.__wrapped__)
            item = next(self._self_items)
        except BaseException:
            self._self_pending.finish()
            raise
        self._self_pending.seen(item)
        return item

    def _self_finishing(self, step: Callable[[], Any]) -> Any:
        try:
            return step()
        finally:
            self._self_pending.finish()

    def close(self) -> None:
        self._self_finishing(lambda: self.__wrapped__.close())

    def __enter__(self) -> Any:
        self.__wrapped__.__enter__()
        return self

    def __exit__(self, *exc: Any) -> Any:
        return self._self_finishing(lambda: self.__wrapped__.__exit__(*exc))


class AsyncObservedStream(_Observed):
    """An async SDK stream whose events are read for usage as the caller iterates."""

    def __aiter__(self) -> Any:
        return self

    async def __anext__(self) -> Any:
        try:
            item = await self.__wrapped__.__anext__()
        except BaseException:
            await self._self_pending.afinish()
            raise
        self._self_pending.seen(item)
        return item

    async def _self_finishing(self, step: Callable[[], Awaitable[Any]]) -> Any:
        try:
            return await step()
        finally:
            await self._self_pending.afinish()

    async def close(self) -> None:
        await self._self_finishing(lambda: self.__wrapped__.close())

    async def aclose(self) -> None:
        await self._self_finishing(lambda: self.__wrapped__.aclose())

    async def __aenter__(self) -> Any:
        await self.__wrapped__.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        return await self._self_finishing(lambda: self.__wrapped__.__aexit__(*exc))


class ObservedRaw(_Observed):
    """An SDK raw response: its usage is read when the caller parses it."""

    def parse(self, *args: Any, **kwargs: Any) -> Any:
        return self._self_parsed(self.__wrapped__.parse(*args, **kwargs), False)

    def _self_parsed(self, parsed: Any, is_async: bool) -> Any:
        names = _sdk_class_names(parsed)
        if names & ALL_STREAMS:
            # A streamed raw response parses to the stream, which takes the event over.
            self._self_owns = False
            return _stream(parsed, names, self._self_pending, is_async)
        self._self_pending.seen(parsed)
        self._self_pending.finish()
        return parsed


class AsyncObservedRaw(ObservedRaw):
    """An SDK raw response whose ``parse`` is awaited."""

    async def parse(self, *args: Any, **kwargs: Any) -> Any:
        return self._self_parsed(await self.__wrapped__.parse(*args, **kwargs), True)


def observe(
    result: Any, pending: Callable[[], Pending], is_async: bool, stream: bool = False
) -> Optional[Any]:
    """``result`` behind a proxy that reports the event later, or ``None`` to report it now.

    Args:
        result: What the call returned.
        pending: Makes the call's ``Pending`` event (only for results that need one).
        is_async: Whether the call was async (LiteLLM's stream serves both ways).
        stream: Whether the call returns a stream whatever its class (``sdks.Point.stream``).
    """
    if stream:
        return (AsyncObservedStream if is_async else ObservedStream)(result, pending())
    if STREAM_KEYS and isinstance(result, Mapping):
        return _in_mapping(result, pending, is_async)
    names = _sdk_class_names(result)
    if names & ALL_STREAMS:
        return _stream(result, names, pending(), is_async)
    if not names & RAW_RESPONSES:
        return None
    parse = getattr(type(result), "parse", None)
    return (AsyncObservedRaw if inspect.iscoroutinefunction(parse) else ObservedRaw)(
        result, pending()
    )


def _in_mapping(
    result: Mapping[str, Any], pending: Callable[[], Pending], is_async: bool
) -> Optional[Any]:
    # A response mapping holding a stream: a copy of it with the stream observed.
    for key in STREAM_KEYS:
        inner = result.get(key)
        names = _sdk_class_names(inner)
        if names & ALL_STREAMS:
            return {**result, key: _stream(inner, names, pending(), is_async)}
    return None


def primed(generator: Iterator[Any]) -> Iterator[Any]:
    """``generator`` advanced to its first item now, handed back whole.

    A generator that sends its request when first advanced (google-genai's sync
    stream) raises a refusal then: primed inside the call, the refusal reaches
    the call's retry, as other SDKs' streams do.
    """
    try:
        head: Tuple[Any, ...] = (next(generator),)
    except StopIteration:
        head = ()
    return _replay(head, generator)


def _replay(head: Tuple[Any, ...], generator: Iterator[Any]) -> Iterator[Any]:
    try:
        yield from head
        yield from generator
    finally:
        close = getattr(generator, "close", None)
        if close is not None:
            close()


def _stream(stream: Any, names: FrozenSet[str], pending: Pending, is_async: bool) -> Any:
    if names & ASYNC_STREAMS or (is_async and names & EITHER_STREAMS):
        return AsyncObservedStream(stream, pending)
    return ObservedStream(stream, pending)
