"""OpenAI Chat Completions: an assistant's ``tool_calls`` answered by ``tool`` messages.

Also the legacy API: an assistant's ``function_call`` answered by the
``function`` message right after it (no id: matched by position).

Grouping: a ``tool`` message stays with the assistant message whose run of
``tool`` messages it is in, when it answers one of its ids (the provider wants
the answers right after the call). A ``tool`` message answering none of them
joins nothing, but does not end the run, as it does not for the provider.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, FrozenSet, Iterator, List, NamedTuple, Optional, Sequence, Tuple

from .._errors import InvalidMessageError
from .._problems import PairingProblem, names
from ._base import Links, ToolCall, ToolResult, unrecognised
from ._shapes import id_set, is_list, key, text_name

PROVIDER = "openai"
# The top-level keys that carry this format's tool structure.
KEYS: Tuple[str, ...] = ("tool_calls", "function_call")
# The roles only this format's messages have.
ROLES = ("tool", "function")

_ORPHAN = (
    "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
    "message with 'tool_calls'."
)
_UNKNOWN_ID = (
    "Invalid parameter: 'tool_call_id' of '{id}' not found in 'tool_calls' of previous message."
)
_MISSING = (
    "An assistant message with 'tool_calls' must be followed by tool messages responding "
    "to each 'tool_call_id'. The following tool_call_ids did not have response messages: {ids}"
)
# The legacy function pair: OpenAI's wording for tool messages, said of function messages.
_FUNCTION = (
    "Invalid parameter: messages with role 'function' must be a response to a preceding "
    "message with 'function_call'."
)
_NO_IDS: FrozenSet[Any] = frozenset()


def call_ids(message: Mapping[str, Any], index: int) -> Optional[FrozenSet[Any]]:
    """The ids of an assistant message's tool calls, or ``None`` if none.

    Calls without an ``id`` cannot be answered, so they contribute nothing.
    """
    tool_calls = message.get("tool_calls")
    if not tool_calls:
        return None
    if type(tool_calls) is list and len(tool_calls) == 1:
        # One call with a string id: most calling messages, without the general checks.
        call = tool_calls[0]
        if type(call) is dict:
            call_id = call.get("id")
            if type(call_id) is str:
                return frozenset((call_id,))
    if not is_list(tool_calls):
        raise InvalidMessageError(
            f"tool_calls must be a list of mappings, not {type(tool_calls).__name__}", index
        )
    for j, call in enumerate(tool_calls):
        if type(call) is not dict and not isinstance(call, Mapping):
            raise InvalidMessageError(
                f"tool_calls[{j}] must be a mapping with an 'id', not {type(call).__name__}",
                index,
            )
    return id_set((call.get("id") for call in tool_calls), index, "a tool call's id")


def opens_function_call(message: Mapping[str, Any]) -> bool:
    """Whether a message is a legacy ``function_call`` awaiting its answer."""
    return message.get("role") == "assistant" and bool(message.get("function_call"))


class _Run(NamedTuple):
    """What an assistant message leaves open: its calls' ids, and a legacy function call."""

    at: int
    ids: FrozenSet[Any]
    function_call: bool


class _OpenCalls(NamedTuple):
    """An assistant message's calls, while its run of tool messages lasts."""

    at: int  # the assistant message's index
    unanswered: List[Any]  # call ids not answered yet, in call order
    called: FrozenSet[Any]  # every id it called: a repeated answer is accepted


def _missing(calls: _OpenCalls) -> Iterator[PairingProblem]:
    if calls.unanswered:
        ids = names(calls.unanswered)
        text = _MISSING.format(ids=", ".join(ids))
        yield PairingProblem(calls.at, "missing_tool_results", ids, PROVIDER, text)


class ChatFormat:
    """OpenAI Chat Completions, legacy ``function_call`` included."""

    provider = PROVIDER
    where = "keys"
    keys: Tuple[str, ...] = KEYS
    roles = ROLES

    def carries(self, view: Mapping[str, Any]) -> bool:
        """Whether ``view`` holds ``tool_calls`` or ``function_call``, or has this format's role."""
        return bool(view.get("tool_calls") or view.get("function_call")) or (
            view.get("role") in ROLES
        )

    def structure(self, view: Mapping[str, Any]) -> Tuple[str, ...]:
        """The tool structure of this format in ``view``, as an error names it."""
        found = tuple(f"{k!r}" for k in KEYS if view.get(k))
        role = view.get("role")
        return (*found, f"role {role!r}") if role in ROLES else found

    def check(self, view: Mapping[str, Any], index: int) -> None:
        """Refuse calls anywhere but on an assistant message."""
        if view.get("role") != "assistant" and (
            view.get("tool_calls") or view.get("function_call")
        ):
            raise unrecognised(
                view,
                index,
                self.structure(view),
                "only an assistant message calls tools in Chat Completions",
            )

    def link(self, view: Mapping[str, Any], index: int, links: Links) -> int:
        """The earliest message ``view`` must stay with, or ``-1``; sets what it leaves open."""
        role = view.get("role")
        left = links.left
        if role == "tool":
            call_id = view.get("tool_call_id")
            if type(left) is _Run:
                if left.function_call:
                    links.left = left._replace(function_call=False)
                try:
                    if call_id in left.ids:  # checks the id is hashable
                        return left.at
                except TypeError:
                    key(call_id, index, "tool_call_id")  # raises, naming the field
                return -1
            links.left = None
            key(call_id, index, "tool_call_id")
            return -1
        if role == "function":
            links.left = None
            return index - 1 if type(left) is _Run and left.function_call else -1
        # An assistant message (check() refuses calls on any other role).
        ids = call_ids(view, index) if view.get("tool_calls") else None
        function_call = bool(view.get("function_call"))
        links.left = _Run(index, ids or _NO_IDS, function_call) if ids or function_call else None
        return -1

    def problems(self, views: Sequence[Mapping[str, Any]]) -> Iterator[PairingProblem]:
        """What OpenAI rejects: unanswered calls, answers to no call, stray function messages."""
        open_calls: Optional[_OpenCalls] = None
        for i, message in enumerate(views):
            role = message.get("role")
            if role == "tool":
                call_id = key(message.get("tool_call_id"), i, "tool_call_id")
                if open_calls is None:
                    yield PairingProblem(
                        i, "orphan_tool_result", names([call_id]), PROVIDER, _ORPHAN
                    )
                elif call_id in open_calls.unanswered:
                    open_calls.unanswered.remove(call_id)
                elif call_id not in open_calls.called:
                    yield PairingProblem(
                        i,
                        "unknown_tool_call_id",
                        names([call_id]),
                        PROVIDER,
                        _UNKNOWN_ID.format(id=call_id),
                    )
                continue
            if open_calls is not None:
                yield from _missing(open_calls)
                open_calls = None
            if role == "assistant":
                ids = call_ids(message, i)
                if ids:
                    calls = (c.get("id") for c in message.get("tool_calls") or ())
                    order = list(dict.fromkeys(c for c in calls if c is not None))
                    open_calls = _OpenCalls(i, order, ids)
            elif role == "function" and not (i and opens_function_call(views[i - 1])):
                name = message.get("name")
                found = () if name is None else names([name])
                yield PairingProblem(i, "orphan_function_result", found, PROVIDER, _FUNCTION)
        if open_calls is not None:
            yield from _missing(open_calls)

    def tool_calls(self, view: Mapping[str, Any], index: int) -> Iterator[ToolCall]:
        """An assistant message's calls, with the tool each names."""
        if view.get("role") == "assistant" and call_ids(view, index):  # validates tool_calls
            for j, call in enumerate(view["tool_calls"]):
                function = call.get("function")
                name = function.get("name") if isinstance(function, Mapping) else None
                yield ToolCall(index, "tool_calls", j, text_name(name), (call.get("id"),))

    def tool_results(self, view: Mapping[str, Any], index: int) -> Iterator[ToolResult]:
        """A ``tool`` message's content."""
        if view.get("role") == "tool":
            yield ToolResult(
                index, None, "content", view.get("tool_call_id"), view.get("content"), False
            )


CHAT = ChatFormat()
