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

from collections.abc import Mapping
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Sequence, Set, Tuple

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
from ._edits import Edits, Part
from ._shapes import dump_failed, is_list, key, sdk_dump, text_name

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


def is_content(view: Mapping[str, Any]) -> bool:
    """Whether ``view`` is a Gemini content: a ``parts`` list and no ``content``."""
    return is_list(view.get("parts")) and "content" not in view


def parts(view: Mapping[str, Any]) -> Sequence[Any]:
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


def role(view: Mapping[str, Any]) -> Any:
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


def calls(view: Mapping[str, Any]) -> List[Tuple[int, Mapping[str, Any]]]:
    """``(position, function_call)`` of each call part, in order."""
    found = []
    for k, part in enumerate(parts(view)):
        _, call = _field(part, CALL_KEYS)
        if isinstance(call, Mapping):
            found.append((k, call))
    return found


def responses(view: Mapping[str, Any]) -> List[Tuple[int, Mapping[str, Any]]]:
    """``(position, function_response)`` of each response part, in order."""
    found = []
    for k, part in enumerate(parts(view)):
        _, response = _field(part, RESPONSE_KEYS)
        if isinstance(response, Mapping):
            found.append((k, response))
    return found


def _has(view: Mapping[str, Any], spellings: Tuple[str, str]) -> bool:
    return any(_field(p, spellings)[1] is not None for p in parts(view))


def is_call_turn(view: Optional[Mapping[str, Any]]) -> bool:
    """Whether ``view`` is a Gemini model turn holding ``function_call`` parts."""
    return view is not None and is_content(view) and _has(view, CALL_KEYS)


def is_response_turn(view: Optional[Mapping[str, Any]]) -> bool:
    """Whether ``view`` is a Gemini turn holding ``function_response`` parts."""
    return view is not None and is_content(view) and _has(view, RESPONSE_KEYS)


def answers(call_list: Sequence[Mapping[str, Any]], response_list: Sequence[Any]) -> bool:
    """Whether one of the responses answers one of the calls: by id when both carry
    one, else by position and name."""
    for position, response in enumerate(response_list):
        response_id = response.get("id")
        if response_id is not None and any(c.get("id") is not None for c in call_list):
            if any(_same_id(c.get("id"), response_id) for c in call_list):
                return True
        elif position < len(call_list) and call_list[position].get("name") == response.get("name"):
            return True
    return False


def _same_id(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # an id whose == raises: not a match
        return False


class _Calls(NamedTuple):
    """What a model turn leaves open: its function calls."""

    calls: List[Mapping[str, Any]]


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

    def media(self, view: Mapping[str, Any]) -> Iterator[Media]:
        """The ``inline_data`` and ``file_data`` parts of a content (either spelling)."""
        found: Any = view.get("parts")
        if not is_list(found):
            return
        for k, part in enumerate(found):
            media = media_part(part, ("parts", k))
            if media is not None:
                yield media

    def carries(self, view: Mapping[str, Any]) -> bool:
        """Whether ``view``'s parts hold a function call or response."""
        return any(
            _field(p, CALL_KEYS)[1] is not None or _field(p, RESPONSE_KEYS)[1] is not None
            for p in parts(view)
        )

    def structure(self, view: Mapping[str, Any]) -> Tuple[str, ...]:
        """The function part kinds in ``view``, as an error names them."""
        found = []
        for spellings in (CALL_KEYS, RESPONSE_KEYS):
            for part in parts(view):
                spelling, value = _field(part, spellings)
                if value is not None:
                    found.append(f"{spelling!r} parts")
                    break
        return tuple(found)

    def check(self, view: Mapping[str, Any], index: int) -> None:
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

    def link(self, view: Mapping[str, Any], index: int, links: Links) -> int:
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

    def resumes(self, before: Optional[Mapping[str, Any]], view: Mapping[str, Any]) -> bool:
        """Whether a conversation may continue at ``view`` right after ``before``
        (``None``: at the start). See the module's docstring."""
        if not is_content(view):
            return True
        if is_response_turn(view):
            return is_call_turn(before)
        if before is None:
            return not is_call_turn(view)
        return bool(_role_of(before) != role(view))

    def shaped(self, view: Optional[Mapping[str, Any]]) -> bool:
        """Whether ``view`` is a Gemini content (tool parts or not)."""
        return view is not None and is_content(view)

    def note(self, text: str, summary_role: str) -> Dict[str, Any]:
        """The summary of dropped turns as a Gemini content of its own."""
        return {"role": summary_role, "parts": [{"text": text}]}

    def joined(self, view: Mapping[str, Any], text: str) -> Dict[str, Any]:
        """A copy of ``view`` with the summary as one more text part at its end."""
        return {**view, "parts": [*parts(view), {"text": text}]}

    def problems(self, views: Sequence[Mapping[str, Any]]) -> Iterator[PairingProblem]:
        """What Gemini rejects: a function-response turn not right after a function-call
        turn, or with another number of parts; a function-call turn not right after a
        user or function-response turn."""
        previous: Optional[Mapping[str, Any]] = None
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
        views: Sequence[Mapping[str, Any]],
        problems: Sequence[PairingProblem],
        edits: Edits,
        answer: Optional[str],
    ) -> None:
        """Repair this format's ``problems`` (see ``repair_pairing``).

        A function-call turn right after a model turn is merged into it (its
        parts after that turn's: one model turn, as Gemini writes text and
        calls); one opening the conversation loses its calls; a
        function-response turn not right after a call turn loses its responses;
        a response turn whose responses do not match its call turn's calls one
        for one keeps the responses that answer a call (by id, else by name, in
        order), in the calls' order, and the calls left unanswered are answered
        with ``answer`` (a ``function_response`` part whose ``response`` is
        ``{"output": answer}``) or, when ``answer`` is ``None``, dropped. A turn
        left without parts goes.
        """
        merged: Set[int] = set()
        for problem in problems:
            i = problem.index
            code = problem.code
            if i - 1 in merged:
                continue  # it answers a turn merged in this pass: read again in the next
            if code == "function_call_not_after_user":
                before = views[i - 1] if i else None
                if before is not None and is_content(before) and role(before) == "model":
                    joined = [p if isinstance(p, dict) else dict(p) for p in parts(views[i])]
                    edits.rebuild(i - 1, "parts", [*range(len(parts(before))), *joined])
                    edits.drop(i)
                    edits.note(i, "merged_message", problem.ids, PROVIDER, code, i - 1)
                    merged.add(i)
                    continue
                gone = [k for k, _ in calls(views[i])]
                _rebuild(views, i, gone, [], edits, "dropped_call", problem.ids, code)
            elif code == "orphan_function_response":
                gone = [k for k, _ in responses(views[i])]
                _rebuild(views, i, gone, [], edits, "dropped_result", problem.ids, code)
            elif code == "function_response_count":
                _recount(views, i, edits, answer, code)

    def awaiting(self, views: Sequence[Mapping[str, Any]]) -> int:
        """Where calls still awaiting their results end ``views``: a last model turn of
        ``functionCall`` parts; ``len(views)`` when there is none."""
        n = len(views)
        return n - 1 if n and is_call_turn(views[-1]) else n

    def step(self, view: Mapping[str, Any]) -> Optional[str]:
        """A user turn opens a turn unless it holds function responses; a model turn calls
        tools when it holds function calls, else replies; ``None`` for no Gemini content."""
        if not is_content(view):
            return None
        if role(view) == "model":
            return CALLS if _has(view, CALL_KEYS) else REPLIES
        return ASIDE if _has(view, RESPONSE_KEYS) else OPENS_TURN

    def thinking(self, views: Sequence[Mapping[str, Any]], index: int) -> Optional[Thinking]:
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

    def tool_calls(self, view: Mapping[str, Any], index: int) -> Iterator[ToolCall]:
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

    def tool_results(self, view: Mapping[str, Any], index: int) -> Iterator[ToolResult]:
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


def _rebuild(
    views: Sequence[Mapping[str, Any]],
    i: int,
    gone: List[int],
    first: List[Part],
    edits: Edits,
    action: str,
    ids: Sequence[Any],
    code: str,
) -> None:
    """The turn at ``i`` starting with ``first``, without its parts ``gone``; gone when empty."""
    if gone:
        edits.note(i, action, ids, PROVIDER, code)
    taken = set(gone) | {k for k in first if isinstance(k, int)}
    kept: List[Part] = [*first, *(k for k in range(len(parts(views[i]))) if k not in taken)]
    if not kept:
        edits.drop(i)
        edits.note(i, "dropped_empty", ids, PROVIDER, code)
    elif kept != list(range(len(parts(views[i])))):
        edits.rebuild(i, "parts", kept)


def _recount(
    views: Sequence[Mapping[str, Any]], i: int, edits: Edits, answer: Optional[str], code: str
) -> None:
    """A response turn answering its call turn one for one, in the calls' order."""
    asked = calls(views[i - 1])
    given = responses(views[i])
    matched: Dict[int, int] = {}  # call's position in ``asked`` -> response part's position
    for k, response in given:
        for c, (_, call) in enumerate(asked):
            if c in matched:
                continue
            call_id, response_id = call.get("id"), response.get("id")
            if call_id is not None and response_id is not None:
                found = _same_id(call_id, response_id)
            else:
                found = call.get("name") == response.get("name")
            if found:
                matched[c] = k
                break
    extra = [k for k, _ in given if k not in matched.values()]
    extra_ids = [_call_key(r) for k, r in given if k in extra]
    first: List[Part] = []
    unanswered = [c for c in range(len(asked)) if c not in matched]
    ids = [_call_key(asked[c][1]) for c in unanswered]
    if unanswered and answer is None:
        gone = [asked[c][0] for c in unanswered]
        _rebuild(views, i - 1, gone, [], edits, "dropped_call", ids, code)
        first = [matched[c] for c in sorted(matched)]
    else:
        camel = any(
            _field(parts(views[i])[k], RESPONSE_KEYS)[0] == RESPONSE_KEYS[1] for k, _ in given
        )
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
            edits.note(i - 1, "answered_call", ids, PROVIDER, code, i)
    order = [k for k in first if isinstance(k, int)]
    if order != sorted(order):  # put in the calls' order: Gemini pairs by position
        ids = [_call_key(r) for k, r in given if k in order]
        edits.note(i, "moved_result", ids, PROVIDER, code)
    _rebuild(views, i, extra, first, edits, "dropped_result", extra_ids, code)


def cleared_response(placeholder: str) -> Dict[str, Any]:
    """What a cleared function response holds: Gemini's ``output`` key, the placeholder."""
    return {"output": placeholder}


def _call_key(part: Mapping[str, Any]) -> Any:
    """What pairs a call with its response for clearing: the id, else the function's name."""
    found = part.get("id")
    return found if found is not None else part.get("name")


def _role_of(view: Mapping[str, Any]) -> Any:
    """The role of any message, a Gemini content's default included."""
    return role(view) if is_content(view) else view.get("role")


GEMINI = GeminiFormat()
