"""What the formats share with the generic rules: grouping's state, what clearing reads."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Dict, Optional, Sequence, Tuple

from .._errors import InvalidMessageError


class Links:
    """What grouping carries from one message to the next.

    ``left`` is what the previous message leaves open for the one after it: a
    value of the format that opened it (its own type), ``FOLLOWED`` when the
    previous message must stay with whatever follows, or ``None``. ``memory``
    holds a format's state that reaches further back (Responses calls answered
    many items later), under the format's name.
    """

    __slots__ = ("left", "memory")

    def __init__(self) -> None:
        self.left: Any = None
        self.memory: Dict[str, Any] = {}


# ``Links.left`` for a message that stays with the next one, whatever that is.
FOLLOWED = object()


@dataclass(frozen=True)
class ToolCall:
    """A tool call, as clearing reads it: where it is, the tool, the ids answering it."""

    index: int
    where: str  # "tool_calls" (Chat), "content" (a block) or "item" (Responses)
    position: int  # in tool_calls or content; 0 for an item
    name: Optional[str]
    ids: Tuple[Any, ...]  # the first is its own; later ones answer it if not taken


@dataclass(frozen=True)
class ToolResult:
    """A tool result, as clearing reads it: where its content is and what it answers."""

    index: int
    block: Optional[int]  # its position in the message's content, for a block
    field: str  # the key holding the result's content
    call_id: Any
    value: Any  # the content clearing would replace
    chunks: bool  # the content is a list of output chunks (a shell call's), not text


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
