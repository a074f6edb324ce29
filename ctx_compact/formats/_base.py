"""What the formats share with the generic rules: grouping's state, what clearing reads."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from .._errors import InvalidMessageError


class Links:
    """What grouping carries from one message to the next.

    ``left`` is what the previous message leaves open for the one after it: a
    value of the format that opened it (its own type), ``FOLLOWED`` when the
    previous message must stay with whatever follows, or ``None``. ``memory``
    holds a format's state that reaches further back (Responses calls answered
    many items later), under the format's name. ``restarts`` is where a format
    notes each message holding a provider's compaction item (the provider's
    own summary of everything before it), by index, in order.
    """

    __slots__ = ("left", "memory", "restarts")

    def __init__(self) -> None:
        self.left: Any = None
        self.memory: Dict[str, Any] = {}
        self.restarts: List[int] = []


# ``Links.left`` for a message that stays with the next one, whatever that is.
FOLLOWED = object()


@dataclass(frozen=True)
class ToolCall:
    """A tool call, as clearing reads it: where it is, the tool, the ids answering it."""

    index: int
    where: str  # "tool_calls" (Chat), "content" (a block), "parts" (Gemini) or "item" (Responses)
    position: int  # in tool_calls, content or parts; 0 for an item
    name: Optional[str]
    ids: Tuple[Any, ...]  # the first is its own; later ones answer it if not taken
    inner: Optional[str] = None  # the key of the call object inside its block or part
    # Where the call's arguments are, from the call object (the item, the tool_calls
    # entry, the block, or the object under ``inner``), for ``clear_inputs``; () where
    # the call is its own input (a shell command, a patch) and nothing may replace it.
    arguments: Tuple[str, ...] = ()
    # What the arguments become when cleared (a mapping is written as a new dict each
    # time); None: the placeholder text, for free-form input.
    no_arguments: Any = None


# What a call's arguments become when cleared (``clear_inputs``): an empty JSON object,
# which every provider (and every SDK or proxy that parses arguments back) accepts where
# a tool's arguments go; as its JSON text where a format carries arguments as a string.
EMPTY_ARGUMENTS = "{}"


@dataclass(frozen=True)
class ToolResult:
    """A tool result, as clearing reads it: where its content is and what it answers."""

    index: int
    block: Optional[int]  # its position in the message's content, for a block
    field: str  # the key holding the result's content
    call_id: Any
    value: Any  # the content clearing would replace
    items: str = "content"  # the list holding the block: "content", or "parts" (Gemini)
    inner: Optional[str] = None  # the key of the result object inside its block or part
    # What the placeholder is written as, when the format wants other than the text (a
    # Converse block list, a Gemini response object, a shell call's output chunks); the
    # result is cleared only where that takes something off.
    wrap: Optional[Callable[[str], Any]] = None


# What a message is among a conversation's turns (``Format.step``), for clearing thinking.
OPENS_TURN = "opens_turn"  # a user's own message: the next turn starts at it
CALLS = "calls"  # a model step calling tools (or an output the model has yet to read)
REPLIES = "replies"  # a model step that calls nothing
THINKS = "thinks"  # no step, but the model's thinking itself (a Responses reasoning item)
ASIDE = "aside"  # none of these: tool results, a system message
# The steps that may hold thinking: only the model's own messages do.
MODELS = (CALLS, REPLIES, THINKS)


@dataclass(frozen=True)
class Thinking:
    """A message's thinking, as clearing reads it (see ``Format.thinking``).

    A message that holds thinking clearing may not remove (a message of
    thinking alone, which removing would leave empty; a reasoning item another
    item needs) has no ``blocks`` and no ``item``: it still counts as a turn
    holding thinking.
    """

    # (position, kind) of each block or part clearing may remove from ``items``.
    blocks: Tuple[Tuple[int, str], ...] = ()
    items: str = "content"  # the list holding them: "content", or "parts" (Gemini)
    item: Optional[str] = None  # the kind of a message that is thinking itself, removed whole


def unrecognised(
    view: Mapping[str, Any], index: int, structure: Sequence[str], why: str
) -> InvalidMessageError:
    """The error for a message whose tool structure no format reads as it stands."""
    role = view.get("role")
    where = "an item without a role" if role is None else f"a {role!r} message"
    return InvalidMessageError(
        f"{', '.join(structure)} on {where}: {why}; no wire format reads it, so its tool "
        "calls could not be kept with their results",
        index,
    )


class Media(NamedTuple):
    """A media part, as a format reads it for counting (see ``Format.media``).

    ``data`` is the payload when the message carries it: base64 text (from
    ``start`` on, past a data URL's header) or raw bytes; ``None`` for a URL or
    a file id, whose size cannot be known offline. A named tuple, not a frozen
    dataclass: one is built for every media part counted, and a tuple is built
    in half the time.
    """

    path: Tuple[Any, ...]  # the keys and positions leading from the message to the part
    provider: str  # whose formula bills it: "openai", "anthropic", "gemini" or "bedrock"
    kind: str  # "image", "document", "audio" or "video"
    data: Any = None
    start: int = 0
    mime: Optional[str] = None  # the media type, or a format name ("pdf", "wav")
    detail: Optional[str] = None  # OpenAI's image detail


# A base64 data URL's header: "data:", the media type (up to the first ";"), any
# parameters, ";base64" and the first comma. Neither part can pass a comma, so the
# ";base64," matched is the one before the first comma; each is bounded, so a long
# URL without one is not scanned to its end.
_DATA_URL = re.compile(r"data:([^;,]{0,250})[^,]{0,250}?;base64,").match


def data_url(value: Any) -> Tuple[Optional[str], Optional[str], int]:
    """``(media type, text, start)`` of a base64 ``data:`` URL, the base64 being ``text[start:]``.

    The header (up to the first comma, within the first 256 characters) must
    end with ``;base64``; the media type is what comes before its first ``;``.
    ``(None, None, 0)`` for anything else (an ``https:`` URL, a percent-encoded
    data URL). Only the header is searched: the payload is not copied.
    """
    found = _DATA_URL(value) if type(value) is str else None
    if found is None:
        return None, None, 0
    start = found.end()
    if start > 256:  # the comma must be among the first 256 characters
        return None, None, 0
    return found[1] or None, value, start
