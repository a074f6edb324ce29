"""The default token estimator and the checked counting helpers."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from itertools import accumulate, islice
from numbers import Real
from typing import Any, Callable, List, Optional, Sequence

from ._errors import InvalidMessageError
from ._grouping import message_view, sdk_dump

CountTokens = Callable[[Any], int]


def _to_json_compatible(value: object) -> object:
    # json only knows dict; a read-only or custom Mapping is serialised as the
    # dict it holds, and an SDK object inside a message (an Anthropic content
    # block in {"role": "assistant", "content": response.content}) as the JSON
    # the SDK sends for it: what the caller would expect to be counted.
    if isinstance(value, Mapping):
        return dict(value)
    dumped = sdk_dump(value)
    if dumped is not None:
        return dumped
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# Built once: json.dumps() with non-default options constructs a new encoder on
# every call. The output is byte-identical to
# json.dumps(message, separators=(",", ":"), ensure_ascii=False).
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=_to_json_compatible)


def utf16_length(text: str) -> int:
    """Return the length of ``text`` in UTF-16 code units, as JavaScript counts it."""
    if text.isascii():
        return len(text)
    # surrogatepass: a lone surrogate counts as one unit, as in JavaScript.
    return len(text.encode("utf-16-le", "surrogatepass")) >> 1


def default_count_tokens(message: Any) -> int:
    """The specification's estimator: compact JSON, UTF-16 length, divided by 4, rounded up.

    Args:
        message: One message (a mapping of JSON-serialisable values).

    Returns:
        ``ceil(utf16_len(json.dumps(message, separators=(",", ":"), ensure_ascii=False)) / 4)``.

    Raises:
        TypeError: The message holds something JSON cannot serialise.
        ValueError: The message holds a circular reference.
    """
    return -(-utf16_length(_ENCODER.encode(message)) // 4)


def check_count(value: object, index: Optional[int]) -> int:
    """Return ``value`` if it is a usable token count, else raise naming the message."""
    if type(value) is int and value >= 0:
        return value
    if isinstance(value, Real) and not isinstance(value, bool):
        number = float(value)
        if math.isfinite(number) and number >= 0:
            return value  # type: ignore[return-value]  # summed as given
    raise InvalidMessageError(
        f"count_tokens returned {value!r}; it must return a non-negative number of tokens",
        index,
    )


def check_callable(value: object, name: str) -> None:
    """Raise ``TypeError`` unless ``value`` is ``None`` or callable."""
    if value is not None and not callable(value):
        raise TypeError(f"{name} must be a callable or None, not {type(value).__name__}")


def count_one(message: Any, count_tokens: Optional[CountTokens], index: Optional[int]) -> int:
    """Count one message with ``count_tokens`` or the default estimator, checking the result."""
    if count_tokens is None:
        try:
            return default_count_tokens(message)
        except (TypeError, ValueError, RecursionError) as exc:
            raise InvalidMessageError(
                f"the default estimator cannot serialise this message as JSON ({exc}); "
                "make it JSON-serialisable or pass count_tokens",
                index,
            ) from exc
    return check_count(count_tokens(message), index)


def count_all(
    messages: Sequence[Any], count_tokens: Optional[CountTokens], start: int = 0
) -> List[int]:
    """Count ``messages[start:]`` once each, in order; errors name the absolute index."""
    if count_tokens is not None:
        return [check_count(count_tokens(messages[i]), i) for i in range(start, len(messages))]
    encode = _ENCODER.encode
    counts: List[int] = []
    try:
        for m in islice(messages, start, None):
            text = encode(m)
            counts.append(-(-(len(text) if text.isascii() else utf16_length(text)) // 4))
    except (TypeError, ValueError, RecursionError):
        # Count the failing message again through the checked path for a clear error.
        index = start + len(counts)
        count_one(messages[index], None, index)
        raise
    return counts


def prefix_sums(counts: Sequence[int]) -> List[int]:
    """``out[i]`` is the sum of ``counts[:i]``; ``out[-1]`` is the total."""
    return list(accumulate(counts, initial=0))


def estimate_tokens(message: Any, count_tokens: Optional[CountTokens] = None) -> int:
    """Estimate one message's tokens with ``count_tokens`` or the default estimator.

    The same estimator ``compact`` and ``compact_with_summary`` use, exported so a
    caller can pre-check a message before appending it.

    Args:
        message: One message: a mapping, or an SDK message model (counted as the
            JSON the SDK sends, ``model_dump(mode="json", exclude_unset=True)``).
        count_tokens: ``(message) -> int``, given the message's mapping; the default
            is the specification's estimator (compact JSON, UTF-16 length, divided
            by 4, rounded up).

    Returns:
        The message's estimated token count.

    Raises:
        TypeError: ``count_tokens`` is not callable.
        InvalidMessageError: The message is neither a mapping nor an SDK model, the
            default estimator cannot serialise it, or ``count_tokens`` returned
            something other than a non-negative number.
    """
    check_callable(count_tokens, "count_tokens")
    return count_one(message_view(message, None), count_tokens, None)
