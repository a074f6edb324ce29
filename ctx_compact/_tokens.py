"""The default token estimator and the checked counting helpers."""

from __future__ import annotations

import json
import math
from itertools import accumulate, islice
from typing import Any, Callable, List, Optional, Sequence

from ._checks import check_callable, check_count
from ._errors import InvalidMessageError
from ._views import message_view, to_json_compatible

CountTokens = Callable[[Any], int]

# Built once: json.dumps() with non-default options constructs a new encoder on
# every call. The output is byte-identical to
# json.dumps(message, separators=(",", ":"), ensure_ascii=False).
ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=to_json_compatible)


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
    return -(-utf16_length(ENCODER.encode(message)) // 4)


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
    encode = ENCODER.encode
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


def finite(total: Any) -> bool:
    """Whether a sum of token counts is still a number a float can hold.

    Float sums overflow to infinity (and then give NaN when subtracted); an int
    sum beyond the largest float cannot be compared with a float budget either.
    """
    try:
        return math.isfinite(total)
    except OverflowError:  # an int beyond any float
        return False


def check_sums(pre: Sequence[Any]) -> None:
    """Raise unless the prefix sums of the counts stayed finite, naming the message at fault.

    Raises:
        InvalidMessageError: The counts up to some message add up to more than a
            float can hold; the error names the first such message.
    """
    if finite(pre[-1]):  # the sums only grow: the last one is the largest
        return
    index = next(k for k, total in enumerate(pre) if not finite(total)) - 1
    raise InvalidMessageError(
        "the token counts up to this message add up to more than a float can hold; "
        "count_tokens must return smaller numbers",
        index,
    )


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
