"""Which messages must stay together: one unit per tool exchange, in every wire format.

Each message is classified on its own, so one list may mix shapes:

- OpenAI Chat Completions: an assistant message with non-empty ``tool_calls`` plus
  every immediately following ``tool`` message whose ``tool_call_id`` matches one
  of its call ids.
- Anthropic Messages: an assistant message whose content holds ``tool_use`` blocks
  (with any ``thinking``/``redacted_thinking`` blocks of that turn, which live in
  the same message) plus the next message when it is a user message whose content
  starts with ``tool_result`` blocks answering those ids.
- OpenAI Responses input items: ``reasoning`` items with the item they lead to;
  ``*_call`` items (``function_call``, ``custom_tool_call``, ``computer_call``,
  ...) with their ``*_call_output`` items matched by ``call_id``; an
  ``mcp_approval_request`` with its ``mcp_approval_response``.

Every other message is a group of its own. Groups are described by their
boundaries: the start index of each group, followed by ``len(messages)``.
SDK objects (pydantic models) are seen as the JSON the SDK would send
(``model_dump(mode="json", exclude_unset=True)``), so "the messages" below are
their mapping views.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping
from typing import Any, FrozenSet, List, Sequence

from ._errors import InvalidMessageError
from ._formats import (
    CALL_OUTPUTS,
    OUTPUT_TYPES,
    call_ids,
    hashable,
    item_call_id,
    leading_results,
    tool_use_ids,
)


def _answers(message: Mapping[str, Any], ids: FrozenSet[Any], index: int) -> bool:
    if message.get("role") != "tool":
        return False
    try:
        return message.get("tool_call_id") in ids
    except TypeError:
        raise InvalidMessageError(
            f"tool_call_id must be a string, not {type(message.get('tool_call_id')).__name__}",
            index,
        ) from None


def _end_of_items(views: Sequence[Mapping[str, Any]], i: int, n: int) -> int:
    """Where the Responses exchange that starts at item ``i`` ends."""
    j = i
    while j < n and views[j].get("type") == "reasoning":
        j += 1  # a reasoning item belongs with the item that follows it
    if j == n:
        return n
    kind = views[j].get("type")
    if kind in CALL_OUTPUTS:
        ids = set()
        while j < n and views[j].get("type") in CALL_OUTPUTS:
            ids.add(hashable(item_call_id(views[j])))
            ids.add(hashable(views[j].get("id")))
            j += 1
        ids.discard(None)
        while (
            j < n
            and views[j].get("type") in OUTPUT_TYPES
            and hashable(item_call_id(views[j])) in ids
        ):
            j += 1
        return j
    if kind == "mcp_approval_request":
        request = hashable(views[j].get("id"))
        j += 1
        if (
            j < n
            and views[j].get("type") == "mcp_approval_response"
            and request is not None
            and hashable(views[j].get("approval_request_id")) == request
        ):
            j += 1
        return j
    return j + 1


def group_bounds(views: Sequence[Mapping[str, Any]], start: int = 0) -> List[int]:
    """Return the group boundaries of ``views[start:]``, validating every message.

    Args:
        views: The messages' mapping views (see ``message_views``).
        start: Where to begin; it must be the start of a group.

    Returns:
        The start index of each group from ``start`` on, then ``len(views)``.

    Raises:
        InvalidMessageError: A message's ``tool_calls`` or ``tool_call_id`` is
            malformed, or a call id is not hashable. The error names the index.
    """
    n = len(views)
    bounds = []
    i = start
    while i < n:
        bounds.append(i)
        message = views[i]
        role = message.get("role")
        if role == "assistant":
            ids = call_ids(message, i)
            i += 1
            if ids:
                while i < n and _answers(views[i], ids, i):
                    i += 1
            elif i < n and views[i].get("role") == "user":
                uses = tool_use_ids(message, i - 1)
                if uses and any(
                    hashable(r.get("tool_use_id")) in uses for r in leading_results(views[i])
                ):
                    i += 1
        elif role is None:  # Responses API items carry a type, not a role
            i = _end_of_items(views, i, n)
        else:
            i += 1
    bounds.append(n)
    return bounds


def regroup_from(bounds: Sequence[int], keep: int) -> int:
    """Where to start grouping again when the first ``keep`` messages are unchanged.

    For a caller that groups a list incrementally (the middleware's session cache):
    ``bounds`` are the boundaries of the list as it was; messages from ``keep`` on
    were changed or appended. Appended messages can extend the last group that
    starts before them (tool results after an assistant's calls), so the groups
    from the returned position of ``bounds`` on must be computed afresh, with
    ``group_bounds(views, bounds[position])``.

    Returns:
        An index into ``bounds``.
    """
    return bisect_right(bounds, keep - 1) - 1 if keep else 0
