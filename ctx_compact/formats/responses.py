"""OpenAI Responses input items: ``*_call`` items answered by their outputs, by ``call_id``.

Items carry a ``type`` and no ``role``; a call and its output may be any number of items
apart (``Matcher``). A ``compaction`` item restarts the conversation (``Links.restarts``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any, Callable, Deque, Dict, Iterator, List, Optional, Sequence, Set, Tuple

from .._problems import PairingProblem, names
from ._base import (
    CALLS,
    EMPTY_ARGUMENTS,
    FOLLOWED,
    REPLIES,
    THINKS,
    Links,
    Media,
    Thinking,
    ToolCall,
    ToolResult,
    WireFormat,
)
from ._edits import Edits, Problems
from ._shapes import View, Views, blocks, data_url, hashable, is_list, item_type, key, text_name

PROVIDER = "openai-responses"

# Items that call a tool and the item types that answer them.
CALL_OUTPUTS = {
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
    "computer_call": "computer_call_output",
    "local_shell_call": "local_shell_call_output",
    "shell_call": "shell_call_output",
    "apply_patch_call": "apply_patch_call_output",
    "tool_search_call": "tool_search_output",
    "program": "program_output",
}
OUTPUT_TYPES = frozenset(CALL_OUTPUTS.values())
# Calls the provider runs itself: the item holds the call and its result, nothing answers it.
SERVER_CALLS = frozenset(
    {
        "web_search_call",
        "file_search_call",
        "image_generation_call",
        "code_interpreter_call",
        "mcp_call",
    }
)
# Outputs whose content clearing may replace, with the field holding it. Not here:
# ``computer_call_output`` (its output must be a screenshot object) and
# ``tool_search_output`` (its output is the tool list the model may use).
OUTPUT_FIELDS = {
    "function_call_output": "output",
    "custom_tool_call_output": "output",
    "local_shell_call_output": "output",
    "shell_call_output": "output",
    "apply_patch_call_output": "output",
    "program_output": "result",
}

# Responses bills as OpenAI does.
_BILLED_AS = "openai"

_NO_OUTPUT = "No tool output found for {what} {id}."
_NO_CALL = "No tool call found for {what} output with call_id {id}."
_REASONING = "Item '{id}' of type 'reasoning' was provided without its required following item."


def is_unknown_call(kind: Any) -> bool:
    """Whether an item type names a tool call or output that this format does not know."""
    if type(kind) is not str or not (kind.endswith("_call") or kind.endswith("_call_output")):
        return False
    return kind not in CALL_OUTPUTS and kind not in OUTPUT_TYPES and kind not in SERVER_CALLS


def item_call_id(item: View) -> Any:
    """The id an output item pairs by (unchecked: see ``key``).

    ``local_shell_call_output`` carries the call's id in its ``id`` field.
    """
    call_id = item.get("call_id")
    if call_id is None and item.get("type") == "local_shell_call_output":
        return item.get("id")
    return call_id


def output_key(item: View, index: int) -> Any:
    """``item_call_id``, checked to be usable as an id."""
    return key(item_call_id(item), index, "an output item's call_id")


def call_keys(item: View, index: int) -> List[Any]:
    """The ids an output may name to answer a call item.

    A ``local_shell_call`` may be answered through its ``call_id`` or its ``id``
    (its output names the call in an ``id`` field); every other call through
    its ``call_id``.
    """
    keys = [key(item.get("call_id"), index, "a call item's call_id")]
    if item.get("type") == "local_shell_call":
        keys.append(key(item.get("id"), index, "a call item's id"))
    return keys


class Matcher:
    """Answers matched to calls by id, as the provider pairs Responses items.

    An answer goes to the most recent call that named its id and is not answered
    yet; a call is answered once. The grouping and the pairing check both match
    through this one class, so what the check accepts is what the grouping keeps
    together.
    """

    __slots__ = ("_answered", "_calls", "_opened")

    def __init__(self) -> None:
        self._calls: Dict[Any, List[int]] = {}  # id -> indices of the calls naming it
        self._answered: Set[int] = set()
        self._opened: Dict[int, Any] = {}  # call index -> the id it is reported under

    def open(self, keys: Sequence[Any], index: int) -> None:
        """Record the call at ``index``, answerable through any of ``keys``."""
        self._opened[index] = keys[0]
        for k in dict.fromkeys(keys):
            self._calls.setdefault(k, []).append(index)

    def answer(self, call_id: Any) -> Optional[int]:
        """The index of the call an answer naming ``call_id`` closes, or ``None``."""
        stack = self._calls.get(call_id)
        if not stack:
            return None
        answered = self._answered
        while stack and stack[-1] in answered:
            stack.pop()  # answered through its other id
        if not stack:
            return None
        index = stack.pop()
        answered.add(index)
        return index

    def unanswered(self) -> Iterator[Tuple[int, Any]]:
        """``(index, id)`` of every call not answered, in order."""
        for index, call_id in self._opened.items():
            if index not in self._answered:
                yield index, call_id


def _answerable(item: View) -> Tuple[Any, ...]:
    """The ids an output may name to answer a call item (unchecked: see ``call_keys``)."""
    if item.get("type") == "local_shell_call":
        return (item.get("call_id"), item.get("id"))
    return (item.get("call_id"),)


def _what(kind: str) -> str:
    return kind.replace("_", " ")


def media_part(part: Any, path: Tuple[Any, ...]) -> Optional[Media]:
    """A Responses ``input_image`` or ``input_file`` part, or ``None`` for any other."""
    if not isinstance(part, Mapping):
        return None
    kind = part.get("type")
    if kind == "input_image":
        mime, data, start = data_url(part.get("image_url"))
        return Media(path, _BILLED_AS, "image", data, start, mime, text_name(part.get("detail")))
    if kind == "input_file":
        mime, data, start = data_url(part.get("file_data"), bare=True)
        if mime is None:
            name = part.get("filename")
            pdf = not isinstance(name, str) or name.lower().endswith(".pdf")
            mime = "application/pdf" if pdf else None
        return Media(path, _BILLED_AS, "document", data, start, mime)
    return None


# Where a call item's arguments are, for ``clear_inputs``, and what they become: a
# function call's JSON text, a custom tool's free text (the placeholder). A built-in
# tool's structured action (a shell command, a patch) is the call itself: not listed.
_ARGUMENTS: Dict[str, Tuple[Tuple[str, ...], Optional[str]]] = {
    "function_call": (("arguments",), EMPTY_ARGUMENTS),
    "custom_tool_call": (("input",), None),
}


def _shell_output(output: Any) -> Callable[[str], Any]:
    """How a ``shell_call_output``'s output is cleared: the list of chunks the API requires,
    one chunk keeping the first one's outcome, its ``stdout`` the placeholder.

    Output that is not such a list is written back as it is: nothing is cleared.
    """
    first = output[0] if is_list(output) and output and isinstance(output[0], Mapping) else None

    def wrap(placeholder: str) -> Any:
        if first is None:
            return output
        return [{**first, "stdout": placeholder, "stderr": ""}]

    return wrap


class ResponsesFormat(WireFormat):
    """OpenAI Responses input items (role-less, typed)."""

    provider = PROVIDER
    where = "items"

    def carries(self, view: View) -> bool:
        """Whether ``view`` is a role-less tool call, output, reasoning or approval item."""
        if view.get("role") is not None:
            return False
        kind = view.get("type")
        return type(kind) is str and (
            kind in CALL_OUTPUTS
            or kind in OUTPUT_TYPES
            or kind == "reasoning"
            or kind.startswith("mcp_approval_")
            or is_unknown_call(kind)
        )

    def structure(self, view: View) -> Tuple[str, ...]:
        """The item's type, as an error names it."""
        return (f"type {view.get('type')!r}",)

    def check(self, view: View, index: int) -> None:
        """Refuse a call or output item of a type this format does not know."""
        if is_unknown_call(view.get("type")):
            why = "not a Responses call or output item type this library knows"
            raise self.refuse(view, index, why)

    def link(self, view: View, index: int, links: Links) -> int:
        """The earliest item ``view`` must stay with, or ``-1``; sets what it leaves open."""
        links.left = None
        found: Optional[int] = None
        kind = view.get("type")
        if type(kind) is not str:
            kind = item_type(view, index)
        if kind in CALL_OUTPUTS:
            _matchers(links)[0].open(call_keys(view, index), index)
        elif kind in OUTPUT_TYPES:
            found = _matchers(links)[0].answer(output_key(view, index))
        elif kind == "reasoning":
            links.left = FOLLOWED
        elif kind == "compaction":
            links.restarts.append(index)
        elif kind == "mcp_approval_request":
            request = key(view.get("id"), index, "an approval request's id")
            _matchers(links)[1].open([request], index)
        elif kind == "mcp_approval_response":
            request = key(view.get("approval_request_id"), index, "approval_request_id")
            found = _matchers(links)[1].answer(request)
        return -1 if found is None else found

    def problems(self, views: Views) -> Iterator[PairingProblem]:
        """What OpenAI rejects: a call without its output, an output without its call,
        a reasoning item without its following item."""
        calls = Matcher()  # the grouping matches outputs to calls through the same class
        for i, item in enumerate(views):
            if item.get("role") is not None:
                continue
            kind = item_type(item, i)
            if kind in CALL_OUTPUTS:
                calls.open(call_keys(item, i), i)
            elif kind in OUTPUT_TYPES:
                call_id = output_key(item, i)
                if calls.answer(call_id) is None:
                    text = _NO_CALL.format(what=_what(kind[: -len("_output")]), id=call_id)
                    yield PairingProblem(i, "orphan_call_output", names([call_id]), PROVIDER, text)
            elif kind == "reasoning":
                yield from _lone_reasoning(views, i)
        for index, call_id in calls.unanswered():
            text = _NO_OUTPUT.format(what=_what(views[index]["type"]), id=call_id)
            yield PairingProblem(index, "missing_call_output", names([call_id]), PROVIDER, text)

    def repair(self, views: Views, problems: Problems, edits: Edits, answer: Optional[str]) -> None:
        """Repair this format's ``problems`` (see docs/repair.md): outputs moved after their
        call or dropped, calls answered with ``answer`` or dropped, lone reasoning dropped."""
        ends = self.run_ends(views, _is_call)  # for a call, the last call of its run
        unanswered = dict.fromkeys(p.index for p in problems if p.code == "missing_call_output")
        waiting = _Waiting(views, unanswered, ends)
        for problem in problems:
            i = problem.index
            if problem.code == "orphan_call_output":
                edits.place(i, waiting.take(output_key(views[i], i), i), problem)
            elif problem.code == "reasoning_without_following_item":
                _drop_reasoning(views, i, problem, edits)
        for j in unanswered:
            ids = [call_keys(views[j], j)[0]]
            output = None if answer is None else answer_output(views[j], answer)
            if output is None:
                edits.drop(j)
                edits.note(j, "dropped_call", ids, PROVIDER, "missing_call_output")
            else:
                edits.insert(ends[j], output)
                edits.note(j, "answered_call", ids, PROVIDER, "missing_call_output")

    def awaiting(self, views: Views) -> int:
        """Where calls still awaiting their results end ``views``: in the items after the
        last message, the earliest call item or ``mcp_approval_request`` that nothing
        answers and that no answer to anything earlier follows (parallel calls awaiting
        their outputs, a human approval); ``len(views)`` when none."""
        n = len(views)
        run = n
        while run > 0 and views[run - 1].get("role") is None:
            run -= 1
        # What the run's calls and requests may be answered by.
        called = {k for i in range(run, n) for k in _asked(views[i])}
        answered: Set[Any] = set()
        found = n
        for i in range(n - 1, run - 1, -1):
            answers = _answers(views[i])
            if answers and answers[0] not in called:
                break  # an answer to something earlier: what precedes it is not waiting
            answered.update(answers)
            asked = _asked(views[i])
            if asked and answered.isdisjoint(asked):
                found = i
        return found

    def tool_calls(self, view: View, index: int) -> Iterator[ToolCall]:
        """A call item, answerable by its ``call_id`` (a ``local_shell_call`` also by its id)."""
        kind = view.get("type")
        if view.get("role") is None and kind in CALL_OUTPUTS:
            arguments, empty = _ARGUMENTS.get(kind, ((), None))
            name = text_name(view.get("name")) or kind
            ids = _answerable(view)
            yield ToolCall(index, "item", 0, name, ids, arguments=arguments, no_arguments=empty)

    def tool_results(self, view: View, index: int) -> Iterator[ToolResult]:
        """An output item whose content may be cleared."""
        kind = view.get("type")
        field = OUTPUT_FIELDS.get(kind) if isinstance(kind, str) else None
        if field is not None and view.get("role") is None:
            value = view.get(field)
            wrap = _shell_output(value) if kind == "shell_call_output" else None
            yield ToolResult(index, None, field, item_call_id(view), value, wrap=wrap)

    def step(self, view: View) -> Optional[str]:
        """A typed item without a role: a ``reasoning`` item is thinking, a call item (or an
        output the model has yet to read) calls tools, any other item replies; ``None``
        for a message with a role or an item without a type."""
        kind = view.get("type")
        if view.get("role") is not None or kind is None:
            return None
        if kind == "reasoning":
            return THINKS
        if type(kind) is str and (kind in CALL_OUTPUTS or kind in OUTPUT_TYPES):
            return CALLS
        return REPLIES

    def thinking(self, views: Views, index: int) -> Optional[Thinking]:
        """A ``reasoning`` item, which may go unless the item it leads to is passed with its
        id (``fc_...``, ``msg_...``): OpenAI rejects that item without the reasoning item it
        was produced with."""
        view = views[index]
        if view.get("role") is not None or view.get("type") != "reasoning":
            return None
        return Thinking() if _reasoning_required(views, index) else Thinking(item="reasoning")

    def media(self, view: View) -> Iterator[Media]:
        """The ``input_image`` and ``input_file`` parts of a message's content or an output's."""
        if view.get("role") is not None:
            return self.media_in(blocks(view), media_part, "content")
        kind = view.get("type")
        field = OUTPUT_FIELDS.get(kind, "output") if type(kind) is str else "output"
        return self.media_in(view.get(field), media_part, field)


def _asked(item: View) -> Tuple[Any, ...]:
    """What may answer a call item or an approval request; ``()`` for any other."""
    kind = item.get("type")
    if kind in CALL_OUTPUTS:
        return tuple(hashable(k) for k in _answerable(item))
    if kind == "mcp_approval_request":
        return (("approval", hashable(item.get("id"))),)
    return ()


def _answers(item: View) -> Tuple[Any, ...]:
    """What an output or an approval response answers, as ``_asked`` names it."""
    kind = item.get("type")
    if kind in OUTPUT_TYPES:
        return (hashable(item_call_id(item)),)
    if kind == "mcp_approval_response":
        return (("approval", hashable(item.get("approval_request_id"))),)
    return ()


def _lone_reasoning(views: Views, i: int) -> Iterator[PairingProblem]:
    """The problem of the reasoning item at ``i`` when no item it may lead to follows it."""
    following = views[i + 1] if i + 1 < len(views) else None
    if (
        following is None
        or item_type(following, i + 1) in OUTPUT_TYPES
        or (following.get("role") in ("user", "system", "developer"))
    ):
        found = names([views[i].get("id")])
        text = _REASONING.format(id=views[i].get("id"))
        yield PairingProblem(i, "reasoning_without_following_item", found, PROVIDER, text)


def _drop_reasoning(views: Views, i: int, problem: PairingProblem, edits: Edits) -> None:
    """The lone reasoning at ``i`` dropped, with the reasoning items right before it."""
    start = i
    while start > 0 and _is_reasoning(views[start - 1]):
        start -= 1
    for k in range(start, i + 1):
        edits.drop(k)
        shown = problem.ids if k == i else names([views[k].get("id")])
        edits.note(k, "dropped_reasoning", shown, PROVIDER, problem.code)


def _reasoning_required(views: Views, at: int) -> bool:
    """Whether the item the reasoning item at ``at`` leads to carries its id."""
    for j in range(at + 1, len(views)):
        view = views[j]
        if view.get("type") == "reasoning" and view.get("role") is None:
            continue
        return view.get("id") is not None and view.get("role") != "user"
    return False


def _is_call(view: View) -> bool:
    return view.get("role") is None and view.get("type") in CALL_OUTPUTS


def _is_reasoning(view: View) -> bool:
    return view.get("role") is None and view.get("type") == "reasoning"


class _Waiting:
    """The unanswered calls an output before them may go after: the first after the output
    that it answers. Asked in item order (``take``), each answer costs the same however
    many calls wait: the calls are queued per id, and those passed or taken skipped once."""

    def __init__(self, views: Views, unanswered: Dict[int, None], ends: List[int]) -> None:
        self._unanswered, self._ends = unanswered, ends  # the caller's: a call taken leaves it
        self._by_id: Dict[Any, Deque[int]] = {}
        for j in unanswered:
            for k in dict.fromkeys(call_keys(views[j], j)):
                self._by_id.setdefault(k, deque()).append(j)

    def take(self, call_id: Any, index: int) -> Optional[int]:
        """Where an output at ``index`` naming ``call_id`` goes: after the run of call items
        of the first unanswered call after it that it answers (now answered), or ``None``."""
        queue = self._by_id.get(call_id)
        while queue and (queue[0] <= index or queue[0] not in self._unanswered):
            queue.popleft()
        if not queue:
            return None
        at = queue.popleft()
        del self._unanswered[at]
        return self._ends[at]


def answer_output(call: View, answer: str) -> Optional[Dict[str, Any]]:
    """The output item answering ``call`` with the text ``answer``, or ``None`` when its
    output cannot be text (a ``computer_call``'s is a screenshot, a ``tool_search_call``'s
    a tool list)."""
    kind = call.get("type")
    call_id = call.get("call_id")
    if kind in ("function_call", "custom_tool_call"):
        return {"type": CALL_OUTPUTS[kind], "call_id": call_id, "output": answer}
    if kind == "local_shell_call":  # its output names the call in an id field
        own = call_id if call_id is not None else call.get("id")
        return {"type": "local_shell_call_output", "id": own, "output": answer}
    if kind == "shell_call":
        chunk = {"stdout": answer, "stderr": "", "outcome": {"type": "exit", "exit_code": 1}}
        return {"type": "shell_call_output", "call_id": call_id, "output": [chunk]}
    if kind == "apply_patch_call":
        failed = {"status": "failed", "output": answer}
        return {"type": "apply_patch_call_output", "call_id": call_id, **failed}
    if kind == "program":
        return {"type": "program_output", "call_id": call_id, "result": answer}
    return None


def _matchers(links: Links) -> Tuple[Matcher, Matcher]:
    """The calls and the MCP approval requests seen so far, matched to their answers."""
    found: Optional[Tuple[Matcher, Matcher]] = links.memory.get(PROVIDER)
    if found is None:
        found = links.memory[PROVIDER] = (Matcher(), Matcher())
    return found


RESPONSES = ResponsesFormat()
