"""Repair: a history the provider accepts, made from one it would reject for its tool pairing.

One generic rule over the formats' interface: the pairing check finds the
problems; each format whose problems they are says how to repair them
(``Format.repair``, recording ``formats._edits.Edits``); the new list is built
from those edits; and the check runs again on it, until it finds nothing (a
repair can leave a new problem behind: a reasoning item whose follower was an
unanswered call that went). What a format does for each problem is written in
its module and in docs/repair.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple

from ._checks import check_flag, check_messages, check_placeholder
from ._defaults import REPAIR_PLACEHOLDER
from ._errors import InvalidMessageError
from ._grouping import group_bounds
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
        action: What was done:

            - ``"dropped_result"``: a tool result answering no call the provider
              would pair it with (a ``tool`` or ``function`` message, a
              ``tool_result`` block, a Responses output) was removed;
            - ``"dropped_call"``: a call without its result (a ``tool_calls``
              entry, a ``tool_use`` block, a Responses call item) was removed;
            - ``"answered_call"``: such a call was answered with the placeholder
              result instead (``answer_unanswered=True``);
            - ``"moved_result"``: a result the provider wants elsewhere was moved
              there (a ``tool`` or ``function`` message to right after its call,
              ``tool_result`` blocks to the start of their message, a Responses
              output to after its call);
            - ``"moved_text"``: Anthropic text blocks after an assistant's
              ``tool_use`` blocks were moved before them, so the results can
              follow the calls immediately;
            - ``"dropped_reasoning"``: a Responses ``reasoning`` item without its
              following item was removed;
            - ``"dropped_empty"``: a message left with nothing to send (an
              assistant message whose only calls went, a user message of
              dropped results) was removed;
            - ``"merged_message"``: a message was merged into the one before
              it, its blocks or parts after that message's (Bedrock, whose
              roles must alternate; a Gemini function-call turn after a model
              turn);
            - ``"dropped_message"``: a message the provider does not take
              where it is was removed (Bedrock: an assistant message opening
              the conversation).
        ids: The call ids concerned, as ``PairingProblem.ids`` gives them (for a
            legacy ``function`` message, its function's name).
        provider: The format's provider, as in ``PairingProblem.provider``.
        problem: The ``PairingProblem.code`` the change repairs.
        into: The position in the input of the message another one changed:
            for a ``"moved_result"`` that moved a whole message, the message it
            now follows; for a ``"merged_message"``, the message it went into;
            for an ``"answered_call"`` whose answer went into the next message
            (an Anthropic ``tool_result`` block, a Gemini ``function_response``
            part, a Bedrock ``toolResult`` block), that message. ``None``
            otherwise (a new message inserted, a block moved inside its own
            message).
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


def repair_pairing(
    messages: Sequence[Any],
    *,
    answer_unanswered: bool = False,
    placeholder: str = REPAIR_PLACEHOLDER,
) -> RepairResult:
    """Return a history the provider accepts from one it would reject for its tool pairing.

    Every problem ``check_pairing`` reports is repaired, in every format it
    reads (mixed freely):

    - a result answering no call is dropped, or moved where the provider
      wants it when the call it answers is in the list without its result:
      a Chat ``tool`` message after another message goes to the end of its
      call's run of ``tool`` messages, a legacy ``function`` message right
      after the ``function_call`` it answers, an Anthropic ``tool_result``
      block that is not at the start of the next message to its start, a
      Responses output before its call to after the call;
    - a call without its result is dropped (from its message's ``tool_calls``
      or content, or the whole Responses item), or, with
      ``answer_unanswered``, answered with a placeholder result holding
      ``placeholder``: a ``{"role": "tool", "tool_call_id": ..., "content":
      placeholder}`` message after the call's run of ``tool`` messages; a
      ``{"type": "tool_result", "tool_use_id": ..., "content": placeholder,
      "is_error": true}`` block at the start of the next user message (a new
      user message when the next one is not a user's); a Responses output
      item after the call's run of call items (``function_call_output``,
      ``custom_tool_call_output`` and ``local_shell_call_output`` with
      ``output: placeholder``, ``apply_patch_call_output`` with ``status:
      "failed"``, ``shell_call_output`` with one chunk whose ``stdout`` is the
      placeholder and whose outcome is exit code 1, ``program_output`` with
      ``result: placeholder``). A ``computer_call`` or ``tool_search_call`` is
      dropped even then: its output must be a screenshot or a tool list;
    - Anthropic text blocks after an assistant's ``tool_use`` blocks are moved
      before them (the results must follow the calls immediately);
    - Gemini: a function-call turn right after a model turn is merged into
      the first model turn of that run when a user turn comes before it;
      without one (opening the conversation, after another format's message)
      it loses its calls; a function-response turn not right after a call
      turn loses its responses, and a response turn answers its call turn
      one for one (the responses that answer no call go; the placeholder
      answer is a ``function_response`` part whose ``response`` is
      ``{"output": placeholder}``);
    - Bedrock: the assistant messages opening the conversation are dropped
      and two messages of one role in a row are merged, then ``toolResult``
      blocks answering no ``toolUse`` of the previous message go (the
      placeholder answer is a ``toolResult`` block with ``status: "error"``
      and the placeholder as its text, at the start of the next user message,
      or in a new one when the next message is not a user's);
    - a Responses ``reasoning`` item without its following item is dropped,
      with the reasoning items right before it;
    - a message left with nothing to send is dropped.

    The check runs again on the result until it finds nothing, so a repair
    that leaves a new problem (a reasoning item whose follower went) is
    repaired too. A history without problems is returned as it is: a new
    list of the same objects, and no changes. The work is linear in the
    length of the history, however it is broken.

    Args:
        messages: The message list (never mutated).
        answer_unanswered: Answer calls without a result with the placeholder
            result instead of dropping them.
        placeholder: The text of a placeholder result.

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
    answer: Optional[str] = None
    if check_flag(answer_unanswered, "answer_unanswered"):
        answer = check_placeholder(placeholder)
    else:
        check_placeholder(placeholder)
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
            return RepairResult(current, changes, first)
        edits = Edits(views)
        reported = set(problems)
        for fmt in FORMATS:
            # Each format repairs what it reported (under any provider's name: Chat's
            # Ollama problems too), of what the check reports.
            own = [p for p in fmt.problems(views) if p in reported]
            if own:
                fmt.repair(views, own, edits, answer)
        if not edits:
            break
        done = sorted(edits.changes, key=lambda c: c.at)  # stable: a message's in order
        changes.extend(
            RepairChange(
                origin[c.at],
                c.action,
                c.ids,
                c.provider,
                c.problem,
                None if c.into is None else origin[c.into],
            )
            for c in done
        )
        current, origin = _applied(edits, current, origin)
        try:
            views = message_views(current)
            group_bounds(views)
            problems = pairing_problems(views)
        except InvalidMessageError as error:
            # A repair made a message no format reads (a bug): named by where it came from.
            at = None if error.index is None else origin[error.index]
            raise InvalidMessageError(f"after repair: {error.reason}", at) from error
    if not problems:  # the last pass the bound allows repaired the last problem
        return RepairResult(current, changes, first)
    raise PairingError(problems)  # no format repairs these: a bug, said rather than hidden


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
            if new is None:  # a moved message, as it is
                out.append(messages[source])
            else:
                out.append(new)
            came.append(origin[source])
    return out, came
