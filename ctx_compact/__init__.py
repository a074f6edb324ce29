"""Trim a message list to a token budget without ever orphaning a tool result.

The core is synchronous, depends only on the standard library, and never
mutates its input. The middleware (``budgeted``, ``CompactingSession``, ...)
is the separate ``middleware`` package, built on top of this one.
"""

from __future__ import annotations

from ._breakdown import CATEGORIES, Breakdown, BreakdownRow, breakdown
from ._clearing import (
    ClearedThinking,
    ClearedToolResult,
    ClearResult,
    clear_thinking,
    clear_tool_results,
)
from ._compact import (
    CompactResult,
    CompactResultWithSummary,
    acompact_with_summary,
    compact,
    compact_with_summary,
)
from ._errors import InvalidMessageError
from ._media import media_aware_counter
from ._pairing import PairingError, check_pairing
from ._problems import PairingProblem
from ._repair import RepairChange, RepairResult, repair_pairing
from ._tokens import estimate_tokens
from ._truncating import TruncatedToolResult, truncate_tool_results
from .batch import (
    CompactedConversation,
    InvalidConversationError,
    KeptIndices,
    compact_indices,
    compact_many,
)
from .counters import openai_chat_counter

__version__ = "0.2.0"

__all__ = [
    "CATEGORIES",
    "Breakdown",
    "BreakdownRow",
    "ClearResult",
    "ClearedThinking",
    "ClearedToolResult",
    "CompactResult",
    "CompactResultWithSummary",
    "CompactedConversation",
    "InvalidConversationError",
    "InvalidMessageError",
    "KeptIndices",
    "PairingError",
    "PairingProblem",
    "RepairChange",
    "RepairResult",
    "TruncatedToolResult",
    "acompact_with_summary",
    "breakdown",
    "check_pairing",
    "clear_thinking",
    "clear_tool_results",
    "compact",
    "compact_indices",
    "compact_many",
    "compact_with_summary",
    "estimate_tokens",
    "media_aware_counter",
    "openai_chat_counter",
    "repair_pairing",
    "truncate_tool_results",
]
