"""How a message is seen: its mapping view, and the JSON an SDK object stands for.

A mapping is its own view unless its tool structure holds SDK objects, dataclasses or other
mappings: then its plain form, every such object replaced by what it serialises to. An SDK
or framework message is seen as the JSON its library sends for it. Compaction still returns
the caller's objects; only the view is plain.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Mapping, Sequence
from typing import Any, Dict, Optional

from ._errors import InvalidMessageError
from .formats._shapes import dump_failed, sdk_dump
from .formats.frameworks import framework_view


def _dataclass_fields(value: Any) -> Optional[Dict[str, Any]]:
    """A dataclass instance's fields by name (not recursed), or ``None`` if it is not one."""
    if not dataclasses.is_dataclass(value) or isinstance(value, type):
        return None
    return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}


def to_json_compatible(value: object) -> object:
    """``json``'s ``default=``: a mapping as the dict it holds, an SDK object (an Anthropic
    block in ``response.content``) as the JSON the SDK sends, a dataclass as its fields;
    ``TypeError`` for anything else."""
    if isinstance(value, Mapping):
        return dict(value)
    try:
        dumped = sdk_dump(value)
    except Exception as exc:  # the estimator reports a TypeError with the message's index
        raise TypeError(dump_failed(value, exc)) from exc
    if dumped is not None:
        return dumped
    fields = _dataclass_fields(value)
    if fields is not None:
        return fields
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# What json.loads gives (and tuples): a message made only of these never needs a plain view.
_JSON_TYPES = frozenset({dict, list, tuple, str, int, float, bool, type(None)})


def _items(value: Any) -> Sequence[Any]:
    """A JSON array's items; ``()`` for anything else."""
    return value if type(value) is list or type(value) is tuple else ()


def holds_objects(message: Mapping[str, Any]) -> bool:
    """Whether a message's tool structure holds anything but what JSON decodes to: only
    where grouping, pairing, clearing and the counters read (``content`` and its blocks'
    ``content``, ``tool_calls`` and their ``function``, ``function_call``)."""
    content = message.get("content")
    calls = message.get("tool_calls")
    read = [content, calls, message.get("function_call")]
    for block in _items(content):
        read.append(block)
        if type(block) is dict:
            inner = block.get("content")
            read.append(inner)
            read.extend(_items(inner))
    for call in _items(calls):
        read.append(call)
        if type(call) is dict:
            read.append(call.get("function"))
    return not _JSON_TYPES.issuperset(map(type, read))


def plain(value: Any, index: Optional[int] = None) -> Any:
    """``value`` with every SDK object, dataclass, mapping and tuple in it, at any depth,
    replaced by the plain dict or list it serialises to; other leaves are kept.

    Raises:
        InvalidMessageError: An SDK object's ``model_dump`` fails; the error names ``index``.
    """
    if isinstance(value, (str, int, float)):
        return value
    if isinstance(value, Mapping):
        return {k: plain(v, index) for k, v in value.items()}
    if type(value) is list or type(value) is tuple:
        return [plain(v, index) for v in value]
    try:
        dumped = sdk_dump(value)
    except Exception as exc:
        raise InvalidMessageError(dump_failed(value, exc), index) from exc
    if dumped is not None:
        return plain(dumped, index)  # a custom model_dump may still hold objects
    fields = _dataclass_fields(value)
    return value if fields is None else plain(fields, index)


def _plain_view(message: Mapping[str, Any], index: Optional[int]) -> Mapping[str, Any]:
    if not holds_objects(message):
        return message
    try:
        return plain(message, index)  # type: ignore[no-any-return]
    except RecursionError:
        raise InvalidMessageError("the message is nested too deeply to be read", index) from None


def message_view(message: object, index: Optional[int]) -> Mapping[str, Any]:
    """The mapping a message is grouped and counted as (see the module): a mapping, or its
    plain form (``holds_objects``); a framework's message as the framework sends it
    (``framework_view``); an SDK object as its JSON (``sdk_dump``). ``InvalidMessageError``
    for anything else, or a ``model_dump`` that fails or gives no message."""
    if isinstance(message, Mapping):
        return _plain_view(message, index)
    try:
        framework = framework_view(message)
    except InvalidMessageError:
        raise
    except Exception as exc:  # a framework object of a shape its version does not have
        raise InvalidMessageError(
            f"{type(message).__name__} could not be read as the message its framework "
            f"sends ({type(exc).__name__}: {exc})",
            index,
        ) from exc
    if framework is not None:
        # Its tool calls may hold an SDK's objects (LlamaIndex keeps OpenAI's).
        return _plain_view(framework, index)
    return _dumped_view(message, index)


def _dumped_view(message: object, index: Optional[int]) -> Mapping[str, Any]:
    """An SDK object's view: its JSON (``sdk_dump``), which must be a message's."""
    try:
        view: Any = sdk_dump(message)
    except Exception as exc:
        raise InvalidMessageError(dump_failed(message, exc), index) from exc
    if isinstance(view, Mapping):
        view = _plain_view(view, index)  # a custom model_dump may hold objects
        # A Gemini content needs no role (the API's default is the user's).
        if view.get("role") is None and view.get("type") is None and "parts" not in view:
            # Neither a wire message nor a known framework's: grouping it alone
            # could keep a tool call without its result, so say so instead.
            raise InvalidMessageError(
                f"{type(message).__name__} dumps to a mapping with neither 'role' nor "
                "'type', so its tool calls cannot be paired; pass wire-format dicts or a "
                "supported framework's messages (LangChain, pydantic-ai, openai-agents, "
                "LlamaIndex, AutoGen, smolagents)",
                index,
            )
        return view  # type: ignore[no-any-return]
    raise InvalidMessageError(
        f"expected a mapping such as {{'role': ..., 'content': ...}} or an SDK message "
        f"model, got {type(message).__name__}",
        index,
    )


class _Trailing(Sequence):  # type: ignore[type-arg]
    """The views of a list's messages, each made when it is read (the formats read the
    last few only)."""

    __slots__ = ("_messages",)

    def __init__(self, messages: Sequence[Any]) -> None:
        self._messages = messages

    def __len__(self) -> int:
        return len(self._messages)

    def __getitem__(self, index: Any) -> Any:
        if index < 0:
            index += len(self._messages)
        return message_view(self._messages[index], index)


def trailing_views(messages: Sequence[Any]) -> Sequence[Mapping[str, Any]]:
    """The views of ``messages`` for a reader of its last messages only: each view is made
    when it is read, so a long list costs what the messages read cost."""
    return _Trailing(messages)


def message_views(messages: Sequence[Any]) -> Sequence[Mapping[str, Any]]:
    """The views of ``messages``.

    Returns ``messages`` itself when each of those messages is its own view (a mapping
    holding no SDK objects), the usual case.
    """
    views = [message_view(message, i) for i, message in enumerate(messages)]
    return messages if all(map(operator.is_, views, messages)) else views
