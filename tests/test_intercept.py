"""Intercepting a third-party method for the duration of a session.

The "SDK" is ``tests/fake_sdk.py``, importable as ``fake_sdk`` because pytest
puts the test directory on ``sys.path``. Its methods return a ``Reply`` holding
the very list they received, so a pass-through (the caller's own list) is told
apart from a compacted call (a new list of the caller's messages 0 and 4-9).
"""

from __future__ import annotations

import inspect
import threading
from typing import Any, Dict, List

import anyio
import pytest
from anyio import to_thread
from fake_sdk import (
    AsyncClient,
    AsyncCompletions,
    Client,
    Completions,
    NoMessages,
    Reply,
    Resource,
    Responses,
)
from helpers import weather_messages

from middleware import CompactingSession, CompactionEvent, SessionStats

WEATHER = {"max_tokens": 150, "keep_head": 1, "keep_tail": 2}
SYNC_TARGET = "fake_sdk.Completions.create"
ASYNC_TARGET = (AsyncCompletions, "create")

ORIGINAL_CREATE = Completions.__dict__["create"]
ORIGINAL_ACREATE = AsyncCompletions.__dict__["create"]
ORIGINAL_RESOURCE_CREATE = Resource.__dict__["create"]
ORIGINAL_NO_MESSAGES_CREATE = NoMessages.__dict__["create"]


@pytest.fixture(autouse=True)
def _nothing_left_patched():
    """Every test starts and ends with the fake SDK exactly as it was defined."""
    assert_untouched()
    yield
    assert_untouched()


def assert_untouched() -> None:
    assert Completions.__dict__["create"] is ORIGINAL_CREATE
    assert AsyncCompletions.__dict__["create"] is ORIGINAL_ACREATE
    assert Resource.__dict__["create"] is ORIGINAL_RESOURCE_CREATE
    assert "create" not in Responses.__dict__


def compacted(reply: Reply, sent: List[Any]) -> bool:
    return reply.messages is not sent and [id(m) for m in reply.messages] == [
        id(m) for m in sent[:1] + sent[4:]
    ]


def passed_through(reply: Reply, sent: List[Any]) -> bool:
    return reply.messages is sent and len(sent) == 10


def weather_stats(calls: int) -> SessionStats:
    return SessionStats(
        calls=calls,
        compactions=calls,
        messages_dropped=3 * calls,
        tokens_before=195 * calls,
        tokens_after=124 * calls,
    )


def test_the_fake_async_sdk_hides_its_coroutine_function() -> None:
    assert not inspect.iscoroutinefunction(AsyncCompletions.create)
    assert inspect.iscoroutinefunction(inspect.unwrap(AsyncCompletions.create))


# --- compacting and recording calls in the session's context ----------------------------


def test_intercept_by_name_compacts_and_records() -> None:
    client = Client()  # made before the session: methods are looked up on the class
    seen: List[CompactionEvent] = []
    with CompactingSession(**WEATHER, intercept=SYNC_TARGET, on_compact=seen.append) as session:
        assert Completions.__dict__["create"] is not ORIGINAL_CREATE
        sent = weather_messages()
        reply = client.chat.completions.create(messages=sent, model="gpt-4o")
    assert Completions.__dict__["create"] is ORIGINAL_CREATE
    assert reply.model == "gpt-4o"
    assert compacted(reply, sent)
    assert len(sent) == 10  # the caller's list is untouched
    (event,) = session.events
    assert event.function == "fake_sdk.Completions.create"
    assert (event.max_tokens, event.tokens_before, event.tokens_after) == (150, 195, 124)
    assert seen == [event]  # the session's hook, exactly once
    assert seen[0] is event


def test_intercept_accepts_a_list_of_targets() -> None:
    with CompactingSession(**WEATHER, intercept=[SYNC_TARGET, (Responses, "create")]) as session:
        one, two = weather_messages(), weather_messages()
        assert compacted(Completions().create(messages=one, model="m"), one)
        assert compacted(Responses().create(messages=two, model="m"), two)
    assert [e.function for e in session.events] == [
        "fake_sdk.Completions.create",
        "fake_sdk.Responses.create",
    ]


@pytest.mark.anyio
async def test_intercept_an_async_method_by_class_and_name() -> None:
    client = AsyncClient()
    awaited: List[CompactionEvent] = []

    async def hook(event: CompactionEvent) -> None:
        await anyio.sleep(0)
        awaited.append(event)

    async with CompactingSession(**WEATHER, intercept=ASYNC_TARGET, on_compact=hook) as session:
        intercepted = AsyncCompletions.__dict__["create"]
        assert intercepted is not ORIGINAL_ACREATE
        sent = weather_messages()
        reply = await client.chat.completions.create(messages=sent, model="gpt-4o")
    assert compacted(reply, sent)
    assert session.stats == weather_stats(1)
    assert session.events[0].function == "fake_sdk.AsyncCompletions.create"
    assert awaited == session.events


def test_session_intercept_while_active() -> None:
    session = CompactingSession(**WEATHER)
    with pytest.raises(RuntimeError, match="active session"):
        session.intercept(SYNC_TARGET)
    assert_untouched()
    with session:
        before = weather_messages()
        assert passed_through(Completions().create(messages=before, model="m"), before)
        session.intercept(SYNC_TARGET)
        session.intercept((Completions, "create"))  # the same method again: one patch
        after = weather_messages()
        assert compacted(Completions().create(messages=after, model="m"), after)
    assert session.stats == weather_stats(1)


# --- other contexts pass through untouched ------------------------------------------------


@pytest.mark.anyio
async def test_only_calls_in_the_session_context_are_compacted() -> None:
    go, done = anyio.Event(), anyio.Event()
    outside: Dict[str, Any] = {}
    inside: Dict[str, Any] = {}

    async def sibling() -> None:  # started before the session was entered
        await go.wait()
        sent = weather_messages()
        outside["sibling sync"] = (sent, Completions().create(messages=sent, model="m"))
        sent = weather_messages()
        reply = await AsyncCompletions().create(messages=sent, model="m")
        outside["sibling async"] = (sent, reply)
        done.set()

    def plain_thread() -> None:
        sent = weather_messages()
        outside["thread"] = (sent, Completions().create(messages=sent, model="m"))

    def worker() -> None:
        sent = weather_messages()
        inside["worker"] = (sent, Completions().create(messages=sent, model="m"))

    async def child() -> None:
        sent = weather_messages()
        inside["child"] = (sent, await AsyncCompletions().create(messages=sent, model="m"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(sibling)
        async with CompactingSession(**WEATHER, intercept=[SYNC_TARGET, ASYNC_TARGET]) as session:
            thread = threading.Thread(target=plain_thread)
            thread.start()
            thread.join()
            go.set()
            await done.wait()
            await to_thread.run_sync(worker)
            async with anyio.create_task_group() as inner:
                inner.start_soon(child)
            sent = weather_messages()
            inside["self"] = (sent, Completions().create(messages=sent, model="m"))

    sent = weather_messages()
    outside["after"] = (sent, Completions().create(messages=sent, model="m"))

    assert sorted(outside) == ["after", "sibling async", "sibling sync", "thread"]
    for sent, reply in outside.values():
        assert passed_through(reply, sent)
    for sent, reply in inside.values():
        assert compacted(reply, sent)
    assert session.stats == weather_stats(3)
    assert {id(e.messages[0]) for e in session.events} == {id(s[0]) for s, _ in inside.values()}


# --- restoring the original ---------------------------------------------------------------


def test_the_original_is_restored_when_the_block_raises() -> None:
    session = CompactingSession(**WEATHER, intercept=[SYNC_TARGET, ASYNC_TARGET])

    def block() -> None:
        with session:
            assert Completions.__dict__["create"] is not ORIGINAL_CREATE
            raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):
        block()
    assert not session.active
    assert_untouched()


@pytest.mark.anyio
async def test_the_original_is_restored_when_an_async_block_raises() -> None:
    async def block() -> None:
        async with CompactingSession(**WEATHER, intercept=ASYNC_TARGET):
            assert AsyncCompletions.__dict__["create"] is not ORIGINAL_ACREATE
            await anyio.sleep(0)
            raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):
        await block()
    assert_untouched()


def test_nested_sessions_restore_only_at_the_last_exit() -> None:
    with CompactingSession(**WEATHER, intercept=SYNC_TARGET) as outer:
        patched = Completions.__dict__["create"]
        with CompactingSession(
            max_tokens=60, keep_head=1, keep_tail=2, intercept=SYNC_TARGET
        ) as inner:
            assert Completions.__dict__["create"] is patched  # one patch, two users
            sent = weather_messages()
            reply = Completions().create(messages=sent, model="m")
            # The innermost intercepting session's options apply: 15 + 14 + 13 tokens.
            assert [id(m) for m in reply.messages] == [id(m) for m in sent[:1] + sent[8:]]
        assert Completions.__dict__["create"] is patched
        sent = weather_messages()
        assert compacted(Completions().create(messages=sent, model="m"), sent)
    assert_untouched()
    assert [e.max_tokens for e in outer.events] == [60, 150]
    assert inner.events == outer.events[:1]
    assert inner.events[0] is outer.events[0]


def test_an_inner_session_reaches_a_method_only_the_outer_intercepts() -> None:
    # The inner session only observes.
    with CompactingSession(**WEATHER, intercept=SYNC_TARGET) as outer, CompactingSession() as inner:
        sent = weather_messages()
        assert compacted(Completions().create(messages=sent, model="m"), sent)
    assert inner.events == outer.events
    assert len(inner.events) == 1


@pytest.mark.anyio
async def test_overlapping_sessions_in_tasks_restore_only_at_the_last_exit() -> None:
    first_in, second_in, first_out = anyio.Event(), anyio.Event(), anyio.Event()
    results: Dict[str, Any] = {}

    async def first() -> None:
        async with CompactingSession(**WEATHER, intercept=ASYNC_TARGET) as session:
            results["first session"] = session
            first_in.set()
            await second_in.wait()
            sent = weather_messages()
            results["first inside"] = (
                sent,
                await AsyncCompletions().create(messages=sent, model="m"),
            )
        first_out.set()
        sent = weather_messages()
        results["first after"] = (sent, await AsyncCompletions().create(messages=sent, model="m"))

    async def second() -> None:
        await first_in.wait()
        async with CompactingSession(**WEATHER, intercept=ASYNC_TARGET) as session:
            results["second session"] = session
            second_in.set()
            await first_out.wait()
            # The first session has exited; the method stays patched for this one.
            assert AsyncCompletions.__dict__["create"] is not ORIGINAL_ACREATE
            sent = weather_messages()
            results["second inside"] = (
                sent,
                await AsyncCompletions().create(messages=sent, model="m"),
            )

    async with anyio.create_task_group() as tg:
        tg.start_soon(first)
        tg.start_soon(second)

    assert compacted(results["first inside"][1], results["first inside"][0])
    assert compacted(results["second inside"][1], results["second inside"][0])
    assert passed_through(results["first after"][1], results["first after"][0])
    assert results["first session"].stats == weather_stats(1)
    assert results["second session"].stats == weather_stats(1)
    assert results["first session"].events[0].messages[0] is results["first inside"][0][0]
    assert results["second session"].events[0].messages[0] is results["second inside"][0][0]


def test_overlapping_sessions_in_threads_restore_only_at_the_last_exit() -> None:
    entered = threading.Barrier(2)
    first_out = threading.Event()
    errors: List[BaseException] = []
    sessions: Dict[str, CompactingSession] = {}

    def first() -> None:
        try:
            with CompactingSession(**WEATHER, intercept=SYNC_TARGET) as session:
                sessions["first"] = session
                entered.wait()
            first_out.set()
            sent = weather_messages()
            assert passed_through(Completions().create(messages=sent, model="m"), sent)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def second() -> None:
        try:
            with CompactingSession(**WEATHER, intercept=SYNC_TARGET) as session:
                sessions["second"] = session
                entered.wait()
                first_out.wait()
                assert Completions.__dict__["create"] is not ORIGINAL_CREATE
                sent = weather_messages()
                assert compacted(Completions().create(messages=sent, model="m"), sent)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sessions["first"].stats == weather_stats(0)
    assert sessions["second"].stats == weather_stats(1)


def test_an_inherited_method_is_removed_from_the_subclass_again() -> None:
    with CompactingSession(**WEATHER, intercept="fake_sdk.Responses.create") as session:
        assert "create" in Responses.__dict__
        assert Resource.__dict__["create"] is ORIGINAL_RESOURCE_CREATE
        sent = weather_messages()
        assert compacted(Responses().create(messages=sent, model="m"), sent)
        # The base class itself is not intercepted.
        base = weather_messages()
        assert passed_through(Resource().create(messages=base, model="m"), base)
    assert "create" not in Responses.__dict__
    assert Responses.create is ORIGINAL_RESOURCE_CREATE
    assert session.stats == weather_stats(1)


# --- bad targets ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "error"),
    [
        ("fake_sdk.Nope.create", LookupError),
        ("fake_sdk.Completions.nope", LookupError),
        ("no_such_module_for_ctx_compact.Client.create", LookupError),
        ((Completions, "nope"), LookupError),
        ((NoMessages, "create"), TypeError),  # no argument that carries the messages
    ],
)
def test_a_bad_target_raises_and_leaves_nothing_patched(target: Any, error: type) -> None:
    session = CompactingSession(**WEATHER, intercept=[SYNC_TARGET, ASYNC_TARGET, target])
    with pytest.raises(error):
        session.__enter__()
    assert not session.active
    assert_untouched()
    assert NoMessages.__dict__["create"] is ORIGINAL_NO_MESSAGES_CREATE
    # The session can still be used, and nothing stays registered for the good targets.
    with CompactingSession(**WEATHER, intercept=SYNC_TARGET):
        pass


@pytest.mark.parametrize("target", ["create", 42, ("create",), (SYNC_TARGET, 1)])
def test_a_target_of_the_wrong_shape_fails_at_construction(target: Any) -> None:
    with pytest.raises(TypeError, match="intercept"):
        CompactingSession(**WEATHER, intercept=[SYNC_TARGET, target])
    with pytest.raises(TypeError, match="intercept"):
        CompactingSession(**WEATHER, intercept=target)
    assert_untouched()


def test_a_bad_target_given_to_intercept_leaves_the_others_in_place() -> None:
    with CompactingSession(**WEATHER, intercept=SYNC_TARGET) as session:
        with pytest.raises(LookupError):
            session.intercept("fake_sdk.Completions.nope")
        sent = weather_messages()
        assert compacted(Completions().create(messages=sent, model="m"), sent)
    assert session.stats == weather_stats(1)


def test_an_observing_session_cannot_intercept() -> None:
    with pytest.raises(TypeError, match="max_tokens"):
        CompactingSession(intercept=SYNC_TARGET).__enter__()
    assert_untouched()


def test_an_async_hook_cannot_meet_a_sync_intercepted_method() -> None:
    async def hook(event: CompactionEvent) -> None:  # pragma: no cover - never run
        pass

    with pytest.raises(TypeError, match="async on_compact hook"):
        CompactingSession(**WEATHER, intercept=SYNC_TARGET, on_compact=hook).__enter__()
    assert_untouched()


# --- an instance, and a base class with its subclass ----------------------------------------


class Service:
    def create(self, messages: List[Any], model: str = "m") -> List[Any]:
        return messages


class BaseService:
    def create(self, messages: List[Any]) -> List[Any]:
        return messages


class SubService(BaseService):
    pass


def test_intercepting_an_instance_method_compacts_that_instance_only() -> None:
    client, other = Service(), Service()
    with CompactingSession(**WEATHER, intercept=[(client, "create")]) as session:
        sent = client.create(weather_messages(), model="x")
        untouched = other.create(weather_messages())
    assert len(sent) == 7
    assert len(untouched) == 10
    assert len(session.events) == 1
    assert "create" not in vars(client)  # put back exactly: the instance holds nothing
    assert client.create.__func__ is Service.create


@pytest.mark.parametrize("order", [(BaseService, SubService), (SubService, BaseService)])
def test_a_base_class_and_its_subclass_compact_one_call_once(order: Any) -> None:
    targets = [(cls, "create") for cls in order]
    with CompactingSession(**WEATHER, intercept=targets) as session:
        assert len(SubService().create(weather_messages())) == 7
        assert len(BaseService().create(weather_messages())) == 7
    assert [event.tokens_before for event in session.events] == [195, 195]
    assert session.stats.calls == 2
    assert "create" not in vars(SubService)
    assert BaseService.__dict__["create"].__name__ == "create"


# --- a summarizer's own model call ------------------------------------------------------


def test_a_summarizers_call_through_the_intercepted_method_passes_through() -> None:
    client = Client()
    replies: List[Reply] = []

    def summarize(dropped: List[Any]) -> str:
        replies.append(client.chat.completions.create(messages=list(dropped) * 3, model="m"))
        return "summary"

    with CompactingSession(
        **WEATHER, intercept=SYNC_TARGET, summarize=summarize, summary_role="system"
    ) as session:
        sent = weather_messages()
        reply = client.chat.completions.create(messages=sent, model="gpt-4o")
    # Over the budget as it is, and sent whole: neither compacted nor reported.
    assert replies
    assert all(len(r.messages) >= 9 for r in replies)
    (event,) = session.events
    assert event.summary == "summary"
    assert list(reply.messages) == list(event.messages)


@pytest.mark.anyio
@pytest.mark.parametrize("awaited", [True, False], ids=["async summarizer", "sync on a thread"])
async def test_an_async_calls_summarizer_passes_through_too(awaited: bool) -> None:
    client = AsyncClient()
    sync_client = Client()
    replies: List[Reply] = []

    async def asummarize(dropped: List[Any]) -> str:
        replies.append(await client.chat.completions.create(messages=list(dropped) * 3, model="m"))
        return "summary"

    def summarize(dropped: List[Any]) -> str:  # run on a worker thread, in the call's context
        replies.append(sync_client.chat.completions.create(messages=list(dropped) * 3, model="m"))
        return "summary"

    async with CompactingSession(
        **WEATHER,
        # A sync point cannot await an async summarizer: it is refused there.
        intercept=[ASYNC_TARGET] if awaited else [ASYNC_TARGET, SYNC_TARGET],
        summarize=asummarize if awaited else summarize,
        summary_role="system",
    ) as session:
        reply = await client.chat.completions.create(messages=weather_messages(), model="gpt-4o")
    assert replies
    assert all(len(r.messages) >= 9 for r in replies)
    (event,) = session.events
    assert event.summary == "summary"
    assert list(reply.messages) == list(event.messages)
