"""``budgeted`` on every kind of callable: the kind is kept and the callee gets the compacted list.

Every test uses the specification's example (``max_tokens=150, keep_head=1,
keep_tail=2``: messages 1-3 are dropped, 195 -> 124 tokens), so "compacted"
always means the same seven of the caller's own message objects.
"""

from __future__ import annotations

import functools
import inspect
import threading
from typing import Any, AsyncIterator, Dict, Iterator, List, Optional, Tuple

import anyio
import pytest

from middleware import CompactionEvent, budgeted

SPEC: Dict[str, Any] = {"max_tokens": 150, "keep_head": 1, "keep_tail": 2}

KIND_CHECKS = (
    inspect.iscoroutinefunction,
    inspect.isasyncgenfunction,
    inspect.isgeneratorfunction,
)


def spec_summary(dropped: List[Any]) -> str:
    return f"Earlier in this conversation: {len(dropped)} messages were removed."


def assert_same_kind(decorated: Any, original: Any) -> None:
    for check in KIND_CHECKS:
        assert check(decorated) == check(original), check.__name__


def assert_compacted(received: Any, weather: List[Any]) -> None:
    """``received`` is a new list holding the caller's own messages 0 and 4-9."""
    assert isinstance(received, list)
    assert received is not weather
    expected = [weather[0], *weather[4:]]
    assert len(received) == len(expected)
    for got, want in zip(received, expected):
        assert got is want


def assert_one_compaction(events: List[CompactionEvent], weather: List[Any]) -> None:
    assert len(events) == 1
    (event,) = events
    assert event.tokens_before == 195
    assert event.tokens_after == 124
    assert len(event.dropped) == 3
    for got, want in zip(event.dropped, weather[1:4]):
        assert got is want


# --- plain and coroutine functions ------------------------------------------------


def test_plain_function(weather):
    events: List[CompactionEvent] = []

    def ask(messages: List[Any], model: str = "gpt-4o") -> Tuple[List[Any], str]:
        return messages, model

    decorated = budgeted(**SPEC, on_compact=events.append)(ask)

    assert_same_kind(decorated, ask)
    received, model = decorated(weather, model="small")
    assert_compacted(received, weather)
    assert model == "small"
    assert_one_compaction(events, weather)


@pytest.mark.anyio
async def test_coroutine_function(weather):
    events: List[CompactionEvent] = []

    async def ask(messages: List[Any]) -> List[Any]:
        await anyio.sleep(0)
        return messages

    decorated = budgeted(**SPEC, on_compact=events.append)(ask)

    assert_same_kind(decorated, ask)
    assert inspect.iscoroutinefunction(decorated)
    received = await decorated(weather)
    assert_compacted(received, weather)
    assert_one_compaction(events, weather)


# --- generator functions --------------------------------------------------------


def test_generator_function_compacts_when_called(weather):
    events: List[CompactionEvent] = []
    started: List[bool] = []

    def stream(messages: List[Any]) -> Iterator[Any]:
        started.append(True)
        yield from messages

    decorated = budgeted(**SPEC, on_compact=events.append)(stream)

    assert_same_kind(decorated, stream)
    gen = decorated(weather)
    assert inspect.isgenerator(gen)
    # Compaction happened at call time, before the body started.
    assert_one_compaction(events, weather)
    assert started == []
    assert_compacted(list(gen), weather)
    assert started == [True]
    assert len(events) == 1


def test_generator_function_send_reaches_the_body(weather):
    sent: List[Any] = []

    def echo(messages: List[Any]) -> Any:
        value = yield len(messages)
        while value is not None:
            sent.append(value)
            value = yield value * 2

    gen = budgeted(**SPEC)(echo)(weather)

    assert next(gen) == 7
    assert gen.send(3) == 6
    assert gen.send(5) == 10
    with pytest.raises(StopIteration):
        gen.send(None)
    assert sent == [3, 5]


# --- async generator functions ----------------------------------------------------


@pytest.mark.anyio
async def test_async_generator_function_compacts_before_the_body_starts(weather):
    events: List[CompactionEvent] = []
    events_seen_by_body: List[int] = []

    async def stream(messages: List[Any]) -> AsyncIterator[Any]:
        events_seen_by_body.append(len(events))
        for message in messages:
            await anyio.sleep(0)
            yield message

    decorated = budgeted(**SPEC, on_compact=events.append)(stream)

    assert_same_kind(decorated, stream)
    assert inspect.isasyncgenfunction(decorated)
    agen = decorated(weather)
    assert inspect.isasyncgen(agen)
    first = await agen.__anext__()
    # The event was there when the body started.
    assert events_seen_by_body == [1]
    rest = [message async for message in agen]
    assert_compacted([first, *rest], weather)
    assert_one_compaction(events, weather)


@pytest.mark.anyio
async def test_async_generator_asend_reaches_the_body(weather):
    sent: List[Any] = []

    async def echo(messages: List[Any]) -> AsyncIterator[Any]:
        value = yield len(messages)
        while value is not None:
            sent.append(value)
            value = yield value * 2

    agen = budgeted(**SPEC)(echo)(weather)

    assert await agen.asend(None) == 7
    assert await agen.asend(3) == 6
    assert await agen.asend(5) == 10
    with pytest.raises(StopAsyncIteration):
        await agen.asend(None)
    assert sent == [3, 5]


@pytest.mark.anyio
async def test_async_generator_athrow_is_caught_by_the_body(weather):
    caught: List[BaseException] = []

    async def resilient(messages: List[Any]) -> AsyncIterator[str]:
        try:
            yield "first"
        except KeyError as exc:
            caught.append(exc)
            yield "recovered"
        yield "after"

    agen = budgeted(**SPEC)(resilient)(weather)
    error = KeyError("boom")

    assert await agen.__anext__() == "first"
    assert await agen.athrow(error) == "recovered"
    assert len(caught) == 1
    assert caught[0] is error
    assert await agen.__anext__() == "after"
    with pytest.raises(StopAsyncIteration):
        await agen.__anext__()


@pytest.mark.anyio
async def test_async_generator_athrow_not_caught_propagates(weather):
    cleaned: List[bool] = []

    async def fragile(messages: List[Any]) -> AsyncIterator[str]:
        try:
            yield "first"
            yield "never"
        finally:
            cleaned.append(True)

    agen = budgeted(**SPEC)(fragile)(weather)
    error = KeyError("boom")

    assert await agen.__anext__() == "first"
    with pytest.raises(KeyError) as info:
        await agen.athrow(error)
    assert info.value is error
    assert cleaned == [True]
    with pytest.raises(StopAsyncIteration):
        await agen.__anext__()


@pytest.mark.anyio
async def test_async_generator_aclose_runs_the_body_cleanup(weather):
    cleaned: List[bool] = []

    async def closable(messages: List[Any]) -> AsyncIterator[int]:
        try:
            yield 1
            yield 2
        finally:
            await anyio.sleep(0)
            cleaned.append(True)

    agen = budgeted(**SPEC)(closable)(weather)

    assert await agen.__anext__() == 1
    await agen.aclose()
    assert cleaned == [True]
    with pytest.raises(StopAsyncIteration):
        await agen.__anext__()


# --- methods -------------------------------------------------------------------


class Chat:
    """A class whose methods of every kind are budgeted."""

    def __init__(self) -> None:
        self.received: List[Any] = []

    @budgeted(**SPEC)
    def ask(self, messages: List[Any], model: str = "gpt-4o") -> Tuple[Chat, List[Any], str]:
        """Ask, as an instance method."""
        return self, messages, model

    @budgeted(**SPEC)
    @classmethod
    def ask_class(cls, messages: List[Any]) -> Tuple[type, List[Any]]:
        return cls, messages

    @budgeted(**SPEC)
    @staticmethod
    def ask_static(messages: List[Any], model: str = "gpt-4o") -> Tuple[List[Any], str]:
        return messages, model

    @budgeted(**SPEC)
    async def aask(self, messages: List[Any]) -> Tuple[Chat, List[Any]]:
        await anyio.sleep(0)
        return self, messages


def test_instance_method_called_through_the_instance(weather):
    chat = Chat()

    me, received, model = chat.ask(weather, "small")

    assert me is chat
    assert model == "small"
    assert_compacted(received, weather)


def test_instance_method_called_through_the_instance_by_keyword(weather):
    chat = Chat()

    me, received, model = chat.ask(messages=weather)

    assert me is chat
    assert model == "gpt-4o"
    assert_compacted(received, weather)


def test_instance_method_called_through_the_class_with_the_instance(weather):
    chat = Chat()

    me, received, model = Chat.ask(chat, weather, "small")

    assert me is chat
    assert model == "small"
    assert_compacted(received, weather)


def test_instance_method_called_through_the_class_messages_by_keyword(weather):
    chat = Chat()

    me, received, _ = Chat.ask(chat, messages=weather)

    assert me is chat
    assert_compacted(received, weather)


@pytest.mark.anyio
async def test_async_instance_method(weather):
    chat = Chat()

    assert inspect.iscoroutinefunction(chat.aask)
    me, received = await chat.aask(weather)
    assert me is chat
    assert_compacted(received, weather)
    me, received = await Chat.aask(chat, weather)
    assert me is chat
    assert_compacted(received, weather)


def test_classmethod_called_through_the_class(weather):
    cls, received = Chat.ask_class(weather)

    assert cls is Chat
    assert_compacted(received, weather)


def test_classmethod_called_through_an_instance(weather):
    cls, received = Chat().ask_class(weather)

    assert cls is Chat
    assert_compacted(received, weather)


def test_classmethod_called_through_an_instance_by_keyword(weather):
    cls, received = Chat().ask_class(messages=weather)

    assert cls is Chat
    assert_compacted(received, weather)


def test_classmethod_called_through_a_subclass(weather):
    class Sub(Chat):
        pass

    cls, received = Sub.ask_class(weather)

    assert cls is Sub
    assert_compacted(received, weather)


def test_staticmethod_called_through_the_class_and_an_instance(weather):
    received, model = Chat.ask_static(weather, "small")
    assert model == "small"
    assert_compacted(received, weather)

    received, model = Chat().ask_static(weather)
    assert model == "gpt-4o"
    assert_compacted(received, weather)


def test_method_kinds_are_kept():
    assert_same_kind(Chat.ask, Chat.ask.__wrapped__)
    assert_same_kind(Chat().aask, Chat.aask.__wrapped__)
    assert inspect.iscoroutinefunction(Chat().aask)
    assert not inspect.iscoroutinefunction(Chat().ask)


# --- bound methods of other objects -------------------------------------------------


class Completions:
    """Stands for a third-party SDK resource: ``messages`` is keyword-only."""

    def __init__(self) -> None:
        self.calls: List[Dict[str, Any]] = []

    def create(self, *, model: str, messages: List[Any], **extra: Any) -> str:
        """Create a chat completion."""
        self.calls.append({"model": model, "messages": messages, **extra})
        return "reply"


def test_bound_method_of_a_third_party_object(weather):
    events: List[CompactionEvent] = []
    client = Completions()

    create = budgeted(**SPEC, on_compact=events.append)(client.create)

    assert_same_kind(create, client.create)
    assert inspect.signature(create) == inspect.signature(client.create)
    assert create(model="gpt-4o", messages=weather, temperature=0.5) == "reply"
    (call,) = client.calls
    assert call["model"] == "gpt-4o"
    assert call["temperature"] == 0.5
    assert_compacted(call["messages"], weather)
    assert_one_compaction(events, weather)
    assert events[0].function.endswith("Completions.create")


def test_bound_method_with_positional_messages(weather):
    class Client:
        def chat(self, messages: List[Any], model: str) -> Tuple[Any, List[Any], str]:
            return self, messages, model

    client = Client()
    chat = budgeted(**SPEC)(client.chat)

    me, received, model = chat(weather, "gpt-4o")

    assert me is client
    assert model == "gpt-4o"
    assert_compacted(received, weather)


def sdk_required_args(fn: Any) -> Any:
    """A sync ``functools.wraps`` decorator, as SDKs put over their async methods."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    return wrapper


class AsyncCompletions:
    """Stands for an async SDK resource whose method hides its async-ness."""

    def __init__(self) -> None:
        self.calls: List[List[Any]] = []

    @sdk_required_args
    async def create(self, *, model: str, messages: List[Any]) -> str:
        await anyio.sleep(0)
        self.calls.append(messages)
        return f"reply from {model}"


@pytest.mark.anyio
async def test_bound_async_sdk_method_hidden_by_functools_wraps(weather):
    events: List[CompactionEvent] = []
    client = AsyncCompletions()
    assert not inspect.iscoroutinefunction(client.create)

    create = budgeted(**SPEC, on_compact=events.append)(client.create)

    assert_same_kind(create, client.create)
    assert await create(model="gpt-4o", messages=weather) == "reply from gpt-4o"
    (received,) = client.calls
    assert_compacted(received, weather)
    assert_one_compaction(events, weather)


class DecoratedAsyncCompletions:
    """The same SDK method, budgeted where it is defined, with positional messages."""

    @budgeted(**SPEC)
    @sdk_required_args
    async def create(self, messages: List[Any], model: str = "gpt-4o") -> Tuple[Any, List[Any]]:
        await anyio.sleep(0)
        return self, messages


@pytest.mark.anyio
async def test_hidden_async_method_budgeted_in_the_class_body(weather):
    client = DecoratedAsyncCompletions()

    me, received = await client.create(weather)
    assert me is client
    assert_compacted(received, weather)
    me, received = await DecoratedAsyncCompletions.create(client, weather, "small")
    assert me is client
    assert_compacted(received, weather)


def test_bound_classmethod_with_positional_messages(weather):
    class Factory:
        @classmethod
        def build(cls, messages: List[Any]) -> Tuple[type, List[Any]]:
            return cls, messages

    cls, received = budgeted(**SPEC)(Factory.build)(weather)

    assert cls is Factory
    assert_compacted(received, weather)


# --- **kwargs-only functions and callable objects ------------------------------------


def test_kwargs_only_function(weather):
    events: List[CompactionEvent] = []

    def send(**kwargs: Any) -> Dict[str, Any]:
        return kwargs

    decorated = budgeted(**SPEC, on_compact=events.append)(send)

    assert_same_kind(decorated, send)
    sent = decorated(model="gpt-4o", messages=weather)
    assert sent["model"] == "gpt-4o"
    assert_compacted(sent["messages"], weather)
    assert_one_compaction(events, weather)


def test_kwargs_only_function_without_messages_passes_through():
    events: List[CompactionEvent] = []

    def send(**kwargs: Any) -> Dict[str, Any]:
        return kwargs

    prompt = ["not", "messages"]
    sent = budgeted(**SPEC, on_compact=events.append)(send)(prompt=prompt)

    assert sent == {"prompt": prompt}
    assert sent["prompt"] is prompt
    assert events == []


class AsyncModel:
    """A callable object whose ``__call__`` is a coroutine function."""

    def __init__(self) -> None:
        self.calls: List[List[Any]] = []

    async def __call__(self, messages: List[Any], temperature: float = 0.0) -> float:
        await anyio.sleep(0)
        self.calls.append(messages)
        return temperature


@pytest.mark.anyio
async def test_object_with_async_call(weather):
    events: List[CompactionEvent] = []
    model = AsyncModel()

    decorated = budgeted(**SPEC, on_compact=events.append)(model)

    assert_same_kind(decorated, model)
    assert await decorated(weather, temperature=0.5) == 0.5
    assert await decorated(messages=weather) == 0.0
    assert len(model.calls) == 2
    for received in model.calls:
        assert_compacted(received, weather)
    assert len(events) == 2
    assert events[0].function.endswith("AsyncModel")


@pytest.mark.anyio
async def test_object_with_async_call_gets_a_sync_summarizer_on_a_worker_thread(weather):
    threads: List[int] = []
    model = AsyncModel()

    def summarize(dropped: List[Any]) -> str:
        threads.append(threading.get_ident())
        return spec_summary(dropped)

    decorated = budgeted(**SPEC, summarize=summarize)(model)

    await decorated(weather)
    assert len(threads) == 1
    assert threads[0] != threading.get_ident()
    (received,) = model.calls
    assert received[1] == {"role": "user", "content": spec_summary(weather[1:4])}


# --- async functions hidden behind functools.wraps -----------------------------------


@sdk_required_args
async def hidden_async(messages: List[Any]) -> List[Any]:
    """An async function that inspect does not recognise as one."""
    await anyio.sleep(0)
    return messages


def test_hidden_async_function_keeps_its_apparent_kind():
    assert not inspect.iscoroutinefunction(hidden_async)

    decorated = budgeted(**SPEC)(hidden_async)

    assert_same_kind(decorated, hidden_async)


@pytest.mark.anyio
async def test_hidden_async_function_is_awaited(weather):
    events: List[CompactionEvent] = []
    decorated = budgeted(**SPEC, on_compact=events.append)(hidden_async)

    received = await decorated(weather)

    assert_compacted(received, weather)
    assert_one_compaction(events, weather)


@pytest.mark.anyio
async def test_hidden_async_function_runs_a_sync_summarizer_on_a_worker_thread(weather):
    threads: List[int] = []

    def summarize(dropped: List[Any]) -> str:
        threads.append(threading.get_ident())
        return spec_summary(dropped)

    decorated = budgeted(**SPEC, summarize=summarize)(hidden_async)

    received = await decorated(weather)

    assert len(threads) == 1
    assert threads[0] != threading.get_ident()
    assert received[1] == {"role": "user", "content": spec_summary(weather[1:4])}
    assert received[0] is weather[0]
    assert all(got is want for got, want in zip(received[2:], weather[4:]))


@pytest.mark.anyio
async def test_hidden_async_function_awaits_an_async_summarizer(weather):
    events: List[CompactionEvent] = []
    awaited: List[bool] = []

    async def summarize(dropped: List[Any]) -> str:
        await anyio.sleep(0)
        awaited.append(True)
        return spec_summary(dropped)

    decorated = budgeted(**SPEC, summarize=summarize, on_compact=events.append)(hidden_async)

    received = await decorated(weather)

    assert awaited == [True]
    assert received[1] == {"role": "user", "content": spec_summary(weather[1:4])}
    assert events[0].tokens_after == 145


@sdk_required_args
async def hidden_async_stream(messages: List[Any]) -> AsyncIterator[Any]:
    for message in messages:
        await anyio.sleep(0)
        yield message


@pytest.mark.anyio
async def test_hidden_async_generator_function_compacts_before_the_body_starts(weather):
    assert not inspect.isasyncgenfunction(hidden_async_stream)
    events: List[CompactionEvent] = []
    threads: List[int] = []

    def summarize(dropped: List[Any]) -> str:
        threads.append(threading.get_ident())
        return spec_summary(dropped)

    decorated = budgeted(**SPEC, summarize=summarize, on_compact=events.append)(hidden_async_stream)

    assert_same_kind(decorated, hidden_async_stream)
    agen = decorated(weather)
    assert events == []
    received = [message async for message in agen]
    assert len(events) == 1
    assert threads[0] != threading.get_ident()
    assert received[1] == {"role": "user", "content": spec_summary(weather[1:4])}


# --- introspection reads through -------------------------------------------------


def documented(messages: List[Any], *, model: str = "gpt-4o", temperature: float = 0.0) -> str:
    """Send the messages to the model."""
    return model


async def adocumented(messages: List[Any], model: Optional[str] = None) -> str:
    """Send the messages, asynchronously."""
    return ""


async def astream(messages: List[Any], chunk: int = 1) -> AsyncIterator[str]:
    """Stream the reply."""
    yield ""


def stream(messages: List[Any], chunk: int = 1) -> Iterator[str]:
    """Stream the reply, synchronously."""
    yield ""


@pytest.mark.parametrize("fn", [documented, adocumented, astream, stream])
def test_introspection_reads_through(fn):
    decorated = budgeted(max_tokens=100)(fn)

    assert inspect.signature(decorated) == inspect.signature(fn)
    assert decorated.__name__ == fn.__name__
    assert decorated.__qualname__ == fn.__qualname__
    assert decorated.__doc__ == fn.__doc__
    assert decorated.__wrapped__ is fn
    assert_same_kind(decorated, fn)


def test_method_introspection_reads_through():
    chat = Chat()

    assert chat.ask.__name__ == "ask"
    assert chat.ask.__doc__ == "Ask, as an instance method."
    assert list(inspect.signature(chat.ask).parameters) == ["messages", "model"]
    assert list(inspect.signature(Chat.ask).parameters) == ["self", "messages", "model"]
    assert list(inspect.signature(Chat.ask_class).parameters) == ["messages"]
    assert list(inspect.signature(Chat.ask_static).parameters) == ["messages", "model"]


def test_bound_method_introspection_reads_through():
    client = Completions()

    create = budgeted(max_tokens=100)(client.create)

    assert create.__name__ == "create"
    assert create.__doc__ == "Create a chat completion."
    assert create.__wrapped__ == client.create
