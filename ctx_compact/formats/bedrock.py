"""Amazon Bedrock Converse ``messages``: ``toolUse`` blocks answered by ``toolResult`` blocks.

Blocks carry no ``type``: each is keyed by what it holds (``{"toolUse": {...}}``). Roles
alternate, starting with a user message (``resumes``; see docs/formats/bedrock.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Dict, FrozenSet, Iterator, List, NamedTuple, Optional, Sequence, Tuple

from .._problems import PairingProblem, names
from ._base import Links, Media, Thinking, ToolCall, ToolResult, WireFormat, turn_step
from ._edits import Edits, Part, Problems, Why
from ._shapes import View, Views, is_list, key, text_name

PROVIDER = "bedrock"
# The block keys holding media.
MEDIA_KEYS = ("image", "document", "video")
# The blocks that carry this format's tool structure, and the role each belongs to.
BLOCKS = {"toolUse": "assistant", "toolResult": "user"}
ROLES = ("user", "assistant")
# The block holding the model's reasoning (Claude's extended thinking, signed or redacted).
REASONING = "reasoningContent"

_EXCEEDS = (
    "The number of toolResult blocks at messages.{index}.content exceeds the number of "
    "toolUse blocks of previous turn."
)
_EXPECTED = "Expected toolResult blocks at messages.{index}.content for the following Ids: {ids}"
_START = (
    "A conversation must start with a user message. Try again with a conversation that "
    "starts with a user message."
)
_ALTERNATE = (
    "A conversation must alternate between user and assistant roles. Make sure the "
    "conversation alternates between user and assistant roles and try again."
)


def _blocks(view: View) -> Sequence[Any]:
    content: Sequence[Any] = view.get("content") or ()
    if type(content) is str or not is_list(content):
        return ()
    return content


def is_message(view: Optional[View]) -> bool:
    """Whether ``view`` is a Converse message: a user or assistant role and a non-empty
    list of blocks that carry no ``type`` (every other format's blocks do)."""
    if view is None or view.get("role") not in ROLES:
        return False
    content = _blocks(view)
    return bool(content) and all(isinstance(b, Mapping) and "type" not in b for b in content)


def _inner(block: Any, kind: str) -> Optional[View]:
    if not isinstance(block, Mapping) or "type" in block:
        return None
    found = block.get(kind)
    return found if isinstance(found, Mapping) else None


def _held(view: View, kind: str) -> List[Tuple[int, View]]:
    """``(position, inner mapping)`` of each block of ``kind``, in order."""
    found = ((k, _inner(block, kind)) for k, block in enumerate(_blocks(view)))
    return [(k, inner) for k, inner in found if inner is not None]


def uses(view: View) -> List[Tuple[int, View]]:
    """``(position, toolUse)`` of each ``toolUse`` block, in order."""
    return _held(view, "toolUse")


def results(view: View) -> List[Tuple[int, View]]:
    """``(position, toolResult)`` of each ``toolResult`` block, in order."""
    return _held(view, "toolResult")


def _ids(found: Sequence[Tuple[int, View]], index: int) -> List[Any]:
    return [key(item.get("toolUseId"), index, "a toolUseId") for _, item in found]


class _Uses(NamedTuple):
    """What an assistant message leaves open: its ``toolUse`` ids."""

    ids: FrozenSet[Any]


def cleared_result(placeholder: str) -> List[Dict[str, Any]]:
    """What a cleared ``toolResult`` holds: one text block, the placeholder."""
    return [{"text": placeholder}]


def media_block(block: Any, path: Tuple[Any, ...]) -> Optional[Media]:
    """An ``image``, ``document`` or ``video`` block, or ``None`` for any other block.

    ``source.bytes`` is the payload: raw bytes as boto3 takes them, base64 text
    in JSON. A source in S3 is not known offline (``data`` is ``None``); a
    ``document`` whose source is ``text`` or ``content`` is text, counted as such.
    """
    for kind in MEDIA_KEYS:
        found = _inner(block, kind)
        if found is None:
            continue
        source = found.get("source")
        source = source if isinstance(source, Mapping) else {}
        if kind == "document" and ("text" in source or "content" in source):
            return None
        data = source.get("bytes")
        data = data if isinstance(data, (str, bytes, bytearray, memoryview)) else None
        mime = text_name(found.get("format"))
        return Media(path, PROVIDER, kind, data, 0, mime)
    return None


class BedrockFormat(WireFormat):
    """Bedrock Converse messages (boto3's ``bedrock-runtime`` ``converse``)."""

    provider = PROVIDER
    where = "content"

    def media(self, view: View) -> Iterator[Media]:
        """The ``image``, ``document`` and ``video`` blocks of a message, in ``toolResult`` too."""
        for k, block in enumerate(_blocks(view)):
            found = media_block(block, ("content", k))
            if found is not None:
                yield found
                continue
            result = _inner(block, "toolResult")
            inner: Any = result.get("content") if result is not None else None
            yield from self.media_in(inner, media_block, "content", k, "toolResult", "content")

    def carries(self, view: View) -> bool:
        """Whether ``view``'s content holds ``toolUse`` or ``toolResult`` blocks."""
        return any(isinstance(b, Mapping) and _tool_block(b) for b in _blocks(view))

    def structure(self, view: View) -> Tuple[str, ...]:
        """The tool block kinds in ``view``'s content, as an error names them."""
        found = {k for b in _blocks(view) if isinstance(b, Mapping) for k in b if k in BLOCKS}
        return tuple(f"{kind!r} blocks" for kind in BLOCKS if kind in found)

    def check(self, view: View, index: int) -> None:
        """Refuse a ``toolUse`` outside an assistant message, a ``toolResult`` outside a
        user message."""
        role = view.get("role")
        for kind, owner in BLOCKS.items():
            if role != owner and any(_inner(b, kind) is not None for b in _blocks(view)):
                raise self.refuse(view, index, f"only a {owner} message holds {kind} blocks")
        _ids(uses(view), index)
        _ids(results(view), index)

    def link(self, view: View, index: int, links: Links) -> int:
        """The earliest message ``view`` must stay with, or ``-1``; sets what it leaves open."""
        left = links.left
        links.left = None
        if view.get("role") == "assistant":
            found = _ids(uses(view), index)
            if found:
                links.left = _Uses(frozenset(found))
            return -1
        if type(left) is _Uses and any(i in left.ids for i in _ids(results(view), index)):
            return index - 1
        return -1

    def resumes(self, before: Optional[View], view: View) -> bool:
        """Whether a conversation may continue at ``view`` right after ``before``
        (``None``: at the start). See the module's docstring."""
        if not is_message(view):
            return True
        role = view.get("role")
        answered = results(view)
        if before is None:
            return role == "user" and not answered
        if before.get("role") == role:
            return False
        if answered:
            called = {use.get("toolUseId") for _, use in uses(before)}
            return all(result.get("toolUseId") in called for _, result in answered)
        return True

    def shaped(self, view: Optional[View]) -> bool:
        """Whether ``view`` is a Converse message (tool blocks or not)."""
        return is_message(view)

    def note(self, text: str, summary_role: str) -> Dict[str, Any]:
        """The summary of dropped messages as a Converse message of its own."""
        return {"role": summary_role, "content": [{"text": text}]}

    def joined(self, view: View, text: str) -> Dict[str, Any]:
        """A copy of ``view`` with the summary as one more text block at its end."""
        return {**view, "content": [*_blocks(view), {"text": text}]}

    def problems(self, views: Views) -> Iterator[PairingProblem]:
        """What Bedrock rejects: ``toolUse`` ids the next message does not answer (or no
        message after them at all), more ``toolResult`` blocks than the previous turn's
        ``toolUse`` blocks, a conversation not starting with a user message, two messages
        of one role in a row."""
        previous: Optional[View] = None
        for i, view in enumerate(views):
            if is_message(view):
                yield from _order_problems(previous, view, i)
            yield from _pairing_problems(previous, view, i)
            previous = view
        # A call awaiting its result at the end: Bedrock wants the results in a message
        # that is not there (reported at the call, in Bedrock's numbering).
        n = len(views)
        if previous is not None and previous.get("role") == "assistant" and uses(previous):
            ids = names(list(dict.fromkeys(_ids(uses(previous), n - 1))))
            text = _EXPECTED.format(index=n, ids=", ".join(ids))
            yield PairingProblem(n - 1, "missing_tool_results", ids, PROVIDER, text)

    def repair(self, views: Views, problems: Problems, edits: Edits, answer: Optional[str]) -> None:
        """Repair this format's ``problems`` (see docs/repair.md): the messages' order first
        (merged, dropped), then in a later pass their results and calls."""
        order = [p for p in problems if p.code in _ORDER]
        if order:
            _reorder(views, order, edits)
            return
        for problem in problems:
            i, code = problem.index, problem.code
            if code == "too_many_tool_results":
                gone, ids = _extra_results(views, i)
                edits.remove(i, "content", gone, action="dropped_result", why=(ids, PROVIDER, code))
            elif code == "missing_tool_results":
                _answer(views, i, edits, answer, code)

    def step(self, view: View) -> Optional[str]:
        """A user message opens a turn unless it holds ``toolResult`` blocks; an assistant
        message calls tools when it holds ``toolUse`` blocks, else replies; ``None`` for
        no Converse message."""
        if not is_message(view):
            return None
        model = view.get("role") == "assistant"
        return turn_step(model, bool(uses(view) if model else results(view)))

    def thinking(self, views: Views, index: int) -> Optional[Thinking]:
        """An assistant message's ``reasoningContent`` blocks; none may go from a message of
        reasoning alone (Bedrock rejects an empty content)."""
        view = views[index]
        if view.get("role") != "assistant" or not is_message(view):
            return None
        content = _blocks(view)
        found = tuple(
            (k, REASONING) for k, b in enumerate(content) if _inner(b, REASONING) is not None
        )
        if not found:
            return None
        return Thinking(found if len(found) < len(content) else ())

    def tool_calls(self, view: View, index: int) -> Iterator[ToolCall]:
        """An assistant message's ``toolUse`` blocks, with the tool each names."""
        if view.get("role") == "assistant":
            for k, use in uses(view):
                yield self.object_call(index, "content", k, use, (use.get("toolUseId"),), "toolUse")

    def tool_results(self, view: View, index: int) -> Iterator[ToolResult]:
        """A user message's ``toolResult`` blocks (their ``content`` list)."""
        if view.get("role") == "user":
            for k, result in results(view):
                yield ToolResult(
                    index,
                    k,
                    "content",
                    result.get("toolUseId"),
                    result.get("content"),
                    inner="toolResult",
                    wrap=cleared_result,
                )


def _order_problems(previous: Optional[View], view: View, i: int) -> Iterator[PairingProblem]:
    """A conversation not starting with a user message, two messages of one role in a row."""
    if i == 0 and view.get("role") != "user":
        yield PairingProblem(i, "first_message_not_user", (), PROVIDER, _START)
    if previous is not None and is_message(previous) and previous.get("role") == view.get("role"):
        yield PairingProblem(i, "roles_not_alternating", (), PROVIDER, _ALTERNATE)


def _pairing_problems(previous: Optional[View], view: View, i: int) -> Iterator[PairingProblem]:
    """More ``toolResult`` blocks in ``view`` than ``toolUse`` blocks in ``previous``, and
    ``toolUse`` ids of ``previous`` that ``view`` does not answer."""
    called = _calls_before(previous, i)
    answered = _ids(results(view), i) if view.get("role") == "user" else []
    if len(answered) > len(called):
        asked = set(called)
        extra = [a for a in answered if a not in asked] or answered
        text = _EXCEEDS.format(index=i)
        yield PairingProblem(i, "too_many_tool_results", names(extra), PROVIDER, text)
    given = set(answered)
    missing = names([c for c in dict.fromkeys(called) if c not in given])
    if missing:
        text = _EXPECTED.format(index=i, ids=", ".join(missing))
        yield PairingProblem(i, "missing_tool_results", missing, PROVIDER, text)


def _reorder(views: Views, order: Sequence[PairingProblem], edits: Edits) -> None:
    """A leading assistant message dropped; each run of one role merged into its first."""
    into: Dict[int, List[Part]] = {}  # the message merged into -> its blocks, then the others'
    root: Dict[int, int] = {}  # a merged message -> the one it went into
    for problem in order:
        i = problem.index
        if problem.code == "first_message_not_user":
            _drop_leading(views, i, problem.code, edits)
            continue
        target = root.get(i - 1, i - 1)
        if target in edits.dropped:
            continue  # the next pass reads the list without it
        if target not in into:
            into[target] = list(range(len(_blocks(views[target]))))
        into[target].extend(b if isinstance(b, dict) else dict(b) for b in _blocks(views[i]))
        root[i] = target
        edits.drop(i)
        edits.note(i, "merged_message", (), PROVIDER, problem.code, target)
    for at, blocks in into.items():
        edits.rebuild(at, "content", blocks)


def _drop_leading(views: Views, i: int, code: str, edits: Edits) -> None:
    """The leading assistant messages dropped: each would open the conversation."""
    end = i + 1
    while end < len(views) and is_message(views[end]) and views[end]["role"] == "assistant":
        end += 1
    for k in range(i, end):
        edits.drop(k)
        edits.note(k, "dropped_message", (), PROVIDER, code)


def _extra_results(views: Views, i: int) -> Tuple[List[int], List[Any]]:
    """The blocks (and ids) of toolResults beyond the previous turn's calls."""
    called = set(_ids(uses(views[i - 1]), i - 1)) if i else set()
    gone, ids, seen = [], [], set()
    for k, result in results(views[i]):
        use_id = result.get("toolUseId")
        if use_id not in called or use_id in seen:
            gone.append(k)
            ids.append(use_id)
        seen.add(use_id)
    return gone, ids


def _answer(views: Views, i: int, edits: Edits, answer: Optional[str], code: str) -> None:
    """The ``toolUse`` ids of the message before ``i`` that ``i`` does not answer: answered
    at its start, or dropped from the message before it. Calls awaiting their results at
    the end (reported at the calls themselves) are answered in a new message after them."""
    at_end = i == len(views) - 1 and views[i].get("role") == "assistant" and uses(views[i])
    at = i if at_end else i - 1
    user = views[i].get("role") == "user"  # never at the end: that message is the assistant's
    answered = set(_ids(results(views[i]), i)) if user else set()
    missing = [c for c in dict.fromkeys(_ids(uses(views[at]), at)) if c not in answered]
    why = (missing, PROVIDER, code)
    if answer is None:
        _drop_uses(views, at, edits, why)
        return
    added: List[Part] = [_placeholder(m, answer) for m in missing]
    if not user:  # no message of Bedrock's holds results there: a new user message does
        edits.insert(at, {"role": "user", "content": added})
        edits.note(at, "answered_call", *why)
        return
    edits.note(at, "answered_call", *why, i)
    edits.remove(i, "content", [], added, action="answered_call", why=why, text=_text)


def _text(text: str) -> Dict[str, Any]:
    return {"text": text}


def _calls_before(previous: Optional[View], i: int) -> List[Any]:
    """The ``toolUse`` ids of the message before ``i`` if it is an assistant message."""
    if previous is None or previous.get("role") != "assistant":
        return []
    return _ids(uses(previous), i - 1)


def _drop_uses(views: Views, at: int, edits: Edits, why: Why) -> None:
    """The ``toolUse`` blocks of the message at ``at`` with the ids ``why[0]`` dropped."""
    gone_ids = set(why[0])
    gone = [k for k, use in uses(views[at]) if use.get("toolUseId") in gone_ids]
    edits.remove(at, "content", gone, action="dropped_call", why=why, text=_text)


def _placeholder(use_id: Any, answer: str) -> Dict[str, Any]:
    return {"toolResult": {"toolUseId": use_id, "content": [{"text": answer}], "status": "error"}}


# The problems of the messages' order, repaired before their pairing.
_ORDER = ("first_message_not_user", "roles_not_alternating")


def _tool_block(block: View) -> bool:
    return "type" not in block and any(k in block for k in BLOCKS)


BEDROCK = BedrockFormat()
