"""The pairing validator: every tool-pairing problem a provider would reject a request for.

It reads the same shapes as the grouping (OpenAI Chat Completions, Anthropic
Messages, OpenAI Responses input items, SDK message models) and reports each
problem with the index, the ids and the provider's own wording.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from ._checks import check_messages
from ._errors import InvalidMessageError
from ._formats import CALL_OUTPUTS, OUTPUT_TYPES, call_ids, item_call_id, leading_results
from ._views import blocks, message_views

_OPENAI_ORPHAN = (
    "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
    "message with 'tool_calls'."
)
_OPENAI_UNKNOWN_ID = (
    "Invalid parameter: 'tool_call_id' of '{id}' not found in 'tool_calls' of previous message."
)
_OPENAI_MISSING = (
    "An assistant message with 'tool_calls' must be followed by tool messages responding "
    "to each 'tool_call_id'. The following tool_call_ids did not have response messages: {ids}"
)
_ANTHROPIC_MISSING = (
    "messages.{index}: `tool_use` ids were found without `tool_result` blocks immediately "
    "after: {ids}. Each `tool_use` block must have a corresponding `tool_result` block in "
    "the next message."
)
_ANTHROPIC_UNEXPECTED = (
    "messages.{index}.content.{block}: unexpected `tool_use_id` found in `tool_result` "
    "blocks: {ids}. Each `tool_result` block must have a corresponding `tool_use` block in "
    "the previous message."
)
_RESPONSES_NO_OUTPUT = "No tool output found for {what} {id}."
_RESPONSES_NO_CALL = "No tool call found for {what} output with call_id {id}."
_RESPONSES_REASONING = (
    "Item '{id}' of type 'reasoning' was provided without its required following item."
)


@dataclass(frozen=True)
class PairingProblem:
    """One reason a provider would reject the request.

    Attributes:
        index: The position of the offending message or item.
        code: A stable identifier of the kind of problem: ``"orphan_tool_result"``,
            ``"unknown_tool_call_id"``, ``"missing_tool_results"`` (OpenAI Chat),
            ``"missing_tool_result_blocks"``, ``"tool_result_not_at_start"``,
            ``"unexpected_tool_result"`` (Anthropic), ``"missing_call_output"``,
            ``"orphan_call_output"``, ``"reasoning_without_following_item"``
            (OpenAI Responses).
        ids: The tool call, tool use or item ids concerned.
        provider: ``"openai"``, ``"anthropic"`` or ``"openai-responses"``.
        message: The provider's own wording for the rejection.
    """

    index: int
    code: str
    ids: Tuple[str, ...]
    provider: str
    message: str

    def __str__(self) -> str:
        return f"message {self.index}: {self.message}"


class PairingError(ValueError):
    """Raised when a message list has pairing problems and the caller asked for an error.

    Attributes:
        problems: Every problem found, in message order.
    """

    def __init__(self, problems: Sequence[PairingProblem]) -> None:
        self.problems = tuple(problems)
        lines = "; ".join(str(p) for p in self.problems)
        super().__init__(f"{len(self.problems)} tool pairing problem(s): {lines}")

    def __reduce__(self) -> Tuple[Any, ...]:
        # Rebuilt from its problems, not from the formatted message (pickle, copy).
        return type(self), (self.problems,)


def _names(ids: Sequence[Any]) -> Tuple[str, ...]:
    return tuple(str(i) for i in ids)


def _chat_problems(views: Sequence[Mapping[str, Any]], out: List[PairingProblem]) -> None:
    # (assistant index, ids not answered, every id it called)
    open_calls: Optional[Tuple[int, List[Any], List[Any]]] = None
    answered_run = False  # inside the run of tool messages after an assistant's calls

    def close() -> None:
        if open_calls is not None and open_calls[1]:
            ids = _names(open_calls[1])
            out.append(
                PairingProblem(
                    open_calls[0],
                    "missing_tool_results",
                    ids,
                    "openai",
                    _OPENAI_MISSING.format(ids=", ".join(ids)),
                )
            )

    for i, message in enumerate(views):
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if not answered_run or open_calls is None:
                out.append(
                    PairingProblem(
                        i, "orphan_tool_result", _names([call_id]), "openai", _OPENAI_ORPHAN
                    )
                )
            elif call_id in open_calls[1]:
                open_calls[1].remove(call_id)
            elif call_id not in open_calls[2]:  # a repeated answer is accepted
                out.append(
                    PairingProblem(
                        i,
                        "unknown_tool_call_id",
                        _names([call_id]),
                        "openai",
                        _OPENAI_UNKNOWN_ID.format(id=call_id),
                    )
                )
            continue
        close()
        open_calls, answered_run = None, False
        if role == "assistant":
            ids = call_ids(message, i)
            if ids:
                calls = (c.get("id") for c in message.get("tool_calls") or ())
                order = list(dict.fromkeys(c for c in calls if c is not None))
                open_calls = (i, list(order), order)
                answered_run = True
    close()


def _is_block(block: Any, kind: str) -> bool:
    return isinstance(block, Mapping) and block.get("type") == kind


def _anthropic_problems(views: Sequence[Mapping[str, Any]], out: List[PairingProblem]) -> None:
    def missing(at: int, ids: Tuple[str, ...], index: int, code: str) -> PairingProblem:
        text = _ANTHROPIC_MISSING.format(index=at, ids=", ".join(ids))
        return PairingProblem(index, code, ids, "anthropic", text)

    pending: List[Any] = []  # tool_use ids of the previous message, an assistant's
    pending_at = -1
    reported = False  # the pending ids were already reported as unanswerable
    for i, message in enumerate(views):
        role = message.get("role")
        content = blocks(message)
        leading = leading_results(message) if role == "user" else []
        answered = [r.get("tool_use_id") for r in leading]
        if pending and not reported:
            unanswered = [u for u in pending if u not in answered]
            if unanswered:
                late = [
                    b.get("tool_use_id")
                    for b in content[len(leading) :]
                    if _is_block(b, "tool_result")
                ]
                if any(u in late for u in unanswered):
                    out.append(
                        missing(pending_at, _names(unanswered), i, "tool_result_not_at_start")
                    )
                else:
                    out.append(
                        missing(
                            pending_at, _names(unanswered), pending_at, "missing_tool_result_blocks"
                        )
                    )
        for k, block in enumerate(content):
            if _is_block(block, "tool_result") and block.get("tool_use_id") not in pending:
                use_id = block.get("tool_use_id")
                out.append(
                    PairingProblem(
                        i,
                        "unexpected_tool_result",
                        _names([use_id]),
                        "anthropic",
                        _ANTHROPIC_UNEXPECTED.format(index=i, block=k, ids=use_id),
                    )
                )
        pending, pending_at, reported = [], -1, False
        if role == "assistant":
            uses = [k for k, b in enumerate(content) if _is_block(b, "tool_use")]
            if uses:
                pending = [content[k].get("id") for k in uses]
                pending_at = i
                # Text after the last tool_use: the results can no longer follow immediately.
                if any(_is_block(b, "text") for b in content[uses[-1] + 1 :]):
                    out.append(missing(i, _names(pending), i, "missing_tool_result_blocks"))
                    reported = True
    if pending and not reported:
        out.append(missing(pending_at, _names(pending), pending_at, "missing_tool_result_blocks"))


def _what(kind: str) -> str:
    return kind.replace("_", " ")


def _responses_problems(views: Sequence[Mapping[str, Any]], out: List[PairingProblem]) -> None:
    calls: Dict[Any, Tuple[int, str]] = {}  # call id -> (index, type), not yet answered
    # Indices of answered calls: a local shell call is filed under both of its ids.
    done: Set[int] = set()
    n = len(views)
    for i, item in enumerate(views):
        kind = item.get("type")
        if kind in CALL_OUTPUTS:
            calls[item_call_id(item)] = (i, kind)
            if kind == "local_shell_call":
                calls.setdefault(item.get("id"), (i, kind))
        elif kind in OUTPUT_TYPES:
            call_id = item_call_id(item)
            found = calls.pop(call_id, None)
            if found is not None:
                done.add(found[0])
            else:
                what = _what(kind[: -len("_output")])
                out.append(
                    PairingProblem(
                        i,
                        "orphan_call_output",
                        _names([call_id]),
                        "openai-responses",
                        _RESPONSES_NO_CALL.format(what=what, id=call_id),
                    )
                )
        elif kind == "reasoning":
            following = views[i + 1] if i + 1 < n else None
            if (
                following is None
                or following.get("type") in OUTPUT_TYPES
                or (following.get("role") in ("user", "system", "developer"))
            ):
                item_id = item.get("id")
                out.append(
                    PairingProblem(
                        i,
                        "reasoning_without_following_item",
                        _names([item_id]),
                        "openai-responses",
                        _RESPONSES_REASONING.format(id=item_id),
                    )
                )
    for call_id, (index, kind) in sorted(calls.items(), key=lambda kv: kv[1][0]):
        if index in done:
            continue
        done.add(index)
        out.append(
            PairingProblem(
                index,
                "missing_call_output",
                _names([call_id]),
                "openai-responses",
                _RESPONSES_NO_OUTPUT.format(what=_what(kind), id=call_id),
            )
        )


def check_pairing(messages: Sequence[Any]) -> List[PairingProblem]:
    """Report every tool-pairing problem that would make a provider reject ``messages``.

    Reads OpenAI Chat Completions messages, Anthropic Messages, OpenAI Responses
    input items and SDK message models, mixed freely. It finds: a tool result
    with no call before it; a call whose results are missing; an Anthropic
    ``tool_result`` that is not at the start of the next message, or answers no
    ``tool_use`` of the previous message; a Responses ``*_call`` without its
    output, an output without its call, and a ``reasoning`` item without its
    following item.

    Args:
        messages: The message list (never mutated).

    Returns:
        The problems in message order (an empty list when the request is well formed).

    Raises:
        TypeError: ``messages`` is not a sequence.
        InvalidMessageError: A message is not a mapping or SDK model, or its
            ``tool_calls`` is malformed.
    """
    views = message_views(list(check_messages(messages)))
    problems: List[PairingProblem] = []
    try:
        _chat_problems(views, problems)
        _anthropic_problems(views, problems)
        _responses_problems(views, problems)
    except InvalidMessageError:  # a TypeError too, but it already names the message
        raise
    except TypeError as exc:  # an unhashable id somewhere
        raise InvalidMessageError(f"an id is not a string ({exc})") from exc
    problems.sort(key=lambda p: p.index)
    return problems
