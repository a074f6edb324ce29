"""OpenAI Chat Completions: an assistant's ``tool_calls`` answered by ``tool`` messages.

Also the legacy ``function_call`` answered by the ``function`` message right after it, and
Ollama's native ``/api/chat``, whose calls carry no ids and are answered in order (or by
``tool_name``; see docs/formats/ollama.md).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any, Deque, Dict, FrozenSet, Iterator, List, NamedTuple, Optional, Tuple

from .._errors import InvalidMessageError
from .._problems import PairingProblem, names
from ._base import ASIDE, CALLS, EMPTY_ARGUMENTS, Links, Media, ToolCall, ToolResult, WireFormat
from ._edits import Edits, Problems, Why
from ._shapes import View, Views, blocks, data_url, id_set, is_list, key, text_name

PROVIDER = "openai"
# Tool calls without ids, answered in order: Ollama's native API.
OLLAMA = "ollama"
# The top-level keys that carry this format's tool structure.
KEYS: Tuple[str, ...] = ("tool_calls", "function_call")
# The roles only this format's messages have.
ROLES = ("tool", "function")

_ORPHAN = (
    "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
    "message with 'tool_calls'."
)
_UNKNOWN_ID = (
    "Invalid parameter: 'tool_call_id' of '{id}' not found in 'tool_calls' of previous message."
)
_MISSING = (
    "An assistant message with 'tool_calls' must be followed by tool messages responding "
    "to each 'tool_call_id'. The following tool_call_ids did not have response messages: {ids}"
)
# The legacy function pair: OpenAI's wording for tool messages, said of function messages.
_FUNCTION = (
    "Invalid parameter: messages with role 'function' must be a response to a preceding "
    "message with 'function_call'."
)
_OLLAMA_ORPHAN = (
    "A 'tool' message without a 'tool_call_id' must follow the assistant message whose "
    "id-less 'tool_calls' it answers, in the calls' order ({what}); Ollama would show the "
    "model a tool result with no call before it."
)
_OLLAMA_MISSING = (
    "An assistant message's 'tool_calls' without an 'id' must be answered in order by the "
    "'tool' messages right after it; Ollama would show the model calls without results: {names}"
)


def calls_tools(view: View) -> bool:
    """Whether ``view`` holds ``tool_calls`` or a ``function_call``."""
    return bool(view.get("tool_calls") or view.get("function_call"))


def call_ids(message: View, index: int) -> Optional[FrozenSet[Any]]:
    """The ids of an assistant message's tool calls, or ``None`` if none.

    Calls without an ``id`` cannot be answered, so they contribute nothing.
    """
    tool_calls = message.get("tool_calls")
    if not tool_calls:
        return None
    if not is_list(tool_calls):
        raise InvalidMessageError(
            f"tool_calls must be a list of mappings, not {type(tool_calls).__name__}", index
        )
    for j, call in enumerate(tool_calls):
        if not isinstance(call, Mapping):
            raise InvalidMessageError(
                f"tool_calls[{j}] must be a mapping with an 'id', not {type(call).__name__}",
                index,
            )
    return id_set((call.get("id") for call in tool_calls), index, "a tool call's id")


def idless_calls(message: View) -> Tuple[Optional[str], ...]:
    """The tool names of an assistant message's calls without an ``id`` (Ollama's), in order.

    ``tool_calls`` must have been checked by ``call_ids`` first.
    """
    return tuple(_function_name(c) for c in message.get("tool_calls") or () if c.get("id") is None)


def _calls_of(message: View, index: int) -> Tuple[FrozenSet[Any], Tuple[Any, ...]]:
    """An assistant message's call ids and the names of its id-less calls."""
    ids = call_ids(message, index) or frozenset()
    calls = message.get("tool_calls")
    return ids, idless_calls(message) if calls and len(ids) < len(calls) else ()


class _IdlessCalls:
    """An assistant message's calls without an ``id`` (Ollama's) not answered yet, in order.

    A ``tool`` message without a ``tool_call_id`` answers the first of them
    calling the tool it names (``tool_name``), or the first of them when it
    names none. Each answer costs the same however many calls there are: the
    positions are queued per tool name, and the answered ones skipped once.
    """

    __slots__ = ("_answered", "_by_name", "_first", "_left", "names")

    def __init__(self, names: Tuple[Optional[str], ...]) -> None:
        self.names = tuple(names)  # the tool each call names (None: none)
        self._answered = [False] * len(self.names)
        self._first = 0  # no call before it is unanswered
        self._left = len(self.names)
        self._by_name: Dict[Optional[str], Deque[int]] = {}
        for position, name in enumerate(self.names):
            self._by_name.setdefault(name, deque()).append(position)

    def __bool__(self) -> bool:
        return self._left > 0

    def answer(self, tool_name: Any) -> int:
        """The position of the call a tool message naming ``tool_name`` answers (``None``:
        naming none), now answered; ``-1`` when it answers none of them."""
        answered = self._answered
        if tool_name is None:
            while self._first < len(answered) and answered[self._first]:
                self._first += 1
            if self._first == len(answered):
                return -1
            position = self._first
        else:
            try:
                queue = self._by_name.get(tool_name)
            except TypeError:  # a name no call can have
                return -1
            while queue and answered[queue[0]]:
                queue.popleft()
            if not queue:
                return -1
            position = queue.popleft()
        answered[position] = True
        self._left -= 1
        return position

    def unanswered(self) -> List[int]:
        """The positions of the calls not answered, in order."""
        return [k for k, done in enumerate(self._answered) if not done]


def opens_function_call(message: View) -> bool:
    """Whether a message is a legacy ``function_call`` awaiting its answer."""
    return message.get("role") == "assistant" and bool(message.get("function_call"))


class _Run(NamedTuple):
    """What an assistant message leaves open: its calls' ids, its id-less calls
    not answered yet (their names), and a legacy function call."""

    at: int
    ids: FrozenSet[Any]
    function_call: bool
    idless: Optional[_IdlessCalls] = None


class _OpenCalls(NamedTuple):
    """An assistant message's calls, while its run of tool messages lasts."""

    at: int  # the assistant message's index
    unanswered: Dict[Any, None]  # call ids not answered yet, in call order
    called: FrozenSet[Any]  # every id it called: a repeated answer is accepted
    idless: _IdlessCalls  # its id-less calls


def _missing(calls: Optional[_OpenCalls]) -> Iterator[PairingProblem]:
    if calls is not None and calls.unanswered:
        ids = names(list(calls.unanswered))
        text = _MISSING.format(ids=", ".join(ids))
        yield PairingProblem(calls.at, "missing_tool_results", ids, PROVIDER, text)
    if calls is not None and calls.idless:
        found = names(_shown([calls.idless.names[k] for k in calls.idless.unanswered()]))
        text = _OLLAMA_MISSING.format(names=", ".join(found))
        yield PairingProblem(calls.at, "missing_tool_results", found, OLLAMA, text)


def _shown(tool_names: List[Optional[str]]) -> List[str]:
    """Id-less calls as a problem names them: by their tool, ``?`` for none."""
    return ["?" if name is None else name for name in tool_names]


def _idless_orphan(index: int, tool_name: Any, open_calls: Optional[_OpenCalls]) -> PairingProblem:
    if open_calls is None:
        what = "no assistant message with 'tool_calls' opens its run"
    elif tool_name is None:
        what = "no id-less call before it is left unanswered"
    else:
        what = f"no unanswered id-less call of {tool_name!r} comes before it"
    found = () if tool_name is None else names([tool_name])
    text = _OLLAMA_ORPHAN.format(what=what)
    return PairingProblem(index, "orphan_tool_result", found, OLLAMA, text)


def _open_calls(message: View, index: int) -> Optional[_OpenCalls]:
    """What an assistant message's calls leave open for the ``tool`` messages after it."""
    ids, idless = _calls_of(message, index)
    if not (ids or idless):
        return None
    calls = (c.get("id") for c in message.get("tool_calls") or ())
    order = dict.fromkeys(c for c in calls if c is not None)
    return _OpenCalls(index, order, ids, _IdlessCalls(idless))


def _answer_problem(
    message: View, index: int, open_calls: Optional[_OpenCalls]
) -> Iterator[PairingProblem]:
    """What is wrong with the ``tool`` message at ``index`` answering ``open_calls``, if
    anything; the call it answers is answered."""
    call_id = key(message.get("tool_call_id"), index, "tool_call_id")
    if call_id is None:  # Ollama's, answered by order (OpenAI refuses it)
        tool_name = message.get("tool_name")
        if open_calls is None or open_calls.idless.answer(tool_name) < 0:
            yield _idless_orphan(index, tool_name, open_calls)
        return
    found = names([call_id])
    if open_calls is None:
        yield PairingProblem(index, "orphan_tool_result", found, PROVIDER, _ORPHAN)
    elif call_id in open_calls.unanswered:
        del open_calls.unanswered[call_id]
    elif call_id not in open_calls.called:
        text = _UNKNOWN_ID.format(id=call_id)
        yield PairingProblem(index, "unknown_tool_call_id", found, PROVIDER, text)


def _unanswered(views: Views, at: int, end: int) -> Tuple[Dict[Any, None], List[int]]:
    """The calls of the assistant message at ``at`` that its run of ``tool`` messages (to
    ``end``) does not answer: their ids in call order, and the positions in ``tool_calls``
    of the id-less ones (answered by order, as ``_IdlessCalls`` pairs them)."""
    calls = views[at].get("tool_calls") or ()
    order = dict.fromkeys(c.get("id") for c in calls if c.get("id") is not None)
    pending = [k for k, call in enumerate(calls) if call.get("id") is None]
    waiting = _IdlessCalls(idless_calls(views[at]) if pending else ())
    for k in range(at + 1, end + 1):
        call_id = views[k].get("tool_call_id")
        if call_id is None:
            waiting.answer(views[k].get("tool_name"))
        else:
            order.pop(call_id, None)
    return order, [pending[k] for k in waiting.unanswered()]


def _function_name(call: View) -> Optional[str]:
    function = call.get("function")
    return text_name(function.get("name")) if isinstance(function, Mapping) else None


class _Owed:
    """Which assistant message a stray ``tool`` message goes to: the nearest before it whose
    call with its id is unanswered, else the nearest after it.

    Asked in message order (``take``), each answer costs the same however many
    messages owe the id: the messages passed are stacked, the rest queued.
    """

    def __init__(self, unanswered: Dict[int, Dict[Any, None]], ends: List[int]) -> None:
        self._unanswered, self._ends = unanswered, ends  # the caller's: a call taken leaves it
        self._later: Dict[Any, Deque[int]] = {}
        self._earlier: Dict[Any, List[int]] = {}
        for at in sorted(unanswered):
            for call_id in unanswered[at]:
                self._later.setdefault(call_id, deque()).append(at)
                self._earlier.setdefault(call_id, [])

    def take(self, call_id: Any, index: int) -> Optional[int]:
        """The message the ``tool`` message at ``index`` answering ``call_id`` goes after (the
        last of the run of the message owing it, that call now answered), or ``None`` when
        no message owes it."""
        later = self._later.get(call_id)
        if later is None:
            return None
        earlier = self._earlier[call_id]
        while later and later[0] < index:
            earlier.append(later.popleft())
        if not (earlier or later):
            return None
        at = earlier.pop() if earlier else later.popleft()
        del self._unanswered[at][call_id]
        return self._ends[at]


def _open_function_calls(views: Views) -> List[int]:
    """The assistant ``function_call`` messages with no ``function`` message right after."""
    n = len(views)
    return [
        at
        for at in range(n)
        if opens_function_call(views[at])
        and not (at + 1 < n and views[at + 1].get("role") == "function")
    ]


def _function_homes(views: Views, problems: Problems) -> Dict[int, Optional[int]]:
    """Where each stray ``function`` message goes: after the nearest assistant
    ``function_call`` before it with no ``function`` message right after it and not given
    one yet; ``None`` for none (it is dropped)."""
    strays = [p.index for p in problems if p.code == "orphan_function_result"]
    functions = deque(_open_function_calls(views) if strays else ())
    passed: List[int] = []  # those before the stray, not given one yet
    homes: Dict[int, Optional[int]] = {}
    for i in strays:
        while functions and functions[0] < i:
            passed.append(functions.popleft())
        homes[i] = passed.pop() if passed else None
    return homes


def _settle(
    views: Views,
    at: int,
    end: int,
    ids: List[Any],
    idless: List[int],
    edits: Edits,
    answer: Optional[str],
) -> None:
    """Answer or drop the unanswered calls of the assistant message at ``at``: those with
    the ids ``ids``, and the id-less ones at the positions ``idless`` of its ``tool_calls``
    (answered after ``end``, the last of its run of ``tool`` messages)."""
    problem = "missing_tool_results"
    calls = views[at].get("tool_calls") or ()
    function_names = [_function_name(calls[k]) for k in idless]
    shown = _shown(function_names)
    if answer is not None:
        _answer_calls(edits, end, ids, function_names, answer)
    action = "dropped_call" if answer is None else "answered_call"
    if ids:
        edits.note(at, action, ids, PROVIDER, problem)
    if idless:
        edits.note(at, action, shown, OLLAMA, problem)
    if answer is None:
        why = (ids, PROVIDER, problem) if ids else (shown, OLLAMA, problem)
        _drop_calls(views[at], at, frozenset(idless), frozenset(ids), edits, why)


def _answer_calls(
    edits: Edits, end: int, ids: List[Any], function_names: List[Optional[str]], answer: str
) -> None:
    """``tool`` messages answering ``answer`` to the calls ``ids``, then the id-less ones."""
    for call_id in ids:
        edits.insert(end, {"role": "tool", "tool_call_id": call_id, "content": answer})
    for name in function_names:
        named = {} if name is None else {"tool_name": name}
        edits.insert(end, {"role": "tool", "content": answer, **named})


def _drop_calls(
    view: View, at: int, gone: FrozenSet[int], gone_ids: FrozenSet[Any], edits: Edits, why: Why
) -> None:
    """The assistant message at ``at`` without the calls at the positions ``gone`` and with
    the ids ``gone_ids``; gone when nothing is left (``dropped_empty``, for ``why``)."""
    calls = view.get("tool_calls") or ()
    kept = [k for k, call in enumerate(calls) if k not in gone and call.get("id") not in gone_ids]
    if kept:
        edits.rebuild(at, "tool_calls", kept)
    elif view.get("content") or view.get("function_call"):
        edits.rebuild(at, None, unset=("tool_calls",))
    else:
        edits.drop(at)
        edits.note(at, "dropped_empty", *why)


def media_part(part: Any, path: Tuple[Any, ...]) -> Optional[Media]:
    """A Chat Completions media part, or ``None`` for any other part."""
    if not isinstance(part, Mapping):
        return None
    kind = part.get("type")
    if kind == "image_url":
        image = part.get("image_url")
        url, detail = (
            (image.get("url"), image.get("detail")) if isinstance(image, Mapping) else (image, None)
        )
        mime, data, start = data_url(url)
        return Media(path, PROVIDER, "image", data, start, mime, text_name(detail))
    if kind == "input_audio":
        audio = part.get("input_audio")
        audio = audio if isinstance(audio, Mapping) else {}
        data = text_name(audio.get("data"))
        return Media(path, PROVIDER, "audio", data, 0, text_name(audio.get("format")))
    if kind == "file":
        file = part.get("file")
        mime, data, start = data_url(
            file.get("file_data") if isinstance(file, Mapping) else None, bare=True
        )
        return Media(path, PROVIDER, "document", data, start, mime or "application/pdf")
    return None


def _tool_link(view: View, index: int, links: Links) -> int:
    """``ChatFormat.link`` of a ``tool`` message: the assistant message whose call it answers."""
    left = links.left
    call_id = view.get("tool_call_id")
    if type(left) is not _Run:
        links.left = None
        key(call_id, index, "tool_call_id")
        return -1
    if left.function_call:
        left = links.left = left._replace(function_call=False)
    if call_id is None and left.idless:
        return left.at if left.idless.answer(view.get("tool_name")) >= 0 else -1
    try:
        if call_id in left.ids:  # checks the id is hashable
            return left.at
    except TypeError:
        key(call_id, index, "tool_call_id")  # raises, naming the field
    return -1


class ChatFormat(WireFormat):
    """OpenAI Chat Completions, legacy ``function_call`` included."""

    provider = PROVIDER
    where = "keys"
    keys = KEYS
    roles = ROLES

    def carries(self, view: View) -> bool:
        """Whether ``view`` holds ``tool_calls`` or ``function_call``, or has this format's role."""
        return calls_tools(view) or view.get("role") in ROLES

    def structure(self, view: View) -> Tuple[str, ...]:
        """The tool structure of this format in ``view``, as an error names it."""
        found = tuple(f"{k!r}" for k in KEYS if view.get(k))
        role = view.get("role")
        return (*found, f"role {role!r}") if role in ROLES else found

    def check(self, view: View, index: int) -> None:
        """Refuse calls anywhere but on an assistant message."""
        if view.get("role") != "assistant" and calls_tools(view):
            raise self.refuse(
                view, index, "only an assistant message calls tools in Chat Completions"
            )

    def link(self, view: View, index: int, links: Links) -> int:
        """The earliest message ``view`` must stay with, or ``-1``; sets what it leaves open."""
        role = view.get("role")
        left = links.left
        if role == "tool":
            return _tool_link(view, index, links)
        if role == "function":
            links.left = None
            return index - 1 if type(left) is _Run and left.function_call else -1
        # An assistant message (check() refuses calls on any other role).
        ids, idless = _calls_of(view, index)
        function_call = bool(view.get("function_call"))
        opens = ids or idless or function_call
        waiting = _IdlessCalls(idless) if idless else None
        links.left = _Run(index, ids, function_call, waiting) if opens else None
        return -1

    def problems(self, views: Views) -> Iterator[PairingProblem]:
        """What OpenAI rejects: unanswered calls, answers to no call, stray function messages."""
        open_calls: Optional[_OpenCalls] = None
        for i, message in enumerate(views):
            role = message.get("role")
            if role == "tool":
                yield from _answer_problem(message, i, open_calls)
                continue
            yield from _missing(open_calls)
            open_calls = _open_calls(message, i) if role == "assistant" else None
            if role == "function" and not (i and opens_function_call(views[i - 1])):
                name = message.get("name")
                found = () if name is None else names([name])
                yield PairingProblem(i, "orphan_function_result", found, PROVIDER, _FUNCTION)
        yield from _missing(open_calls)

    def repair(self, views: Views, problems: Problems, edits: Edits, answer: Optional[str]) -> None:
        """Repair this format's ``problems`` (see docs/repair.md): stray results moved into the
        run owing them or dropped, calls answered with ``answer`` or dropped."""
        ends = self.run_ends(views, lambda view: view.get("role") == "tool")
        unanswered: Dict[int, Dict[Any, None]] = {}
        idless: Dict[int, List[int]] = {}  # Ollama's calls: positions in tool_calls
        for problem in problems:
            at = problem.index
            if problem.code == "missing_tool_results" and at not in unanswered:
                unanswered[at], idless[at] = _unanswered(views, at, ends[at])
        owed = _Owed(unanswered, ends)
        homes = _function_homes(views, problems)
        for problem in problems:
            i = problem.index
            if problem.code in ("orphan_tool_result", "unknown_tool_call_id"):
                edits.place(i, owed.take(views[i].get("tool_call_id"), i), problem)
            elif problem.code == "orphan_function_result":
                edits.place(i, homes[i], problem)
        for at, ids in unanswered.items():
            if ids or idless[at]:
                _settle(views, at, ends[at], list(ids), idless[at], edits, answer)

    def awaiting(self, views: Views) -> int:
        """Where calls still awaiting their results end ``views``: the assistant message
        whose run of ``tool`` messages reaches the end without answering every call (a
        legacy ``function_call`` with nothing after it); ``len(views)`` when none."""
        n = len(views)
        at = n - 1
        while at >= 0 and views[at].get("role") == "tool":
            at -= 1
        if at < 0 or views[at].get("role") != "assistant":
            return n
        if views[at].get("function_call") and at == n - 1:
            return at
        ids, idless = _unanswered(views, at, n - 1)
        return at if ids or idless else n

    def tool_calls(self, view: View, index: int) -> Iterator[ToolCall]:
        """An assistant message's calls, with the tool each names."""
        if view.get("role") == "assistant" and call_ids(view, index):  # validates tool_calls
            for j, call in enumerate(view["tool_calls"]):
                arguments = (
                    ("function", "arguments") if isinstance(call.get("function"), Mapping) else ()
                )
                yield ToolCall(
                    index,
                    "tool_calls",
                    j,
                    _function_name(call),
                    (call.get("id"),),
                    arguments=arguments,
                    no_arguments=EMPTY_ARGUMENTS,
                )

    def step(self, view: View) -> Optional[str]:
        """A message with ``tool_calls`` or ``function_call`` calls tools, a ``tool`` or
        ``function`` message is none of a turn's steps; ``None`` for any other."""
        if calls_tools(view):
            return CALLS
        return ASIDE if view.get("role") in ROLES else None

    def tool_results(self, view: View, index: int) -> Iterator[ToolResult]:
        """A ``tool`` message's content."""
        if view.get("role") == "tool":
            yield ToolResult(index, None, "content", view.get("tool_call_id"), view.get("content"))

    def media(self, view: View) -> Iterator[Media]:
        """The ``image_url``, ``input_audio`` and ``file`` parts of ``view``'s content."""
        return self.media_in(blocks(view), media_part, "content")


CHAT = ChatFormat()
