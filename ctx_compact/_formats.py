"""Reading the tool exchanges of each wire format out of a message's mapping view.

OpenAI Chat Completions carries calls in an assistant's ``tool_calls`` and
answers in ``tool`` messages; Anthropic Messages in ``tool_use`` and
``tool_result`` content blocks; OpenAI Responses in ``*_call`` and
``*_call_output`` items; the legacy Chat Completions API in an assistant's
``function_call`` answered by a ``function`` message. Grouping and the pairing
check both read them here, and match Responses items through one ``Matcher``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Dict, FrozenSet, Iterable, Iterator, List, Optional, Sequence, Set, Tuple

from ._errors import InvalidMessageError
from ._views import is_list

# Responses API items that call a tool and the item types that answer them.
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


def key(value: Any, index: int, where: str) -> Any:
    """``value``, checked to be usable as an id (hashable); an error naming ``where`` if not."""
    try:
        hash(value)
    except TypeError:
        raise InvalidMessageError(
            f"{where} must be a string, not {type(value).__name__}", index
        ) from None
    return value


def id_set(values: Iterable[Any], index: int, where: str) -> FrozenSet[Any]:
    """The non-``None`` ids among ``values``; an unhashable one is an error naming ``where``."""
    ids = [value for value in values if value is not None]
    try:
        return frozenset(ids)
    except TypeError:
        for value in ids:
            key(value, index, where)  # raises for the first unhashable one
        raise


def hashable(value: Any) -> Any:
    """``value`` if it can be a set member or dict key, else ``None``."""
    try:
        hash(value)
    except TypeError:
        return None
    return value


def item_type(item: Mapping[str, Any], index: int) -> Any:
    """A message's ``type``, checked to be usable as a key."""
    kind = item.get("type")
    if type(kind) is str or kind is None:
        return kind
    return key(kind, index, "a message's 'type'")


def call_ids(message: Mapping[str, Any], index: int) -> Optional[FrozenSet[Any]]:
    """The ids of a Chat Completions assistant message's tool calls, or ``None`` if none.

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
        if type(call) is not dict and not isinstance(call, Mapping):
            raise InvalidMessageError(
                f"tool_calls[{j}] must be a mapping with an 'id', not {type(call).__name__}",
                index,
            )
    return id_set((call.get("id") for call in tool_calls), index, "a tool call's id")


def is_block(block: Any, kind: str) -> bool:
    """Whether ``block`` is a content block of type ``kind``."""
    return isinstance(block, Mapping) and block.get("type") == kind


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


def opens_function_call(message: Mapping[str, Any]) -> bool:
    """Whether a message is a legacy Chat Completions ``function_call`` awaiting its answer.

    Before ``tool_calls``, an assistant message carried one ``function_call`` and
    the next message, with role ``function``, answered it. The pair has no id:
    it is matched by position.
    """
    return message.get("role") == "assistant" and bool(message.get("function_call"))


def item_call_id(item: Mapping[str, Any]) -> Any:
    """The id a Responses output item pairs by (unchecked: see ``key``).

    ``local_shell_call_output`` carries the call's id in its ``id`` field.
    """
    call_id = item.get("call_id")
    if call_id is None and item.get("type") == "local_shell_call_output":
        return item.get("id")
    return call_id


def output_key(item: Mapping[str, Any], index: int) -> Any:
    """``item_call_id``, checked to be usable as an id."""
    return key(item_call_id(item), index, "an output item's call_id")


def call_keys(item: Mapping[str, Any], index: int) -> List[Any]:
    """The ids an output may name to answer a Responses call item.

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
