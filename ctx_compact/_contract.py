"""The core's contract with the layers above it: the middleware and the command line.

Every name they use from the core that is not public API is re-exported here, and they import
it from here only, so the core's modules can change shape without reaching into them. Public
names have one path, ``ctx_compact``; nothing in the core imports this module's users.
"""

from __future__ import annotations

from ._breakdown import tally
from ._checks import (
    check_callable,
    check_flag,
    check_keep,
    check_max_tokens,
    check_messages,
    check_summary,
    check_summary_role,
    check_target_tokens,
    must,
)
from ._clearing import ThinkingClearing, ToolResultClearing
from ._compact import Compaction, MessageRow, measure, pinned_groups, prepare
from ._defaults import KEEP_HEAD, KEEP_RESULTS, KEEP_TAIL, REPAIR_PLACEHOLDER
from ._grouping import group_bounds
from ._media import MEDIA_AWARE, media_parts
from ._pairing import pairing_problems
from ._tokens import (
    ENCODER,
    CountTokens,
    SpecCounter,
    compact_json,
    count_all,
    count_value,
    default_count_tokens,
    prefix_sums,
    tokens_of_units,
    utf16_length,
)
from ._truncating import ToolResultTruncation
from ._views import message_views
from .formats import OPENS_TURN, step
from .formats._shapes import sdk_dump
from .formats.responses import CALL_OUTPUTS

__all__ = [
    "CALL_OUTPUTS",
    "ENCODER",
    "KEEP_HEAD",
    "KEEP_RESULTS",
    "KEEP_TAIL",
    "MEDIA_AWARE",
    "OPENS_TURN",
    "REPAIR_PLACEHOLDER",
    "Compaction",
    "CountTokens",
    "MessageRow",
    "SpecCounter",
    "ThinkingClearing",
    "ToolResultClearing",
    "ToolResultTruncation",
    "check_callable",
    "check_flag",
    "check_keep",
    "check_max_tokens",
    "check_messages",
    "check_summary",
    "check_summary_role",
    "check_target_tokens",
    "compact_json",
    "count_all",
    "count_value",
    "default_count_tokens",
    "group_bounds",
    "measure",
    "media_parts",
    "message_views",
    "must",
    "pairing_problems",
    "pinned_groups",
    "prefix_sums",
    "prepare",
    "sdk_dump",
    "step",
    "tally",
    "tokens_of_units",
    "utf16_length",
]
