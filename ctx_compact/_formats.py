"""Reading the tool exchanges of each wire format out of a message's mapping view.

OpenAI Chat Completions carries calls in an assistant's ``tool_calls`` and
answers in ``tool`` messages; Anthropic Messages in ``tool_use`` and
``tool_result`` content blocks; OpenAI Responses in ``*_call`` and
``*_call_output`` items. Grouping and the pairing check both read them here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, FrozenSet, Iterable, List, Optional

from ._errors import InvalidMessageError
from ._views import blocks, is_list

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


def id_set(values: Iterable[Any], index: int, where: str) -> FrozenSet[Any]:
    """The non-``None`` ids among ``values``; an unhashable one is an error naming ``where``."""
    ids = set()
    for value in values:
        if value is not None:
            try:
                ids.add(value)
            except TypeError:
                raise InvalidMessageError(
                    f"{where} must be a string, not {type(value).__name__}", index
                ) from None
    return frozenset(ids)


def hashable(value: Any) -> Any:
    """``value`` if it can be a set member or dict key, else ``None``."""
    try:
        hash(value)
    except TypeError:
        return None
    return value


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


def tool_use_ids(message: Mapping[str, Any], index: int) -> FrozenSet[Any]:
    """The ids of the ``tool_use`` blocks in an Anthropic assistant message's content."""
    return id_set(
        (
            b.get("id")
            for b in blocks(message)
            if isinstance(b, Mapping) and b.get("type") == "tool_use"
        ),
        index,
        "a tool_use block's id",
    )


def leading_results(message: Mapping[str, Any]) -> List[Mapping[str, Any]]:
    """The ``tool_result`` blocks a message's content starts with."""
    results = []
    for block in blocks(message):
        if not (isinstance(block, Mapping) and block.get("type") == "tool_result"):
            break
        results.append(block)
    return results


def item_call_id(item: Mapping[str, Any]) -> Any:
    """The id a Responses call or output item pairs by.

    ``local_shell_call_output`` carries the call's id in its ``id`` field.
    """
    call_id = item.get("call_id")
    if call_id is None and item.get("type") == "local_shell_call_output":
        return item.get("id")
    return call_id
