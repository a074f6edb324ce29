"""Which messages must stay together: one group per tool exchange, in every wire format.

A group is the smallest contiguous run of messages that closes every call opened in it and every
answer given in it, so dropping whole groups never separates a call from its answer; one list may
mix formats. Each message is read by the format that recognises it, which says the earliest message
it must stay with (``Format.link``). A call never answered, or an answer whose call is absent (or
not where the provider wants it), links to nothing: broken input stays droppable in small pieces.
Groups are given by their boundaries: the start of each group, then ``len(messages)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, List, Optional, Sequence

from .formats import FOLLOWED, Format, Links, recognise


def group_bounds(
    views: Sequence[Mapping[str, Any]],
    start: int = 0,
    restarts: Optional[List[int]] = None,
    formats: Optional[List[Optional[Format]]] = None,
) -> List[int]:
    """Return the group boundaries of ``views[start:]``, validating every message.

    ``views[start:]`` is grouped as if it were the whole list: ``start`` must be
    the start of a group no link crosses.

    Args:
        views: The messages' mapping views (see ``message_views``).
        start: Where to begin.
        restarts: A list to append, in order, the index of every message from
            ``start`` on that holds a provider's compaction item (a Responses
            ``compaction`` item, an Anthropic ``compaction`` block): where the
            provider restarts the conversation (``Compaction``'s ``restart``).
        formats: A list to append, in order, the format reading each message from
            ``start`` on (``recognise``'s answer), for a reader of the same messages
            that would otherwise recognise each one again.

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
        if formats is not None:
            formats.append(fmt)
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
