"""The compaction options of ``budgeted`` and ``CompactingSession``, defined and checked once.

``CompactionOptions`` is the one place where the options' names, defaults and
checks are defined. ``budgeted``, ``CompactingSession`` and
``CompactingSession.wrap`` spell them out as explicit, typed keyword parameters
(what type checkers, editors and the API reference read) and hand them here;
tests/test_options.py fails when a signature and the fields disagree, so a new
option cannot be forgotten in one of them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Literal, Optional, Protocol, Sequence, Union

from ctx_compact._contract import (
    KEEP_HEAD,
    KEEP_TAIL,
    MEDIA_AWARE,
    CountTokens,
    ThinkingClearing,
    ToolResultClearing,
    check_callable,
    check_flag,
    check_keep,
    check_max_tokens,
    check_summary_role,
    check_target_tokens,
    must,
)

from ._callables import is_async_callable
from ._store import SummaryStore, check_store

OVERFLOW_CHOICES = ("call", "raise", "retry")
VALIDATE_CHOICES = (None, "raise", "report", "repair")

# The options' types as callers give them, for the explicit signatures of
# budgeted, CompactingSession and CompactingSession.wrap (type checkers and
# editors read those; tests/test_options.py checks they agree with the fields below).


class RollingSummarize(Protocol):
    """A summarizer that takes the previous summary: ``(dropped, *, previous) -> str``."""

    def __call__(self, dropped: List[Any], *, previous: Optional[str]) -> Any: ...


Summarize = Union[Callable[[List[Any]], Any], RollingSummarize]
OnOverflow = Literal["call", "raise", "retry"]
Validate = Optional[Literal["raise", "report", "repair"]]
Clearing = Union[bool, Mapping[str, Any], None]


class Inherit:
    """The default of ``CompactingSession.wrap``'s options: the session's own value."""

    def __repr__(self) -> str:
        return "INHERIT"


INHERIT: Any = Inherit()


@dataclass(frozen=True)
class CompactionOptions:
    """How the messages of an intercepted call are compacted (see ``budgeted``).

    ``max_tokens`` is always set: a session without a budget holds no options.
    """

    max_tokens: float
    keep_head: int = KEEP_HEAD
    keep_tail: int = KEEP_TAIL
    count_tokens: Optional[CountTokens] = None
    count_media: bool = True
    summarize: Optional[Summarize] = None
    summary_role: str = "user"
    messages_arg: str = "messages"
    on_overflow: str = "call"
    validate: Optional[str] = None
    clear_tool_results: Optional[ToolResultClearing] = None
    clear_thinking: Optional[ThinkingClearing] = None
    target_tokens: Optional[float] = None
    store: Optional[SummaryStore] = None

    @classmethod
    def build(cls, caller: str, max_tokens: object, options: Dict[str, Any]) -> CompactionOptions:
        """Check ``max_tokens`` and every other option, naming the bad one.

        Args:
            caller: Who was given the options (``"budgeted"``), for error messages.
            max_tokens: The budget.
            options: The other options, by keyword; missing ones take their defaults.

        Raises:
            TypeError, ValueError: An unknown or bad option.
        """
        budget = check_max_tokens(max_tokens)
        checked = check_options(caller, options)
        check_target_tokens(checked["target_tokens"], budget)
        return cls(max_tokens=budget, **checked)

    @property
    def counter(self) -> Optional[CountTokens]:
        """What every figure is counted with: ``count_tokens``, else the default counting.

        The default is the media-aware estimate (``ctx_compact.media_aware_counter()``:
        the specification's estimate on a message without media, a media part at
        its billed tokens); with ``count_media=False``, the specification's
        estimator everywhere (``None``).
        """
        if self.count_tokens is not None or not self.count_media:
            return self.count_tokens
        return MEDIA_AWARE


OPTION_NAMES = tuple(
    f.name for f in dataclasses.fields(CompactionOptions) if f.name != "max_tokens"
)


def given_options(arguments: Dict[str, Any]) -> Dict[str, Any]:
    """The options among a call's ``locals()``, by name (``max_tokens`` aside)."""
    return {name: arguments[name] for name in OPTION_NAMES}


def check_options(caller: str, options: Dict[str, Any]) -> Dict[str, Any]:
    """Check the options other than ``max_tokens``; return them with unknown names refused.

    Raises:
        TypeError: An unknown option, or one of the wrong type (an async
            ``count_tokens`` among them: counting is always synchronous).
        ValueError: A negative ``keep_*``, a ``messages_arg`` that is no
            identifier, or an ``on_overflow``/``validate`` outside its choices.
    """
    for name in options:
        if name not in OPTION_NAMES:
            raise TypeError(f"{caller}() got an unexpected keyword argument {name!r}")
    defaults = {f.name: f.default for f in dataclasses.fields(CompactionOptions)}
    merged = {name: options.get(name, defaults[name]) for name in OPTION_NAMES}
    check_keep(merged["keep_head"], "keep_head")
    check_keep(merged["keep_tail"], "keep_tail")
    check_callable(merged["count_tokens"], "count_tokens")
    if merged["count_tokens"] is not None and is_async_callable(merged["count_tokens"]):
        raise must(
            "count_tokens",
            "a plain (not async) function: tokens are counted synchronously (cache an async "
            "tokenizer's figures)",
            merged["count_tokens"],
        )
    check_flag(merged["count_media"], "count_media")
    check_callable(merged["summarize"], "summarize")
    check_summary_role(merged["summary_role"])
    messages_arg = merged["messages_arg"]
    if not isinstance(messages_arg, str):
        raise must("messages_arg", "an argument name", messages_arg)
    if not messages_arg.isidentifier():
        raise must("messages_arg", "an argument name", messages_arg, ValueError)
    _choice("on_overflow", merged["on_overflow"], OVERFLOW_CHOICES)
    _choice("validate", merged["validate"], VALIDATE_CHOICES)
    merged["clear_tool_results"] = _clearing(
        "clear_tool_results", merged["clear_tool_results"], ToolResultClearing
    )
    merged["clear_thinking"] = _clearing(
        "clear_thinking", merged["clear_thinking"], ThinkingClearing
    )
    check_store(merged["store"])
    if merged["target_tokens"] is not None:
        merged["target_tokens"] = check_max_tokens(merged["target_tokens"], "target_tokens")
    return merged


def _clearing(name: str, value: Any, kind: Any) -> Any:
    # False/None: off; True: the defaults; a mapping: the options of the core function.
    if value is None or value is False:
        return None
    if value is True:
        return kind.checked()
    if isinstance(value, kind):
        return value
    if isinstance(value, Mapping):
        try:
            return kind.checked(**value)
        except TypeError as exc:
            raise TypeError(f"{name!r}: {exc}") from None
    raise must(name, "True, False or a dict of its options", value)


def _choice(name: str, value: Any, choices: Sequence[Any]) -> None:
    """Refuse ``value`` unless it is one of ``choices`` (``ValueError``, or ``TypeError`` for
    a value no choice could equal, such as a list)."""
    try:
        if value in choices:
            return
    except TypeError:  # unhashable: compared against a set of choices
        pass
    expected = ", ".join(map(repr, choices[:-1])) + f" or {choices[-1]!r}"
    right_type = any(type(value) is type(choice) for choice in choices)
    raise must(name, expected, value, ValueError if right_type else TypeError)


def check_awaitables(
    is_async: bool,
    kind_name: str,
    function_name: str,
    summarize: Optional[Callable[..., Any]],
    hooks: Sequence[Callable[..., Any]],
) -> None:
    """Refuse, at wrapping time, async helpers that a sync callable could not await."""
    if is_async:
        return
    if summarize is not None and is_async_callable(summarize):
        raise TypeError(
            f"{function_name} is a {kind_name} function, so it cannot await the async "
            f"summarize {summarize!r}; pass a plain function, or wrap an async function"
        )
    for hook in hooks:
        if is_async_callable(hook):
            raise TypeError(
                f"{function_name} is a {kind_name} function, so it cannot await the "
                f"async on_compact hook {hook!r}; pass a plain function, or wrap an "
                f"async function"
            )
