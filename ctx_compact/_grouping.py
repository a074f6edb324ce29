"""Which messages must stay together: one unit per tool exchange, in every wire format.

A group is the smallest contiguous run of messages that closes every call
opened in it and every answer given in it, whatever the format, so dropping
whole groups can never separate a call from its answer. One list may mix
formats; what links two messages:

- OpenAI Chat Completions: a ``tool`` message answering one of the ``tool_calls``
  ids of the assistant message whose run of ``tool`` messages it is in (the
  provider wants the answers right after the call). A ``tool`` message answering
  none of them joins nothing, but does not end the run, as it does not for the
  provider.
- Legacy Chat Completions: an assistant's ``function_call`` and the ``function``
  message right after it.
- Anthropic Messages: a user message starting with ``tool_result`` blocks and
  the assistant message right before it, when one of those blocks answers one of
  its ``tool_use`` ids (``thinking`` blocks live in the same message as the
  ``tool_use``).
- OpenAI Responses input items: a ``*_call`` item (``function_call``,
  ``custom_tool_call``, ``computer_call``, ...) and its ``*_call_output``,
  however far apart, matched by ``call_id`` (see ``Matcher``); an
  ``mcp_approval_request`` and its ``mcp_approval_response``.
- A ``reasoning`` item and the message right after it, whatever that message is.

Broken input stays droppable in small pieces: a call that is never answered and
an answer whose call is absent (or not where the provider wants it) link to
nothing, so each is a group of its own unless something else links it.

Groups are described by their boundaries: the start index of each group,
followed by ``len(messages)``. SDK objects (pydantic models) are seen as the
JSON the SDK would send (``model_dump(mode="json", exclude_unset=True)``), so
"the messages" below are their mapping views.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping
from typing import Any, FrozenSet, List, Optional, Sequence

from ._formats import (
    CALL_OUTPUTS,
    OUTPUT_TYPES,
    Matcher,
    call_ids,
    call_keys,
    item_type,
    key,
    leading_results,
    output_key,
    result_ids,
    tool_use_ids,
)
from ._views import blocks, message_view

_NO_IDS: FrozenSet[Any] = frozenset()


def group_bounds(views: Sequence[Mapping[str, Any]], start: int = 0) -> List[int]:
    """Return the group boundaries of ``views[start:]``, validating every message.

    ``views[start:]`` is grouped as if it were the whole list: ``start`` must be
    the start of a group no link crosses (``0``, or what ``regroup_from`` gives).

    Args:
        views: The messages' mapping views (see ``message_views``).
        start: Where to begin.

    Returns:
        The start index of each group from ``start`` on, then ``len(views)``.

    Raises:
        InvalidMessageError: A message's ``tool_calls`` is malformed, or an id or
            a ``type`` is not hashable. The error names the index.
    """
    n = len(views)
    bounds: List[int] = []
    calls = Matcher()  # Responses calls and their outputs
    approvals = Matcher()  # MCP approval requests and their responses
    run_at = -1  # the assistant whose tool_calls the current run of tool messages answers
    run_ids: Optional[FrozenSet[Any]] = None
    # What the previous message leaves open for this one:
    uses: Optional[List[Any]] = None  # an assistant's tool_use ids
    function_call = False  # a legacy function_call
    reasoning = False  # a reasoning item: it stays with whatever follows
    for i in range(start, n):
        message = views[i]
        role = message.get("role")
        # The earliest message this one must stay with; every partner is before it.
        linked = i - 1 if reasoning else -1
        reasoning = False
        if role == "tool":
            call_id = message.get("tool_call_id")
            try:
                if call_id in (run_ids or _NO_IDS):  # checks every id is hashable
                    linked = run_at
            except TypeError:
                key(call_id, i, "tool_call_id")  # raises, naming the field
            uses, function_call = None, False
        elif role == "assistant":
            run_ids = None
            if message.get("tool_calls"):
                ids = call_ids(message, i)
                if ids:
                    run_at, run_ids = i, ids
            content = message.get("content")
            uses = (
                tool_use_ids(blocks(message, i), i)
                if content and type(content) is not str
                else None
            )
            function_call = bool(message.get("function_call"))
        elif role is None:  # Responses API items carry a type, not a role
            kind = message.get("type")
            if type(kind) is not str:
                kind = item_type(message, i)
            if kind in CALL_OUTPUTS:
                calls.open(call_keys(message, i), i)
            elif kind in OUTPUT_TYPES:
                found = calls.answer(output_key(message, i))
                if found is not None:
                    linked = found
            elif kind == "reasoning":
                reasoning = True
            elif kind == "mcp_approval_request":
                approvals.open([key(message.get("id"), i, "an approval request's id")], i)
            elif kind == "mcp_approval_response":
                request = key(message.get("approval_request_id"), i, "approval_request_id")
                found = approvals.answer(request)
                if found is not None:
                    linked = found
            run_ids, uses, function_call = None, None, False
        else:
            run_ids = None
            if role == "function":
                if function_call:
                    linked = i - 1
            elif role == "user" and uses:
                answers = result_ids(leading_results(blocks(message, i)), i)
                if any(u in uses for u in answers):
                    linked = i - 1
            uses, function_call = None, False
        if linked < 0:
            bounds.append(i)
        else:
            while bounds[-1] > linked:
                bounds.pop()  # this message joins the group its partner is in
    bounds.append(n)
    return bounds


def regroup_from(messages: Sequence[Any], bounds: Sequence[int], keep: int) -> int:
    """Where to start grouping again when the first ``keep`` messages are unchanged.

    For a caller that groups a list incrementally (the middleware's session cache):
    ``bounds`` are the boundaries of the list as it was; ``messages`` is the list
    as it is now, whose first ``keep`` messages equal the old ones and whose
    later messages were changed or appended. A new message can join a group that
    starts well before it (an output answering a call made many items earlier),
    so the groups from the returned position of ``bounds`` on must be computed
    afresh, with ``group_bounds(views, bounds[position])``; the result equals
    grouping ``messages`` from scratch.

    The position is usually that of the last old group: the one a new tool
    result, ``tool_result`` block, ``function`` message or reasoning item's
    follower joins. When a new Responses output or MCP approval response answers
    nothing from that group on, it may answer an earlier call, and grouping
    starts again from the beginning.

    Args:
        messages: The list as it is now (messages or their mapping views).
        bounds: The group boundaries of the list as it was.
        keep: How many leading messages are unchanged.

    Returns:
        An index into ``bounds``.

    Raises:
        InvalidMessageError: A message is neither a mapping nor an SDK model.
    """
    if keep <= 0:
        return 0
    earliest = keep - 1
    # A new tool message may join the assistant whose run of tool messages reaches keep.
    i = earliest
    while i >= 0 and _view(messages, i).get("role") == "tool":
        i -= 1
    if i >= 0 and i < earliest and _view(messages, i).get("role") == "assistant":
        earliest = i
    position = bisect_right(bounds, earliest) - 1
    if _answers_before(messages, bounds[position], keep):
        return 0
    return position


def _view(messages: Sequence[Any], index: int) -> Mapping[str, Any]:
    return message_view(messages[index], index)


def _answers_before(messages: Sequence[Any], start: int, keep: int) -> bool:
    """Whether an item from ``keep`` on answers no call from ``start`` on.

    Such an output answers an earlier call, or none at all; either way grouping
    from ``start`` could not see it. Malformed items are left for ``group_bounds``
    to report.
    """
    calls, approvals = Matcher(), Matcher()
    for i in range(start, len(messages)):
        item = _view(messages, i)
        if item.get("role") is not None:
            continue
        try:
            kind = item_type(item, i)
            if kind in CALL_OUTPUTS:
                calls.open(call_keys(item, i), i)
            elif kind == "mcp_approval_request":
                approvals.open([key(item.get("id"), i, "an approval request's id")], i)
            elif kind in OUTPUT_TYPES:
                if calls.answer(output_key(item, i)) is None and i >= keep:
                    return True
            elif kind == "mcp_approval_response":
                request = key(item.get("approval_request_id"), i, "approval_request_id")
                if approvals.answer(request) is None and i >= keep:
                    return True
        except (TypeError, ValueError):
            return True
    return False
