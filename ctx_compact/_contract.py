"""The core's contract with the layers above it: the middleware and the command line.

Everything they use from the core that is not public API is named here (and
nothing more, nor any public name: those have one path, ``ctx_compact``), and
they import it from here only, so the core's modules can change shape without
reaching into the layers above. The arrows point one way: nothing in the core
imports from this module's users.

- Checking options: ``check_max_tokens`` (also for another budget-like option,
  by name), ``check_target_tokens``, ``check_keep``, ``check_flag``,
  ``check_callable``, ``check_summary_role``, ``check_summary``,
  ``check_messages``; ``must`` builds any other check's error in the same
  words (``'name' must be ... (got ...)``, ``TypeError`` for a wrong type,
  ``ValueError`` for a wrong value of the right type).
- Measuring messages: ``message_views``, ``group_bounds``, ``count_all`` (each
  message's count) and ``measure`` (a whole list grouped and counted), giving
  the prefix sums and group boundaries ``Compaction`` takes;
  ``sdk_dump``, the JSON an SDK object is seen as; ``CALL_OUTPUTS``, the
  Responses call item types (what the model writes) and their outputs' types.
- Clearing before dropping: ``ToolResultClearing`` and ``ThinkingClearing`` (checked
  options, built once with ``.checked(...)``; ``.apply(messages, views, counts,
  max_tokens=..., count_tokens=...)`` clears from counts already made and returns
  the result with the output's per-message counts; clearing tool results keeps
  the group boundaries).
- Defaults: ``KEEP_HEAD``, ``KEEP_TAIL`` (``compact*``), ``KEEP_RESULTS``
  (``clear_tool_results``' ``keep``) and ``REPAIR_PLACEHOLDER``
  (``repair_pairing``'s ``placeholder``), for the CLI's and the middleware's own
  signatures.
- Deciding: ``Compaction`` (what to drop, from those arrays alone;
  ``target_tokens=`` and ``uncleared=`` for the step rule, whose ``began`` is
  the length of the prefix that made the reduction, for a caller that reports
  whether a cut stood) and ``prepare`` (check, measure and decide in one step,
  as ``compact`` does). ``prefix_sums``
  turns counts into what it takes;
  ``ENCODER`` is the estimator's JSON encoder (the text a message is counted as),
  ``compact_json`` its text;
  ``default_count_tokens`` is the estimator on any JSON value (a system prompt),
  ``count_value`` a value sent beside the messages counted by the options'
  counter; ``MEDIA_AWARE`` is the media-aware estimate with its defaults, the
  middleware's and the command line's default counting, a ``SpecCounter`` (the
  specification's estimate on any message without media); ``media_parts(view)``
  gives a message's media parts, so that a caller holding the specification's
  counts need ask it only of the messages that have some.
- Checking pairing after compacting: ``pairing_problems`` is ``check_pairing``
  of message views the compaction's grouping has already validated.
- Reporting: ``Compaction.rows`` gives one ``MessageRow`` per message (tokens,
  group, kept or dropped and why), what ``ctx-compact --explain`` prints;
  ``utf16_length`` and ``tokens_of_units`` are the estimator's length rule and
  its division, for a counter that must agree with it exactly (the command line
  counts the JSON text it writes anyway).
"""

from __future__ import annotations

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
from ._compact import Compaction, MessageRow, measure, prepare
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
from ._views import message_views
from .formats._shapes import sdk_dump
from .formats.responses import CALL_OUTPUTS

__all__ = [
    "CALL_OUTPUTS",
    "ENCODER",
    "KEEP_HEAD",
    "KEEP_RESULTS",
    "KEEP_TAIL",
    "MEDIA_AWARE",
    "REPAIR_PLACEHOLDER",
    "Compaction",
    "CountTokens",
    "MessageRow",
    "SpecCounter",
    "ThinkingClearing",
    "ToolResultClearing",
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
    "prefix_sums",
    "prepare",
    "sdk_dump",
    "tokens_of_units",
    "utf16_length",
]
