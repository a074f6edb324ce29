"""Repair: a history the provider accepts, made from one it would reject for its tool pairing.

The pairing check finds the problems, each format repairs its own (``Format.repair``, recording
``formats._edits.Edits``), the new list is built from those edits, and the check runs again on
it until it finds nothing (docs/repair.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple

from ._checks import check_flag, check_messages, check_placeholder
from ._defaults import REPAIR_PLACEHOLDER
from ._errors import InvalidMessageError
from ._grouping import group_bounds
from ._option_docs import with_option_docs
from ._pairing import PairingError, pairing_problems
from ._problems import PairingProblem
from ._views import message_views
from .formats import FORMATS
from .formats._edits import Edits


@dataclass(frozen=True)
class RepairChange:
    """One change ``repair_pairing`` made.

    Attributes:
        index: The position, in the input, of the message or item changed: the
            one dropped, moved or rebuilt; for an ``"answered_call"``, the
            message holding the call that was answered.
        action: What was done: ``"dropped_result"`` (a result answering no call),
            ``"dropped_call"`` (a call without its result), ``"answered_call"`` (such
            a call answered with the placeholder), ``"moved_result"`` (a result moved
            where the provider wants it), ``"moved_text"`` (Anthropic text blocks
            moved before the ``tool_use`` blocks), ``"dropped_reasoning"`` (a
            ``reasoning`` item without its following item), ``"dropped_empty"`` (a
            message left with nothing to send), ``"merged_message"`` (merged into the
            message before it, where roles must alternate) or ``"dropped_message"`` (a
            message the provider does not take where it is).
        ids: The call ids concerned, as ``PairingProblem.ids`` gives them (for a
            legacy ``function`` message, its function's name).
        provider: The format's provider, as in ``PairingProblem.provider``.
        problem: The ``PairingProblem.code`` the change repairs.
        into: The position in the input of the other message the change went into:
            the one a moved message now follows, the one a merged message went into,
            the one that received a placeholder answer block; ``None`` otherwise.
    """

    index: int
    action: str
    ids: Tuple[str, ...]
    provider: str
    problem: str
    into: Optional[int] = None


@dataclass(frozen=True)
class RepairResult:
    """What ``repair_pairing`` returns.

    Attributes:
        messages: The repaired list. Messages that were not changed are the
            caller's own objects, in order; a changed message is a new dict; a
            placeholder answer is a new dict.
        changes: Every change, in the order it was made (``RepairChange``).
        problems: The pairing problems of the input (``check_pairing(messages)``):
            what was repaired. ``check_pairing(result.messages)`` is empty.
    """

    messages: List[Any]
    changes: List[RepairChange]
    problems: List[PairingProblem]

    @property
    def changed(self) -> bool:
        """Whether anything was changed (the input had pairing problems)."""
        return bool(self.changes)


@with_option_docs(
    answer_unanswered="Answer calls without a result with the placeholder result instead of "
    "dropping them.",
    placeholder="The text of a placeholder result.",
)
def repair_pairing(
    messages: Sequence[Any],
    *,
    answer_unanswered: bool = False,
    placeholder: str = REPAIR_PLACEHOLDER,
) -> RepairResult:
    """Return a history the provider accepts from one it would reject for its tool pairing.

    Every problem ``check_pairing`` reports is repaired, in every format it reads
    (mixed freely): a result answering no call is moved where the provider wants
    it when its call is in the list, else dropped; a call without its result is
    dropped, or answered with a placeholder result (``answer_unanswered``); Anthropic
    text after ``tool_use`` blocks moves before them; Gemini and Bedrock turns out of
    their order are merged or lose their calls; a Responses ``reasoning`` item
    without its following item goes; and a message left with nothing to send goes.
    docs/repair.md says what each format does. The check runs again on the result
    until it finds nothing; a history without problems comes back as a new list of
    the same objects. The work is linear in the length of the history.

    Returns:
        A ``RepairResult``: the repaired messages, every change
        (``RepairChange``) and the input's problems.

    Raises:
        TypeError: ``messages`` is not a sequence, ``answer_unanswered`` is not
            a bool, or ``placeholder`` is not a string.
        ValueError: ``placeholder`` is empty.
        InvalidMessageError: A message is malformed, as for ``check_pairing``;
            the error names its index in ``messages`` (as it would name a
            message a repair made that no format reads, a bug: by the input
            message it was made from).
        PairingError: A problem no format knows how to repair (a bug: every
            problem ``check_pairing`` reports has a repair).
    """
    answering = check_flag(answer_unanswered, "answer_unanswered")
    text = check_placeholder(placeholder)
    answer = text if answering else None
    current = list(check_messages(messages))
    views = message_views(current)
    group_bounds(views)  # validates every message exactly as compaction does
    problems = first = pairing_problems(views)
    origin = list(range(len(current)))
    changes: List[RepairChange] = []
    # Each pass repairs what the check found and what that repair leaves behind in the
    # same format (a run of reasoning items, Gemini turns read in one walk), so a few
    # passes do (a dropped call's reasoning item takes a second): each pass is linear,
    # and so is the repair. A bound that is never reached stops a loop.
    for _ in range(3 * len(current) + 3):
        if not problems:
            break
        edits = _one_pass(views, problems, answer)
        if not edits:
            break
        done = sorted(edits.changes, key=lambda c: c.at)  # stable: a message's in order
        for c in done:
            into = None if c.into is None else origin[c.into]
            changes.append(RepairChange(origin[c.at], c.action, c.ids, c.provider, c.problem, into))
        current, origin = _applied(edits, current, origin)
        views, problems = _checked_again(current, origin)
    if problems:  # no format repairs these: a bug, said rather than hidden
        raise PairingError(problems)
    return RepairResult(current, changes, first)


def _one_pass(
    views: Sequence[Mapping[str, Any]], problems: List[PairingProblem], answer: Optional[str]
) -> Edits:
    """Each format's repairs of what it reported (under any provider's name: Chat's Ollama
    problems too), of ``problems``."""
    edits = Edits(views)
    reported = set(problems)
    for fmt in FORMATS:
        own = [p for p in fmt.problems(views) if p in reported]
        if own:
            fmt.repair(views, own, edits, answer)
    return edits


def _checked_again(
    current: List[Any], origin: List[int]
) -> Tuple[Sequence[Mapping[str, Any]], List[PairingProblem]]:
    """The views and the pairing problems of a repaired list."""
    try:
        views = message_views(current)
        group_bounds(views)
        return views, pairing_problems(views)
    except InvalidMessageError as error:
        # A repair made a message no format reads (a bug): named by where it came from.
        at = None if error.index is None else origin[error.index]
        raise InvalidMessageError(f"after repair: {error.reason}", at) from error


def _applied(edits: Edits, messages: List[Any], origin: List[int]) -> Tuple[List[Any], List[int]]:
    """The list the edits make, and where each of its messages came from in the input."""
    out: List[Any] = []
    came: List[int] = []
    dropped = edits.dropped
    for i, message in enumerate(messages):
        if i not in dropped:
            out.append(edits.message(i, message))
            came.append(origin[i])
        for source, new in edits.after.get(i, ()):
            out.append(messages[source] if new is None else new)  # None: moved as it is
            came.append(origin[source])
    return out, came
