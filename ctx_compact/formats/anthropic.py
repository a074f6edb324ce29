"""Anthropic Messages: ``tool_use`` blocks answered by ``tool_result`` blocks.

Grouping: a user message starting with ``tool_result`` blocks stays with the
assistant message right before it, when one of those blocks answers one of its
``tool_use`` ids (``thinking`` blocks live in the same message as the
``tool_use``).

A ``compaction`` block in an assistant message is the API's own summary of
everything before it (server-side compaction, 2026): the API ignores every
block before the latest one, so the conversation restarts at that message
(``Links.restarts``; see ``Compaction``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import (
    AbstractSet,
    Any,
    Dict,
    FrozenSet,
    Iterator,
    List,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
)

from .._problems import PairingProblem, names
from ._base import ASIDE, CALLS, Links, Media, Thinking, ToolCall, ToolResult, unrecognised
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
    results = []
    for block in content:
        if not is_block(block, "tool_result"):
            break
        results.append(block)
    return results


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
    source = block.get("source")
    source = source if isinstance(source, Mapping) else {}
    origin = source.get("type")
    if block["type"] == "document" and origin not in ("base64", "url", "file"):
        return None
    data = source.get("data") if origin == "base64" else None
    data = data if isinstance(data, str) else None
    mime = text_name(source.get("media_type"))
    if block["type"] == "document" and mime is None:
        mime = "application/pdf"
    return Media(path, PROVIDER, "image" if block["type"] == "image" else "document", data, 0, mime)


class AnthropicFormat:
    """Anthropic Messages content blocks."""

    provider = PROVIDER
    where = "content"
    keys: Tuple[str, ...] = ()

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
            raise unrecognised(
                view, index, self.structure(view), "only an assistant message holds tool_use blocks"
            )

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

        def missing(at: int, ids: Tuple[str, ...], index: int, code: str) -> PairingProblem:
            text = _MISSING.format(index=at, ids=", ".join(ids))
            return PairingProblem(index, code, ids, PROVIDER, text)

        pending: List[Any] = []  # tool_use ids of the previous message, an assistant's
        called: FrozenSet[Any] = frozenset()  # the same, to look up
        pending_at = -1
        reported = False  # the pending ids were already reported as unanswerable
        for i, message in enumerate(views):
            role = message.get("role")
            content = blocks(message, i)
            leading = leading_results(content) if role == "user" else []
            if pending and not reported:
                answered = {r.get("tool_use_id") for r in leading}
                unanswered = [u for u in pending if u not in answered]
                if unanswered:
                    late = set(result_ids(content[len(leading) :], i))
                    if any(u in late for u in unanswered):
                        yield missing(pending_at, names(unanswered), i, "tool_result_not_at_start")
                    else:
                        yield missing(
                            pending_at, names(unanswered), pending_at, "missing_tool_result_blocks"
                        )
            for k, block in enumerate(content):
                if is_block(block, "tool_result"):
                    use_id = key(block.get("tool_use_id"), i, "a tool_result block's tool_use_id")
                    if use_id not in called:
                        yield PairingProblem(
                            i,
                            "unexpected_tool_result",
                            names([use_id]),
                            PROVIDER,
                            _UNEXPECTED.format(index=i, block=k, ids=use_id),
                        )
            pending, called, pending_at, reported = [], frozenset(), -1, False
            if role == "assistant":
                uses = [k for k, b in enumerate(content) if is_block(b, "tool_use")]
                if uses:
                    pending = tool_use_ids(content, i)
                    called = frozenset(pending)
                    pending_at = i
                    # Text after the last tool_use: the results can no longer follow immediately.
                    if any(is_block(b, "text") for b in content[uses[-1] + 1 :]):
                        yield missing(i, names(pending), i, "missing_tool_result_blocks")
                        reported = True
        if pending and not reported:
            yield missing(pending_at, names(pending), pending_at, "missing_tool_result_blocks")

    def repair(
        self,
        views: Views,
        problems: Problems,
        edits: Edits,
        answer: Optional[str],
    ) -> None:
        """Repair this format's ``problems`` (see ``repair_pairing``).

        Per assistant message whose ``tool_use`` blocks are not all answered at
        the start of the next message: the next user message's ``tool_result``
        blocks answering them move to its start; those answering nothing there
        go; a ``tool_use`` still unanswered is answered with ``answer`` (a
        ``tool_result`` block with ``is_error``, at the start of the next user
        message or in a new one) or, when ``answer`` is ``None``, dropped; text
        after the last ``tool_use`` left moves before the first. Elsewhere a
        ``tool_result`` block answering no ``tool_use`` of the previous message
        goes. A message left with nothing (or thinking alone) goes.
        """
        exchanges: Dict[int, str] = {}  # assistant message -> the problem found
        strays: Dict[int, str] = {}  # user message -> its unexpected results
        for problem in problems:
            if problem.code == "missing_tool_result_blocks":
                exchanges.setdefault(problem.index, problem.code)
            elif problem.code == "tool_result_not_at_start":
                exchanges.setdefault(problem.index - 1, problem.code)
            elif problem.code == "unexpected_tool_result":
                strays.setdefault(problem.index, problem.code)
        for at, code in exchanges.items():
            if at + 1 < len(views):
                strays.pop(at + 1, None)  # the exchange rebuilds its next message
            _exchange(views, at, code, edits, answer)
        for i, code in strays.items():
            previous = views[i - 1] if i else {}
            allowed: AbstractSet[Any] = frozenset()
            if _role(previous) == "assistant":
                allowed = frozenset(tool_use_ids(blocks(previous), i - 1))
            content = blocks(views[i], i)
            gone = [k for k, b in enumerate(content) if _result_id(b, allowed) is not _KEPT]
            _rebuild_next(edits, i, content, gone, [], [], code)

    def awaiting(self, views: Views) -> int:
        """Where calls still awaiting their results end ``views``: a last assistant
        message with ``tool_use`` blocks; ``len(views)`` when there is none."""
        n = len(views)
        last = views[-1] if n else None
        if last is not None and last.get("role") == "assistant":
            return n - 1 if any(is_block(b, "tool_use") for b in blocks(last, n - 1)) else n
        return n

    def tool_calls(self, view: View, index: int) -> Iterator[ToolCall]:
        """An assistant message's ``tool_use`` blocks, with the tool each names."""
        if view.get("role") == "assistant":
            for k, block in enumerate(blocks(view)):
                if is_block(block, "tool_use"):
                    yield ToolCall(
                        index,
                        "content",
                        k,
                        text_name(block.get("name")),
                        (block.get("id"),),
                        arguments=("input",),
                        no_arguments={},
                    )

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
            elif is_block(block, "tool_result") and is_list(block.get("content")):
                for j, inner in enumerate(block["content"]):
                    found = media_block(inner, ("content", k, "content", j))
                    if found is not None:
                        yield found


# What a message of each role is among a turn's steps when it holds a block of this type.
_STEPS = {"user": ("tool_result", ASIDE), "assistant": ("tool_use", CALLS)}

_KEPT = object()  # what _result_id says of a block that is not a stray tool_result


def _role(view: View) -> Any:
    return view.get("role")


def _result_id(block: Any, allowed: AbstractSet[Any]) -> Any:
    """A ``tool_result`` block's id when it answers none of ``allowed``, else ``_KEPT``."""
    if is_block(block, "tool_result") and block.get("tool_use_id") not in allowed:
        return block.get("tool_use_id")
    return _KEPT


def _placeholder(use_id: Any, answer: str) -> Dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": use_id, "content": answer, "is_error": True}


def _exchange(
    views: Views,
    at: int,
    code: str,
    edits: Edits,
    answer: Optional[str],
) -> None:
    """Repair the assistant message at ``at`` and the message after it, together."""
    content = blocks(views[at], at)
    uses = tool_use_ids(content, at)
    nxt = at + 1
    following = views[nxt] if nxt < len(views) and _role(views[nxt]) == "user" else None
    given = blocks(following, nxt) if following is not None else ()
    found = {b.get("tool_use_id") for b in given if is_block(b, "tool_result")}
    unanswered = list(dict.fromkeys(u for u in uses if u not in found))
    missing = set(unanswered)
    # The calls: answered with placeholders, or dropped.
    added: List[Dict[str, Any]] = []
    parts: List[int] = list(range(len(content)))
    if unanswered and answer is not None:
        added = [_placeholder(u, answer) for u in unanswered]
        into = None if following is None else nxt
        edits.note(at, "answered_call", unanswered, PROVIDER, code, into)
        if following is None:
            edits.insert(at, {"role": "user", "content": added})
            added = []
    elif unanswered:
        parts = [
            k
            for k in parts
            if not (is_block(content[k], "tool_use") and content[k].get("id") in missing)
        ]
        edits.note(at, "dropped_call", unanswered, PROVIDER, code)
    kept_uses = [k for k in parts if is_block(content[k], "tool_use")]
    if kept_uses:
        first, last = kept_uses[0], kept_uses[-1]
        late_text = [k for k in parts if k > last and is_block(content[k], "text")]
        if late_text:
            moved = [k for k in parts if k > first and is_block(content[k], "text")]
            taken = set(moved)
            parts = (
                [k for k in parts if k < first]
                + moved
                + [k for k in parts if k >= first and k not in taken]
            )
            ids = [content[k].get("id") for k in kept_uses]
            edits.note(at, "moved_text", ids, PROVIDER, code)
    if not any(content[k].get("type") not in THINKING_BLOCKS for k in parts):
        edits.drop(at)
        edits.note(at, "dropped_empty", unanswered, PROVIDER, code)
    elif parts != list(range(len(content))):
        edits.rebuild(at, "content", parts)
    # The next message: its answers first, then the placeholders, then the rest.
    if following is None:
        return
    kept = {u for u in uses if u not in missing} if answer is None else set(uses)
    gone = [k for k, b in enumerate(given) if _result_id(b, kept) is not _KEPT]
    dropped = set(gone)
    answering = [k for k, b in enumerate(given) if is_block(b, "tool_result") and k not in dropped]
    lead = len(leading_results(given))
    late = [k for k in answering if k >= lead]
    if late:
        late_ids = [given[k].get("tool_use_id") for k in late]
        edits.note(nxt, "moved_result", late_ids, PROVIDER, code)
    _rebuild_next(edits, nxt, given, gone, answering, added, code)


def _rebuild_next(
    edits: Edits,
    i: int,
    content: Sequence[Any],
    gone: List[int],
    first: List[int],
    added: List[Dict[str, Any]],
    code: str,
) -> None:
    """The user message at ``i`` without the blocks ``gone``, starting with its blocks
    ``first`` and then ``added``; string content becomes a text block after them."""
    message = edits.views[i]
    for k in gone:
        ids = [content[k].get("tool_use_id")]
        edits.note(i, "dropped_result", ids, PROVIDER, "unexpected_tool_result")
    text = message.get("content")
    if isinstance(text, str) and not added:
        return  # a text message: nothing in it to move or drop
    placed = {*gone, *first}
    rest = [k for k in range(len(content)) if k not in placed]
    parts: List[Part] = [*first, *added, *rest]
    if isinstance(text, str) and text:
        parts.append({"type": "text", "text": text})
    if not parts:
        edits.drop(i)
        edits.note(i, "dropped_empty", [], PROVIDER, code)
    elif parts != list(range(len(content))):
        edits.rebuild(i, "content", parts)


ANTHROPIC = AnthropicFormat()
