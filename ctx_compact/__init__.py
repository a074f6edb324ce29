"""Trim a message list to a token budget without ever orphaning a tool result.

The core is synchronous, depends only on the standard library, and never
mutates its input. The middleware names (``budgeted``, ``CompactingSession``,
``CompactionEvent``, ``BudgetExceededError``, ``log_compaction``) are also
importable from here; they load the ``middleware`` package (and with it wrapt
and anyio) only when first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._compact import (
    CompactResult,
    CompactResultWithSummary,
    acompact_with_summary,
    compact,
    compact_with_summary,
)
from ._errors import InvalidMessageError
from ._pairing import PairingError, PairingProblem, check_pairing
from ._tokens import estimate_tokens
from .counters import openai_chat_counter

if TYPE_CHECKING:  # pragma: no cover
    from middleware import (
        BudgetExceededError,
        CompactingSession,
        CompactionEvent,
        UnpairedMessagesError,
        budgeted,
        log_compaction,
    )

__version__ = "0.2.0"

_MIDDLEWARE_NAMES = frozenset(
    {
        "BudgetExceededError",
        "CompactingSession",
        "CompactionEvent",
        "UnpairedMessagesError",
        "budgeted",
        "log_compaction",
    }
)


def __getattr__(name: str) -> Any:
    # Lazy, so that `import ctx_compact` alone loads neither wrapt nor anyio.
    if name in _MIDDLEWARE_NAMES:
        import middleware

        return getattr(middleware, name)
    raise AttributeError(f"module 'ctx_compact' has no attribute {name!r}")


__all__ = [
    "BudgetExceededError",
    "CompactResult",
    "CompactResultWithSummary",
    "CompactingSession",
    "CompactionEvent",
    "InvalidMessageError",
    "PairingError",
    "PairingProblem",
    "UnpairedMessagesError",
    "acompact_with_summary",
    "budgeted",
    "check_pairing",
    "compact",
    "compact_with_summary",
    "estimate_tokens",
    "log_compaction",
    "openai_chat_counter",
]
