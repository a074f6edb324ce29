"""A session's memory of messages it has already counted.

Chatbots re-send a growing history on every turn, and a stateless server
rebuilds it from storage for every request (equal messages, new objects). A
``CountCache`` keeps a few conversations ("lines"), each a snapshot of every
message it counted with the messages' prefix token sums and group boundaries.
On the next call the line sharing the longest unchanged prefix with the new
list is found; only the messages after that prefix are grouped and counted.

A conversation is recognised by its content: lines are filed under a key made
from the role and text of their first two messages, so a history decoded anew
with ``json.loads`` finds the line its previous request left. Several lines may
share a key (conversations that open alike); the one with the longest unchanged
prefix wins. At most ``conversations`` lines are kept, the least recently used
forgotten first.

"Unchanged" is exact, never stale, and costs C-speed comparisons:

- A message made only of dicts, lists, tuples, strings and ``None`` is kept as
  a copy of its containers (sharing the immutable strings) and compared with
  ``==``, which runs in C. The messages' own types are compared too, so a dict
  replaced by an equal ``OrderedDict`` is noticed. (Deeper down, ``==`` does
  not tell a dict from an equal ``OrderedDict``, or a str from an equal str
  subclass such as an enum member; both are sent, and counted by the default
  estimator and ``openai_chat_counter``, as the same JSON.)
- A message that also holds numbers (or booleans) is kept as its pickle, which
  writes ``1``, ``True`` and ``1.0`` differently, as it does ``0.0`` and
  ``-0.0``, and names the class of anything but the exact built-in types. It is
  compared by pickling the new message the same way, also in C. Such messages
  are also pickled in runs of ``_RUN`` (one list per run), and a run is checked
  with one call: a call's cost is then what pickling the bytes costs, not a
  call per message. A run that differs sends the check back to its first
  message: the run's messages before the changed one are counted again too,
  with the same figures.
- A message holding other mappings (``OrderedDict``, ``MappingProxyType``) or
  SDK objects (pydantic models) is kept as the pickle of a tagged form: each
  mapping with its type and its items in order, each SDK object with its type
  and the JSON the SDK sends for it (what is counted), all the way down. This
  form is built in Python on every call, as the SDK's dump is.
- A message holding anything else is never taken as unchanged: it is counted
  afresh on every call.

What a line keeps per message: the copy of its containers, or its pickle (and
its share of a run's pickle), and its type; per conversation, the prefix sums,
the group boundaries and where its provider's compaction items are. A line is
never changed once published: an update publishes a new one, which for a
history that only grew shares the old one's per-message records and appends to
them (under the lock, past the old line's length, which the old line never
reads), so a turn costs what its new messages cost, not a copy of the whole
history. A call reads lines with no lock held,
and ``count_tokens`` is called with no lock held too: it may itself make a
compacting call through the same cache.

The arrays handed out are exactly those a from-scratch pass computes.
"""

from __future__ import annotations

import io
import pickle
import threading
import weakref
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Mapping
from itertools import accumulate
from typing import Any, Callable, Dict, List, Optional, Tuple

from ctx_compact._contract import (
    CountTokens,
    count_all,
    group_bounds,
    measure,
    message_views,
    must,
    regroup_from,
    sdk_dump,
)

# Pickle rather than marshal: as fast for these values, and marshal's back-references
# depend on reference counts. Pickled in fast mode, which keeps no memo: the bytes
# then depend on the values alone, not on which of them are the same object (a
# history built by the application shares its string literals, one decoded by
# json.loads does not).
_PROTOCOL = 5
# How many leading messages make a conversation's key.
_KEY_MESSAGES = 2
# A list that departs from its line only in this many last messages (a reply
# streamed in, an edit near the end, a truncation) updates the line; one that
# departs earlier starts a line of its own.
_TAIL_EDITS = 8
# Messages compared by their pickle are also pickled this many at a time.
_RUN = 16

# What the first messages say (role, type, text), or their types: hashable either way.
_Key = Tuple[Any, ...]

# How a message is compared (see the module docstring).
_PLAIN = 0
_BYTES = 1
_TAGGED = 2
_NEVER = 3


class _Checked:
    """Stands in a line's list of copies for a message compared by its serialisation."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = None  # type: ignore[assignment]


_CHECKED = _Checked()


class _NotPlain(Exception):
    pass


class _Uncomparable(Exception):
    pass


def _copy_plain(value: Any) -> Any:
    """A copy of the containers of a value made of dicts, lists, tuples, str and None."""
    kind = type(value)
    if kind is str or value is None:
        return value
    if kind is dict:
        copy = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _NotPlain
            copy[key] = _copy_plain(item)
        return copy
    if kind is list:
        return [_copy_plain(item) for item in value]
    if kind is tuple:
        return tuple([_copy_plain(item) for item in value])
    raise _NotPlain


_EXACT_LEAVES = frozenset({str, int, float, bool, type(None)})


def _only_builtin(value: Any) -> bool:
    """Whether a value is made of the exact built-in JSON-like types only."""
    kind = type(value)
    if kind in _EXACT_LEAVES:
        return True
    if kind is dict:
        return all(type(k) in _EXACT_LEAVES and _only_builtin(v) for k, v in value.items())
    if kind is list or kind is tuple:
        return all(_only_builtin(item) for item in value)
    return False


def _type_tag(kind: type) -> Tuple[str, str, int]:
    return (kind.__module__, kind.__qualname__, id(kind))


def _tagged(value: Any) -> Any:
    """A picklable form of ``value`` made of built-in types, telling apart every type it holds.

    Only this function makes tuples, and it makes one for every value that is
    not an exact str, number, None, list or dict, so a tag cannot be mistaken
    for the caller's data.

    Raises:
        _Uncomparable: The value holds something not known to compare exactly.
    """
    kind = type(value)
    if kind in _EXACT_LEAVES:
        return value
    if kind is list:
        return [_tagged(item) for item in value]
    if kind is dict:
        return {_tagged(k): _tagged(v) for k, v in value.items()}
    if kind is tuple:
        return ("tuple", tuple([_tagged(item) for item in value]))
    if isinstance(value, Mapping):
        pairs = [_tagged(part) for item in value.items() for part in item]
        return ("mapping", _type_tag(kind), pairs)
    dumped = sdk_dump(value)
    if dumped is not None:
        # The JSON-mode dump holds exact built-in types only.
        return ("sdk", _type_tag(kind), dumped)
    raise _Uncomparable


def _snapshot(message: Any) -> Tuple[int, Any]:
    """How a message will be compared, and what it is compared with."""
    try:
        return _PLAIN, _copy_plain(message)
    except _NotPlain:
        pass
    except RecursionError:  # circular
        return _NEVER, None
    try:
        if _only_builtin(message):
            return _BYTES, _dumps(message)
        return _TAGGED, _dumps(_tagged(message))
    except Exception:  # circular, unserialisable, a failing model_dump: never equal
        return _NEVER, None


def _dumps(value: Any) -> bytes:
    """The pickle of ``value`` with no back-references: equal values, equal bytes.

    Raises:
        ValueError: ``value`` is circular.
        Exception: Whatever pickling ``value`` raises.
    """
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, _PROTOCOL)
    pickler.fast = True  # no memo (and a ValueError for a circular value)
    pickler.dump(value)
    return buffer.getvalue()


def _serialised(value: Any) -> Optional[bytes]:
    try:
        return _dumps(value)
    except Exception:  # no longer serialisable: changed
        return None


def _unchanged_tagged(message: Any, expected: bytes) -> bool:
    try:
        return _dumps(_tagged(message)) == expected
    except Exception:  # no longer serialisable: changed
        return False


def _same(a: List[Any], b: List[Any]) -> bool:
    try:
        return bool(a == b)
    except Exception:  # a value whose == raises or is ambiguous (arrays)
        return False


def _head(items: List[Any], count: int) -> List[Any]:
    """``items[:count]``, without the copy when that is all of it."""
    return items if count == len(items) else items[:count]


def _key(messages: List[Any]) -> _Key:
    """A conversation's key: what its first messages say, cheaply (a str is hashed in C).

    Only a hint that narrows the search: the lines found under it are compared
    message by message all the same, so two conversations sharing a key cost a
    comparison, never a wrong count.
    """
    parts: List[Any] = []
    for message in messages[:_KEY_MESSAGES]:
        kind = type(message)
        if kind is not dict:
            parts.append(kind)
            continue
        content = message.get("content")
        if type(content) is not str:
            content = type(content)
        part: Tuple[Any, ...] = (message.get("role"), message.get("type"), content)
        try:
            hash(part)
        except TypeError:  # an unhashable role or type: malformed, left for grouping to name
            part = (kind,)
        parts.append(part)
    return tuple(parts)


class _Columns:
    """A conversation's records, one entry per message, shared by the versions of its line.

    Only ever appended to, under the cache's lock, and only through the version
    that covers every entry; a version reads its first ``size`` entries, which
    never change, so no lock reads them.
    """

    __slots__ = ("copies", "exact", "exact_at", "others", "pre", "runs", "types")

    def __init__(self) -> None:
        self.copies: List[Any] = []  # plain copies; _CHECKED where compared by serialisation
        self.types: List[type] = []  # each message's type
        self.exact_at: List[int] = []  # where the messages compared by their pickle are
        self.exact: List[bytes] = []  # and their serialisations
        self.runs: List[Optional[bytes]] = []  # the pickle of each whole run of _RUN of them
        self.others: List[Tuple[int, int, Any]] = []  # (index, kind, tagged serialisation)
        self.pre: List[Any] = [0]  # prefix sums of the counts

    def head(self, size: int) -> _Columns:
        """New columns holding the entries of the first ``size`` messages."""
        head = _Columns()
        head.copies = self.copies[:size]
        head.types = self.types[:size]
        count = bisect_left(self.exact_at, size)
        head.exact_at = self.exact_at[:count]
        head.exact = self.exact[:count]
        head.runs = self.runs[: count // _RUN]
        head.others = self.others[: bisect_left(self.others, (size,))]
        head.pre = self.pre[: size + 1]
        return head

    def extend(self, added: _Columns) -> None:
        """Append ``added``'s entries, which follow these (its ``pre`` without the leading 0)."""
        self.copies.extend(added.copies)
        self.types.extend(added.types)
        self.exact_at.extend(added.exact_at)
        self.exact.extend(added.exact)
        self.runs.extend(added.runs)
        self.others.extend(added.others)
        self.pre.extend(added.pre)


class _Line:
    """One conversation as last counted: its first ``size`` entries of shared columns.

    A line is never changed once published; a longer version of the same
    conversation appends to the columns in place, past ``size``.
    """

    __slots__ = ("bounds", "cols", "key", "restarts", "size")

    def __init__(
        self, key: _Key, size: int, cols: _Columns, bounds: List[int], restarts: List[int]
    ) -> None:
        self.key = key
        self.size = size
        self.cols = cols
        self.bounds = bounds
        self.restarts = restarts  # the messages holding a provider's compaction item

    def equal_prefix(self, messages: List[Any]) -> int:
        """How many leading messages are == to their copies: at least the unchanged prefix."""
        known = min(self.size, len(messages))
        copies = self.cols.copies
        if _same(_head(messages, known), _head(copies, known)):
            keep = known
        else:
            # Binary search on prefix equality, comparing each message at most about twice.
            lo, hi = 0, known
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if _same(messages[lo:mid], copies[lo:mid]):
                    lo = mid
                else:
                    hi = mid - 1
            keep = lo
        return keep

    def unchanged_prefix(self, messages: List[Any], keep: int, now: List[type]) -> int:
        """How many of the first ``keep`` messages (an ``equal_prefix``) are unchanged.

        ``now`` is the messages' types, ``list(map(type, messages))``.
        """
        cols = self.cols
        types = cols.types
        if _head(now, keep) != _head(types, keep):
            keep = next(i for i in range(keep) if now[i] is not types[i])
        count = bisect_left(cols.exact_at, keep)
        if count:
            keep = _unchanged_pickled(messages, cols, count, keep)
        for index, kind, expected in cols.others:
            if index >= keep:
                break
            if kind == _NEVER or not _unchanged_tagged(messages[index], expected):
                return index
        return keep


def _unchanged_pickled(messages: List[Any], cols: _Columns, count: int, keep: int) -> int:
    """``keep``, or the first of the ``count`` messages compared by pickle that changed.

    Whole runs are pickled a run at a time; when a run differs, its first
    message is returned (a bound on the unchanged prefix, never past it).
    """
    where = cols.exact_at[:count]
    held = list(map(messages.__getitem__, where))
    runs = count // _RUN
    for number in range(runs):
        part = held[number * _RUN : (number + 1) * _RUN]
        if _serialised(part) != cols.runs[number]:
            return where[number * _RUN]
    rest = range(runs * _RUN, count)
    pickles = list(map(_serialised, map(held.__getitem__, rest)))
    if pickles != cols.exact[runs * _RUN : count]:
        return next(where[i] for i, a in zip(rest, pickles) if a != cols.exact[i])
    return keep


def _runs(messages: List[Any], where: List[int]) -> List[Optional[bytes]]:
    """The pickles of the whole runs of ``where``'s messages (which starts a run)."""
    out: List[Optional[bytes]] = []
    for number in range(len(where) // _RUN):
        part = [messages[i] for i in where[number * _RUN : (number + 1) * _RUN]]
        out.append(_serialised(part))  # None (never equal) if it fails under us
    return out


def _hold(count_tokens: Optional[CountTokens]) -> Callable[[], Optional[CountTokens]]:
    # Weakly where the counter allows it, so a session's cache does not keep alive a
    # counter nobody else holds (a counter built per request); its owner drops the cache.
    if count_tokens is None:
        return lambda: None
    try:
        return weakref.ref(count_tokens)
    except TypeError:
        return lambda: count_tokens


class CountCache:
    """Token counts and group boundaries remembered across calls, for one counter.

    Safe to share between threads; ``count_tokens`` is called with no lock
    held, so it may itself make a compacting call through the same cache.

    Args:
        count_tokens: The counter every figure in this cache comes from.
        conversations: How many conversations are remembered at once; the least
            recently used is forgotten first.

    Raises:
        TypeError: ``conversations`` is not an int.
        ValueError: ``conversations`` is less than 1.
    """

    def __init__(self, count_tokens: Optional[CountTokens], conversations: int = 8) -> None:
        if type(conversations) is not int:
            raise must("conversations", "an int of at least 1", conversations)
        if conversations < 1:
            raise must("conversations", "an int of at least 1", conversations, ValueError)
        self._counter = _hold(count_tokens)
        self._conversations = conversations
        self._lines: OrderedDict[int, _Line] = OrderedDict()  # by id, least recent first
        self._by_key: Dict[_Key, List[_Line]] = {}
        self._lock = threading.Lock()

    @property
    def count_tokens(self) -> Optional[CountTokens]:
        """The counter (``None`` for the default estimator, or once the counter is gone)."""
        return self._counter()

    def __len__(self) -> int:
        """How many conversations are remembered."""
        with self._lock:
            return len(self._lines)

    def clear(self) -> None:
        """Forget every conversation, releasing its snapshots."""
        with self._lock:
            self._lines.clear()
            self._by_key.clear()

    def arrays(
        self, messages: List[Any], restarts: Optional[List[int]] = None
    ) -> Tuple[List[Any], List[int]]:
        """Prefix token sums and group boundaries of ``messages``, as computed from scratch.

        ``restarts``, when given, gets what ``measure`` would give it: the
        messages holding a provider's compaction item.

        Returns:
            ``(pre, bounds)``, new lists, equal to ``measure(messages, count_tokens)``.

        Raises:
            InvalidMessageError: As ``compact`` would, naming the message index.
        """
        if not messages:
            return measure(messages, self.count_tokens, restarts)
        key = _key(messages)
        with self._lock:
            candidates = list(self._by_key.get(key, ()))
        # Lines under one key often share a long prefix (the same conversation edited,
        # or opening alike). Comparing with == is cheap; only the line promising the
        # longest prefix has its numbers and tagged messages checked, then the next
        # one only if it could still do better.
        line: Optional[_Line] = None
        keep = 0
        now = list(map(type, messages))
        promised = sorted(
            ((candidate.equal_prefix(messages), candidate) for candidate in candidates),
            key=lambda pair: pair[0],
            reverse=True,
        )
        for bound, candidate in promised:
            if line is not None and bound <= keep:
                break
            shared = candidate.unchanged_prefix(messages, bound, now)
            if line is None or shared > keep:
                line, keep = candidate, shared
        # Grouped and counted as the core does, through the messages' mapping views,
        # with no lock held: count_tokens may call back into this cache.
        old_bounds = line.bounds if line is not None else [0]
        if line is not None and keep == len(messages):
            # Nothing new: the list is the line or a prefix of it (a truncation,
            # an earlier state re-sent), which the line serves as it stands.
            self._touch(line)
            if keep == line.size:
                if restarts is not None:
                    restarts.extend(line.restarts)
                return line.cols.pre[: keep + 1], old_bounds[:]
        regroup_at = regroup_from(messages, old_bounds, keep)
        start = old_bounds[regroup_at]
        views = message_views(messages, start)
        found = [r for r in line.restarts if r < start] if line is not None else []
        bounds = old_bounds[:regroup_at] + group_bounds(views, start, found)
        if restarts is not None:
            restarts.extend(found)
        if line is not None and keep == len(messages):
            return line.cols.pre[: keep + 1], bounds
        counts = count_all(views, self.count_tokens, keep)
        sums = accumulate(counts, initial=line.cols.pre[keep] if line is not None else 0)
        next(sums)
        added = _Columns()
        added.pre = list(sums)
        added.types = now[keep:]  # the first keep types are the line's, checked above
        for index in range(keep, len(messages)):
            kind, value = _snapshot(messages[index])
            if kind == _PLAIN:
                added.copies.append(value)
                continue
            added.copies.append(_CHECKED)
            if kind == _BYTES:
                added.exact_at.append(index)
                added.exact.append(value)
            else:
                added.others.append((index, kind, value))
        if added.exact_at:
            known = bisect_left(line.cols.exact_at, keep) if line is not None else 0
            if (known + len(added.exact_at)) // _RUN > known // _RUN:
                # The line's entries past its last whole run start the next one.
                start = known // _RUN * _RUN
                base = line.cols.exact_at[start:known] if line is not None else []
                added.runs = _runs(messages, base + added.exact_at)
        cols = self._extend(line, keep, added)
        updated = _Line(key, len(messages), cols, bounds, found)
        follows = line is not None and keep > 0 and keep >= line.size - _TAIL_EDITS
        self._publish(updated, line if follows else None)
        return cols.pre[: len(messages) + 1], bounds[:]

    def _extend(self, line: Optional[_Line], keep: int, added: _Columns) -> _Columns:
        """The columns of ``line``'s first ``keep`` messages followed by ``added``.

        The line's own columns, appended to in place, when nothing was appended
        past this version yet (a history that grew since its last call: no copy
        of what the cache already holds); else a copy of the shared head.
        """
        with self._lock:
            if line is None:
                cols = _Columns()
            elif keep == line.size == len(line.cols.copies):
                cols = line.cols
            else:
                cols = line.cols.head(keep)
            cols.extend(added)
            return cols

    def _touch(self, line: _Line) -> None:
        with self._lock:
            if id(line) in self._lines:
                self._lines.move_to_end(id(line))

    def _publish(self, line: _Line, replaces: Optional[_Line]) -> None:
        with self._lock:
            if replaces is not None and self._lines.pop(id(replaces), None) is not None:
                self._forget(replaces)
            self._lines[id(line)] = line
            self._by_key.setdefault(line.key, []).append(line)
            while len(self._lines) > self._conversations:
                self._forget(self._lines.popitem(last=False)[1])

    def _forget(self, line: _Line) -> None:
        peers = self._by_key[line.key]
        peers.remove(line)
        if not peers:
            del self._by_key[line.key]
