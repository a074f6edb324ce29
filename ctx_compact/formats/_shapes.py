"""The JSON shapes every wire format reads: arrays, content blocks, ids, SDK dumps.

Below the formats and the views both: nothing here knows a provider.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Dict, FrozenSet, Iterable, Optional, Tuple

from .._errors import InvalidMessageError

# A message as the formats read it (its view: see ``_views``), and a list of them.
View = Mapping[str, Any]
Views = Sequence[View]

# Fields an SDK sends even when the object was built without them: what the
# message or block is. A message class that gives its role a default (a user
# message built from its content alone) is sent with that role.
_DEFAULTS_SENT = ("role", "type")


def sdk_dump(value: Any) -> Any:
    """The JSON an SDK sends for one of its pydantic objects, or ``None`` if it is not one.

    ``model_dump(mode="json", exclude_unset=True)``, with the object's ``role``
    and ``type`` put back when a default filled them and the dump leaves them
    out (or null): the SDK sends those.
    """
    dump = getattr(value, "model_dump", None)
    if dump is None or not callable(dump) or isinstance(value, type):
        return None
    dumped = dump(mode="json", exclude_unset=True)
    if type(dumped) is dict:
        fields = getattr(type(value), "model_fields", None)
        for name in _DEFAULTS_SENT:
            if dumped.get(name) is None and isinstance(fields, Mapping) and name in fields:
                default = dump(mode="json", include={name}).get(name)
                if default is not None:
                    dumped[name] = default
    return dumped


def dump_failed(value: Any, exc: Exception) -> str:
    """The reason given when an SDK object's ``model_dump`` raises."""
    return f"{type(value).__name__}.model_dump() failed ({exc}); pass plain dicts"


def is_list(value: object) -> bool:
    """Whether ``value`` is a JSON array: a sequence other than a string."""
    kind = type(value)
    if kind is list or kind is tuple:  # the usual cases, without the ABC machinery
        return True
    if kind is str or value is None:  # string content, or none at all
        return False
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes, bytearray))


# What ``replace_paths`` puts at a path to leave the list item there out.
LEFT_OUT: Any = object()


def replace_paths(value: Any, new: Mapping[Tuple[Any, ...], Any]) -> Any:
    """``value`` with what is at each path of ``new`` (keys and indices) replaced by its value
    there, or left out of its list for ``LEFT_OUT``; copies only along the paths."""
    if () in new:
        return new[()]
    heads: Dict[Any, Dict[Tuple[Any, ...], Any]] = {}
    for path, put in new.items():
        heads.setdefault(path[0], {})[path[1:]] = put
    if isinstance(value, Mapping):
        return {**value, **{key: replace_paths(value[key], below) for key, below in heads.items()}}
    items = [replace_paths(item, heads[k]) if k in heads else item for k, item in enumerate(value)]
    return [item for item in items if item is not LEFT_OUT]


def is_block(block: Any, kind: str) -> bool:
    """Whether ``block`` is a content block of type ``kind``."""
    return isinstance(block, Mapping) and block.get("type") == kind


def blocks(message: Mapping[str, Any], index: Optional[int] = None) -> Sequence[Any]:
    """A content block list, or ``()`` for string or missing content.

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
        raise InvalidMessageError(dump_failed(block, exc), index) from exc


def key(value: Any, index: int, where: str) -> Any:
    """``value``, checked to be usable as an id (hashable); an error naming ``where`` if not."""
    if value is not None and hashable(value) is None:
        raise InvalidMessageError(f"{where} must be a string, not {type(value).__name__}", index)
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


def text_name(value: object) -> Optional[str]:
    """``value`` if it is a string (a tool's name as read from a call), else ``None``."""
    return value if isinstance(value, str) else None


# A base64 data URL's header: "data:", the media type (up to the first ";"), any
# parameters, ";base64" and the first comma. Neither part can pass a comma, so the
# ";base64," matched is the one before the first comma; each is bounded, so a long
# URL without one is not scanned to its end.
_DATA_URL = re.compile(r"data:([^;,]{0,250})[^,]{0,250}?;base64,").match


def data_url(value: Any, bare: bool = False) -> Tuple[Optional[str], Optional[str], int]:
    """``(media type, text, start)`` of a base64 ``data:`` URL, the base64 being ``text[start:]``.

    The header (up to the first comma, within the first 256 characters) must
    end with ``;base64``; the media type is what comes before its first ``;``.
    ``(None, None, 0)`` for anything else (an ``https:`` URL, a percent-encoded
    data URL), or with ``bare`` ``(None, value, 0)`` for text (bare base64). Only the
    header is searched: the payload is not copied.
    """
    found = _DATA_URL(value) if type(value) is str else None
    # The comma must be among the first 256 characters.
    if found is None or found.end() > 256:
        return None, text_name(value) if bare else None, 0
    return found[1] or None, value, found.end()
