"""Digests of a history's prefix: the same bytes for the same messages, in every process.

A summary is kept under the content of everything before its cut (see
``_summaries``): the messages as the estimator serialises them, or as they
pickle, for content that JSON cannot hold. The cut itself needs no memory:
with ``target_tokens`` it is the core's step rule, a function of the history
alone.
"""

from __future__ import annotations

import hashlib
import io
import pickle
from typing import Any, List, Optional, Sequence

from ctx_compact._contract import ENCODER, message_views

# Fixed, not pickle.DEFAULT_PROTOCOL, so that a digest does not change with the Python version.
_PICKLE_PROTOCOL = 4


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
