"""The pairing validator: every tool-pairing problem a provider would reject a request for.

It reads the same shapes as the grouping (OpenAI Chat Completions, Anthropic
Messages, OpenAI Responses input items, SDK message models) and reports each
problem with the index, the ids and the provider's own wording.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, FrozenSet, Iterator, List, NamedTuple, Optional, Sequence, Tuple

from ._checks import check_messages
from ._formats import (
    CALL_OUTPUTS,
    OUTPUT_TYPES,
    Matcher,
    call_ids,
    call_keys,
    is_block,
    item_type,
    key,
    leading_results,
    opens_function_call,
    output_key,
    result_ids,
    tool_use_ids,
)
from ._grouping import group_bounds
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
# The legacy function pair: OpenAI's wording for tool messages, said of function messages.
_OPENAI_FUNCTION = (
    "Invalid parameter: messages with role 'function' must be a response to a preceding "
    "message with 'function_call'."
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
            ``"unknown_tool_call_id"``, ``"missing_tool_results"``,
            ``"orphan_function_result"`` (OpenAI Chat),
            ``"missing_tool_result_blocks"``, ``"tool_result_not_at_start"``,
            ``"unexpected_tool_result"`` (Anthropic), ``"missing_call_output"``,
            ``"orphan_call_output"``, ``"reasoning_without_following_item"``
            (OpenAI Responses).
        ids: The tool call, tool use or item ids concerned (for a legacy
            ``function`` message, which has no id, its function's name).
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


class _OpenCalls(NamedTuple):
    """An assistant message's Chat Completions calls, while its run of tool messages lasts."""

    at: int  # the assistant message's index
    unanswered: List[Any]  # call ids not answered yet, in call order
    called: FrozenSet[Any]  # every id it called: a repeated answer is accepted


def _missing_tool_results(calls: _OpenCalls) -> Iterator[PairingProblem]:
    if calls.unanswered:
        ids = _names(calls.unanswered)
        text = _OPENAI_MISSING.format(ids=", ".join(ids))
        yield PairingProblem(calls.at, "missing_tool_results", ids, "openai", text)


def _chat_problems(views: Sequence[Mapping[str, Any]]) -> Iterator[PairingProblem]:
    open_calls: Optional[_OpenCalls] = None
    for i, message in enumerate(views):
        role = message.get("role")
        if role == "tool":
            call_id = key(message.get("tool_call_id"), i, "tool_call_id")
            if open_calls is None:
                yield PairingProblem(
                    i, "orphan_tool_result", _names([call_id]), "openai", _OPENAI_ORPHAN
                )
            elif call_id in open_calls.unanswered:
                open_calls.unanswered.remove(call_id)
            elif call_id not in open_calls.called:
                yield PairingProblem(
                    i,
                    "unknown_tool_call_id",
                    _names([call_id]),
                    "openai",
                    _OPENAI_UNKNOWN_ID.format(id=call_id),
                )
            continue
        if open_calls is not None:
            yield from _missing_tool_results(open_calls)
            open_calls = None
        if role == "assistant":
            ids = call_ids(message, i)
            if ids:
                calls = (c.get("id") for c in message.get("tool_calls") or ())
                order = list(dict.fromkeys(c for c in calls if c is not None))
                open_calls = _OpenCalls(i, order, ids)
        elif role == "function" and not (i and opens_function_call(views[i - 1])):
            name = message.get("name")
            names = () if name is None else _names([name])
            yield PairingProblem(i, "orphan_function_result", names, "openai", _OPENAI_FUNCTION)
    if open_calls is not None:
        yield from _missing_tool_results(open_calls)


def _anthropic_problems(views: Sequence[Mapping[str, Any]]) -> Iterator[PairingProblem]:
    def missing(at: int, ids: Tuple[str, ...], index: int, code: str) -> PairingProblem:
        text = _ANTHROPIC_MISSING.format(index=at, ids=", ".join(ids))
        return PairingProblem(index, code, ids, "anthropic", text)

    pending: List[Any] = []  # tool_use ids of the previous message, an assistant's
    pending_at = -1
    reported = False  # the pending ids were already reported as unanswerable
    for i, message in enumerate(views):
        role = message.get("role")
        content = blocks(message, i)
        leading = leading_results(content) if role == "user" else []
        if pending and not reported:
            answered = [r.get("tool_use_id") for r in leading]
            unanswered = [u for u in pending if u not in answered]
            if unanswered:
                late = result_ids(content[len(leading) :], i)
                if any(u in late for u in unanswered):
                    yield missing(pending_at, _names(unanswered), i, "tool_result_not_at_start")
                else:
                    yield missing(
                        pending_at, _names(unanswered), pending_at, "missing_tool_result_blocks"
                    )
        for k, block in enumerate(content):
            if is_block(block, "tool_result"):
                use_id = key(block.get("tool_use_id"), i, "a tool_result block's tool_use_id")
                if use_id not in pending:
                    yield PairingProblem(
                        i,
                        "unexpected_tool_result",
                        _names([use_id]),
                        "anthropic",
                        _ANTHROPIC_UNEXPECTED.format(index=i, block=k, ids=use_id),
                    )
        pending, pending_at, reported = [], -1, False
        if role == "assistant":
            uses = [k for k, b in enumerate(content) if is_block(b, "tool_use")]
            if uses:
                pending = tool_use_ids(content, i)
                pending_at = i
                # Text after the last tool_use: the results can no longer follow immediately.
                if any(is_block(b, "text") for b in content[uses[-1] + 1 :]):
                    yield missing(i, _names(pending), i, "missing_tool_result_blocks")
                    reported = True
    if pending and not reported:
        yield missing(pending_at, _names(pending), pending_at, "missing_tool_result_blocks")


def _what(kind: str) -> str:
    return kind.replace("_", " ")


def _responses_problems(views: Sequence[Mapping[str, Any]]) -> Iterator[PairingProblem]:
    calls = Matcher()  # the grouping matches outputs to calls through the same class
    n = len(views)
    for i, item in enumerate(views):
        if item.get("role") is not None:
            continue
        kind = item_type(item, i)
        if kind in CALL_OUTPUTS:
            calls.open(call_keys(item, i), i)
        elif kind in OUTPUT_TYPES:
            call_id = output_key(item, i)
            if calls.answer(call_id) is None:
                what = _what(kind[: -len("_output")])
                yield PairingProblem(
                    i,
                    "orphan_call_output",
                    _names([call_id]),
                    "openai-responses",
                    _RESPONSES_NO_CALL.format(what=what, id=call_id),
                )
        elif kind == "reasoning":
            following = views[i + 1] if i + 1 < n else None
            if (
                following is None
                or item_type(following, i + 1) in OUTPUT_TYPES
                or (following.get("role") in ("user", "system", "developer"))
            ):
                item_id = item.get("id")
                yield PairingProblem(
                    i,
                    "reasoning_without_following_item",
                    _names([item_id]),
                    "openai-responses",
                    _RESPONSES_REASONING.format(id=item_id),
                )
    for index, call_id in calls.unanswered():
        yield PairingProblem(
            index,
            "missing_call_output",
            _names([call_id]),
            "openai-responses",
            _RESPONSES_NO_OUTPUT.format(what=_what(views[index]["type"]), id=call_id),
        )


def check_pairing(messages: Sequence[Any]) -> List[PairingProblem]:
    """Report every tool-pairing problem that would make a provider reject ``messages``.

    Reads OpenAI Chat Completions messages, Anthropic Messages, OpenAI Responses
    input items and SDK message models, mixed freely. It finds: a tool result
    with no call before it; a call whose results are missing; a legacy
    ``function`` message not right after an assistant's ``function_call``; an
    Anthropic ``tool_result`` that is not at the start of the next message, or
    answers no ``tool_use`` of the previous message; a Responses ``*_call``
    without its output, an output without its call (an output answers the most
    recent unanswered call with its ``call_id``, each call once), and a
    ``reasoning`` item without its following item.

    It reads exchanges exactly as the grouping does, so whatever it accepts,
    it accepts after any compaction.

    Args:
        messages: The message list (never mutated).

    Returns:
        The problems in message order (an empty list when the request is well formed).

    Raises:
        TypeError: ``messages`` is not a sequence.
        InvalidMessageError: A message is not a mapping or SDK model, its
            ``tool_calls`` is malformed, an id or ``type`` is not hashable, or an
            SDK block's ``model_dump`` fails; the error names the index, as
            ``compact``'s would.
    """
    views = message_views(list(check_messages(messages)))
    group_bounds(views)  # validates every message exactly as compaction does
    return pairing_problems(views)


def pairing_problems(views: Sequence[Mapping[str, Any]]) -> List[PairingProblem]:
    """``check_pairing`` of message views that grouping has already validated.

    For a caller that compacts the same list anyway (the command line): the
    compaction's grouping is the validation, so it is not done twice.
    """
    problems = [
        *_chat_problems(views),
        *_anthropic_problems(views),
        *_responses_problems(views),
    ]
    problems.sort(key=lambda p: p.index)
    return problems
