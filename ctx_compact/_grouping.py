"""Which messages must stay together: one unit per tool exchange, in every wire format.

Each message is classified on its own, so one list may mix shapes:

- OpenAI Chat Completions: an assistant message with non-empty ``tool_calls`` plus
  every immediately following ``tool`` message whose ``tool_call_id`` matches one
  of its call ids.
- Anthropic Messages: an assistant message whose content holds ``tool_use`` blocks
  (with any ``thinking``/``redacted_thinking`` blocks of that turn, which live in
  the same message) plus the next message when it is a user message whose content
  starts with ``tool_result`` blocks answering those ids.
- OpenAI Responses input items: ``reasoning`` items with the item they lead to;
  ``*_call`` items (``function_call``, ``custom_tool_call``, ``computer_call``,
  ...) with their ``*_call_output`` items matched by ``call_id``; an
  ``mcp_approval_request`` with its ``mcp_approval_response``.

Every other message is a group of its own. Groups are described by their
boundaries: the start index of each group, followed by ``len(messages)``.
SDK objects (pydantic models) are seen as the JSON the SDK would send
(``model_dump(mode="json", exclude_unset=True)``), so "the messages" below are
their mapping views.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, FrozenSet, List, Optional

from ._errors import InvalidMessageError

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


def check_messages(messages: object) -> Sequence[Any]:
    """Return ``messages`` if it is a sequence (not a string), else raise ``TypeError``."""
    if isinstance(messages, (str, bytes, bytearray, Mapping)) or not isinstance(messages, Sequence):
        raise TypeError(
            f"messages must be a list (or other sequence) of message mappings, "
            f"not {type(messages).__name__}"
        )
    return messages


def message_view(message: object, index: Optional[int]) -> Mapping[str, Any]:
    """The mapping a message is grouped and counted as.

    A mapping is its own view. An SDK object with ``model_dump`` (a pydantic
    model, such as the OpenAI SDK's ``ChatCompletionMessage``) is seen as the
    JSON the SDK sends for it: ``model_dump(mode="json", exclude_unset=True)``.

    Raises:
        InvalidMessageError: Anything else, or a ``model_dump`` that fails.
    """
    if isinstance(message, Mapping):
        return message
    if callable(getattr(message, "model_dump", None)):
        try:
            view = sdk_dump(message)
        except Exception as exc:
            raise InvalidMessageError(
                f"{type(message).__name__}.model_dump() failed ({exc}); pass plain dicts",
                index,
            ) from exc
        if isinstance(view, Mapping):
            return view
    raise InvalidMessageError(
        f"expected a mapping such as {{'role': ..., 'content': ...}} or an SDK message "
        f"model, got {type(message).__name__}",
        index,
    )


def message_views(messages: Sequence[Any], start: int = 0) -> Sequence[Mapping[str, Any]]:
    """The views of ``messages[start:]`` (earlier items are left as they are).

    Returns ``messages`` itself when those messages are all dicts, the usual case.
    """
    views: Optional[List[Any]] = None
    for i in range(start, len(messages)):
        message = messages[i]
        if type(message) is dict:
            continue
        if views is None:
            views = list(messages)
        views[i] = message_view(message, i)
    return messages if views is None else views


def _ids(values: Any, index: int, where: str) -> FrozenSet[Any]:
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


def _is_list(value: object) -> bool:
    if type(value) is list:  # the usual case, without the ABC machinery
        return True
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes, bytearray))


def call_ids(message: Mapping[str, Any], index: int) -> Optional[FrozenSet[Any]]:
    """The ids of a Chat Completions assistant message's tool calls, or ``None`` if none.

    Calls without an ``id`` cannot be answered, so they contribute nothing.
    """
    tool_calls = message.get("tool_calls")
    if not tool_calls:
        return None
    if not _is_list(tool_calls):
        raise InvalidMessageError(
            f"tool_calls must be a list of mappings, not {type(tool_calls).__name__}", index
        )
    for j, call in enumerate(tool_calls):
        if type(call) is not dict and not isinstance(call, Mapping):
            raise InvalidMessageError(
                f"tool_calls[{j}] must be a mapping with an 'id', not {type(call).__name__}",
                index,
            )
    return _ids((call.get("id") for call in tool_calls), index, "a tool call's id")


def sdk_dump(value: Any) -> Any:
    """The JSON an SDK sends for one of its pydantic objects, or ``None`` if it is not one."""
    dump = getattr(value, "model_dump", None)
    if dump is None or not callable(dump) or isinstance(value, type):
        return None
    return dump(mode="json", exclude_unset=True)


def blocks(message: Mapping[str, Any]) -> Sequence[Any]:
    """An Anthropic-style content block list, or ``()`` for string or missing content.

    SDK block objects (``{"role": "assistant", "content": response.content}``, as
    users append a reply) are seen as the mappings the SDK sends for them.
    """
    content: Sequence[Any] = message.get("content") or ()
    if not _is_list(content):
        return ()
    if all(type(b) is dict for b in content):
        return content
    return [b if isinstance(b, Mapping) else (sdk_dump(b) or b) for b in content]


def tool_use_ids(message: Mapping[str, Any], index: int) -> FrozenSet[Any]:
    """The ids of the ``tool_use`` blocks in an Anthropic assistant message's content."""
    return _ids(
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


def item_call_id(item: Mapping[str, Any]) -> Any:
    """The id a Responses call or output item pairs by.

    ``local_shell_call_output`` carries the call's id in its ``id`` field.
    """
    call_id = item.get("call_id")
    if call_id is None and item.get("type") == "local_shell_call_output":
        return item.get("id")
    return call_id


def _hashable(value: Any) -> Any:
    try:
        hash(value)
    except TypeError:
        return None
    return value


def _end_of_items(views: Sequence[Mapping[str, Any]], i: int, n: int) -> int:
    """Where the Responses exchange that starts at item ``i`` ends."""
    j = i
    while j < n and views[j].get("type") == "reasoning":
        j += 1  # a reasoning item belongs with the item that follows it
    if j == n:
        return n
    kind = views[j].get("type")
    if kind in CALL_OUTPUTS:
        ids = set()
        while j < n and views[j].get("type") in CALL_OUTPUTS:
            ids.add(_hashable(item_call_id(views[j])))
            ids.add(_hashable(views[j].get("id")))
            j += 1
        ids.discard(None)
        while (
            j < n
            and views[j].get("type") in OUTPUT_TYPES
            and _hashable(item_call_id(views[j])) in ids
        ):
            j += 1
        return j
    if kind == "mcp_approval_request":
        request = _hashable(views[j].get("id"))
        j += 1
        if (
            j < n
            and views[j].get("type") == "mcp_approval_response"
            and request is not None
            and _hashable(views[j].get("approval_request_id")) == request
        ):
            j += 1
        return j
    return j + 1


def group_bounds(views: Sequence[Mapping[str, Any]], start: int = 0) -> List[int]:
    """Return the group boundaries of ``views[start:]``, validating every message.

    Args:
        views: The messages' mapping views (see ``message_views``).
        start: Where to begin; it must be the start of a group.

    Returns:
        The start index of each group from ``start`` on, then ``len(views)``.

    Raises:
        InvalidMessageError: A message's ``tool_calls`` or ``tool_call_id`` is
            malformed, or a call id is not hashable. The error names the index.
    """
    n = len(views)
    bounds = []
    i = start
    while i < n:
        bounds.append(i)
        message = views[i]
        role = message.get("role")
        if role == "assistant":
            ids = call_ids(message, i)
            i += 1
            if ids:
                while i < n and _answers(views[i], ids, i):
                    i += 1
            elif i < n and views[i].get("role") == "user":
                uses = tool_use_ids(message, i - 1)
                if uses and any(
                    _hashable(r.get("tool_use_id")) in uses for r in leading_results(views[i])
                ):
                    i += 1
        elif role is None:  # Responses API items carry a type, not a role
            i = _end_of_items(views, i, n)
        else:
            i += 1
    bounds.append(n)
    return bounds
