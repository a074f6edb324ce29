"""How a message is seen: its mapping view, and the JSON an SDK object stands for.

The core reads and counts plain mappings. An SDK object (a pydantic model such
as the OpenAI SDK's ``ChatCompletionMessage`` or an Anthropic content block) is
seen as the JSON the SDK sends for it, ``model_dump(mode="json",
exclude_unset=True)``; any other object is not a message.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, List, Optional

from ._errors import InvalidMessageError
from ._frameworks import framework_view


def sdk_dump(value: Any) -> Any:
    """The JSON an SDK sends for one of its pydantic objects, or ``None`` if it is not one."""
    dump = getattr(value, "model_dump", None)
    if dump is None or not callable(dump) or isinstance(value, type):
        return None
    return dump(mode="json", exclude_unset=True)


def _dump_failed(value: Any, exc: Exception) -> str:
    return f"{type(value).__name__}.model_dump() failed ({exc}); pass plain dicts"


def to_json_compatible(value: object) -> object:
    """``json``'s ``default=``: a mapping as the dict it holds, an SDK object as its JSON.

    json only knows dict; a read-only or custom Mapping is serialised as the
    dict it holds, and an SDK object inside a message (an Anthropic content
    block in ``{"role": "assistant", "content": response.content}``) as the JSON
    the SDK sends for it: what the caller would expect to be counted.

    Raises:
        TypeError: ``value`` is neither.
    """
    if isinstance(value, Mapping):
        return dict(value)
    try:
        dumped = sdk_dump(value)
    except Exception as exc:  # the estimator reports a TypeError with the message's index
        raise TypeError(_dump_failed(value, exc)) from exc
    if dumped is not None:
        return dumped
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def message_view(message: object, index: Optional[int]) -> Mapping[str, Any]:
    """The mapping a message is grouped and counted as.

    A mapping is its own view; a LangChain message, a pydantic-ai
    ``ModelRequest``/``ModelResponse`` or an openai-agents run item is seen as
    what the framework sends for it (``framework_view``); an SDK object with
    ``model_dump`` is seen as its JSON.

    Raises:
        InvalidMessageError: Anything else, a ``model_dump`` that fails, or one
            whose mapping has neither a ``role`` nor a ``type``.
    """
    if isinstance(message, Mapping):
        return message
    framework = framework_view(message)
    if framework is not None:
        return framework
    if callable(getattr(message, "model_dump", None)):
        try:
            view = sdk_dump(message)
        except Exception as exc:
            raise InvalidMessageError(_dump_failed(message, exc), index) from exc
        if isinstance(view, Mapping):
            if view.get("role") is None and view.get("type") is None:
                # Neither a wire message nor a known framework's: grouping it alone
                # could keep a tool call without its result, so say so instead.
                raise InvalidMessageError(
                    f"{type(message).__name__} dumps to a mapping with neither 'role' nor "
                    "'type', so its tool calls cannot be paired; pass wire-format dicts or a "
                    "supported framework's messages (LangChain, pydantic-ai, openai-agents)",
                    index,
                )
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


def is_list(value: object) -> bool:
    """Whether ``value`` is a JSON array: a sequence other than a string."""
    kind = type(value)
    if kind is list or kind is tuple:  # the usual cases, without the ABC machinery
        return True
    if kind is str or value is None:  # string content, or none at all
        return False
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes, bytearray))


def blocks(message: Mapping[str, Any], index: Optional[int] = None) -> Sequence[Any]:
    """An Anthropic-style content block list, or ``()`` for string or missing content.

    SDK block objects (``{"role": "assistant", "content": response.content}``, as
    users append a reply) are seen as the mappings the SDK sends for them.

    Raises:
        InvalidMessageError: A block's ``model_dump`` fails; the error names ``index``.
    """
    content: Sequence[Any] = message.get("content") or ()
    if not is_list(content):
        return ()
    if all(type(b) is dict for b in content):
        return content
    return [b if isinstance(b, Mapping) else _block_view(b, index) for b in content]


def _block_view(block: Any, index: Optional[int]) -> Any:
    try:
        return sdk_dump(block) or block
    except Exception as exc:
        raise InvalidMessageError(_dump_failed(block, exc), index) from exc
