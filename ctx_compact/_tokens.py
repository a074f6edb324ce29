"""The default token estimator and the checked counting helpers."""

from __future__ import annotations

import json
import math
from itertools import accumulate
from typing import Any, Callable, List, Optional, Sequence

from ._checks import check_callable, check_count
from ._errors import InvalidMessageError
from ._option_docs import with_option_docs
from ._views import message_view, to_json_compatible

CountTokens = Callable[[Any], int]


class SpecCounter:
    """A ``count_tokens`` that is the specification's estimate on any message without media
    (the media-aware one): its errors are the estimator's, and values beside the messages
    are counted by the estimator itself."""

    def __call__(self, message: Any) -> int:
        raise NotImplementedError


# The estimator's text, as a JSONEncoder built once: byte-identical to json.dumps(message,
# separators=(",", ":"), ensure_ascii=False, default=to_json_compatible).
ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=to_json_compatible)


def compact_json(value: Any) -> str:
    """The estimator's text for ``value``: ``ENCODER.encode(value)``, and its errors."""
    return ENCODER.encode(value)


def utf16_length(text: str) -> int:
    """Return the length of ``text`` in UTF-16 code units, as JavaScript counts it."""
    if text.isascii():
        return len(text)
    # surrogatepass: a lone surrogate counts as one unit, as in JavaScript.
    return len(text.encode("utf-16-le", "surrogatepass")) >> 1


def tokens_of_units(units: int) -> int:
    """The estimator's rule: a JSON text of ``units`` UTF-16 code units is a quarter of that, up."""
    return -(-units // 4)


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
    return tokens_of_units(utf16_length(ENCODER.encode(message)))


def count_value(value: Any, count_tokens: Optional[CountTokens]) -> int:
    """A JSON value sent beside the messages (a system prompt, a tool's schema), counted: by
    the estimator itself, or by a custom counter as the system message it stands for."""
    if count_tokens is None or isinstance(count_tokens, SpecCounter):
        return default_count_tokens(value)
    return int(count_tokens({"role": "system", "content": value}))


def count_one(message: Any, count_tokens: Optional[CountTokens], index: Optional[int]) -> int:
    """Count one message with ``count_tokens`` or the default estimator, checking the result."""
    if count_tokens is None or isinstance(count_tokens, SpecCounter):
        return estimated(count_tokens or default_count_tokens, index, message)
    return check_count(count_tokens(message), index)


def estimated(estimate: Callable[..., int], index: Optional[int], *args: Any) -> int:
    """``estimate(*args)``, an estimate of the specification's (which serialises the message):
    what it cannot serialise is an ``InvalidMessageError`` naming ``index``."""
    try:
        return estimate(*args)
    except InvalidMessageError:
        raise
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidMessageError(
            f"the default estimator cannot serialise this message as JSON ({exc}); "
            "make it JSON-serialisable or pass count_tokens",
            index,
        ) from exc


def count_all(messages: Sequence[Any], count_tokens: Optional[CountTokens]) -> List[int]:
    """Count ``messages`` once each, in order; errors name the index."""
    return [count_one(m, count_tokens, i) for i, m in enumerate(messages)]


def prefix_sums(counts: Sequence[int]) -> List[int]:
    """``out[i]`` is the sum of ``counts[:i]``; ``out[-1]`` is the total."""
    return list(accumulate(counts, initial=0))


def finite(total: Any) -> bool:
    """Whether a sum of token counts is still a number a float can hold (a float budget
    cannot be compared with an infinite sum, nor with an int beyond any float)."""
    try:
        return math.isfinite(total)
    except OverflowError:  # an int beyond any float
        return False


def check_sums(pre: Sequence[Any]) -> None:
    """Raise ``InvalidMessageError`` naming the first message whose prefix sum is not finite."""
    if finite(pre[-1]):  # the sums only grow: the last one is the largest
        return
    index = next(k for k, total in enumerate(pre) if not finite(total)) - 1
    raise InvalidMessageError(
        "the token counts up to this message add up to more than a float can hold; "
        "count_tokens must return smaller numbers",
        index,
    )


@with_option_docs(
    message="One message: a mapping, or an SDK message model (counted as the JSON the SDK "
    'sends, ``model_dump(mode="json", exclude_unset=True)``).'
)
def estimate_tokens(message: Any, count_tokens: Optional[CountTokens] = None) -> int:
    """Estimate one message's tokens with ``count_tokens`` or the default estimator.

    The same estimator ``compact`` and ``compact_with_summary`` use, exported so a
    caller can pre-check a message before appending it.

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
