"""The wire formats: one module each, all behind one small interface.

Every format the core reads is a ``Format`` object in ``FORMATS``; grouping
(``_grouping``), the pairing check (``_pairing``) and clearing (``_clearing``)
are one generic rule each over this interface, and name no format. A format:

- ``carries(view)``: the tool structure of the format a message holds (the
  keys, roles, block or item types, as they are named in an error), ``()`` if
  none; ``check(view, index, structure)`` refuses it where the format does not
  allow it;
- ``link(view, index, links)``: the earliest message the message must stay
  with (what it answers), ``-1`` for none, and what it leaves open for the
  next message in ``links`` (what it opens);
- ``problems(views)``: its pairing problems, in the provider's own words;
- ``tool_calls(view, index)`` and ``tool_results(view, index)``: its tool
  calls and results, for clearing;
- ``step(view)``: what its message is among a conversation's turns (a user's
  own message opening a turn, a model step calling tools or replying, or none
  of these), ``None`` for a message that is not its own; and
  ``thinking(views, index)``: the thinking a message holds and what of it
  clearing may remove (``_base.Thinking``), ``None`` for none; both for
  ``clear_thinking`` (``step`` and ``thinking`` below);
- ``repair(views, problems, edits, answer)``: how its ``problems`` (what its
  ``problems`` reported on ``views``) are repaired, recorded in ``edits``
  (``_edits.Edits``: a message dropped, moved, rebuilt from some of its parts,
  or followed by a new one); ``answer`` is the placeholder text answering an
  unanswered call, ``None`` to drop the call (``repair_pairing``);
- ``media(view)``: its media parts (images, documents, audio) and where each
  is, for the media-aware count (``_media``).

Where a conversation may resume after a cut: the formats in ``RESUMING``
(Gemini, Bedrock, and LangChain messages sent to those two providers through
LangChain, read in Chat Completions form: ``frameworks.LANGCHAIN_TURNS``) have
rules on it, as ``Resuming`` objects:
``resumes(before, view)`` says whether the message ``view`` may come right
after ``before`` (``None``: at the start of the conversation), so a cut that
drops what lies between them leaves a request the provider takes. Every other
format accepts every group boundary, and ``resumes`` below asks only these
(the decision for the others stays the specification's, at no cost). They also
shape the summary message ``compact_with_summary`` inserts among their messages
(``summary_note``).

Where a conversation starts again: a format's ``link`` notes in
``Links.restarts`` each message holding the provider's own compaction item (a
Responses ``compaction`` item, an Anthropic ``compaction`` block), which
``Compaction`` takes as the start of the conversation. Calls still awaiting
their results at the end: the formats in ``WAITING`` say where they start
(``awaiting(views)``, reading the last messages only), and ``Compaction`` keeps
them with the tail.

Which format reads a message (``recognise``): the one whose tool structure it
carries; a message carrying none is plain text, read by the format owning its
role (``tool``/``function``: Chat Completions; no role: Responses) or by none.
A Gemini content (``parts`` and no ``content``) holding function responses
with role ``function`` or ``tool`` is Gemini's, not Chat's.

Tool structure no format recognises is refused with an ``InvalidMessageError``
naming the index and the keys, never grouped as plain text:

- the structure of two formats in one message (``tool_calls`` or
  ``function_call`` with ``tool_use``/``tool_result`` blocks, with a Responses
  call, output or reasoning ``type``, or on a ``tool``/``function`` message;
  Gemini function parts or Bedrock tool blocks with any other format's);
- ``tool_calls`` or ``function_call`` on anything but an assistant message
  (an item without a role included);
- a ``tool_use`` block outside an assistant message;
- Gemini function parts beside a ``content`` key, on a role the API does not
  take, a ``function_call`` part outside a model turn or a
  ``function_response`` part in one;
- a Bedrock ``toolUse`` block outside an assistant message, a ``toolResult``
  block outside a user message;
- a role-less item whose type ends in ``_call`` or ``_call_output`` and that is
  neither a call this library pairs, its output, nor a call the provider runs
  itself (``web_search_call``, ``file_search_call``, ``image_generation_call``,
  ``code_interpreter_call``, ``mcp_call``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Dict, Iterator, Optional, Protocol, Sequence, Tuple

from .._problems import PairingProblem
from . import gemini
from ._base import (
    ASIDE,
    CALLS,
    FOLLOWED,
    MODELS,
    OPENS_TURN,
    REPLIES,
    THINKS,
    Links,
    Media,
    Thinking,
    ToolCall,
    ToolResult,
    unrecognised,
)
from ._edits import Edits
from .anthropic import ANTHROPIC
from .bedrock import BEDROCK
from .chat import CHAT
from .frameworks import LANGCHAIN_TURNS
from .gemini import GEMINI
from .responses import RESPONSES


class Format(Protocol):
    """What the generic rules need to know of one wire format."""

    provider: str
    where: str  # where its tool structure lives: "keys", "content" (blocks) or "items"
    keys: Tuple[str, ...]  # for "keys": the top-level keys holding it

    def carries(self, view: Mapping[str, Any]) -> bool: ...

    def structure(self, view: Mapping[str, Any]) -> Tuple[str, ...]: ...

    def check(self, view: Mapping[str, Any], index: int) -> None: ...

    def link(self, view: Mapping[str, Any], index: int, links: Links) -> int: ...

    def problems(self, views: Sequence[Mapping[str, Any]]) -> Iterator[PairingProblem]: ...

    def tool_calls(self, view: Mapping[str, Any], index: int) -> Iterator[ToolCall]: ...

    def tool_results(self, view: Mapping[str, Any], index: int) -> Iterator[ToolResult]: ...

    def step(self, view: Mapping[str, Any]) -> Optional[str]: ...

    def thinking(self, views: Sequence[Mapping[str, Any]], index: int) -> Optional[Thinking]: ...

    def repair(
        self,
        views: Sequence[Mapping[str, Any]],
        problems: Sequence[PairingProblem],
        edits: Edits,
        answer: Optional[str],
    ) -> None: ...

    # Media, for the media-aware count: each media part of a message, with where it is.
    def media(self, view: Mapping[str, Any]) -> Iterator[Media]: ...


class Resuming(Protocol):
    """A format with rules on where a conversation may resume after a cut."""

    def resumes(self, before: Optional[Mapping[str, Any]], view: Mapping[str, Any]) -> bool: ...

    def shaped(self, view: Optional[Mapping[str, Any]]) -> bool: ...

    def note(self, text: str, summary_role: str) -> Dict[str, Any]: ...

    def joined(self, view: Mapping[str, Any], text: str) -> Dict[str, Any]: ...


class Waiting(Protocol):
    """A format whose calls may be left awaiting their results at the end of a list."""

    def awaiting(self, views: Sequence[Mapping[str, Any]]) -> int: ...


FORMATS: Tuple[Format, ...] = (CHAT, ANTHROPIC, RESPONSES, GEMINI, BEDROCK)
RESUMING: Tuple[Resuming, ...] = (GEMINI, BEDROCK, LANGCHAIN_TURNS)
WAITING: Tuple[Waiting, ...] = (CHAT, ANTHROPIC, RESPONSES, GEMINI, BEDROCK)

# The format reading a message that carries no tool structure, by role.
OWNERS: Dict[Any, Format] = {**dict.fromkeys(CHAT.roles, CHAT), None: RESPONSES}

# Which formats may claim a message: every format that keeps tool structure in
# top-level keys; with list content, those keeping it in blocks; without a role,
# those whose items are typed.
_KEYED = tuple(f for f in FORMATS if f.where == "keys")
_TEXT = _KEYED
_BLOCKS = _KEYED + tuple(f for f in FORMATS if f.where == "content")
_ITEMS = tuple(f for f in FORMATS if f.where == "items") + _KEYED


def recognise(view: Mapping[str, Any], index: int) -> Optional[Format]:
    """The format reading ``view``, or ``None`` for plain text no format reads.

    Raises:
        InvalidMessageError: ``view`` carries tool structure no format recognises
            (see the module's docstring); the error names the index and the keys.
    """
    role = view.get("role")
    if role is None:
        candidates = _ITEMS
    else:
        content = view.get("content")
        if content is None or type(content) is str:
            candidates = _TEXT
            # A Gemini function response turn sent with role "function" or "tool" (as
            # older docs have it): Chat's claim on it is by role alone.
            if (
                content is None
                and role in CHAT.roles
                and gemini.is_content(view)
                and not any(map(view.get, CHAT.keys))
            ):
                candidates = (GEMINI,)
        else:
            candidates = _BLOCKS
    found: Optional[Format] = None
    for fmt in candidates:
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


def resumes(before: Optional[Mapping[str, Any]], view: Mapping[str, Any]) -> bool:
    """Whether a conversation may continue at ``view`` right after ``before``.

    ``before`` is ``None`` at the start of the conversation. ``True`` unless a
    format in ``RESUMING`` says otherwise.
    """
    return all(fmt.resumes(before, view) for fmt in RESUMING)


def awaiting(views: Sequence[Mapping[str, Any]]) -> int:
    """Where the calls still awaiting their results at the end of ``views`` start.

    An agent's history saved between a call and its result ends with the call
    (and the results that came so far); an approval awaits its human. Each
    format in ``WAITING`` reads only the last messages. ``len(views)`` when
    nothing awaits.
    """
    return min(fmt.awaiting(views) for fmt in WAITING)


def step(view: Mapping[str, Any]) -> str:
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


def thinking(views: Sequence[Mapping[str, Any]], index: int) -> Optional[Thinking]:
    """The thinking of the message at ``index`` (``Format.thinking``), ``None`` for none.

    The formats' thinking shapes do not overlap (typed blocks, typeless blocks,
    parts, role-less items), so at most one format finds any.
    """
    for fmt in FORMATS:
        found = fmt.thinking(views, index)
        if found is not None:
            return found
    return None


def summary_note(
    text: str, summary_role: str, beside: Optional[Mapping[str, Any]]
) -> Dict[str, Any]:
    """The summary message, shaped as the message ``beside`` it is (the specification's
    ``{"role": ..., "content": ...}`` unless that is a Gemini content or a Converse message)."""
    for fmt in RESUMING:
        if fmt.shaped(beside):
            return fmt.note(text, summary_role)
    return {"role": summary_role, "content": text}


def joined(view: Mapping[str, Any], text: str) -> Optional[Dict[str, Any]]:
    """A copy of ``view`` with ``text`` as one more text part or block, for a format in
    ``RESUMING`` whose message it is; ``None`` for any other message."""
    for fmt in RESUMING:
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
    "THINKS",
    "WAITING",
    "Format",
    "Links",
    "Media",
    "Resuming",
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
