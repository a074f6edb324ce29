"""Anthropic Messages: ``tool_use`` blocks answered by ``tool_result`` blocks.

Grouping: a user message starting with ``tool_result`` blocks stays with the
assistant message right before it, when one of those blocks answers one of its
``tool_use`` ids (``thinking`` blocks live in the same message as the
``tool_use``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Iterator, List, NamedTuple, Sequence, Tuple

from .._problems import PairingProblem, names
from ._base import Links, ToolCall, ToolResult, unrecognised
from ._shapes import blocks, is_block, is_list, key, text_name

PROVIDER = "anthropic"
# The content blocks that carry this format's tool structure, and the role each belongs to.
BLOCKS = {"tool_use": "assistant", "tool_result": "user"}
THINKING_BLOCKS = ("thinking", "redacted_thinking")

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


def leading_results(content: Sequence[Any]) -> List[Mapping[str, Any]]:
    """The ``tool_result`` blocks ``content`` starts with."""
    results = []
    for block in content:
        if not is_block(block, "tool_result"):
            break
        results.append(block)
    return results


class _Uses(NamedTuple):
    """What an assistant message leaves open: its ``tool_use`` ids."""

    ids: List[Any]


class AnthropicFormat:
    """Anthropic Messages content blocks."""

    provider = PROVIDER
    where = "content"
    keys: Tuple[str, ...] = ()

    def carries(self, view: Mapping[str, Any]) -> bool:
        """Whether ``view``'s content holds ``tool_use`` or ``tool_result`` blocks."""
        content = view.get("content")
        if type(content) is str or not is_list(content):
            return False
        return any(isinstance(b, Mapping) and b.get("type") in BLOCKS for b in blocks(view))

    def structure(self, view: Mapping[str, Any]) -> Tuple[str, ...]:
        """The tool block types in ``view``'s content, as an error names them."""
        found = {b.get("type") for b in blocks(view) if isinstance(b, Mapping)}
        return tuple(f"{kind!r} blocks" for kind in BLOCKS if kind in found)

    def check(self, view: Mapping[str, Any], index: int) -> None:
        """Refuse a ``tool_use`` block outside an assistant message."""
        if view.get("role") != "assistant" and any(
            is_block(b, "tool_use") for b in blocks(view, index)
        ):
            raise unrecognised(
                view, index, self.structure(view), "only an assistant message holds tool_use blocks"
            )

    def link(self, view: Mapping[str, Any], index: int, links: Links) -> int:
        """The earliest message ``view`` must stay with, or ``-1``; sets what it leaves open."""
        left = links.left
        content = blocks(view, index)
        if view.get("role") == "assistant":
            uses = tool_use_ids(content, index)
            links.left = _Uses(uses) if uses else None
            return -1
        links.left = None
        if type(left) is _Uses and view.get("role") == "user":
            answers = result_ids(leading_results(content), index)
            if any(u in left.ids for u in answers):
                return index - 1
        return -1

    def problems(self, views: Sequence[Mapping[str, Any]]) -> Iterator[PairingProblem]:
        """What Anthropic rejects: a ``tool_use`` not answered at the start of the next message,
        a ``tool_result`` answering no ``tool_use`` of the previous one."""

        def missing(at: int, ids: Tuple[str, ...], index: int, code: str) -> PairingProblem:
            text = _MISSING.format(index=at, ids=", ".join(ids))
            return PairingProblem(index, code, ids, PROVIDER, text)

        pending: List[Any] = []  # tool_use ids of the previous message, an assistant's
        pending_at = -1
        reported = False  # the pending ids were already reported as unanswerable
        for i, message in enumerate(views):
            role = message.get("role")
            content = blocks(message, i)
            leading = leading_results(content) if role == "user" else []
            if pending and not reported:
                answered = [r.get("tool_use_id") for r in leading]
                unanswered = [u for u in pending if u not in answered]
                if unanswered:
                    late = result_ids(content[len(leading) :], i)
                    if any(u in late for u in unanswered):
                        yield missing(pending_at, names(unanswered), i, "tool_result_not_at_start")
                    else:
                        yield missing(
                            pending_at, names(unanswered), pending_at, "missing_tool_result_blocks"
                        )
            for k, block in enumerate(content):
                if is_block(block, "tool_result"):
                    use_id = key(block.get("tool_use_id"), i, "a tool_result block's tool_use_id")
                    if use_id not in pending:
                        yield PairingProblem(
                            i,
                            "unexpected_tool_result",
                            names([use_id]),
                            PROVIDER,
                            _UNEXPECTED.format(index=i, block=k, ids=use_id),
                        )
            pending, pending_at, reported = [], -1, False
            if role == "assistant":
                uses = [k for k, b in enumerate(content) if is_block(b, "tool_use")]
                if uses:
                    pending = tool_use_ids(content, i)
                    pending_at = i
                    # Text after the last tool_use: the results can no longer follow immediately.
                    if any(is_block(b, "text") for b in content[uses[-1] + 1 :]):
                        yield missing(i, names(pending), i, "missing_tool_result_blocks")
                        reported = True
        if pending and not reported:
            yield missing(pending_at, names(pending), pending_at, "missing_tool_result_blocks")

    def tool_calls(self, view: Mapping[str, Any], index: int) -> Iterator[ToolCall]:
        """An assistant message's ``tool_use`` blocks, with the tool each names."""
        if view.get("role") == "assistant":
            for k, block in enumerate(blocks(view)):
                if is_block(block, "tool_use"):
                    yield ToolCall(
                        index, "content", k, text_name(block.get("name")), (block.get("id"),)
                    )

    def tool_results(self, view: Mapping[str, Any], index: int) -> Iterator[ToolResult]:
        """A user message's ``tool_result`` blocks."""
        if view.get("role") == "user":
            for k, block in enumerate(blocks(view)):
                if is_block(block, "tool_result"):
                    yield ToolResult(
                        index, k, "content", block.get("tool_use_id"), block.get("content"), False
                    )


ANTHROPIC = AnthropicFormat()
