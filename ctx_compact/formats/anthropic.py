"""Anthropic Messages: ``tool_use`` blocks answered by ``tool_result`` blocks at the start of
the next message. A ``compaction`` block restarts the conversation (``Links.restarts``)."""

from __future__ import annotations

from collections.abc import Mapping
from itertools import takewhile
from typing import Any, Dict, FrozenSet, Iterator, List, NamedTuple, Optional, Sequence, Tuple

from .._problems import PairingProblem, names
from ._base import ASIDE, CALLS, Links, Media, Thinking, ToolCall, ToolResult, WireFormat
from ._edits import Edits, Part, Problems
from ._shapes import View, Views, blocks, is_block, is_list, key, text_name

PROVIDER = "anthropic"
# The content blocks that carry this format's tool structure, and the role each belongs to.
BLOCKS = {"tool_use": "assistant", "tool_result": "user", "compaction": "assistant"}
# The block holding the provider's summary of everything before it (server-side
# compaction, 2026): the API ignores every block before the latest one.
COMPACTION = "compaction"
THINKING_BLOCKS = ("thinking", "redacted_thinking")
# The content blocks holding media (in a message's content or a tool_result's).
MEDIA_TYPES = ("image", "document")

_MISSING = (
    "messages.{index}: `tool_use` ids were found without `tool_result` blocks immediately "
    "after: {ids}. Each `tool_use` block must have a corresponding `tool_result` block in "
    "the next message."
)
_UNEXPECTED = (
    "messages.{index}.content.{block}: unexpected `tool_use_id` found in `tool_result` "
    "blocks: {ids}. Each `tool_result` block must have a corresponding `tool_use` block in "
    "the previous message."
)


def tool_use_ids(content: Sequence[Any], index: int) -> List[Any]:
    """The ids of the ``tool_use`` blocks in ``content``, in order (``None`` for a missing one).

    A ``tool_use`` without an id is answered by a ``tool_result`` without one,
    as far as the pairing goes: the provider rejects both for other reasons.
    """
    return [
        key(b.get("id"), index, "a tool_use block's id") for b in content if is_block(b, "tool_use")
    ]


def result_ids(content: Sequence[Any], index: int) -> List[Any]:
    """The ``tool_use_id`` of every ``tool_result`` block in ``content``, in order."""
    return [
        key(b.get("tool_use_id"), index, "a tool_result block's tool_use_id")
        for b in content
        if is_block(b, "tool_result")
    ]


def leading_results(content: Sequence[Any]) -> List[View]:
    """The ``tool_result`` blocks ``content`` starts with."""
    return list(takewhile(lambda block: is_block(block, "tool_result"), content))


class _Uses(NamedTuple):
    """What an assistant message leaves open: its ``tool_use`` ids."""

    ids: FrozenSet[Any]


def media_block(block: Any, path: Tuple[Any, ...]) -> Optional[Media]:
    """An ``image`` block, or a ``document`` block holding a PDF (base64, URL or file).

    A ``document`` whose source is plain text or content blocks is text, and
    is counted as text: ``None``.
    """
    if not isinstance(block, Mapping) or block.get("type") not in MEDIA_TYPES:
        return None
    kind, source = block["type"], block.get("source")
    source = source if isinstance(source, Mapping) else {}
    origin = source.get("type")
    if kind == "document" and origin not in ("base64", "url", "file"):
        return None
    data = text_name(source.get("data")) if origin == "base64" else None
    mime = text_name(source.get("media_type"))
    if kind == "document" and mime is None:
        mime = "application/pdf"
    return Media(path, PROVIDER, kind, data, 0, mime)


class AnthropicFormat(WireFormat):
    """Anthropic Messages content blocks."""

    provider = PROVIDER
    where = "content"

    def carries(self, view: View) -> bool:
        """Whether ``view``'s content holds ``tool_use``, ``tool_result`` or ``compaction``
        blocks."""
        content = view.get("content")
        if type(content) is str or not is_list(content):
            return False
        return any(isinstance(b, Mapping) and b.get("type") in BLOCKS for b in blocks(view))

    def structure(self, view: View) -> Tuple[str, ...]:
        """The tool block types in ``view``'s content, as an error names them."""
        found = {b.get("type") for b in blocks(view) if isinstance(b, Mapping)}
        return tuple(f"{kind!r} blocks" for kind in BLOCKS if kind in found)

    def check(self, view: View, index: int) -> None:
        """Refuse a ``tool_use`` block outside an assistant message."""
        if view.get("role") != "assistant" and any(
            is_block(b, "tool_use") for b in blocks(view, index)
        ):
            raise self.refuse(view, index, "only an assistant message holds tool_use blocks")

    def link(self, view: View, index: int, links: Links) -> int:
        """The earliest message ``view`` must stay with, or ``-1``; sets what it leaves open."""
        left = links.left
        content = blocks(view, index)
        if view.get("role") == "assistant":
            if any(is_block(b, COMPACTION) for b in content):
                links.restarts.append(index)
            uses = tool_use_ids(content, index)
            links.left = _Uses(frozenset(uses)) if uses else None
            return -1
        links.left = None
        if type(left) is _Uses and view.get("role") == "user":
            answers = result_ids(leading_results(content), index)
            if any(u in left.ids for u in answers):
                return index - 1
        return -1

    def problems(self, views: Views) -> Iterator[PairingProblem]:
        """What Anthropic rejects: a ``tool_use`` not answered at the start of the next message,
        a ``tool_result`` answering no ``tool_use`` of the previous one."""

        pending: List[Any] = []  # tool_use ids of the previous message, not yet reported
        called: FrozenSet[Any] = frozenset()  # every tool_use id of the previous message
        for i, message in enumerate(views):
            content = blocks(message, i)
            if pending:
                problem = _unanswered(pending, i - 1, message, content, i)
                if problem is not None:
                    yield problem
            yield from _unexpected(content, i, called)
            pending = tool_use_ids(content, i) if message.get("role") == "assistant" else []
            called = frozenset(pending)
            # Text after the last tool_use: the results can no longer follow immediately.
            if pending and _text_after(content, range(len(content))):
                yield _missing(i, pending, i, "missing_tool_result_blocks")
                pending = []
        if pending:
            yield _missing(len(views) - 1, pending, len(views) - 1, "missing_tool_result_blocks")

    def repair(self, views: Views, problems: Problems, edits: Edits, answer: Optional[str]) -> None:
        """Repair this format's ``problems`` (see docs/repair.md): results moved to the start of
        the next message or dropped, calls answered with ``answer`` or dropped."""
        exchanges: Dict[int, str] = {}  # assistant message -> the problem found
        strays: Dict[int, str] = {}  # user message -> its unexpected results
        for problem in problems:
            if problem.code == "unexpected_tool_result":
                strays.setdefault(problem.index, problem.code)
            else:  # reported at the call, or at the message after it (not at its start)
                late = problem.code == "tool_result_not_at_start"
                exchanges.setdefault(problem.index - late, problem.code)
        for at, code in exchanges.items():
            strays.pop(at + 1, None)  # the exchange rebuilds its next message
            _exchange(views, at, code, edits, answer)
        for i, code in strays.items():
            previous = views[i - 1] if i else {}
            uses = blocks(previous) if previous.get("role") == "assistant" else ()
            allowed = frozenset(tool_use_ids(uses, i - 1))
            content = blocks(views[i], i)
            gone = [k for k, b in enumerate(content) if _stray(b, allowed)]
            _rebuild_next(edits, i, content, gone, [], code)

    def tool_calls(self, view: View, index: int) -> Iterator[ToolCall]:
        """An assistant message's ``tool_use`` blocks, with the tool each names."""
        if view.get("role") == "assistant":
            for k, block in enumerate(blocks(view)):
                if is_block(block, "tool_use"):
                    yield self.object_call(index, "content", k, block, (block.get("id"),))

    def tool_results(self, view: View, index: int) -> Iterator[ToolResult]:
        """A user message's ``tool_result`` blocks."""
        if view.get("role") == "user":
            for k, block in enumerate(blocks(view)):
                if is_block(block, "tool_result"):
                    yield ToolResult(
                        index, k, "content", block.get("tool_use_id"), block.get("content")
                    )

    def step(self, view: View) -> Optional[str]:
        """A user message carrying ``tool_result`` blocks is no user's own message, and an
        assistant message with ``tool_use`` blocks calls tools; ``None`` for any other."""
        role = view.get("role")
        content = view.get("content")
        if type(content) is str or content is None or type(role) is not str:
            return None
        if role not in _STEPS:
            return None
        wanted, step = _STEPS[role]
        for block in blocks(view):
            if isinstance(block, Mapping) and block.get("type") == wanted:
                return step
        return None

    def thinking(self, views: Views, index: int) -> Optional[Thinking]:
        """An assistant message's ``thinking`` and ``redacted_thinking`` blocks; none may go
        from a message of thinking alone (Anthropic rejects an empty content)."""
        view = views[index]
        content = view.get("content")
        if type(content) is str or content is None or view.get("role") != "assistant":
            return None
        content = blocks(view, index)
        found = []
        for k, block in enumerate(content):
            if isinstance(block, Mapping) and block.get("type") in THINKING_BLOCKS:
                found.append((k, block["type"]))
        if not found:
            return None
        return Thinking(tuple(found) if len(found) < len(content) else ())

    def media(self, view: View) -> Iterator[Media]:
        """The ``image`` and ``document`` blocks of ``view``, in ``tool_result`` blocks too."""
        for k, block in enumerate(blocks(view)):
            found = media_block(block, ("content", k))
            if found is not None:
                yield found
            elif is_block(block, "tool_result"):
                yield from self.media_in(block.get("content"), media_block, "content", k, "content")


# What a message of each role is among a turn's steps when it holds a block of this type.
_STEPS = {"user": ("tool_result", ASIDE), "assistant": ("tool_use", CALLS)}


def _unexpected(content: Sequence[Any], i: int, called: FrozenSet[Any]) -> Iterator[PairingProblem]:
    """The ``tool_result`` blocks of ``content`` answering none of ``called``."""
    for k, block in enumerate(content):
        if is_block(block, "tool_result"):
            use_id = key(block.get("tool_use_id"), i, "a tool_result block's tool_use_id")
            if use_id not in called:
                text = _UNEXPECTED.format(index=i, block=k, ids=use_id)
                yield PairingProblem(i, "unexpected_tool_result", names([use_id]), PROVIDER, text)


def _missing(at: int, ids: List[Any], index: int, code: str) -> PairingProblem:
    shown = names(ids)
    text = _MISSING.format(index=at, ids=", ".join(shown))
    return PairingProblem(index, code, shown, PROVIDER, text)


def _unanswered(
    pending: List[Any], at: int, message: View, content: Sequence[Any], index: int
) -> Optional[PairingProblem]:
    """The problem of the message at ``index`` not answering the ``tool_use`` ids ``pending``
    of the assistant message at ``at`` at its start, if it does not."""
    leading = leading_results(content) if message.get("role") == "user" else []
    answered = {r.get("tool_use_id") for r in leading}
    unanswered = [u for u in pending if u not in answered]
    if not unanswered:
        return None
    late = set(result_ids(content[len(leading) :], index))
    if any(u in late for u in unanswered):
        return _missing(at, unanswered, index, "tool_result_not_at_start")
    return _missing(at, unanswered, at, "missing_tool_result_blocks")


def _placeholder(use_id: Any, answer: str) -> Dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": use_id, "content": answer, "is_error": True}


def _exchange(views: Views, at: int, code: str, edits: Edits, answer: Optional[str]) -> None:
    """Repair the assistant message at ``at`` and the message after it, together."""
    content = blocks(views[at], at)
    uses = tool_use_ids(content, at)
    nxt = at + 1
    following = views[nxt] if nxt < len(views) and _answers_here(views[nxt]) else None
    given = blocks(following, nxt) if following is not None else ()
    found = {b.get("tool_use_id") for b in given if is_block(b, "tool_result")}
    unanswered = list(dict.fromkeys(u for u in uses if u not in found))
    added = _settle(content, at, unanswered, following is not None, code, edits, answer)
    if following is not None:
        kept = frozenset(uses) - frozenset(unanswered) if answer is None else frozenset(uses)
        _answers_first(edits, nxt, given, kept, added, code)


def _answers_here(view: View) -> bool:
    """Whether ``view`` is a user message this format's results may go into: one whose
    blocks are all typed, as Anthropic's are (another format's tool blocks are not)."""
    content: Any = view.get("content")
    blocks_given: Sequence[Any] = content if is_list(content) else ()
    return view.get("role") == "user" and not any(
        isinstance(b, Mapping) and "type" not in b for b in blocks_given
    )


def _answers_first(
    edits: Edits, i: int, given: Sequence[Any], kept: FrozenSet[Any], added: List[Any], code: str
) -> None:
    """The user message at ``i``: its results answering ``kept`` first; the others go."""
    results = [k for k, b in enumerate(given) if is_block(b, "tool_result")]
    answering = [k for k in results if given[k].get("tool_use_id") in kept]
    lead = len(leading_results(given))
    late = [given[k].get("tool_use_id") for k in answering if k >= lead]
    if late:
        edits.note(i, "moved_result", late, PROVIDER, code)
    gone = [k for k in results if given[k].get("tool_use_id") not in kept]
    _rebuild_next(edits, i, given, gone, [*answering, *added], code)


def _settle(
    content: Sequence[Any],
    at: int,
    unanswered: List[Any],
    followed: bool,
    code: str,
    edits: Edits,
    answer: Optional[str],
) -> List[Dict[str, Any]]:
    """The assistant message at ``at`` with its ``unanswered`` calls answered (the
    placeholders, returned for the user message after it when ``followed``, else in a new
    one) or dropped, and text after its last call moved before its first."""
    added: List[Dict[str, Any]] = []
    parts = list(range(len(content)))
    if unanswered and answer is not None:
        added = [_placeholder(u, answer) for u in unanswered]
        edits.note(at, "answered_call", unanswered, PROVIDER, code, at + 1 if followed else None)
        if not followed:
            edits.insert(at, {"role": "user", "content": added})
            added = []
    elif unanswered:
        missing = frozenset(unanswered)
        parts = [k for k in parts if not _use_of(content[k], missing)]
        edits.note(at, "dropped_call", unanswered, PROVIDER, code)
    _text_first(content, parts, at, unanswered, code, edits)
    return added


def _text_after(content: Sequence[Any], parts: Sequence[int]) -> List[int]:
    """The ``tool_use`` blocks among ``parts`` if a text block follows the last one."""
    uses = [k for k in parts if is_block(content[k], "tool_use")]
    late = uses and any(k > uses[-1] and is_block(content[k], "text") for k in parts)
    return uses if late else []


def _text_first(
    content: Sequence[Any], parts: List[int], at: int, ids: List[Any], code: str, edits: Edits
) -> None:
    """The assistant message at ``at`` made of ``parts``, with the text after its first
    ``tool_use`` moved before it when some follows the last one; gone when only thinking
    is left (for the calls ``ids``)."""
    uses = _text_after(content, parts)
    if uses:
        texts = {k for k in parts if is_block(content[k], "text")}
        edits.note(at, "moved_text", [content[k].get("id") for k in uses], PROVIDER, code)
        # Stable: what comes before the first call, then the text after it, then the rest.
        parts = sorted(parts, key=lambda k: 0 if k < uses[0] else 1 if k in texts else 2)
    if all(content[k].get("type") in THINKING_BLOCKS for k in parts):
        edits.drop(at)
        edits.note(at, "dropped_empty", ids, PROVIDER, code)
    elif parts != list(range(len(content))):
        edits.rebuild(at, "content", parts)


def _stray(block: Any, allowed: FrozenSet[Any]) -> bool:
    """Whether ``block`` is a ``tool_result`` answering none of ``allowed``."""
    return is_block(block, "tool_result") and block.get("tool_use_id") not in allowed


def _use_of(block: Any, ids: FrozenSet[Any]) -> bool:
    return is_block(block, "tool_use") and block.get("id") in ids


def _rebuild_next(
    edits: Edits, i: int, content: Sequence[Any], gone: List[int], first: List[Part], code: str
) -> None:
    """The user message at ``i`` without the blocks ``gone``, starting with ``first``;
    string content becomes a text block after them."""
    for k in gone:
        ids = [content[k].get("tool_use_id")]
        edits.note(i, "dropped_result", ids, PROVIDER, "unexpected_tool_result")
    why = ((), PROVIDER, code)
    edits.remove(i, "content", gone, first, action=None, why=why, text=_text)


def _text(text: str) -> Dict[str, Any]:
    return {"type": "text", "text": text}


ANTHROPIC = AnthropicFormat()
