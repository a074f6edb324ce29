"""Which messages must stay together: one unit per tool exchange.

A group is an assistant message with non-empty ``tool_calls`` plus every
immediately following ``tool`` message whose ``tool_call_id`` matches one of
that assistant's call ids. Every other message is a group of its own.
Groups are described by their boundaries: the start index of each group,
followed by ``len(messages)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, FrozenSet, List, Optional, Sequence

from ._errors import InvalidMessageError


def check_messages(messages: object) -> Sequence[Any]:
    """Return ``messages`` if it is a sequence (not a string), else raise ``TypeError``."""
    if isinstance(messages, (str, bytes, bytearray, Mapping)) or not isinstance(messages, Sequence):
        raise TypeError(
            f"messages must be a list (or other sequence) of message mappings, "
            f"not {type(messages).__name__}"
        )
    return messages


def _check_mapping(message: object, index: int) -> Mapping[str, Any]:
    if type(message) is dict or isinstance(message, Mapping):
        return message
    raise InvalidMessageError(
        f"expected a mapping such as {{'role': ..., 'content': ...}}, got {type(message).__name__}",
        index,
    )


def call_ids(message: Mapping[str, Any], index: int) -> Optional[FrozenSet[Any]]:
    """The ids of an assistant message's tool calls, or ``None`` if it makes none.

    Calls without an ``id`` cannot be answered, so they contribute nothing.
    """
    if message.get("role") != "assistant":
        return None
    tool_calls = message.get("tool_calls")
    if not tool_calls:
        return None
    if isinstance(tool_calls, (str, bytes, Mapping)) or not isinstance(tool_calls, Sequence):
        raise InvalidMessageError(
            f"tool_calls must be a list of mappings, not {type(tool_calls).__name__}", index
        )
    ids = set()
    for j, call in enumerate(tool_calls):
        if not isinstance(call, Mapping):
            raise InvalidMessageError(
                f"tool_calls[{j}] must be a mapping with an 'id', not {type(call).__name__}",
                index,
            )
        call_id = call.get("id")
        if call_id is not None:
            try:
                ids.add(call_id)
            except TypeError:
                raise InvalidMessageError(
                    f"tool_calls[{j}].id must be a string, not {type(call_id).__name__}",
                    index,
                ) from None
    return frozenset(ids)


def _answers(message: Mapping[str, Any], ids: FrozenSet[Any], index: int) -> bool:
    if message.get("role") != "tool":
        return False
    try:
        return message.get("tool_call_id") in ids
    except TypeError:
        raise InvalidMessageError(
            f"tool_call_id must be a string, not {type(message.get('tool_call_id')).__name__}",
            index,
        ) from None


def group_bounds(messages: Sequence[Any], start: int = 0) -> List[int]:
    """Return the group boundaries of ``messages[start:]``, validating every message.

    Args:
        messages: The messages.
        start: Where to begin; it must be the start of a group.

    Returns:
        The start index of each group from ``start`` on, then ``len(messages)``.

    Raises:
        InvalidMessageError: A message is not a mapping, or its ``tool_calls``
            or ``tool_call_id`` is malformed. The error names the index.
    """
    n = len(messages)
    bounds = []
    i = start
    while i < n:
        bounds.append(i)
        ids = call_ids(_check_mapping(messages[i], i), i)
        i += 1
        if ids:
            while i < n and _answers(_check_mapping(messages[i], i), ids, i):
                i += 1
    bounds.append(n)
    return bounds
