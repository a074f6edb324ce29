"""The interface every format implements (``Format``), and what the formats share with the
generic rules: grouping's state, what clearing and counting read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import (
    Any,
    Callable,
    Dict,
    Iterator,
    List,
    NamedTuple,
    Optional,
    Protocol,
    Sequence,
    Tuple,
)

from .._errors import InvalidMessageError
from .._problems import PairingProblem
from ._edits import Edits, Problems
from ._shapes import View, Views, is_list, text_name


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


def unrecognised(view: View, index: int, structure: Sequence[str], why: str) -> InvalidMessageError:
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
    a file id, whose size cannot be known offline.
    """

    path: Tuple[Any, ...]  # the keys and positions leading from the message to the part
    provider: str  # whose formula bills it: "openai", "anthropic", "gemini" or "bedrock"
    kind: str  # "image", "document", "audio" or "video"
    data: Any = None
    start: int = 0
    mime: Optional[str] = None  # the media type, or a format name ("pdf", "wav")
    detail: Optional[str] = None  # OpenAI's image detail


def turn_step(model: bool, tools: bool) -> str:
    """The step of a message of a format whose roles alternate (Gemini, Bedrock): a model's
    message calls tools when it holds ``tools`` (calls), else replies; a user's is no step
    when it holds them (results), else it opens a turn."""
    if model:
        return CALLS if tools else REPLIES
    return ASIDE if tools else OPENS_TURN


class Format(Protocol):
    """What the generic rules (grouping, the pairing check, repair, clearing, the media
    count) need to know of one wire format; they name no format."""

    provider: str
    where: str  # where its tool structure lives: "keys", "content" (blocks) or "items"
    keys: Tuple[str, ...]  # for "keys": the top-level keys holding it

    # Whether ``view`` carries this format's tool structure (keys, roles, block or item
    # types), and that structure as an error names it.
    def carries(self, view: View) -> bool: ...

    def structure(self, view: View) -> Tuple[str, ...]: ...

    # Refuse the structure where the provider does not take it (``InvalidMessageError``).
    def check(self, view: View, index: int) -> None: ...

    # The earliest message ``view`` must stay with (what it answers), ``-1`` for none;
    # what it opens for the next message goes in ``links``.
    def link(self, view: View, index: int, links: Links) -> int: ...

    # Its pairing problems, in the provider's own words.
    def problems(self, views: Views) -> Iterator[PairingProblem]: ...

    # Its tool calls and results, for clearing.
    def tool_calls(self, view: View, index: int) -> Iterator[ToolCall]: ...

    def tool_results(self, view: View, index: int) -> Iterator[ToolResult]: ...

    # What its message is among a conversation's turns (``OPENS_TURN`` ... ``ASIDE``),
    # ``None`` for a message not its own; and the thinking a message holds.
    def step(self, view: View) -> Optional[str]: ...

    def thinking(self, views: Views, index: int) -> Optional[Thinking]: ...

    # How its ``problems`` on ``views`` are repaired, recorded in ``edits``; ``answer``
    # is the text answering an unanswered call, ``None`` to drop the call.
    def repair(
        self, views: Views, problems: Problems, edits: Edits, answer: Optional[str]
    ) -> None: ...

    # Its media parts (images, documents, audio), with where each is, for the count.
    def media(self, view: View) -> Iterator[Media]: ...


class Resuming(Protocol):
    """A format with rules on where a conversation may resume after a cut."""

    # Whether ``view`` may come right after ``before`` (``None``: at the start).
    def resumes(self, before: Optional[View], view: View) -> bool: ...


class Shaping(Resuming, Protocol):
    """A format whose messages the summary takes the shape of, beside them."""

    # Whether ``view`` is this format's message, and the summary shaped as one: a
    # message of its own, or one more text part of ``view``.
    def shaped(self, view: Optional[View]) -> bool: ...

    def note(self, text: str, summary_role: str) -> Dict[str, Any]: ...

    def joined(self, view: View, text: str) -> Dict[str, Any]: ...


class Waiting(Protocol):
    """A format whose calls may be left awaiting their results at the end of a list."""

    # Where those calls start, reading the last messages only; ``len(views)`` for none.
    def awaiting(self, views: Views) -> int: ...


class WireFormat:
    """What the formats' classes share."""

    provider: str
    where: str
    keys: Tuple[str, ...] = ()

    def structure(self, view: View) -> Tuple[str, ...]:
        raise NotImplementedError

    def refuse(self, view: View, index: int, why: str, *more: str) -> InvalidMessageError:
        """The error for this format's tool structure in ``view`` (and ``more``) where the
        provider does not take it."""
        return unrecognised(view, index, (*self.structure(view), *more), why)

    def step(self, view: View) -> Optional[str]:
        raise NotImplementedError

    def thinking(self, views: Views, index: int) -> Optional[Thinking]:
        """None: unless the format says otherwise, its messages carry no thinking."""
        return None

    def awaiting(self, views: Views) -> int:
        """Where calls still awaiting their results end ``views``: a last message that
        calls tools (``step``); ``len(views)`` when there is none."""
        n = len(views)
        return n - 1 if n and self.step(views[-1]) == CALLS else n

    @staticmethod
    def object_call(
        index: int,
        where: str,
        k: int,
        call: View,
        ids: Tuple[Any, ...],
        inner: Optional[str] = None,
    ) -> ToolCall:
        """The call ``call`` at position ``k`` of the message's ``where`` list (in the block's
        ``inner`` key), its arguments an object under ``input`` (``args`` in a Gemini part)."""
        arguments = ("args",) if where == "parts" else ("input",)
        return ToolCall(index, where, k, text_name(call.get("name")), ids, inner, arguments, {})

    @staticmethod
    def media_in(
        parts: Any, read: Callable[[Any, Tuple[Any, ...]], Optional[Media]], *path: Any
    ) -> Iterator[Media]:
        """What ``read`` finds among ``parts`` (when a list), each at ``(*path, position)``."""
        for k, part in enumerate(parts if is_list(parts) else ()):
            found = read(part, (*path, k))
            if found is not None:
                yield found

    @staticmethod
    def run_ends(views: Views, member: Callable[[View], bool]) -> List[int]:
        """For each message, the last of the run of ``member`` messages after it."""
        ends = list(range(len(views)))
        for i in range(len(views) - 2, -1, -1):
            if member(views[i + 1]):
                ends[i] = ends[i + 1]
        return ends
