"""Which sessions are active in the current context.

A context variable, so that tasks started inside a session and worker threads
started through anyio (which copy the context) see it, and other tasks and
threads do not. Its own module, so that the call path reads it without
importing the session module at call time.
"""

from __future__ import annotations

import contextvars
from typing import TYPE_CHECKING, Any, Optional, Tuple

if TYPE_CHECKING:  # pragma: no cover
    from ._cache import CountCache
    from ._session import CompactingSession

# Each entry pairs a session with the marker of the activation that pushed it.
# A context copied into a task outlives the block that set it (a task started
# inside the session into an outer task group): only entries whose activation
# is still the session's current one count as active.
Entries = Tuple[Tuple["CompactingSession", object], ...]
active: contextvars.ContextVar[Entries] = contextvars.ContextVar("ctx_compact_sessions", default=())


def active_sessions() -> Tuple[CompactingSession, ...]:
    """The sessions active in the current context, outermost first."""
    entries = active.get()
    if not entries:
        return ()
    return tuple(session for session, entry in entries if session._entry is entry)


def cache_for(count_tokens: Optional[Any]) -> Optional[CountCache]:
    """The innermost active session's count cache for ``count_tokens``, if any."""
    sessions = active_sessions()
    return sessions[-1]._cache(count_tokens) if sessions else None


def calibration() -> float:
    """The factor from estimated to provider tokens of the innermost calibrating session.

    ``1.0`` when no active session calibrates or it has no provider figures yet.
    """
    for session in reversed(active_sessions()):
        if session._calibrate:
            return session.calibration
    return 1.0
