"""Where summaries outlive the process that wrote them: the store protocol and its stores.

``SummaryStore`` is ``get`` and ``put`` of strings by string keys, the first
value stored winning. What a store answers is not trusted (``_summaries``
checks it), so the stores here hand back what they hold as it is, and ``put``
replaces a value that is not text. See docs/summaries.md.
"""

from __future__ import annotations

import contextlib
import math
import os
import sqlite3
import threading
import time
import weakref
from collections import OrderedDict
from typing import Any, Dict, List, Optional, Protocol, Sequence, Tuple, Union, runtime_checkable

from ctx_compact._contract import must

# Keys looked up in one SQL statement: far below SQLite's smallest limit on parameters (999).
_CHUNK = 500
# A read refreshes an entry's last use at most this often, so reads rarely write.
_TOUCH_SECONDS = 60.0
# Seconds a store's work may take in one call when it says nothing (no ``timeout``),
# and RedisStore's default socket timeout.
DEFAULT_TIMEOUT = 5.0


@runtime_checkable
class SummaryStore(Protocol):
    """What ``store=`` takes: strings by string keys, the first value stored winning.

    ``SQLiteStore`` and ``RedisStore`` implement it; any object with these two
    methods does. A store may forget entries (a bounded size, an expiry): a
    forgotten summary is written again, once, by the next call that needs it.
    A store may also offer ``get_many(keys) -> list`` (one value or ``None``
    per key, in order), which the rolling lookup uses to ask for many keys in
    one round trip. The methods are called from worker threads on async paths,
    and from many threads at once.

    A store can cost a call its summary, never the call: anything ``get`` or
    ``get_many`` answers that is not a string (or a list of the wrong length)
    is a miss, a ``put`` that answers something other than a string leaves the
    new summary to be sent, and an exception is a miss too. A store's
    ``timeout`` attribute, when it has one (seconds, or ``None`` for no limit;
    5 seconds when it has none), is the deadline of all its work in one call:
    once spent, or once the store raised, it is not asked again in that call.
    """

    def get(self, key: str) -> Optional[str]:
        """The value stored under ``key``, or ``None``."""

    def put(self, key: str, value: str) -> str:
        """Store ``value`` under ``key`` unless the key holds one already.

        Returns:
            The value the key holds afterwards: ``value``, or the one another
            writer stored first.
        """


def store_timeout(store: object) -> Optional[float]:
    """The seconds ``store``'s work may take in one call: its ``timeout``, or the default.

    An attribute named ``timeout`` that is not a positive number (a method, say)
    is not taken for one.
    """
    timeout = getattr(store, "timeout", DEFAULT_TIMEOUT)
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        return DEFAULT_TIMEOUT
    return float(timeout) if timeout > 0 else DEFAULT_TIMEOUT  # NaN > 0 is false


def _positive(name: str, value: object, kinds: Any, optional: bool = True) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise must(name, "a positive number or None", value)
    if not (value > 0 and math.isfinite(value)):
        raise must(name, "a positive number or None", value, ValueError)


class MemoryStore:
    """The default store: this interceptor's own recent summaries, least recently used forgotten.

    Args:
        size: How many summaries are kept.
    """

    def __init__(self, size: int = 1024) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._values: OrderedDict[str, str] = OrderedDict()

    def get(self, key: str) -> Optional[str]:
        """The value stored under ``key``, or ``None``."""
        with self._lock:
            value = self._values.get(key)
            if value is not None:
                self._values.move_to_end(key)
            return value

    def put(self, key: str, value: str) -> str:
        """Store ``value`` under ``key`` unless it holds one; return what it holds."""
        with self._lock:
            stored = self._values.setdefault(key, value)
            self._values.move_to_end(key)
            while len(self._values) > self._size:
                self._values.popitem(last=False)
            return stored


# Connections a forked child inherited from its parent: never closed in the child (that
# could disturb the parent's locks), never collected either (an unclosed sqlite3
# connection collected is a ResourceWarning from Python 3.13 on).
_INHERITED: List[sqlite3.Connection] = []


def _close_all(opened: List[Tuple[int, sqlite3.Connection]], lock: threading.Lock) -> None:
    """Close the connections a store opened in this process (its finalizer).

    A finalizer rather than ``__del__``: when a store dies in a reference cycle, the
    garbage collector runs weak-reference callbacks before any object's finalizer,
    so the connections are closed before sqlite3 could warn about them.
    """
    with lock:
        connections, opened[:] = list(opened), []
    for pid, connection in connections:
        if pid != os.getpid():
            _INHERITED.append(connection)
            continue
        with contextlib.suppress(Exception):  # at interpreter exit, say
            connection.close()


class SQLiteStore:
    """Summaries in an SQLite file, shared by the processes of one machine.

    The file is opened in WAL mode (readers never wait for the writer) with a
    busy timeout, so several worker processes and threads can read and write
    it at once; each thread of each process has its own connection, opened on
    first use (also after a fork). A write that loses a race keeps the entry
    written first. The file is bounded: past ``max_entries`` the least recently
    used entries are deleted, and entries older than ``ttl`` are neither
    returned nor kept (nor are entries stamped later than now: a clock that
    ran ahead cannot keep one forever). A row that does not hold text (written
    by something else) is returned as it is, which a call treats as a miss, and
    the next ``put`` of its key replaces it. It pickles as its path and options,
    so a decorated function can be shipped to worker processes.

    Use a local file system: SQLite's locking is unreliable on network file
    systems. For a fleet of machines, use ``RedisStore``.

    Args:
        path: The database file; created with its table if missing.
        max_entries: How many summaries are kept at most; ``None`` for no limit.
        ttl: Seconds a summary is kept after it was stored; ``None`` (the
            default) keeps it until ``max_entries`` pushes it out.
        timeout: Seconds a write waits for another process's write to finish,
            and the deadline of all the store's work in one call.

    Raises:
        TypeError, ValueError: A bad option.
    """

    def __init__(
        self,
        path: Union[str, os.PathLike[str]],
        *,
        max_entries: Optional[int] = 10_000,
        ttl: Optional[float] = None,
        timeout: float = 30.0,
    ) -> None:
        if not isinstance(path, (str, os.PathLike)):
            raise must("path", "a str or a path", path)
        _positive("max_entries", max_entries, int)
        _positive("ttl", ttl, (int, float))
        _positive("timeout", timeout, (int, float), optional=False)
        self.path = os.fspath(path)
        self.max_entries = max_entries
        self.ttl = ttl
        self.timeout = float(timeout)
        self._start()

    def _start(self) -> None:
        # Every connection this store opens, in any thread, closed by its finalizer.
        self._local = threading.local()
        self._lock = threading.Lock()
        self._opened: List[Tuple[int, sqlite3.Connection]] = []
        weakref.finalize(self, _close_all, self._opened, self._lock)

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r}, max_entries={self.max_entries}, ttl={self.ttl})"

    def __getstate__(self) -> Dict[str, Any]:
        return {name: getattr(self, name) for name in ("path", "max_entries", "ttl", "timeout")}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._start()

    def _connection(self) -> sqlite3.Connection:
        local = self._local
        pid = os.getpid()
        # A connection must not cross a fork: the child opens its own.
        if getattr(local, "pid", None) == pid and local.connection is not None:
            return local.connection  # type: ignore[no-any-return]
        # Used by its own thread only; closed by the store's finalizer, in any thread.
        connection = sqlite3.connect(
            self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False
        )
        connection.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("PRAGMA synchronous = NORMAL")
        connection.execute(
            "CREATE TABLE IF NOT EXISTS summaries (key TEXT PRIMARY KEY, value TEXT NOT NULL, "
            "stored REAL NOT NULL, used REAL NOT NULL)"
        )
        connection.execute("CREATE INDEX IF NOT EXISTS summaries_used ON summaries (used)")
        connection.execute("CREATE INDEX IF NOT EXISTS summaries_stored ON summaries (stored)")
        local.connection, local.pid = connection, pid
        with self._lock:
            self._opened.append((pid, connection))
        return connection

    def close(self) -> None:
        """Close the calling thread's connection (the next use opens another).

        Every connection the store opened is closed when the store is collected,
        or at the interpreter's exit.
        """
        connection = getattr(self._local, "connection", None)
        if connection is not None and getattr(self._local, "pid", None) == os.getpid():
            self._local.connection = None
            with self._lock:
                self._opened[:] = [(p, c) for p, c in self._opened if c is not connection]
            connection.close()

    def _kept_between(self, now: float) -> Tuple[float, float]:
        """The stamps of the entries that have not expired: within ``ttl`` of now, not after it."""
        if self.ttl is None:
            return -math.inf, math.inf
        return now - self.ttl, now

    def get(self, key: str) -> Optional[str]:
        """The summary stored under ``key``, or ``None`` (also once it expired)."""
        return self.get_many([key])[0]

    def get_many(self, keys: Sequence[str]) -> List[Optional[str]]:
        """The summaries stored under ``keys``, ``None`` for each missing one, in one query.

        A row that does not hold text is returned as it is (a call treats it as a miss).
        """
        connection = self._connection()
        now = time.time()
        found: Dict[str, Any] = {}
        stale: List[str] = []
        for start in range(0, len(keys), _CHUNK):
            chunk = list(keys[start : start + _CHUNK])
            rows = connection.execute(
                f"SELECT key, value, used FROM summaries WHERE key IN "
                f"({', '.join('?' * len(chunk))}) AND stored BETWEEN ? AND ?",
                [*chunk, *self._kept_between(now)],
            ).fetchall()
            for key, value, used in rows:
                found[key] = value
                if used < now - _TOUCH_SECONDS:
                    stale.append(key)
        if stale:
            # Best effort: the order of eviction is not worth failing a read for.
            with contextlib.suppress(sqlite3.OperationalError):
                connection.executemany(
                    "UPDATE summaries SET used = ? WHERE key = ?", [(now, key) for key in stale]
                )
        return [found.get(key) for key in keys]

    def put(self, key: str, value: str) -> str:
        """Store ``value`` under ``key`` unless it holds one; return what it holds.

        The insert, the read back and the trimming to ``max_entries`` are one
        transaction, taken with the write lock at its start, so concurrent
        writers of one key all return the first one's value. An expired entry,
        or one that does not hold text, does not count as stored first.
        """
        connection = self._connection()
        now = time.time()
        connection.execute("BEGIN IMMEDIATE")
        try:
            if self.ttl is not None:
                connection.execute(
                    "DELETE FROM summaries WHERE stored NOT BETWEEN ? AND ?",
                    self._kept_between(now),
                )
            connection.execute(
                "DELETE FROM summaries WHERE key = ? AND typeof(value) != 'text'", (key,)
            )
            inserted = connection.execute(
                "INSERT OR IGNORE INTO summaries (key, value, stored, used) VALUES (?, ?, ?, ?)",
                (key, value, now, now),
            ).rowcount
            (stored,) = connection.execute(
                "SELECT value FROM summaries WHERE key = ?", (key,)
            ).fetchone()
            if inserted and self.max_entries is not None:
                (count,) = connection.execute("SELECT count(*) FROM summaries").fetchone()
                if count > self.max_entries:
                    connection.execute(
                        "DELETE FROM summaries WHERE key IN "
                        "(SELECT key FROM summaries ORDER BY used LIMIT ?)",
                        (count - self.max_entries,),
                    )
            connection.execute("COMMIT")
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        return str(stored)

    def __len__(self) -> int:
        (count,) = self._connection().execute("SELECT count(*) FROM summaries").fetchone()
        return int(count)


class RedisStore:
    """Summaries in Redis, shared by a fleet.

    Each summary is one Redis string under ``prefix`` plus its key, written
    with ``SET ... NX`` (so the first writer wins) and an expiry of ``ttl``
    seconds; Redis's own ``maxmemory`` policy may bound it further. redis-py is
    imported when the store is built from a URL, so it is only needed by those
    who use it (``pip install redis``).

    Args:
        url: A Redis URL (``"redis://host:6379/0"``, ``"rediss://..."``,
            ``"unix:///path"``), or a ready client (``redis.Redis``, or any
            object with redis-py's ``get``, ``set`` and ``mget``).
        prefix: Put before every key, to share a database with other data.
        ttl: Seconds a summary is kept after it was stored; ``None`` keeps it
            until Redis evicts it. A week by default.
        socket_timeout: Seconds to wait for Redis when built from a URL, so an
            unreachable server fails a lookup (the call goes on) instead of
            hanging it; also the deadline of all the store's work in one call
            (``timeout``), from a URL or a client.

    Raises:
        TypeError, ValueError: A bad option.
        ImportError: A URL was given and redis-py is not installed.
    """

    def __init__(
        self,
        url: Any = "redis://localhost:6379/0",
        *,
        prefix: str = "ctx-compact:summary:",
        ttl: Optional[float] = 7 * 24 * 3600,
        socket_timeout: Optional[float] = DEFAULT_TIMEOUT,
    ) -> None:
        if not isinstance(prefix, str):
            raise must("prefix", "a str", prefix)
        _positive("ttl", ttl, (int, float))
        _positive("socket_timeout", socket_timeout, (int, float))
        self.prefix = prefix
        self.ttl = ttl
        self.socket_timeout = socket_timeout
        self.url: Optional[str] = None
        if isinstance(url, str):
            try:
                import redis
            except ImportError:
                raise ImportError(
                    "RedisStore needs redis-py to reach Redis: pip install redis"
                ) from None
            self.url = url
            self.client: Any = redis.Redis.from_url(url, socket_timeout=socket_timeout)
        elif all(callable(getattr(url, name, None)) for name in ("get", "set", "mget")):
            self.client = url
        else:
            raise must("url", "a Redis URL or a redis client", url)

    def __repr__(self) -> str:
        where = repr(self.url) if self.url is not None else repr(self.client)
        return f"RedisStore({where}, prefix={self.prefix!r}, ttl={self.ttl})"

    @property
    def timeout(self) -> Optional[float]:
        """The deadline of all the store's work in one call: ``socket_timeout``."""
        return self.socket_timeout

    def __reduce__(self) -> Any:
        if self.url is None:
            raise TypeError(
                "a RedisStore built from a client cannot be pickled (a client holds "
                "connections); build it from a URL to ship it to other processes"
            )
        return _redis_store, (self.url, self.prefix, self.ttl, self.socket_timeout)

    def get(self, key: str) -> Optional[str]:
        """The summary stored under ``key``, or ``None``; a value not UTF-8 as it is."""
        return self.get_many([key])[0]

    def get_many(self, keys: Sequence[str]) -> List[Optional[str]]:
        """The summaries stored under ``keys``, ``None`` for each missing one, in one ``MGET``.

        A value that is not UTF-8 text is returned as it is (a call treats it as a miss).
        """
        if not keys:
            return []
        return [_text(value) for value in self.client.mget([self.prefix + k for k in keys])]

    def put(self, key: str, value: str) -> str:
        """Store ``value`` under ``key`` unless it holds one; return what it holds.

        A value that is not UTF-8 text does not count as stored first: it is replaced.
        """
        name = self.prefix + key
        ex = None if self.ttl is None else max(1, round(self.ttl))
        encoded = value.encode("utf-8", "surrogatepass")
        if self.client.set(name, encoded, nx=True, ex=ex):
            return value
        stored = _text(self.client.get(name))
        if stored is not None and not isinstance(stored, str):
            # Two writers replacing it at once may each send their own text, once.
            self.client.set(name, encoded, ex=ex)
            return value
        # Expired between the two commands: nobody else's value stands, so ours does.
        return value if stored is None else stored


def _redis_store(
    url: str, prefix: str, ttl: Optional[float], socket_timeout: Optional[float]
) -> RedisStore:
    return RedisStore(url, prefix=prefix, ttl=ttl, socket_timeout=socket_timeout)


def _text(value: Any) -> Any:
    """A Redis reply as text: bytes decoded; what is not UTF-8 text stays as it is."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        try:
            return bytes(value).decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            return value
    return value


def check_store(store: object) -> None:
    """Raise ``TypeError`` unless ``store`` is ``None`` or has ``get`` and ``put``."""
    if store is not None and not isinstance(store, SummaryStore):
        raise must(
            "store",
            "None or an object with get(key) and put(key, value) methods (a SQLiteStore, "
            "a RedisStore or your own SummaryStore)",
            store,
        )
