"""Google Gemini ``contents``: a model turn's ``function_call`` parts answered by the next turn's
``function_response`` parts.

A content is ``{"role": "user" | "model", "parts": [...]}`` (a missing role is
the API's default, ``"user"``). Parts are read in both spellings the API takes:
``function_call``/``functionCall``, ``function_response``/``functionResponse``,
``thought_signature``/``thoughtSignature``, ``inline_data``/``inlineData``. A
google-genai ``types.Content`` is seen as the JSON it sends (snake_case).

Grouping: a turn holding ``function_response`` parts stays with the model turn
right before it when one of its responses answers one of that turn's calls: by
``id`` when both carry one, else by position and ``name``. A ``thought_signature``
is a field of the part it signs (or a part of the same model turn), so it never
leaves its call.

Where a conversation may resume after a cut (``resumes``): Gemini refuses a
function-call turn that does not come right after a user turn or a
function-response turn ("Please ensure that function call turn comes
immediately after a user turn or after a function response turn."), so one never
opens the conversation or follows a model turn; a function-response turn only
ever follows its call turn. And because older models refuse two turns of the
same role in a row ("Please ensure that multiturn requests alternate between
user and model."), a cut never makes two user turns or two model turns meet:
whatever the model, the turns on either side of a cut alternate.

Roles: the API takes ``"user"`` and ``"model"``, and for a function response
turn also ``"function"`` or ``"tool"`` (older docs send it so; it is a user
turn for the alternation); a content holding function parts with any other role
is refused.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any, Deque, Dict, Iterator, List, NamedTuple, Optional, Sequence, Set, Tuple

from .._errors import InvalidMessageError
from .._problems import PairingProblem, names
from ._base import (
    ASIDE,
    CALLS,
    OPENS_TURN,
    REPLIES,
    Links,
    Media,
    Thinking,
    ToolCall,
    ToolResult,
    unrecognised,
)
from ._edits import Edits, Part, Problems
from ._shapes import View, Views, dump_failed, is_list, key, sdk_dump, text_name

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


def calls(view: View) -> List[Tuple[int, View]]:
    """``(position, function_call)`` of each call part, in order."""
    found = []
    for k, part in enumerate(parts(view)):
        _, call = _field(part, CALL_KEYS)
        if isinstance(call, Mapping):
            found.append((k, call))
    return found


def responses(view: View) -> List[Tuple[int, View]]:
    """``(position, function_response)`` of each response part, in order."""
    found = []
    for k, part in enumerate(parts(view)):
        _, response = _field(part, RESPONSE_KEYS)
        if isinstance(response, Mapping):
            found.append((k, response))
    return found


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


class GeminiFormat:
    """Gemini ``contents``, dicts in either spelling or google-genai objects' JSON."""

    provider = PROVIDER
    where = "keys"
    keys: Tuple[str, ...] = ("parts",)

    def media(self, view: View) -> Iterator[Media]:
        """The ``inline_data`` and ``file_data`` parts of a content (either spelling)."""
        found: Any = view.get("parts")
        if not is_list(found):
            return
        for k, part in enumerate(found):
            media = media_part(part, ("parts", k))
            if media is not None:
                yield media

    def carries(self, view: View) -> bool:
        """Whether ``view``'s parts hold a function call or response."""
        return any(
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
            raise unrecognised(
                view,
                index,
                (*self.structure(view), "'content'"),
                "a Gemini content has 'parts' and no 'content'",
            )
        if found is not None and found not in ROLES and found not in RESPONSE_ROLES:
            raise unrecognised(
                view,
                index,
                self.structure(view),
                "Gemini takes role 'user' or 'model' (a function response turn also "
                "'function' or 'tool')",
            )
        current = role(view)
        if current != "model" and _has(view, CALL_KEYS):
            raise unrecognised(
                view, index, self.structure(view), "only a model turn holds function_call parts"
            )
        if current == "model" and _has(view, RESPONSE_KEYS):
            raise unrecognised(
                view,
                index,
                self.structure(view),
                "a function_response part belongs to a user turn, not a model turn",
            )
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
                ids = names([c.get("id") or c.get("name") for _, c in calls(view)])
                yield PairingProblem(
                    i, "function_call_not_after_user", ids, PROVIDER, _CALL_AFTER_USER
                )
            if is_response_turn(view):
                answered = responses(view)
                ids = names([r.get("id") or r.get("name") for _, r in answered])
                if not is_call_turn(previous):
                    yield PairingProblem(
                        i, "orphan_function_response", ids, PROVIDER, _RESPONSE_AFTER_CALL
                    )
                elif previous is not None and len(calls(previous)) != len(answered):
                    yield PairingProblem(i, "function_response_count", ids, PROVIDER, _PART_COUNT)
            previous = view

    def repair(
        self,
        views: Views,
        problems: Problems,
        edits: Edits,
        answer: Optional[str],
    ) -> None:
        """Repair this format's ``problems`` (see ``repair_pairing``).

        The turns are read once, in order, each against the turn kept before it
        (so a repair's consequences are repaired in the same pass). A
        function-call turn right after a model turn is merged into the first
        model turn of that run when a user turn comes before it (the parts after
        that turn's: one model turn, as Gemini writes text and calls); with no
        user turn before it (opening the conversation, or after another
        format's message) it loses its calls. A function-response turn not
        right after a call turn loses its responses; a response turn whose
        responses are not as many as its call turn's calls keeps the responses
        that answer a call (by id, else by name, in order), in the calls' order,
        and the calls left unanswered are answered with ``answer`` (a
        ``function_response`` part whose ``response`` is ``{"output":
        answer}``) or, when ``answer`` is ``None``, dropped. A turn left without
        parts goes.
        """
        if not problems:
            return
        state: Any = _START  # the message kept before this one: _START, _USER, _OTHER, a _Turn
        members: List[int] = []  # model turns kept after the _Turn's, not merged into it
        turns: List[_Turn] = []
        for i, view in enumerate(views):
            if not is_content(view):
                state, members = (_USER if view.get("role") == "user" else _OTHER), []
                continue
            if role(view) == "model":
                found = calls(view)
                if isinstance(state, _Turn) and found and state.after_user:
                    state.merge(views, [*members, i], edits)
                    members = []
                elif found and (isinstance(state, _Turn) or state is not _USER):
                    code = "function_call_not_after_user"
                    gone = [k for k, _ in found]
                    if _rebuild(views, i, gone, [], edits, "dropped_call", _shown(found), code):
                        if isinstance(state, _Turn):
                            members.append(i)  # a model turn after a model turn, as it was
                        else:
                            state = _Turn(views, i, False, [])
                            turns.append(state)
                elif isinstance(state, _Turn):
                    members.append(i)
                else:
                    state = _Turn(views, i, state is _USER, found)
                    turns.append(state)
                continue
            given = responses(view)
            if not given:
                state, members = _USER, []
                continue
            if not (isinstance(state, _Turn) and not members and state.calls):
                code = "orphan_function_response"
                gone = [k for k, _ in given]
                if _rebuild(views, i, gone, [], edits, "dropped_result", _shown(given), code):
                    state, members = _USER, []
                continue
            if len(state.calls) == len(given) or _recount(views, i, state, edits, answer):
                state = _USER
            elif not state.kept():
                state = _USER  # the call turn went too: a user turn was before it
        for turn in turns:
            turn.finish(views, edits)

    def awaiting(self, views: Views) -> int:
        """Where calls still awaiting their results end ``views``: a last model turn of
        ``functionCall`` parts; ``len(views)`` when there is none."""
        n = len(views)
        return n - 1 if n and is_call_turn(views[-1]) else n

    def step(self, view: View) -> Optional[str]:
        """A user turn opens a turn unless it holds function responses; a model turn calls
        tools when it holds function calls, else replies; ``None`` for no Gemini content."""
        if not is_content(view):
            return None
        if role(view) == "model":
            return CALLS if _has(view, CALL_KEYS) else REPLIES
        return ASIDE if _has(view, RESPONSE_KEYS) else OPENS_TURN

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
        # A call part with "thought" set is still the call; a signed part is the signature's.
        clearable = tuple(
            (k, "thought")
            for k in thoughts
            if _field(found[k], SIGNATURE_KEYS)[1] is None
            and _field(found[k], CALL_KEYS)[1] is None
        )
        if len(clearable) == len(found):
            clearable = ()
        return Thinking(clearable, items="parts")

    def tool_calls(self, view: View, index: int) -> Iterator[ToolCall]:
        """A model turn's function calls; one without an id is answered through its name."""
        if role(view) == "model":
            for k, call in calls(view):
                name = text_name(call.get("name"))
                spelling, _ = _field(parts(view)[k], CALL_KEYS)
                yield ToolCall(
                    index,
                    "parts",
                    k,
                    name,
                    (_call_key(call),),
                    inner=spelling,
                    arguments=("args",),
                    no_arguments={},
                )

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


# What the message kept before a turn is, when it is not a model turn (a _Turn).
_START = "start"  # none: the turn opens the conversation
_USER = "user"  # a user turn, a function-response turn, another format's user message
_OTHER = "other"  # another format's message of another role


class _Turn:
    """A model turn kept by a repair pass, as the turns after it see it: its parts as they
    will be sent (its own by position, then those of the turns merged into it), its calls
    among them, and whether a user turn comes before it (calls may follow only one)."""

    def __init__(
        self,
        views: Views,
        at: int,
        after_user: bool,
        found: List[Tuple[int, View]],
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
        if not self.changed:
            return
        kept = self.kept()
        if not kept:
            edits.drop(self.at)
            edits.note(self.at, "dropped_empty", self.gone_ids, PROVIDER, "function_response_count")
        elif kept != list(range(len(parts(views[self.at])))):
            edits.rebuild(self.at, "parts", kept)


def _shown(found: Sequence[Tuple[int, View]]) -> List[Any]:
    """Calls or responses as a problem names them: by id, else by name."""
    return [part.get("id") or part.get("name") for _, part in found]


def _rebuild(
    views: Views,
    i: int,
    gone: List[int],
    first: List[Part],
    edits: Edits,
    action: str,
    ids: Sequence[Any],
    code: str,
) -> bool:
    """The turn at ``i`` starting with ``first``, without its parts ``gone``; gone when
    empty (then ``False``)."""
    if gone:
        edits.note(i, action, ids, PROVIDER, code)
    taken = set(gone) | {k for k in first if isinstance(k, int)}
    kept: List[Part] = [*first, *(k for k in range(len(parts(views[i]))) if k not in taken)]
    if not kept:
        edits.drop(i)
        edits.note(i, "dropped_empty", ids, PROVIDER, code)
        return False
    if kept != list(range(len(parts(views[i])))):
        edits.rebuild(i, "parts", kept)
    return True


def _name(part: View) -> Any:
    """A call's or response's name, to look up (one that cannot be matches nothing)."""
    found = part.get("name")
    try:
        hash(found)
    except TypeError:
        return object()
    return found


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


def _recount(
    views: Views,
    i: int,
    turn: _Turn,
    edits: Edits,
    answer: Optional[str],
) -> bool:
    """The response turn at ``i`` answering the call turn ``turn`` one for one, in the
    calls' order; ``False`` when it is left empty and goes."""
    code = "function_response_count"
    asked = turn.calls
    given = responses(views[i])
    matched = _match(asked, given)
    answering = set(matched.values())
    extra_ids = [_call_key(r) for k, r in given if k not in answering]
    extra = [k for k, _ in given if k not in answering]
    first: List[Part] = []
    unanswered = [c for c in range(len(asked)) if c not in matched]
    ids = [_call_key(asked[c][1]) for c in unanswered]
    if unanswered and answer is None:
        turn.drop_calls(unanswered, ids, edits, code)
        first = [matched[c] for c in sorted(matched)]
    else:
        own = parts(views[i])
        camel = any(_field(own[k], RESPONSE_KEYS)[0] == RESPONSE_KEYS[1] for k, _ in given)
        spelling = RESPONSE_KEYS[1] if camel else RESPONSE_KEYS[0]
        for c, (_, call) in enumerate(asked):
            if c in matched:
                first.append(matched[c])
                continue
            made: Dict[str, Any] = {"name": call.get("name"), "response": {"output": answer}}
            if call.get("id") is not None:
                made["id"] = call.get("id")
            first.append({spelling: made})
        if unanswered:
            edits.note(turn.at, "answered_call", ids, PROVIDER, code, i)
    order = [k for k in first if isinstance(k, int)]
    if order != sorted(order):  # put in the calls' order: Gemini pairs by position
        placed = set(order)
        ids = [_call_key(r) for k, r in given if k in placed]
        edits.note(i, "moved_result", ids, PROVIDER, code)
    return _rebuild(views, i, extra, first, edits, "dropped_result", extra_ids, code)


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
