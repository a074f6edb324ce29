"""SQLiteStore, RedisStore and store=: summaries shared by processes, the first stored winning.

Redis is a real ``redis-server`` started here on 127.0.0.1 (never a mock); without
the binary these tests fail with the command that installs it.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import pickle
import shutil
import signal
import socket
import sqlite3
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest
from summary_workers import chat, serve

from middleware import (
    CompactingSession,
    CompactionEvent,
    RedisStore,
    SQLiteStore,
    SummaryStore,
    budgeted,
)

# Seconds a worker or the server may take before the test fails rather than hangs.
DEADLINE = 60.0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def _running_redis(workdir: Path) -> Iterator[Tuple[subprocess.Popen[bytes], str]]:
    """A redis-server of its own on a free port, answering PING: its process and URL."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail(
            "the RedisStore tests need the redis-server binary: apt-get install redis-server",
            pytrace=False,
        )
    import redis

    port = _free_port()
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        cwd=workdir,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=1.0)
    try:
        deadline = time.monotonic() + DEADLINE
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"redis-server did not answer PING on port {port}", pytrace=False)
                time.sleep(0.05)
        yield process, f"redis://127.0.0.1:{port}/0"
    finally:
        client.close()
        process.kill()
        process.wait(timeout=DEADLINE)


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A redis-server for the module's tests: its URL."""
    with _running_redis(tmp_path_factory.mktemp("redis")) as (_, url):
        yield url


@pytest.fixture
def redis_url(redis_server: str) -> str:
    """The module's server, emptied for each test."""
    RedisStore(redis_server).client.flushdb()
    return redis_server


@pytest.fixture(params=["sqlite", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> SummaryStore:
    if request.param == "sqlite":
        return SQLiteStore(tmp_path / "summaries.db")
    return RedisStore(request.getfixturevalue("redis_url"))


# --- the protocol ----------------------------------------------------------------


def test_the_first_value_stored_under_a_key_wins(store: SummaryStore) -> None:
    assert store.get("k") is None
    assert store.put("k", "first") == "first"
    assert store.put("k", "second") == "first"
    assert store.get("k") == "first"
    assert store.put("other", "naïve \U0001f600") == "naïve \U0001f600"
    assert store.get("other") == "naïve \U0001f600"


def test_a_store_pickles_to_the_same_shared_place(store: SummaryStore) -> None:
    store.put("k", "kept")
    copy = pickle.loads(pickle.dumps(store))
    assert copy.get("k") == "kept"
    assert copy.put("k", "other") == "kept"


def test_get_many_answers_in_order_with_none_for_the_missing(store: SummaryStore) -> None:
    store.put("a", "1")
    store.put("c", "3")
    get_many = getattr(store, "get_many")  # noqa: B009 - optional in the protocol
    assert get_many(["a", "b", "c"]) == ["1", None, "3"]
    assert get_many([]) == []


def test_a_user_store_with_get_and_put_is_accepted() -> None:
    class DictStore:
        def __init__(self) -> None:
            self.values: Dict[str, str] = {}

        def get(self, key: str) -> Optional[str]:
            return self.values.get(key)

        def put(self, key: str, value: str) -> str:
            return self.values.setdefault(key, value)

    shared = DictStore()
    calls: List[int] = []

    def summarize(dropped: List[Any]) -> str:
        calls.append(len(dropped))
        return "gist"

    for _ in range(2):  # two decorated functions: two processes, as far as the store knows
        budgeted(max_tokens=600, summarize=summarize, store=shared)(lambda messages: None)(chat(20))
    assert len(calls) == 1
    assert list(shared.values.values()) == ["gist"]


@pytest.mark.parametrize(
    ("store", "error"),
    [(object(), TypeError), ("path.db", TypeError)],
    ids=["object", "str"],
)
def test_store_must_have_get_and_put(store: Any, error: type) -> None:
    expected = r"^'store' must be None or an object with get\(key\) and put\(key, value\)"
    with pytest.raises(error, match=expected):
        budgeted(max_tokens=100, store=store)
    with pytest.raises(error, match=expected):
        CompactingSession(max_tokens=100, store=store)


# --- SQLiteStore ---------------------------------------------------------------


def test_sqlite_keeps_at_most_max_entries_the_least_recently_used_going_first(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "s.db", max_entries=3)
    for key in "abc":
        store.put(key, key.upper())
    store.put("d", "D")
    assert len(store) == 3
    assert store.get("a") is None
    assert [store.get(k) for k in "bcd"] == ["B", "C", "D"]


def test_sqlite_forgets_entries_older_than_ttl(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db", ttl=0.2)
    store.put("k", "old")
    time.sleep(0.4)
    assert store.get("k") is None
    assert store.put("k", "new") == "new"
    assert store.get("k") == "new"


def test_a_sqlite_entry_stamped_in_the_future_is_expired_under_ttl(tmp_path: Path) -> None:
    # A worker whose clock ran a day ahead wrote it.
    store = SQLiteStore(tmp_path / "s.db", ttl=3600)
    store.put("k", "from the future")
    with contextlib.closing(sqlite3.connect(tmp_path / "s.db")) as connection:
        connection.execute("UPDATE summaries SET stored = stored + 86400, used = used + 86400")
        connection.commit()
    assert store.get("k") is None
    assert store.put("k", "now") == "now"
    assert store.get("k") == "now"


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"max_entries": 0}, ValueError, "'max_entries' must be a positive number"),
        ({"max_entries": 1.5}, TypeError, "'max_entries'"),
        ({"ttl": -1}, ValueError, "'ttl'"),
        ({"timeout": True}, TypeError, "'timeout'"),
    ],
)
def test_sqlite_checks_its_options(
    tmp_path: Path, options: Dict[str, Any], error: type, match: str
) -> None:
    with pytest.raises(error, match=match):
        SQLiteStore(tmp_path / "s.db", **options)


def test_sqlite_opens_its_file_in_wal_mode(tmp_path: Path) -> None:
    import contextlib
    import sqlite3

    SQLiteStore(tmp_path / "s.db").put("k", "v")
    # closing(): a connection's own context manager commits but does not close it.
    with contextlib.closing(sqlite3.connect(tmp_path / "s.db")) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_a_store_closes_every_connection_it_opened_when_it_goes(tmp_path: Path) -> None:
    import gc
    import sqlite3
    import threading

    store = SQLiteStore(tmp_path / "s.db")
    store.put("k", "v")
    worker = threading.Thread(target=store.get, args=("k",))
    worker.start()
    worker.join(timeout=30)
    opened = [connection for _, connection in store._opened]
    assert len(opened) == 2  # the main thread's and the worker's
    cycle: List[Any] = [store]
    cycle.append(cycle)  # a store that dies in a reference cycle, as in a decorated function
    del store, cycle
    gc.collect()
    for connection in opened:
        with pytest.raises(sqlite3.ProgrammingError, match="closed"):
            connection.execute("SELECT 1")


# --- RedisStore ----------------------------------------------------------------


def test_redis_keys_carry_the_prefix_and_expire(redis_url: str) -> None:
    store = RedisStore(redis_url, prefix="app:", ttl=100)
    store.put("k", "v")
    client = store.client
    assert client.get("app:k") == b"v"
    assert 0 < client.ttl("app:k") <= 100


def test_redis_takes_a_ready_client(redis_url: str) -> None:
    import redis

    client = redis.Redis.from_url(redis_url)
    store = RedisStore(client, ttl=None)
    assert store.put("k", "v") == "v"
    assert client.ttl("ctx-compact:summary:k") == -1  # no expiry
    with pytest.raises(TypeError, match="built from a client cannot be pickled"):
        pickle.dumps(store)


def test_redis_refuses_what_is_neither_a_url_nor_a_client() -> None:
    with pytest.raises(TypeError, match="'url' must be a Redis URL or a redis client"):
        RedisStore(42)


def test_an_unreachable_redis_costs_the_summary_not_the_call() -> None:
    store = RedisStore(f"redis://127.0.0.1:{_free_port()}/0", socket_timeout=1.0)
    events: List[CompactionEvent] = []
    sent: List[Any] = []
    history = chat(20)

    def send(messages: List[Any]) -> None:
        sent.append(messages)

    budgeted(max_tokens=600, summarize=lambda d: "gist", store=store, on_compact=events.append)(
        send
    )(history)
    assert events[0].summary == "gist"
    assert events[0].summary_error is None
    assert sent[0][1] == {"role": "user", "content": "gist"}


# --- a store can cost the summary, never the call ---------------------------------------


def _sending(store: Any, summarize: Any) -> Tuple[Any, List[CompactionEvent], List[Any]]:
    """A decorated function with ``store`` and ``summarize``: it, its events and what it sent."""
    events: List[CompactionEvent] = []
    sent: List[Any] = []
    decorated = budgeted(
        max_tokens=2000,
        target_tokens=1200,
        summarize=summarize,
        store=store,
        on_compact=events.append,
    )(lambda messages: sent.append(messages))
    return decorated, events, sent


def _spoil(store: SummaryStore) -> None:
    """Overwrite every summary in ``store`` with bytes that are not UTF-8 text."""
    if isinstance(store, SQLiteStore):
        with contextlib.closing(sqlite3.connect(store.path)) as connection:
            connection.execute("UPDATE summaries SET value = x'fffe00'")
            connection.commit()
    else:
        assert isinstance(store, RedisStore)
        for name in store.client.scan_iter(match=store.prefix + "*"):
            store.client.set(name, b"\xff\xfe\x00", keepttl=True)


def test_a_value_that_is_not_text_costs_its_summary_once(store: SummaryStore) -> None:
    calls: List[int] = []

    def summarize(dropped: List[Any]) -> str:
        calls.append(len(dropped))
        return f"gist {len(calls)}"

    send, events, sent = _sending(store, summarize)
    send(chat(60))
    _spoil(store)
    send(chat(60))  # the value is a miss: summarised afresh, and the value replaced
    send(chat(60))
    assert [event.summary for event in events] == ["gist 1", "gist 2", "gist 2"]
    assert [message["content"] for message in (sent[1][1], sent[2][1])] == ["gist 2", "gist 2"]
    assert events[1].store_error == "get_many returned bytes for 1 of 1 keys, not a str or None"
    assert events[2].store_error is None
    assert len(calls) == 2


class OddStore:
    """A user's store whose ``get``/``get_many``/``put`` answer what they are told to."""

    def __init__(self, **answers: Any) -> None:
        self.values: Dict[str, str] = {}
        self.answers = answers
        if "get_many" in answers:
            self.get_many = lambda keys: answers["get_many"](list(keys))

    def get(self, key: str) -> Any:
        return self.answers.get("get", self.values.get(key))

    def put(self, key: str, value: str) -> Any:
        stored = self.values.setdefault(key, value)
        return self.answers.get("put", stored)


@pytest.mark.parametrize(
    ("answers", "error"),
    [
        ({"get": 42}, "get returned int for 1 of 1 keys, not a str or None"),
        ({"get": b"gist"}, "get returned bytes for 1 of 1 keys, not a str or None"),
        ({"get_many": lambda keys: None}, "get_many returned NoneType, not a list"),
        ({"get_many": lambda keys: "gist"}, "get_many returned str, not a list"),
        ({"get_many": lambda keys: [None] * (len(keys) - 1)}, "get_many returned 0 values for 1"),
        ({"get_many": lambda keys: [None] * (len(keys) + 1)}, "get_many returned 2 values for 1"),
        ({"get_many": lambda keys: [7] * len(keys)}, "get_many returned int for 1 of 1 keys"),
        ({"put": 42}, "put returned int, not a str"),
        ({"put": None}, "put returned NoneType, not a str"),
    ],
    ids=[
        "get 42",
        "get bytes",
        "get_many None",
        "get_many str",
        "get_many too few",
        "get_many too many",
        "get_many ints",
        "put 42",
        "put None",
    ],
)
def test_what_a_store_answers_that_is_not_a_string_is_a_miss_reported_on_the_event(
    answers: Dict[str, Any], error: str
) -> None:
    calls: List[int] = []

    def summarize(dropped: List[Any]) -> str:
        calls.append(len(dropped))
        return "gist"

    send, events, sent = _sending(OddStore(**answers), summarize)
    send(chat(60))
    (event,) = events
    assert event.summary == "gist"
    assert sent[0][1] == {"role": "user", "content": "gist"}
    assert event.store_error is not None
    assert error in event.store_error
    assert event.summary_error is None


@pytest.mark.anyio
async def test_an_async_call_treats_what_is_not_a_string_as_a_miss_too() -> None:
    events: List[CompactionEvent] = []
    decorated = budgeted(
        max_tokens=2000,
        summarize=lambda dropped: "gist",
        store=OddStore(get=42),
        on_compact=events.append,
    )(aecho)
    sent = await decorated(chat(60))
    assert sent[1] == {"role": "user", "content": "gist"}
    assert events[0].store_error is not None
    assert "get returned int" in events[0].store_error


class CountingClient:
    """A redis-py client that records each command it is given and how it ended."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.commands: List[Tuple[str, Optional[str]]] = []

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.client, name)
        if name not in ("get", "set", "mget"):
            return method

        def counted(*args: Any, **kwargs: Any) -> Any:
            try:
                result = method(*args, **kwargs)
            except Exception as exc:
                self.commands.append((name, type(exc).__name__))
                raise
            self.commands.append((name, None))
            return result

        return counted


def rolling(dropped: List[Any], *, previous: Optional[str] = None) -> str:
    return f"{len(dropped)} more after {previous}"


def echo(messages: List[Any]) -> List[Any]:
    return messages


async def aecho(messages: List[Any]) -> List[Any]:
    return messages


@contextlib.contextmanager
def _stalled_redis(workdir: Path) -> Iterator[Tuple[RedisStore, CountingClient]]:
    """A RedisStore (``socket_timeout=0.2``) whose server is stopped, and its counted client."""
    with _running_redis(workdir) as (process, url):
        store = RedisStore(url, socket_timeout=0.2)
        client = store.client = CountingClient(store.client)
        os.kill(process.pid, signal.SIGSTOP)
        try:
            yield store, client
        finally:
            os.kill(process.pid, signal.SIGCONT)


# Hundreds of earlier cuts for a rolling summarizer to look up: several batches of them.
LONG = 200


def test_a_stalled_redis_costs_one_timeout_per_call(tmp_path: Path) -> None:
    events: List[CompactionEvent] = []
    with _stalled_redis(tmp_path) as (store, client):
        send = budgeted(
            max_tokens=2000,
            target_tokens=1200,
            summarize=rolling,
            store=store,
            on_compact=events.append,
        )(echo)
        sent = send(chat(LONG))
    # The first command timed out, and the store was not asked again in that call.
    assert client.commands == [("mget", "TimeoutError")]
    (event,) = events
    assert event.summary is not None
    assert sent[1] == {"role": "user", "content": event.summary}
    assert event.store_error is not None
    assert event.store_error.startswith("TimeoutError: ")


@pytest.mark.anyio
async def test_a_stalled_redis_costs_an_async_call_one_timeout_too(tmp_path: Path) -> None:
    events: List[CompactionEvent] = []
    with _stalled_redis(tmp_path) as (store, client):
        send = budgeted(
            max_tokens=2000,
            target_tokens=1200,
            summarize=rolling,
            store=store,
            on_compact=events.append,
        )(aecho)
        sent = await send(chat(LONG))
    assert client.commands == [("mget", "TimeoutError")]
    assert sent[1] == {"role": "user", "content": events[0].summary}


class SlowStore(OddStore):
    """A store that answers, each time taking longer than its ``timeout`` allows in all."""

    timeout = 0.05

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def get_many(self, keys: List[str]) -> List[Optional[str]]:
        self.reads += 1
        time.sleep(0.06)
        return [None] * len(keys)


def test_a_store_is_not_asked_again_in_a_call_once_its_timeout_is_spent() -> None:
    store = SlowStore()
    send, events, _ = _sending(store, rolling)
    send(chat(200))
    assert store.reads == 1  # not once per batch of earlier cuts
    assert store.values == {}  # nor asked to keep the new summary
    (event,) = events
    assert event.summary is not None
    assert event.store_error is not None
    assert "timeout" in event.store_error


# --- shared by worker processes ----------------------------------------------------


class Workers:
    """Worker processes (summary_workers.serve) sharing one store, driven in turn."""

    def __init__(self, store: SummaryStore, count: int) -> None:
        context = multiprocessing.get_context("spawn")
        self.connections = []
        self.processes = []
        for index in range(count):
            ours, theirs = context.Pipe()
            process = context.Process(target=serve, args=(theirs, store, f"w{index}"), daemon=True)
            process.start()
            self.connections.append(ours)
            self.processes.append(process)

    def send(self, index: int, history: List[Any]) -> Tuple[Optional[str], int, int, int]:
        connection = self.connections[index]
        connection.send(history)
        if not connection.poll(DEADLINE):
            raise AssertionError(f"worker {index} gave no answer within {DEADLINE} s")
        return connection.recv()  # type: ignore[no-any-return]

    def close(self) -> None:
        for connection in self.connections:
            connection.send(None)
        for process in self.processes:
            process.join(DEADLINE)
            if process.is_alive():
                process.kill()
                process.join(DEADLINE)


@pytest.mark.slow
def test_two_workers_send_the_same_summary_for_the_same_cut_paid_once(store: SummaryStore) -> None:
    workers = Workers(store, 2)
    try:
        answers = []
        for turns in range(1, 61):
            history = chat(turns)
            answers.append((workers.send(0, history), workers.send(1, history)))
    finally:
        workers.close()
    summaries: Counter[str] = Counter()
    calls = 0
    for first, second in answers:
        assert first[0] == second[0]  # the same text for the same cut
        assert second[3] == 0  # the second worker only ever reads it
        calls += first[3]
        if first[0] is not None:
            summaries[first[0]] += 1
    assert len(summaries) >= 3  # the cut moved, and each cut's summary stood for many turns
    assert calls == len(summaries)  # one summarizer call per cut, across both workers
    assert all(text.startswith("w0's") for text in summaries)


@pytest.mark.slow
def test_round_robin_workers_feed_the_summarizer_each_dropped_message_about_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = SQLiteStore(tmp_path / "summaries.db")
    workers = Workers(store, 2)
    fed = calls = dropped = 0
    try:
        for turns in range(1, 301):
            _, dropped, messages, made = workers.send(turns % 2, chat(turns))
            fed += messages
            calls += made
    finally:
        workers.close()
    with capsys.disabled():
        print(
            f"\n300 turns over 2 workers sharing a SQLiteStore: {calls} summarizer calls fed "
            f"{fed} messages; the last call dropped {dropped} ({fed / dropped:.2f}x)"
        )
    assert fed <= 1.5 * dropped
