"""Summaries that outlive the call: reused for the same cut, rolled on from the previous one.

A summary is stored under a key of the summarizer, the summary role, the head's
end and the digest of the messages before the cut (``_prefix``), so the same cut
is the same key in every process; a rolling summarizer is given the summary of
the longest earlier prefix stored. The sequence is a generator of steps (look
up, summarise, keep) that the interceptor's shells drive. What a store answers
is checked here, and a store that raised or spent its ``timeout`` is not asked
again in the call (``Visit``). See docs/summaries.md.
"""

from __future__ import annotations

import hashlib
import inspect
import logging
import time
from functools import partial
from typing import (
    Any,
    Callable,
    Dict,
    Generator,
    List,
    Mapping,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
    Union,
)

from ctx_compact._contract import check_summary

from ._callables import is_async_callable, qualified_name
from ._prefix import _digests
from ._store import MemoryStore, SummaryStore, store_timeout
from ._summary_usage import UsageSink

logger = logging.getLogger("ctx_compact.middleware")

# Boundaries looked up per round trip while searching for the previous summary.
_BATCH = 64
# Bumped when the key's recipe changes, so old entries are never read as new ones.
_KEY_VERSION = b"ctx-compact summary 1"


class Lookup(NamedTuple):
    """Read ``keys`` from the store; the reply is one value or ``None`` per key."""

    keys: Tuple[str, ...]


class Summarize(NamedTuple):
    """Call the summarizer; the reply is what it returned (awaited on async paths).

    ``request`` is what the summarizer is shown of the call being compacted
    (``CallRun.summary_request``), for a summarizer that takes it; ``usage`` counts what
    the summarizer's model calls report (``_state.SummarizerCall``).
    """

    dropped: List[Any]
    previous: Optional[str]
    request: Optional[Mapping[str, Any]] = None
    usage: Optional[UsageSink] = None


class Keep(NamedTuple):
    """Store ``summary`` under ``key``; the reply is the value the store holds afterwards."""

    key: str
    summary: str


Step = Union[Lookup, Summarize, Keep]
# The summary to insert (or None) and, when the summarizer failed, why.
Outcome = Tuple[Optional[str], Optional[str]]
Flow = Generator[Step, Any, Outcome]
# What a summarizer taking ``request`` is shown of the call, given the previous summary
# and where the messages it summarizes start (``CallRun.summary_request``).
Shown = Callable[[Optional[str], int], Optional[Mapping[str, Any]]]


class Visit:
    """The store's part in one call: one deadline for all its work, and what went wrong.

    Args:
        name: The called function, for log lines.
        store: The store.
        timeout: Seconds the store's work may take in the call, in all; ``None``
            for no limit.
    """

    def __init__(self, name: str, store: SummaryStore, timeout: Optional[float]) -> None:
        self.name = name
        self.store = store
        self.timeout = timeout
        self.spent = 0.0
        self.closed = False
        self.problems: List[str] = []

    @property
    def error(self) -> Optional[str]:
        """What went wrong with the store in this call (for ``store_error``), or ``None``."""
        return "; ".join(self.problems) or None

    def open(self) -> bool:
        """Whether the store may be asked again in this call (saying once why not)."""
        if not self.closed and self.timeout is not None and self.spent >= self.timeout:
            self.failed(
                f"its work took {self.spent:.2f} s in this call, past its timeout of "
                f"{self.timeout:g} s"
            )
        return not self.closed

    def failed(self, text: str) -> None:
        """The store raised or ran out of time: it is not asked again in this call."""
        self.problem(text)
        self.closed = True

    def problem(self, text: str) -> None:
        """Log ``text`` and keep it for the event (once, when the call meets it again)."""
        if text not in self.problems:
            logger.warning(
                "%s: summary store %r: %s; the call goes on", self.name, self.store, text
            )
            self.problems.append(text)


def _wrong(values: Any, count: int, method: str) -> Optional[str]:
    """Why ``values`` is not one value per key of ``count`` keys, or ``None`` when it is."""
    if isinstance(values, (str, bytes, bytearray)) or not isinstance(values, Sequence):
        return f"{method} returned {type(values).__name__}, not a list of {count} values"
    if len(values) != count:
        return f"{method} returned {len(values)} values for {count} keys"
    return None


def takes_keyword(summarize: Callable[..., Any], name: str) -> bool:
    """Whether ``summarize`` accepts a keyword argument ``name`` (read once)."""
    target = getattr(summarize, "__func__", summarize)
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):
        return False
    param = signature.parameters.get(name)
    return param is not None and param.kind in (param.KEYWORD_ONLY, param.POSITIONAL_OR_KEYWORD)


def takes_previous(summarize: Callable[..., Any]) -> bool:
    """Whether ``summarize`` accepts a keyword argument named ``previous`` (read once)."""
    return takes_keyword(summarize, "previous")


class Summaries:
    """The summaries of one interceptor's calls: where they are kept and how they are made.

    Args:
        summarize: The summarizer, sync or async.
        summary_role: The role of the inserted message (part of the key).
        store: Where summaries are kept; by default this interceptor's own memory.
    """

    def __init__(
        self, summarize: Callable[..., Any], summary_role: str, store: Optional[SummaryStore]
    ) -> None:
        self.summarize = summarize
        self.rolling = takes_previous(summarize)
        self._takes_request = takes_keyword(summarize, "request")
        self.store: SummaryStore = store if store is not None else MemoryStore()
        # The default store never blocks, so async calls need no worker thread for it.
        self._blocking = store is not None
        self._awaited = is_async_callable(summarize)
        get_many = getattr(self.store, "get_many", None)
        self._get_many: Callable[[Sequence[str]], List[Optional[str]]] = (
            get_many if callable(get_many) else self._one_by_one
        )
        # How a lookup reaches the store, as its problems name it.
        self._reads = "get_many" if callable(get_many) else "get"
        self._timeout = store_timeout(self.store)
        identity = f"{qualified_name(summarize)}\0{summary_role}\0{int(self.rolling)}"
        self._identity = _KEY_VERSION + b"\0" + identity.encode("utf-8", "surrogatepass")

    def visit(self, name: str) -> Visit:
        """The store's part in a new call of ``name``: its deadline starts unspent."""
        return Visit(name, self.store, self._timeout)

    def _one_by_one(self, keys: Sequence[str]) -> List[Optional[str]]:
        return [self.store.get(key) for key in keys]

    def task(self, step: Step) -> Tuple[Callable[..., Any], Tuple[Any, ...], bool]:
        """What carries out ``step``: a function, its arguments, and whether an async call
        runs it on a worker thread (a store that may block, a sync summarizer).

        A ``Keep`` stores its summary unless another writer stored one first, and
        its reply is the stored one; a ``Summarize`` passes ``previous`` to a
        rolling summarizer.
        """
        if isinstance(step, Lookup):
            return self._get_many, (step.keys,), self._blocking
        if isinstance(step, Keep):
            return self.store.put, (step.key, step.summary), self._blocking
        keywords: Dict[str, Any] = {}
        if self.rolling:
            keywords["previous"] = step.previous
        if self._takes_request:
            keywords["request"] = step.request
        summarize = partial(self.summarize, **keywords) if keywords else self.summarize
        return summarize, (step.dropped,), not self._awaited

    def _key(self, head_end: int, digest: bytes) -> str:
        material = b"%s\0%d\0%s" % (self._identity, head_end, digest)
        return hashlib.blake2b(material, digest_size=20).hexdigest()

    def flow(
        self,
        prefix: List[Any],
        head_end: int,
        boundaries: Sequence[int],
        visit: Visit,
        request: Optional[Shown] = None,
        usage: Optional[UsageSink] = None,
    ) -> Flow:
        """The summary of the cut after ``prefix``: the stored one, else a new one, stored.

        Args:
            prefix: The caller's messages before the cut (the cut is ``len(prefix)``).
            head_end: Where the kept head ends; ``prefix[head_end:]`` is dropped.
            boundaries: The group boundaries strictly between ``head_end`` and
                the cut, ascending: where earlier calls may have cut.
            visit: The store's part in this call, shared by the call's flows.
            request: What a summarizer that takes ``request`` is shown of the call,
                from the previous summary and where the summarized messages start.
            usage: Where the summarizer's usage is counted, shared by the call's flows.

        Yields:
            The steps for the shell to carry out, each answered with its reply.

        Returns:
            The summary (or ``None``) and the summarizer's failure (or ``None``).

        Raises:
            InvalidMessageError: The summarizer returned something other than a string.
        """
        cut = len(prefix)
        ends = [*boundaries, cut] if self.rolling else [cut]
        digests = _digests(prefix, ends)
        own = digests[-1]
        key = self._key(head_end, own) if own is not None else None
        if key is None:
            since, previous = head_end, None
        else:
            (stored,) = yield from self._read((key,), visit)
            if stored is not None:
                return stored, None
            since, previous = yield from self._previous(head_end, boundaries, digests, visit)
        try:
            shown = request(previous, since) if request and self._takes_request else None
            returned = yield Summarize(prefix[since:], previous, shown, usage)
        except Exception as exc:
            logger.warning(
                "%s: summarize raised %s; the call goes on without a summary and the next "
                "one tries again",
                visit.name,
                type(exc).__name__,
                exc_info=(type(exc), exc, exc.__traceback__),
            )
            return None, f"{type(exc).__name__}: {exc}"
        summary = check_summary(returned)
        if key is None:
            return summary, None
        return (yield from self._kept(key, summary, visit)), None

    def _previous(
        self,
        head_end: int,
        boundaries: Sequence[int],
        digests: List[Optional[bytes]],
        visit: Visit,
    ) -> Generator[Step, Any, Tuple[int, Optional[str]]]:
        """Where a rolling summarizer starts, and the stored summary of what came before.

        ``(head_end, None)`` when it is not rolling or nothing earlier is stored.
        """
        if not self.rolling:
            return head_end, None
        # Longest first: the newest summary covers the most of what is dropped now.
        earlier = [(b, d) for b, d in zip(boundaries, digests) if d is not None][::-1]
        for start in range(0, len(earlier), _BATCH):
            batch = earlier[start : start + _BATCH]
            keys = tuple(self._key(head_end, d) for _, d in batch)
            values = yield from self._read(keys, visit)
            hit = next(((b, v) for (b, _), v in zip(batch, values) if v is not None), None)
            if hit is not None:
                return hit
        return head_end, None

    def _kept(self, key: str, summary: str, visit: Visit) -> Generator[Step, Any, str]:
        """``summary`` stored under ``key``: the summary to send, another writer's if it won."""
        answered, stored = yield from self._ask(Keep(key, summary), visit)
        if not answered:
            return summary
        if not isinstance(stored, str):
            # The summary just made is sent; the next call with this cut makes another.
            visit.problem(f"put returned {type(stored).__name__}, not a str")
            return summary
        return stored

    def _read(
        self, keys: Tuple[str, ...], visit: Visit
    ) -> Generator[Step, Any, List[Optional[str]]]:
        """The values of ``keys``: ``None`` for each missing one, and for anything not a str."""
        misses: List[Optional[str]] = [None] * len(keys)
        answered, values = yield from self._ask(Lookup(keys), visit)
        if not answered:
            return misses
        wrong = _wrong(values, len(keys), self._reads)
        if wrong is not None:
            visit.problem(wrong)
            return misses
        found: List[Optional[str]] = [v if isinstance(v, str) else None for v in values]
        odd = [v for v in values if v is not None and not isinstance(v, str)]
        if odd:
            visit.problem(
                f"{self._reads} returned {type(odd[0]).__name__} for {len(odd)} of {len(keys)} "
                "keys, not a str or None",
            )
        return found

    def _ask(self, step: Step, visit: Visit) -> Generator[Step, Any, Tuple[bool, Any]]:
        """Whether the store answered ``step`` (not once closed for the call, nor when it
        raised), and its answer; its time is spent from the call's deadline."""
        if not visit.open():
            return False, None
        started = time.monotonic()
        try:
            return True, (yield step)
        except Exception as exc:
            visit.failed(f"{type(exc).__name__}: {exc}")
            return False, None
        finally:
            visit.spent += time.monotonic() - started
