"""Argument checks at the core's boundary, in one message shape: ``'name' must be ... (got
...)``, ``TypeError`` for a wrong type and ``ValueError`` for a wrong value (``must``).
"""

from __future__ import annotations

import inspect
import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from numbers import Real
from typing import Any, Dict, FrozenSet, Optional

from ._errors import InvalidMessageError

_SHOWN = 80  # a longer repr is shown as its type: an error message is read in one line


def must(name: str, expected: str, value: object, error: type[Exception] = TypeError) -> Exception:
    """The error of an argument check: ``'name' must be expected (got value)``; ``TypeError``
    for a value of the wrong type, ``ValueError`` for a right-typed value that is wrong."""
    return error(f"{name!r} must be {expected} (got {got(value)})")


def got(value: object) -> str:
    """``value`` as an error shows it: its repr, or its type when the repr is long."""
    try:
        shown = _shown(value)
    except Exception:  # a repr that fails is shown by its type
        shown = ""
    if 0 < len(shown) <= _SHOWN:
        return shown
    kind = type(value).__name__
    return f"{'an' if kind[:1] in 'aeiouAEIOU' else 'a'} {kind}"


def check_messages(messages: object) -> Sequence[Any]:
    """Return ``messages`` if it is a sequence (not a string), else raise ``TypeError``."""
    if isinstance(messages, (str, bytes, bytearray, Mapping)) or not isinstance(messages, Sequence):
        raise must("messages", "a list (or other sequence) of message mappings", messages)
    return messages


class BudgetValueError(TypeError, ValueError):
    """A budget of the right type with a wrong value (``0``, ``-5``, ``inf``, ``nan``): the
    specification's ``TypeError`` and the usual ``ValueError`` both, so either catch works."""


def check_max_tokens(max_tokens: object, name: str = "max_tokens") -> float:
    """Return ``max_tokens`` if it is a finite positive number: ``TypeError`` for a non-number
    (a bool), ``BudgetValueError`` for another number; errors name ``name``."""
    expected = "a finite positive number"
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, Real):
        raise must(name, expected, max_tokens)
    try:
        as_float = float(max_tokens)
    except OverflowError:  # an int beyond any float: no budget means anything there
        raise must(name, expected, max_tokens, BudgetValueError) from None
    if not math.isfinite(as_float) or as_float <= 0:
        raise must(name, expected, max_tokens, BudgetValueError)
    return max_tokens  # type: ignore[return-value]


def check_keep(value: object, name: str, positive: bool = False) -> int:
    """Return ``value`` if it is a non-negative int (``positive``: at least 1);
    ``TypeError``/``ValueError`` otherwise."""
    expected = "a positive int" if positive else "a non-negative int"
    if isinstance(value, bool) or not isinstance(value, int):
        raise must(name, expected, value)
    if value < positive:
        raise must(name, expected, value, ValueError)
    return value


def check_tokens(value: object, name: str, optional: bool = False) -> Any:
    """Return ``value`` if it is a non-negative int (or ``None`` when ``optional``).

    ``type(value) is int``: a bool is not a count of tokens.
    """
    if optional and value is None:
        return None
    if type(value) is not int:
        raise must(name, "an int or None" if optional else "a non-negative int", value)
    if value < 0:
        raise must(name, "a non-negative int", value, ValueError)
    return value


def check_summary_role(summary_role: object) -> str:
    """Return ``summary_role`` if it is a string, else raise ``TypeError``."""
    if not isinstance(summary_role, str):
        raise must("summary_role", "a string", summary_role)
    return summary_role


def check_callable(value: object, name: str) -> None:
    """Raise ``TypeError`` unless ``value`` is ``None`` or callable."""
    if value is not None and not callable(value):
        raise must(name, "a callable or None", value)


_LARGEST = int(sys.float_info.max)  # counts are compared with float budgets


def check_count(value: object, index: Optional[int]) -> int:
    """Return ``value`` if it is a non-negative number a float can hold, else raise naming
    the message."""
    if type(value) is int and 0 <= value <= _LARGEST:
        return value
    problem = "it must return a non-negative number of tokens"
    if isinstance(value, Real) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:  # an int (or a Real) beyond any float
            if value > 0:  # type: ignore[operator]  # Real declares no comparison
                raise InvalidMessageError(
                    f"count_tokens returned {_shown(value)}, which is too large for a float "
                    f"(the largest is about {sys.float_info.max:.3g}); return a count of tokens",
                    index,
                ) from None
            number = -math.inf
        if math.isfinite(number) and number >= 0:
            return value  # type: ignore[return-value]  # summed as given
        if number == math.inf:
            problem = "it must return a finite number of tokens"
    raise InvalidMessageError(f"count_tokens returned {_shown(value)}; {problem}", index)


def _shown(value: object) -> str:
    """``repr(value)``, or its length for an int too long to print (Python 3.11+ limits it)."""
    if type(value) is int and value.bit_length() > 1000:
        return f"an int of about {int(value.bit_length() * 0.30103)} digits"
    return repr(value)


def check_summary(summary: object) -> str:
    """Return ``summary`` if it is a string; otherwise raise, naming what came back."""
    if isinstance(summary, str):
        return summary
    if inspect.isawaitable(summary):
        close = getattr(summary, "close", None)
        if close is not None:
            close()  # no "coroutine was never awaited" warning on top of the error
        raise InvalidMessageError(
            "summarize returned an awaitable; use acompact_with_summary for an async summarizer"
        )
    raise InvalidMessageError(f"summarize must return a string, got {type(summary).__name__}")


def check_placeholder(value: object) -> str:
    """Return ``value`` if it is a non-empty string; ``TypeError``/``ValueError`` otherwise."""
    if not isinstance(value, str):
        raise must("placeholder", "a non-empty string", value)
    if not value:
        # An empty result could not be told from a cleared one, and providers
        # reject empty text.
        raise must("placeholder", "a non-empty string", value, ValueError)
    return value


def check_tool_names(value: object) -> FrozenSet[str]:
    """``exclude_tools`` as a frozenset of names; ``TypeError`` for a string or non-string."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise must("exclude_tools", "a collection of tool names such as ('search',)", value)
    names = list(value)
    for name in names:
        if not isinstance(name, str):
            raise must("exclude_tools", "a collection of tool names (strings)", name)
    return frozenset(names)


def check_flag(value: object, name: str) -> bool:
    """Return ``value`` if it is a bool, else raise ``TypeError`` naming the option."""
    if not isinstance(value, bool):
        raise must(name, "True or False", value)
    return value


def check_target_tokens(target_tokens: object, max_tokens: float) -> Optional[float]:
    """Return ``target_tokens`` if it is ``None`` or a finite positive number up to ``max_tokens``
    (checked as ``check_max_tokens`` does; ``ValueError`` when it is more)."""
    if target_tokens is None:
        return None
    check_max_tokens(target_tokens, "target_tokens")
    if target_tokens > max_tokens:  # type: ignore[operator]  # Real declares no comparison
        raise must(
            "target_tokens",
            f"at most max_tokens ({max_tokens}): it is what a history over max_tokens is "
            "compacted down to",
            target_tokens,
            ValueError,
        )
    return target_tokens  # type: ignore[return-value]


def check_options(arguments: Mapping[str, Any]) -> Dict[str, Any]:
    """``compact``'s options among a call's ``locals()``, checked; errors name the option."""
    budget = check_max_tokens(arguments["max_tokens"])
    target = check_target_tokens(arguments["target_tokens"], budget)
    check_callable(arguments["count_tokens"], "count_tokens")
    check_callable(arguments.get("pin"), "pin")
    return {
        "max_tokens": budget,
        "count_tokens": arguments["count_tokens"],
        "keep_head": check_keep(arguments["keep_head"], "keep_head"),
        "keep_tail": check_keep(arguments["keep_tail"], "keep_tail"),
        "target_tokens": target,
        "pin": arguments.get("pin"),
    }
