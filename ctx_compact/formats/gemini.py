"""Google Gemini ``contents``: a model turn's ``function_call`` parts answered by the next
turn's ``function_response`` parts (by id, else by position and name).

Parts are read in both spellings the API takes (``function_call``/``functionCall``, ...);
where a conversation may resume after a cut is ``resumes`` (see docs/formats/gemini.md).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any, Deque, Dict, Iterator, List, NamedTuple, Optional, Sequence, Set, Tuple

from .._errors import InvalidMessageError
from .._problems import PairingProblem, names
from ._base import Links, Media, Thinking, ToolCall, ToolResult, WireFormat, turn_step
from ._edits import Edits, Part, Problems
from ._shapes import View, Views, dump_failed, hashable, is_list, key, sdk_dump, text_name

PROVIDER = "gemini"
ROLES = ("user", "model")
# The roles a function response turn may have besides "user" (it is a user turn).
RESPONSE_ROLES = ("function", "tool")
# The part keys holding this format's tool structure, in both spellings.
CALL_KEYS = ("function_call", "functionCall")
RESPONSE_KEYS = ("function_response", "functionResponse")
SIGNATURE_KEYS = ("thought_signature", "thoughtSignature")
# The part keys holding media, in both spellings, with their MIME type's and data's keys.
_MEDIA_FIELDS = (
    ("inline_data", "mime_type", "data"),
    ("inlineData", "mimeType", "data"),
    ("file_data", "mime_type", None),
    ("fileData", "mimeType", None),
)

_RESPONSE_AFTER_CALL = (
    "Please ensure that function response turn comes immediately after a function call turn."
)
_CALL_AFTER_USER = (
    "Please ensure that function call turn comes immediately after a user turn or after a "
    "function response turn."
)
_PART_COUNT = (
    "Please ensure that the number of function response parts is equal to the number of "
    "function call parts of the function call turn."
)


def is_content(view: View) -> bool:
    """Whether ``view`` is a Gemini content: a ``parts`` list and no ``content``."""
    return is_list(view.get("parts")) and "content" not in view


def parts(view: View) -> Sequence[Any]:
    """A content's parts, or ``()``; google-genai ``Part`` objects (``{"role": "model",
    "parts": response.candidates[0].content.parts}``) are seen as the JSON they send.

    Raises:
        InvalidMessageError: A part's ``model_dump`` fails.
    """
    found: Sequence[Any] = view.get("parts") or ()
    if not is_list(found):
        return ()
    if all(type(p) is dict for p in found):
        return found
    return [_part_view(p) for p in found]


def _part_view(part: Any) -> Any:
    if isinstance(part, Mapping):
        return part
    try:
        return sdk_dump(part) or part
    except Exception as exc:
        raise InvalidMessageError(dump_failed(part, exc)) from exc


def role(view: View) -> Any:
    """A content's role: ``"user"`` when it has none (the API's default) or when it is a
    function response turn's ``"function"``/``"tool"``."""
    found = view.get("role")
    return "user" if found is None or found in RESPONSE_ROLES else found


def _field(part: Any, spellings: Tuple[str, str]) -> Tuple[Optional[str], Any]:
    """The key (as spelled) and value of one of a part's fields, or ``(None, None)``."""
    if not isinstance(part, Mapping):
        return None, None
    for spelling in spellings:
        value = part.get(spelling)
        if value is not None:
            return spelling, value
    return None, None


def _held(view: View, spellings: Tuple[str, str]) -> List[Tuple[int, View]]:
    """``(position, value)`` of each part whose field in ``spellings`` is a mapping, in order."""
    found = ((k, _field(part, spellings)[1]) for k, part in enumerate(parts(view)))
    return [(k, value) for k, value in found if isinstance(value, Mapping)]


def calls(view: View) -> List[Tuple[int, View]]:
    """``(position, function_call)`` of each call part, in order."""
    return _held(view, CALL_KEYS)


def responses(view: View) -> List[Tuple[int, View]]:
    """``(position, function_response)`` of each response part, in order."""
    return _held(view, RESPONSE_KEYS)


def _has(view: View, spellings: Tuple[str, str]) -> bool:
    return any(_field(p, spellings)[1] is not None for p in parts(view))


def is_call_turn(view: Optional[View]) -> bool:
    """Whether ``view`` is a Gemini model turn holding ``function_call`` parts."""
    return view is not None and is_content(view) and _has(view, CALL_KEYS)


def is_response_turn(view: Optional[View]) -> bool:
    """Whether ``view`` is a Gemini turn holding ``function_response`` parts."""
    return view is not None and is_content(view) and _has(view, RESPONSE_KEYS)


def answers(call_list: Views, response_list: Sequence[Any]) -> bool:
    """Whether one of the responses answers one of the calls: by id when both carry
    one, else by position and name."""
    ids = {c.get("id") for c in call_list if c.get("id") is not None}  # checked hashable
    for position, response in enumerate(response_list):
        response_id = response.get("id")
        if response_id is not None and ids:
            if _among(response_id, ids):
                return True
        elif position < len(call_list) and call_list[position].get("name") == response.get("name"):
            return True
    return False


def _among(found: Any, ids: Set[Any]) -> bool:
    try:
        return found in ids
    except Exception:  # an id whose == raises: not a match
        return False


class _Calls(NamedTuple):
    """What a model turn leaves open: its function calls."""

    calls: List[View]


def media_part(part: Any, path: Tuple[Any, ...]) -> Optional[Media]:
    """An ``inline_data``/``inlineData`` or ``file_data``/``fileData`` part, else ``None``.

    What it is comes from its MIME type: ``image/*``, ``audio/*``, ``video/*``,
    and anything else a document (a PDF; a ``text/*`` one counts as its text).
    """
    if not isinstance(part, Mapping):
        return None
    for name, mime_key, data_key in _MEDIA_FIELDS:
        blob = part.get(name)
        if isinstance(blob, Mapping):
            mime = text_name(blob.get(mime_key))
            data = blob.get(data_key) if data_key else None
            data = data if isinstance(data, (str, bytes, bytearray)) else None
            kind = (mime or "").split("/", 1)[0]
            kind = kind if kind in ("image", "audio", "video") else "document"
            return Media(path, PROVIDER, kind, data, 0, mime)
    return None


class GeminiFormat(WireFormat):
    """Gemini ``contents``, dicts in either spelling or google-genai objects' JSON."""

    provider = PROVIDER
    where = "keys"
    keys: Tuple[str, ...] = ("parts",)

    def media(self, view: View) -> Iterator[Media]:
        """The ``inline_data`` and ``file_data`` parts of a content (either spelling)."""
        return self.media_in(view.get("parts"), media_part, "parts")

    def carries(self, view: View) -> bool:
        """Whether ``view``'s parts hold a function call or response."""
        return "parts" in view and any(
            _field(p, CALL_KEYS)[1] is not None or _field(p, RESPONSE_KEYS)[1] is not None
            for p in parts(view)
        )

    def structure(self, view: View) -> Tuple[str, ...]:
        """The function part kinds in ``view``, as an error names them."""
        found = []
        for spellings in (CALL_KEYS, RESPONSE_KEYS):
            for part in parts(view):
                spelling, value = _field(part, spellings)
                if value is not None:
                    found.append(f"{spelling!r} parts")
                    break
        return tuple(found)

    def check(self, view: View, index: int) -> None:
        """Refuse function parts the API would not take: with ``content`` beside ``parts``,
        on a role other than ``user``/``model``, a call on a user turn or a response on a
        model turn."""
        found = view.get("role")
        if "content" in view:
            why = "a Gemini content has 'parts' and no 'content'"
            raise self.refuse(view, index, why, "'content'")
        if found is not None and found not in ROLES and found not in RESPONSE_ROLES:
            why = "Gemini takes role 'user' or 'model' (a function response turn also "
            raise self.refuse(view, index, why + "'function' or 'tool')")
        current = role(view)
        if current != "model" and _has(view, CALL_KEYS):
            raise self.refuse(view, index, "only a model turn holds function_call parts")
        if current == "model" and _has(view, RESPONSE_KEYS):
            why = "a function_response part belongs to a user turn, not a model turn"
            raise self.refuse(view, index, why)
        for _, part in calls(view) + responses(view):
            key(part.get("id"), index, "a function part's id")

    def link(self, view: View, index: int, links: Links) -> int:
        """The earliest content ``view`` must stay with, or ``-1``; sets what it leaves open."""
        left = links.left
        links.left = None
        if role(view) == "model":
            found = [call for _, call in calls(view)]
            if found:
                links.left = _Calls(found)
            return -1
        if type(left) is _Calls:
            found_responses = [response for _, response in responses(view)]
            if found_responses and answers(left.calls, found_responses):
                return index - 1
        return -1

    def resumes(self, before: Optional[View], view: View) -> bool:
        """Whether a conversation may continue at ``view`` right after ``before``
        (``None``: at the start). See the module's docstring."""
        if not is_content(view):
            return True
        if is_response_turn(view):
            return is_call_turn(before)
        if before is None:
            return not is_call_turn(view)
        return bool(_role_of(before) != role(view))

    def shaped(self, view: Optional[View]) -> bool:
        """Whether ``view`` is a Gemini content (tool parts or not)."""
        return view is not None and is_content(view)

    def note(self, text: str, summary_role: str) -> Dict[str, Any]:
        """The summary of dropped turns as a Gemini content of its own."""
        return {"role": summary_role, "parts": [{"text": text}]}

    def joined(self, view: View, text: str) -> Dict[str, Any]:
        """A copy of ``view`` with the summary as one more text part at its end."""
        return {**view, "parts": [*parts(view), {"text": text}]}

    def problems(self, views: Views) -> Iterator[PairingProblem]:
        """What Gemini rejects: a function-response turn not right after a function-call
        turn, or with another number of parts; a function-call turn not right after a
        user or function-response turn."""
        previous: Optional[View] = None
        for i, view in enumerate(views):
            if is_call_turn(view) and not (previous is not None and _role_of(previous) == "user"):
                ids, text = names(_shown(calls(view))), _CALL_AFTER_USER
                yield PairingProblem(i, "function_call_not_after_user", ids, PROVIDER, text)
            if is_response_turn(view):
                yield from _response_problems(previous, view, i)
            previous = view

    def repair(self, views: Views, problems: Problems, edits: Edits, answer: Optional[str]) -> None:
        """Repair this format's ``problems`` (see docs/repair.md), reading the turns once, in
        order, each against the turn kept before it."""
        if not problems:
            return
        repair = _Pass(views, edits, answer)
        for i, view in enumerate(views):
            if not is_content(view):
                repair.state = _USER if view.get("role") == "user" else _OTHER
                repair.members = []
            elif role(view) == "model":
                repair.model_turn(i, view)
            else:
                repair.response_turn(i, view)
        for turn in repair.turns:
            turn.finish(views, edits)

    def step(self, view: View) -> Optional[str]:
        """A user turn opens a turn unless it holds function responses; a model turn calls
        tools when it holds function calls, else replies; ``None`` for no Gemini content."""
        if not is_content(view):
            return None
        model = role(view) == "model"
        return turn_step(model, _has(view, CALL_KEYS if model else RESPONSE_KEYS))

    def thinking(self, views: Views, index: int) -> Optional[Thinking]:
        """A model turn's thought parts (``{"text": ..., "thought": true}``).

        Never a part holding a ``thought_signature`` (Gemini wants it back with the
        call it signs, on the part it came on) nor a ``function_call`` part, and none
        from a turn of thoughts alone (Gemini rejects a content without parts).
        """
        view = views[index]
        if not is_content(view) or role(view) != "model":
            return None
        found = parts(view)
        thoughts = [
            k for k, p in enumerate(found) if isinstance(p, Mapping) and p.get("thought") is True
        ]
        if not thoughts:
            return None
        clearable = tuple((k, "thought") for k in thoughts if _clearable(found[k]))
        return Thinking(clearable if len(clearable) < len(found) else (), items="parts")

    def tool_calls(self, view: View, index: int) -> Iterator[ToolCall]:
        """A model turn's function calls; one without an id is answered through its name."""
        if role(view) == "model":
            for k, call in calls(view):
                spelling, _ = _field(parts(view)[k], CALL_KEYS)
                yield self.object_call(index, "parts", k, call, (_call_key(call),), spelling)

    def tool_results(self, view: View, index: int) -> Iterator[ToolResult]:
        """A user turn's function responses (their ``response`` object)."""
        if role(view) == "user":
            for k, response in responses(view):
                spelling, _ = _field(parts(view)[k], RESPONSE_KEYS)
                yield ToolResult(
                    index,
                    k,
                    "response",
                    _call_key(response),
                    response.get("response"),
                    items="parts",
                    inner=spelling,
                    wrap=cleared_response,
                )


def _response_problems(previous: Optional[View], view: View, i: int) -> Iterator[PairingProblem]:
    """A function-response turn after no call turn, or with another number of parts."""
    answered = responses(view)
    ids = names(_shown(answered))
    if previous is None or not is_call_turn(previous):
        yield PairingProblem(i, "orphan_function_response", ids, PROVIDER, _RESPONSE_AFTER_CALL)
    elif len(calls(previous)) != len(answered):
        yield PairingProblem(i, "function_response_count", ids, PROVIDER, _PART_COUNT)


def _clearable(part: View) -> bool:
    """Whether a thought part may go: not a call part, not a signed part."""
    return _field(part, SIGNATURE_KEYS)[1] is None and _field(part, CALL_KEYS)[1] is None


# What the message kept before a turn is, when it is not a model turn (a _Turn).
_START = "start"  # none: the turn opens the conversation
_USER = "user"  # a user turn, a function-response turn, another format's user message
_OTHER = "other"  # another format's message of another role


class _Turn:
    """A model turn kept by a repair pass, as the turns after it see it: its parts as they
    will be sent (its own by position, then those of the turns merged into it), its calls
    among them, and whether a user turn comes before it (calls may follow only one)."""

    def __init__(
        self, views: Views, at: int, after_user: bool, found: List[Tuple[int, View]]
    ) -> None:
        self.at = at
        self.after_user = after_user
        self.parts: List[Part] = list(range(len(parts(views[at]))))
        self.calls = found  # (position in self.parts, call)
        self.gone: Set[int] = set()  # positions in self.parts dropped
        self.gone_ids: List[Any] = []
        self.changed = False

    def merge(self, views: Views, merged: List[int], edits: Edits) -> None:
        """The turns ``merged`` (model turns after this one, the last with calls) joined
        to it, their parts after its own."""
        code = "function_call_not_after_user"
        for i in merged:
            base = len(self.parts)
            self.parts.extend(p if isinstance(p, dict) else dict(p) for p in parts(views[i]))
            found = calls(views[i])
            self.calls.extend((base + k, call) for k, call in found)
            edits.drop(i)
            edits.note(i, "merged_message", _shown(found), PROVIDER, code, self.at)
        self.changed = True

    def drop_calls(self, dropped: List[int], ids: List[Any], edits: Edits, code: str) -> None:
        """The calls at ``dropped`` (positions in ``self.calls``) dropped."""
        gone = set(dropped)
        self.gone.update(self.calls[c][0] for c in gone)
        self.calls = [call for c, call in enumerate(self.calls) if c not in gone]
        self.gone_ids += ids
        self.changed = True
        edits.note(self.at, "dropped_call", ids, PROVIDER, code)

    def kept(self) -> List[Part]:
        return [part for k, part in enumerate(self.parts) if k not in self.gone]

    def finish(self, views: Views, edits: Edits) -> None:
        """Record what became of the turn."""
        if self.changed:  # its own parts kept, then those merged into it
            count = len(parts(views[self.at]))
            last = [p for k, p in enumerate(self.parts[count:], count) if k not in self.gone]
            why = (self.gone_ids, PROVIDER, "function_response_count")
            edits.arrange(self.at, "parts", count, (), sorted(self.gone), last, why=why)


class _Pass:
    """A repair pass over the turns, in order, each against the message kept before it."""

    def __init__(self, views: Views, edits: Edits, answer: Optional[str]) -> None:
        self.views, self.edits, self.answer = views, edits, answer
        self.state: Any = _START  # the message kept before this one: _START, _USER, _OTHER, a _Turn
        self.members: List[int] = []  # model turns kept after the _Turn's, not merged into it
        self.turns: List[_Turn] = []

    def model_turn(self, i: int, view: View) -> None:
        state, found = self.state, calls(view)
        if isinstance(state, _Turn) and found and state.after_user:
            state.merge(self.views, [*self.members, i], self.edits)
            self.members = []
            return
        if found and (isinstance(state, _Turn) or state is not _USER):
            why = (_shown(found), PROVIDER, "function_call_not_after_user")
            gone = [k for k, _ in found]
            if not self.edits.remove(i, "parts", gone, action="dropped_call", why=why):
                return
            found = []
        if isinstance(state, _Turn):
            self.members.append(i)  # a model turn after a model turn, as it was
        else:
            self.state = _Turn(self.views, i, state is _USER, found)
            self.turns.append(self.state)

    def response_turn(self, i: int, view: View) -> None:
        state, given = self.state, responses(view)
        if not given:
            self.state, self.members = _USER, []
        elif not (isinstance(state, _Turn) and not self.members and state.calls):
            why = (_shown(given), PROVIDER, "orphan_function_response")
            gone = [k for k, _ in given]
            if self.edits.remove(i, "parts", gone, action="dropped_result", why=why):
                self.state, self.members = _USER, []
        elif (
            len(state.calls) == len(given)
            or _recount(self.views, i, state, self.edits, self.answer)
            or not state.kept()  # the call turn went too: a user turn was before it
        ):
            self.state = _USER


def _shown(found: Sequence[Tuple[int, View]]) -> List[Any]:
    """Calls or responses as a problem names them: by id, else by name."""
    return [part.get("id") or part.get("name") for _, part in found]


def _name(part: View) -> Any:
    """A call's or response's name, to look up (one that cannot be matches nothing)."""
    found = part.get("name")
    return found if found is None or hashable(found) is not None else object()


def _match(asked: Sequence[Tuple[int, View]], given: Sequence[Tuple[int, View]]) -> Dict[int, int]:
    """Which response answers which call (by their positions in ``asked`` and in the
    turn's parts): each response, in order, the first call not answered yet with its id
    when both carry one, else with its name. The calls are queued per id and name, and
    those answered skipped once, so each response costs the same however many calls."""
    by_id: Dict[Any, Deque[int]] = {}
    idless_by_name: Dict[Any, Deque[int]] = {}
    by_name: Dict[Any, Deque[int]] = {}
    for c, (_, call) in enumerate(asked):
        name = _name(call)
        by_name.setdefault(name, deque()).append(c)
        if call.get("id") is None:
            idless_by_name.setdefault(name, deque()).append(c)
        else:
            by_id.setdefault(call["id"], deque()).append(c)
    matched: Dict[int, int] = {}

    def first(queue: Optional[Deque[int]]) -> Optional[int]:
        while queue and queue[0] in matched:
            queue.popleft()
        return queue[0] if queue else None

    for k, response in given:
        name = _name(response)
        if response.get("id") is None:
            found = first(by_name.get(name))
        else:
            either = (first(by_id.get(response["id"])), first(idless_by_name.get(name)))
            found = min((c for c in either if c is not None), default=None)
        if found is not None:
            matched[found] = k
    return matched


def _recount(views: Views, i: int, turn: _Turn, edits: Edits, answer: Optional[str]) -> bool:
    """The response turn at ``i`` answering the call turn ``turn`` one for one, in the
    calls' order; ``False`` when it is left empty and goes."""
    code = "function_response_count"
    asked = turn.calls
    given = responses(views[i])
    matched = _match(asked, given)
    unanswered = [c for c in range(len(asked)) if c not in matched]
    ids = [_call_key(asked[c][1]) for c in unanswered]
    first: List[Part]
    if unanswered and answer is None:
        turn.drop_calls(unanswered, ids, edits, code)
        first = [matched[c] for c in sorted(matched)]
    else:
        first = _in_order(views[i], given, asked, matched, answer)
        if unanswered:
            edits.note(turn.at, "answered_call", ids, PROVIDER, code, i)
    _note_moved(i, first, given, edits, code)
    extra = sorted({k for k, _ in given} - set(matched.values()))
    why = (_keys(given, extra), PROVIDER, code)
    return edits.remove(i, "parts", extra, first, action="dropped_result", why=why)


def _note_moved(
    i: int, first: List[Part], given: Sequence[Tuple[int, View]], edits: Edits, code: str
) -> None:
    """Note the responses ``first`` puts in the calls' order (Gemini pairs by position)."""
    own = [k for k in first if isinstance(k, int)]
    if own != sorted(own):
        edits.note(i, "moved_result", _keys(given, own), PROVIDER, code)


def _keys(given: Sequence[Tuple[int, View]], among: Sequence[int]) -> List[Any]:
    """The call keys of the responses of ``given`` at the positions ``among``, in order."""
    found = set(among)
    return [_call_key(r) for k, r in given if k in found]


def _in_order(
    view: View,
    given: Sequence[Tuple[int, View]],
    asked: Sequence[Tuple[int, View]],
    matched: Dict[int, int],
    answer: Optional[str],
) -> List[Part]:
    """A response for each call of ``asked``, in order: the turn's own that ``matched``
    says answers it, else a new one answering ``answer``, spelled as the turn's are."""
    own = parts(view)
    camel = any(_field(own[k], RESPONSE_KEYS)[0] == RESPONSE_KEYS[1] for k, _ in given)
    spelling = RESPONSE_KEYS[1] if camel else RESPONSE_KEYS[0]
    found: List[Part] = []
    for c, (_, call) in enumerate(asked):
        if c in matched:
            found.append(matched[c])
            continue
        made: Dict[str, Any] = {"name": call.get("name"), "response": {"output": answer}}
        if call.get("id") is not None:
            made["id"] = call.get("id")
        found.append({spelling: made})
    return found


def cleared_response(placeholder: str) -> Dict[str, Any]:
    """What a cleared function response holds: Gemini's ``output`` key, the placeholder."""
    return {"output": placeholder}


def _call_key(part: View) -> Any:
    """What pairs a call with its response for clearing: the id, else the function's name."""
    found = part.get("id")
    return found if found is not None else part.get("name")


def _role_of(view: View) -> Any:
    """The role of any message, a Gemini content's default included."""
    return role(view) if is_content(view) else view.get("role")


GEMINI = GeminiFormat()
