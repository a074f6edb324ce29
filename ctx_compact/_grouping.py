"""Which messages must stay together: one unit per tool exchange, in every wire format.

A group is the smallest contiguous run of messages that closes every call
opened in it and every answer given in it, whatever the format, so dropping
whole groups can never separate a call from its answer. One list may mix
formats. What links two messages is each format's own rule (``formats``:
``chat``, ``anthropic``, ``responses``); the rule here is generic: each message
is read by the format that recognises it, which says the earliest message it
must stay with, and the message joins that message's group.

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
from typing import Any, List, Optional, Sequence

from ._views import message_view, message_views
from .formats import FOLLOWED, Links, recognise
from .formats.responses import answers_earlier


def group_bounds(
    views: Sequence[Mapping[str, Any]], start: int = 0, restarts: Optional[List[int]] = None
) -> List[int]:
    """Return the group boundaries of ``views[start:]``, validating every message.

    ``views[start:]`` is grouped as if it were the whole list: ``start`` must be
    the start of a group no link crosses (``0``, or what ``regroup_from`` gives).

    Args:
        views: The messages' mapping views (see ``message_views``).
        start: Where to begin.
        restarts: A list to append, in order, the index of every message from
            ``start`` on that holds a provider's compaction item (a Responses
            ``compaction`` item, an Anthropic ``compaction`` block): where the
            provider restarts the conversation (``Compaction``'s ``restart``).

    Returns:
        The start index of each group from ``start`` on, then ``len(views)``.

    Raises:
        InvalidMessageError: A message's ``tool_calls`` is malformed, an id or a
            ``type`` is not hashable, or it carries tool structure no format
            recognises (see ``formats``). The error names the index.
    """
    n = len(views)
    bounds: List[int] = []
    links = Links()
    if restarts is not None:
        links.restarts = restarts
    for i in range(start, n):
        view = views[i]
        followed = links.left is FOLLOWED
        fmt = recognise(view, i)
        if fmt is None:  # plain text: it answers nothing and leaves nothing open
            links.left = None
            linked = -1
        else:
            linked = fmt.link(view, i, links)
        if linked < 0 and followed:
            linked = i - 1
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
    start = bounds[position]
    if answers_earlier(message_views(messages, start), start, keep):
        return 0
    return position


def _view(messages: Sequence[Any], index: int) -> Mapping[str, Any]:
    return message_view(messages[index], index)
