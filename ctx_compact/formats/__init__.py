"""The wire formats: one module each, behind one small interface (``Format``).

Grouping, the pairing check, repair, clearing and the media count are one generic rule
each over ``Format`` and name no format. ``recognise`` says which format reads a
message, and refuses tool structure that none reads (see docs/grouping.md).
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from . import gemini
from ._base import (
    ASIDE,
    CALLS,
    FOLLOWED,
    MODELS,
    OPENS_TURN,
    REPLIES,
    Format,
    Links,
    Resuming,
    Shaping,
    Thinking,
    ToolCall,
    ToolResult,
    Waiting,
    unrecognised,
)
from ._shapes import View, Views
from .anthropic import ANTHROPIC
from .bedrock import BEDROCK
from .chat import CHAT
from .frameworks import LANGCHAIN_TURNS
from .gemini import GEMINI
from .responses import RESPONSES

FORMATS: Tuple[Format, ...] = (CHAT, ANTHROPIC, RESPONSES, GEMINI, BEDROCK)
# The formats a summary beside their messages is shaped as (``summary_note``, ``joined``).
_SHAPING: Tuple[Shaping, ...] = (GEMINI, BEDROCK)
RESUMING: Tuple[Resuming, ...] = (*_SHAPING, LANGCHAIN_TURNS)
WAITING: Tuple[Waiting, ...] = (CHAT, ANTHROPIC, RESPONSES, GEMINI, BEDROCK)

# The format reading a message that carries no tool structure, by role.
OWNERS: Dict[Any, Format] = {**dict.fromkeys(CHAT.roles, CHAT), None: RESPONSES}

# Which formats may claim a message: every format that keeps tool structure in
# top-level keys; with list content, those keeping it in blocks; without a role,
# those whose items are typed.
_KEYED = tuple(f for f in FORMATS if f.where == "keys")
_BLOCKS = _KEYED + tuple(f for f in FORMATS if f.where == "content")
_ITEMS = tuple(f for f in FORMATS if f.where == "items") + _KEYED


def recognise(view: View, index: int) -> Optional[Format]:
    """The format reading ``view``, or ``None`` for plain text no format reads.

    Raises:
        InvalidMessageError: ``view`` carries tool structure no format recognises
            (see docs/grouping.md); the error names the index and the keys.
    """
    role = view.get("role")
    found: Optional[Format] = None
    for fmt in _candidates(view, role):
        if fmt.carries(view):
            if found is not None:
                raise unrecognised(
                    view,
                    index,
                    found.structure(view) + fmt.structure(view),
                    f"{found.provider} and {fmt.provider} structure in one message",
                )
            found = fmt
    if found is None:
        return _owner(role)
    found.check(view, index)
    return found


def _candidates(view: View, role: Any) -> Tuple[Format, ...]:
    content = view.get("content")
    if role is None:
        return _ITEMS
    if content is not None and type(content) is not str:
        return _BLOCKS
    # A Gemini function response turn sent with role "function" or "tool" (as older docs
    # have it): Chat's claim on it is by role alone.
    if (
        content is None
        and role in CHAT.roles
        and gemini.is_content(view)
        and not any(map(view.get, CHAT.keys))
    ):
        return (GEMINI,)
    return _KEYED


def resumes(before: Optional[View], view: View) -> bool:
    """Whether a conversation may continue at ``view`` right after ``before`` (``None``: at
    the start): ``True`` unless a format in ``RESUMING`` says otherwise."""
    return all(fmt.resumes(before, view) for fmt in RESUMING)


def awaiting(views: Views) -> int:
    """Where the calls still awaiting their results (or an approval awaiting its human) at
    the end of ``views`` start; ``len(views)`` when nothing awaits."""
    return min(fmt.awaiting(views) for fmt in WAITING)


def step(view: View) -> str:
    """What ``view`` is among a conversation's turns: ``OPENS_TURN``, ``CALLS``,
    ``REPLIES``, ``THINKS`` or ``ASIDE``; only the model's own (``MODELS``) hold thinking.

    The format whose message it is says (``Format.step``); a message no format
    claims is the specification's: a ``user`` message opens a turn, an
    ``assistant`` message replies, any other is none of a turn's steps.
    """
    for fmt in FORMATS:
        found = fmt.step(view)
        if found is not None:
            return found
    role = view.get("role")
    if role == "user":
        return OPENS_TURN
    return REPLIES if role == "assistant" else ASIDE


def thinking(views: Views, index: int) -> Optional[Thinking]:
    """The thinking of the message at ``index`` (``Format.thinking``), ``None`` for none;
    the formats' thinking shapes do not overlap, so at most one format finds any."""
    for fmt in FORMATS:
        found = fmt.thinking(views, index)
        if found is not None:
            return found
    return None


def summary_note(text: str, summary_role: str, beside: Optional[View]) -> Dict[str, Any]:
    """The summary message, shaped as the message ``beside`` it is (the specification's
    ``{"role": ..., "content": ...}`` unless that is a Gemini content or a Converse message)."""
    for fmt in _SHAPING:
        if fmt.shaped(beside):
            return fmt.note(text, summary_role)
    return {"role": summary_role, "content": text}


def joined(view: View, text: str) -> Optional[Dict[str, Any]]:
    """A copy of ``view`` with ``text`` as one more text part or block, for a format in
    ``_SHAPING`` whose message it is; ``None`` for any other message."""
    for fmt in _SHAPING:
        if fmt.shaped(view):
            return fmt.joined(view, text)
    return None


def _owner(role: Any) -> Optional[Format]:
    try:
        return OWNERS.get(role)
    except TypeError:  # an unhashable role is no format's
        return None


__all__ = [
    "ASIDE",
    "CALLS",
    "FOLLOWED",
    "FORMATS",
    "MODELS",
    "OPENS_TURN",
    "OWNERS",
    "REPLIES",
    "RESUMING",
    "WAITING",
    "Format",
    "Links",
    "Resuming",
    "Shaping",
    "Thinking",
    "ToolCall",
    "ToolResult",
    "Waiting",
    "awaiting",
    "joined",
    "recognise",
    "resumes",
    "step",
    "summary_note",
    "thinking",
]
