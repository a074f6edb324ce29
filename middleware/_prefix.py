"""Keeping the prompt's prefix still: the cut of each conversation, remembered across calls.

Providers bill a re-sent prompt prefix at a fraction of the price, but only
when it is the same, byte for byte. A history compacted afresh on every call
drops a little more at the front each time, so its prefix changes on almost
every call. With ``target_tokens``, the cut made for a conversation is
remembered and made again while the history still fits ``max_tokens``; only
when it no longer fits is the history compacted again, down to
``target_tokens``, leaving room for the calls that follow.

A conversation is recognised by the content of everything up to its cut: the
cut is reused only for a history whose messages before the cut are, as the
estimator serialises them (or as they pickle, for content that JSON cannot
hold), exactly those of the call that made it. A history
edited before the cut is compacted afresh, and two users whose histories share
that prefix rightly share the cut. Only digests are kept, never messages.
"""

from __future__ import annotations

import hashlib
import io
import pickle
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple

from ctx_compact._engine import ENCODER, Compaction, message_views

# Conversations remembered per interceptor; the least recently used is forgotten first.
REMEMBERED_CUTS = 256
# Fixed, not pickle.DEFAULT_PROTOCOL, so that a digest does not change with the Python version.
_PICKLE_PROTOCOL = 4


@dataclass(frozen=True)
class Cut:
    """A cut made for a conversation, and the summary inserted with it."""

    head_end: int
    cut: int
    summary: Optional[str]


def _digests(messages: Sequence[Any], ends: Sequence[int]) -> List[Optional[bytes]]:
    """The digest of ``messages[:end]`` for each of ``ends`` (ascending), in one pass.

    ``None`` for a prefix holding a message that cannot be serialised at all:
    such a history is never recognised, so it is compacted afresh.
    """
    views = message_views(messages)
    digest = hashlib.blake2b(digest_size=16)
    out: List[Optional[bytes]] = []
    done = 0
    for end in ends:
        for i in range(done, end):
            line = _line(views[i])
            if line is None:
                return out + [None] * (len(ends) - len(out))
            digest.update(line)
        done = end
        out.append(digest.copy().digest())
    return out


def _line(view: Any) -> Optional[bytes]:
    """One message's part of a digest: its JSON, else its pickle; ``None`` when neither.

    A newline cannot occur inside the compact JSON, so it ends a message. Content
    that JSON cannot hold is allowed with a custom ``count_tokens`` (a ``datetime``,
    ``bytes``): such a message is its pickle, which names each value's type and
    is the same bytes in every process, behind a NUL byte (which compact JSON
    never starts with) and its length, so that no two messages' parts run together.
    """
    try:
        return ENCODER.encode(view).encode("utf-8", "surrogatepass") + b"\n"
    except (TypeError, ValueError, RecursionError):
        pass
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, protocol=_PICKLE_PROTOCOL)
    pickler.fast = True  # no memo: equal values, equal bytes, however they share objects
    try:
        pickler.dump(view)
    except Exception:  # a lambda, a lock, a circular value, a failing __reduce__
        return None
    pickled = buffer.getvalue()
    return b"\0" + len(pickled).to_bytes(8, "big") + pickled


class CutMemory:
    """The cuts of recent conversations, for one intercepted callable.

    Args:
        size: How many conversations are remembered.
    """

    def __init__(self, size: int = REMEMBERED_CUTS) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._cuts: OrderedDict[bytes, Cut] = OrderedDict()

    def __len__(self) -> int:
        with self._lock:
            return len(self._cuts)

    def find(self, plan: Compaction) -> Optional[Cut]:
        """The remembered cut that applies to ``plan``'s messages, if any.

        It applies when the messages before it are unchanged and it is still a
        group boundary between the kept head and tail.
        """
        with self._lock:
            candidates = [c for c in self._cuts.values() if c.head_end == plan.head_end]
        usable = sorted(
            {c.cut: c for c in candidates if plan.can_cut_at(c.cut) and c.cut > c.head_end}.items()
        )
        if not usable:
            return None
        digests = _digests(plan.messages, [end for end, _ in usable])
        with self._lock:
            # The longest matching prefix is the most specific conversation.
            for digest, (_, cut) in reversed(list(zip(digests, usable))):
                if digest is not None and self._cuts.get(digest) == cut:
                    self._cuts.move_to_end(digest)
                    return cut
        return None

    def remember(self, plan: Compaction, cut: int, summary: Optional[str]) -> None:
        """Remember that ``plan``'s messages were cut at ``cut`` (with ``summary``)."""
        if cut <= plan.head_end:
            return
        (digest,) = _digests(plan.messages, [cut])
        if digest is None:
            return
        with self._lock:
            self._cuts[digest] = Cut(plan.head_end, cut, summary)
            self._cuts.move_to_end(digest)
            while len(self._cuts) > self._size:
                self._cuts.popitem(last=False)


def steer(
    plan: Compaction, target: Compaction, memory: CutMemory
) -> Tuple[Compaction, Optional[Cut]]:
    """Choose the cut for this call: the remembered one while it fits, else the target's.

    Args:
        plan: The specification's decision at ``max_tokens``.
        target: The same messages decided at ``target_tokens``.
        memory: The conversations' remembered cuts.

    Returns:
        The decision to use, and the remembered cut when it was reused (its
        summary must then be reused too, to keep the prefix identical).
    """
    remembered = memory.find(plan)
    if remembered is not None and plan.tokens_after_cut(remembered.cut) <= plan.max_tokens:
        return plan.cutting_at(remembered.cut), remembered
    if plan.cut == plan.head_end:
        return plan, None  # fits whole: nothing to drop, the prefix is the history itself
    # The target's cut, judged against the real budget: a history that cannot get
    # down to target_tokens still fits when it gets under max_tokens.
    return plan.cutting_at(max(target.cut, plan.cut)), None
