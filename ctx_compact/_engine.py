"""The core's contract with the layers above it: the middleware and the command line.

Everything they use from the core that is not public API is named here, and
they import it from here only, so the core's modules can change shape without
reaching into the layers above. The arrows point one way: nothing in the core
imports from this module's users.

- Checking options: ``check_max_tokens``, ``check_keep``, ``check_callable``,
  ``check_summary_role``, ``check_summary``, ``check_messages``.
- Measuring messages: ``message_views``, ``group_bounds``, ``count_all`` (for
  the part of a list not seen before) and ``measure`` (a whole list from
  scratch), giving the prefix sums and group boundaries ``Compaction`` takes;
  ``regroup_from`` says where an incremental caller must group afresh;
  ``sdk_dump``, the JSON an SDK object is seen as.
- Deciding: ``Compaction`` (what to drop, from those arrays alone) and
  ``prepare`` (check, measure and decide in one step, as ``compact`` does).
"""

from __future__ import annotations

from ._checks import (
    check_callable,
    check_keep,
    check_max_tokens,
    check_messages,
    check_summary,
    check_summary_role,
)
from ._compact import Compaction, Summarize, measure, prepare
from ._grouping import group_bounds, regroup_from
from ._tokens import CountTokens, count_all
from ._views import message_views, sdk_dump

__all__ = [
    "Compaction",
    "CountTokens",
    "Summarize",
    "check_callable",
    "check_keep",
    "check_max_tokens",
    "check_messages",
    "check_summary",
    "check_summary_role",
    "count_all",
    "group_bounds",
    "measure",
    "message_views",
    "prepare",
    "regroup_from",
    "sdk_dump",
]
