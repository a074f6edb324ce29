"""The default token estimator and the checked counting helpers."""

from __future__ import annotations

import json
import json.encoder
import math
import threading
from itertools import accumulate
from typing import Any, Callable, Dict, List, Optional, Sequence

from ._checks import check_callable, check_count
from ._errors import InvalidMessageError
from ._views import message_view, to_json_compatible

CountTokens = Callable[[Any], int]


class SpecCounter:
    """A ``count_tokens`` that is the specification's estimate except on the messages it marks.

    ``count_all`` counts the unmarked messages in its own loop (the estimator's
    fast path) and asks ``count_marked`` for the others only; calling the
    counter on one message gives the same figure.
    """

    def marked(self, view: Any) -> object:
        """Whether ``view`` (a message's mapping view) is counted by ``count_marked`` (truthy).

        What it returns, its mark, is handed to ``count_marked``: what it found
        need not be looked for again.
        """
        raise NotImplementedError

    def count_marked(self, view: Any, mark: Any) -> int:
        """The count of a marked message's view; ``mark``: what ``marked`` returned for it."""
        raise NotImplementedError

    def __call__(self, message: Any) -> int:
        view = message_view(message, None)
        mark = self.marked(view)
        return self.count_marked(view, mark) if mark else default_count_tokens(view)


# The estimator's text, as a JSONEncoder: byte-identical to json.dumps(message,
# separators=(",", ":"), ensure_ascii=False, default=to_json_compatible). Used
# where the C encoder below is missing or already busy on this thread.
ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=to_json_compatible)

# JSONEncoder.encode builds a new C encoder (and a markers dict) on every call,
# which costs as much as serialising a short message. The same C encoder, with
# the arguments JSONEncoder.iterencode gives it for ENCODER's settings, is built
# once per thread instead. None when the C accelerator is missing, as json
# itself then falls back to its Python encoder.
_MAKE_ENCODER: Optional[Callable[..., Any]] = getattr(json.encoder, "c_make_encoder", None)


def _encoder_chunks(value: Any, _indent: int) -> Sequence[str]:
    """``ENCODER`` in the C encoder's calling convention, where that one cannot be used."""
    return (ENCODER.encode(value),)


class _ThreadEncoder(threading.local):
    """This thread's C encoder and its ``markers`` (the ids of the containers being encoded).

    Per thread because the markers are state: two threads sharing them would see
    each other's containers as cycles, and clear each other's after an error.
    """

    def __init__(self) -> None:
        # Empty between encodes. The C encoder holds a container's id here while
        # inside it, and a value's while its default= hook runs: so any Python code
        # running mid-encode on this thread (a hook that counts tokens itself)
        # finds it non-empty, and must neither share nor clear the outer call's.
        self.markers: Dict[int, Any] = {}
        self.chunks: Callable[[Any, int], Sequence[str]] = _encoder_chunks
        if _MAKE_ENCODER is not None:
            self.chunks = _MAKE_ENCODER(
                self.markers,  # check_circular=True
                to_json_compatible,
                json.encoder.encode_basestring,  # ensure_ascii=False
                None,  # indent
                ENCODER.key_separator,
                ENCODER.item_separator,
                False,  # sort_keys
                False,  # skipkeys
                True,  # allow_nan
            )


_THREAD = _ThreadEncoder()


def compact_json(value: Any) -> str:
    """The estimator's text for ``value``: ``ENCODER.encode(value)``, from an encoder built once.

    Raises:
        TypeError: ``value`` holds something JSON cannot serialise.
        ValueError: ``value`` holds a circular reference.
        RecursionError: ``value`` is nested too deeply.
    """
    state = _THREAD
    markers = state.markers
    if markers:  # called mid-encode, from a default= hook: an encoder of its own
        return ENCODER.encode(value)
    try:
        return "".join(state.chunks(value, 0))
    except BaseException:
        # The C encoder leaves behind the markers of the containers it was inside.
        markers.clear()
        raise


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
    return tokens_of_units(utf16_length(compact_json(message)))


def count_value(value: Any, count_tokens: Optional[CountTokens]) -> int:
    """A JSON value sent beside the messages (a system prompt, a tool's schema), counted.

    The estimator counts the value itself, for the default counting and for a
    ``SpecCounter`` (the media-aware estimate) alike; a custom counter counts
    messages, so it is given the system message the value stands for.
    """
    if count_tokens is None or isinstance(count_tokens, SpecCounter):
        return default_count_tokens(value)
    return int(count_tokens({"role": "system", "content": value}))


def count_one(message: Any, count_tokens: Optional[CountTokens], index: Optional[int]) -> int:
    """Count one message with ``count_tokens`` or the default estimator, checking the result."""
    if count_tokens is None or isinstance(count_tokens, SpecCounter):
        try:
            return (count_tokens or default_count_tokens)(message)
        except InvalidMessageError:
            raise
        except (TypeError, ValueError, RecursionError) as exc:
            raise InvalidMessageError(
                f"the default estimator cannot serialise this message as JSON ({exc}); "
                "make it JSON-serialisable or pass count_tokens",
                index,
            ) from exc
    return check_count(count_tokens(message), index)


def count_all(messages: Sequence[Any], count_tokens: Optional[CountTokens]) -> List[int]:
    """Count ``messages`` once each, in order; errors name the index."""
    # A SpecCounter's marked messages are counted by it; the rest in this loop.
    marked: Optional[Callable[[Any], object]] = None
    count_marked: Callable[[Any, Any], int]  # set, and only called, when marked is
    if count_tokens is not None:
        if not isinstance(count_tokens, SpecCounter):
            return [check_count(count_tokens(m), i) for i, m in enumerate(messages)]
        marked, count_marked = count_tokens.marked, count_tokens.count_marked
    state = _THREAD
    own = not state.markers  # else re-entered from a default= hook: leave its markers alone
    chunks = state.chunks if own else _encoder_chunks
    join = "".join
    counts: List[int] = []
    try:
        for m in messages:
            if marked is not None:
                mark = marked(m)
                if mark:
                    counts.append(count_marked(m, mark))
                    continue
            text = join(chunks(m, 0))
            # tokens_of_units, written out: one call less per message on the hot path.
            counts.append(-(-(len(text) if text.isascii() else utf16_length(text)) // 4))
    except (TypeError, ValueError, RecursionError):
        if own:
            state.markers.clear()  # what the C encoder left behind
        # Count the failing message again through the checked path for a clear error.
        index = len(counts)
        count_one(messages[index], None, index)
        raise
    except BaseException:
        if own:
            state.markers.clear()
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
