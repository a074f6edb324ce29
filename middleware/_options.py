"""The compaction options, declared once: ``Options`` as given, ``CompactionOptions`` checked.

``budgeted``, ``CompactingSession``, ``CompactingSession.wrap`` and the framework
integrations take the options as ``**options: Unpack[Options]`` (type checkers
refuse a misspelt or mistyped one, the API reference lists them from here) and
hand them to ``CompactionOptions.build``, which checks them, naming the bad one,
and fills in the defaults.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from typing import (
    Any,
    Callable,
    Dict,
    List,
    Literal,
    Optional,
    Protocol,
    Sequence,
    TypedDict,
    TypeVar,
    Union,
)

from ctx_compact._contract import (
    KEEP_HEAD,
    KEEP_TAIL,
    MEDIA_AWARE,
    CountTokens,
    ThinkingClearing,
    ToolResultClearing,
    ToolResultTruncation,
    check_callable,
    check_flag,
    check_keep,
    check_max_tokens,
    check_summary_role,
    check_target_tokens,
    must,
)

from ._callables import Kind, is_async_callable
from ._store import SummaryStore, check_store

OVERFLOW_CHOICES = ("call", "raise", "retry")
VALIDATE_CHOICES = (None, "raise", "report", "repair")

F = TypeVar("F", bound=Callable[..., Any])


class RollingSummarize(Protocol):
    """A summarizer that takes the previous summary: ``(dropped, *, previous) -> str``."""

    def __call__(self, dropped: List[Any], *, previous: Optional[str]) -> Any: ...


Summarize = Union[Callable[[List[Any]], Any], RollingSummarize]
OnOverflow = Literal["call", "raise", "retry"]
Validate = Optional[Literal["raise", "report", "repair"]]
Clearing = Union[bool, Mapping[str, Any], None]


class SharedOptions(TypedDict, total=False):
    """The options every entry point takes, the framework integrations too (``Options``)."""

    keep_head: int
    """Leading messages always kept (1)."""
    keep_tail: int
    """Trailing messages always kept (4)."""
    count_tokens: Optional[CountTokens]
    """``(message) -> int``, synchronous. By default the media-aware estimate
    (``ctx_compact.media_aware_counter()``): the specification's estimate on a message
    without media, an image, PDF or recording at the tokens its provider bills
    (docs/media.md)."""
    count_media: bool
    """``False`` counts with the specification's estimator everywhere, a media part as
    the length of its JSON; ignored when ``count_tokens`` is given."""
    summarize: Optional[Summarize]
    """``(dropped) -> str``, sync or async, called when something was dropped; its text
    is inserted after the head. On async callables an async one is awaited and a sync one
    runs on a worker thread; an async one is refused for sync callables. With a keyword
    argument ``previous`` it rolls: it is given the previous summary and only the messages
    dropped since. With a keyword argument ``request`` it is given a ``CallRequest``, a
    read-only mapping of what the call sends beside its messages (an SDK request's body, a
    call's keyword arguments; ``None`` when unknown), such as its ``model``, with the
    messages sent before the dropped ones. The summary of a cut is kept
    (in ``store``) and reused while the cut stands; one that raises does not fail the call
    (the event's ``summary_error`` says why). See docs/summaries.md."""
    summary_role: str
    """The role of the inserted summary message (``"user"``)."""
    on_overflow: OnOverflow
    """``"call"`` (the default) makes the call with the best compaction even when it does
    not fit; ``"raise"`` raises ``BudgetExceededError`` instead (after reporting the event);
    ``"retry"`` calls and, when the provider refuses the prompt for its length, compacts
    again to the provider's own figures from the error and retries once (the event has
    ``retried=True``)."""
    validate: Validate
    """``None`` (the default) skips the pairing check; ``"report"`` puts the problems
    ``ctx_compact.check_pairing`` finds in the list about to be sent on the event;
    ``"raise"`` also raises ``UnpairedMessagesError`` instead of making the call;
    ``"repair"`` sends what ``ctx_compact.repair_pairing`` makes of it (the event's
    ``repairs`` say what changed)."""
    clear_tool_results: Clearing
    """``True`` (or a dict of ``ctx_compact.clear_tool_results``' options): while the call
    is over budget, the oldest tool results are replaced by a placeholder before anything
    is dropped (docs/prompt-cache.md)."""
    clear_thinking: Clearing
    """``True`` (or ``{"keep_turns": n}``): old thinking blocks and reasoning items are
    cleared first, likewise."""
    truncate_tool_results: Clearing
    """``None`` (the default): the last resort only: when the head, the pins and the tail
    alone do not fit, the largest tool results they hold are cut to their head and tail
    just enough to fit (docs/truncation.md). ``True`` (or a dict of
    ``ctx_compact.truncate_tool_results``' options, ``{"max_result_tokens": 2000, ...}``)
    also cuts every result over its cap before anything is dropped (``True``: a quarter of
    ``max_tokens``); ``False``: neither. The event's ``truncated_results`` say what was cut."""
    pin: Optional[Callable[[Any], Any]]
    """A predicate ``(message) -> bool`` called with each of the caller's messages: the
    group of a message it accepts is never dropped, and its results never cleared or cut;
    it stays in place between the head and the tail."""
    target_tokens: Optional[float]
    """Cut in steps of ``max_tokens - target_tokens``, as ``ctx_compact.compact`` does, so
    the prompt's prefix (and the provider's prompt cache) stays the same between cuts."""
    store: Optional[SummaryStore]
    """Where summaries are kept, keyed by the dropped prefix and the summarizer: a
    ``SQLiteStore``, a ``RedisStore`` or any ``SummaryStore``, so processes sharing it send
    the same summary for the same cut. By default each callable keeps its recent summaries
    in memory. A store can cost a call its summary, never the call (the event's
    ``store_error`` says why)."""


class Options(SharedOptions, total=False):
    """The compaction options by keyword; one left out takes its default (``CompactionOptions``)."""

    messages_arg: str
    """The argument carrying the messages (``"messages"``; ``"input"`` for the Responses
    API, ``"contents"`` elsewhere)."""


class Inherit:
    """The default of ``CompactingSession.wrap``'s options: the session's own value."""

    def __repr__(self) -> str:
        return "INHERIT"


INHERIT: Any = Inherit()


@dataclass(frozen=True)
class CompactionOptions:
    """How the messages of an intercepted call are compacted: the ``Options`` given, checked.

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
    truncate_tool_results: Union[bool, ToolResultTruncation, Mapping[str, Any], None] = None
    pin: Optional[Callable[[Any], Any]] = None
    target_tokens: Optional[float] = None
    store: Optional[SummaryStore] = None

    @classmethod
    def build(
        cls, caller: str, max_tokens: object, options: Mapping[str, Any]
    ) -> CompactionOptions:
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
        truncating = checked["truncate_tool_results"]
        if isinstance(truncating, Mapping):  # True, or options without a cap: a quarter
            cap = max(int(budget // 4), 1)
            checked["truncate_tool_results"] = ToolResultTruncation.checked(
                **{"max_result_tokens": cap, **truncating}
            )
        return cls(max_tokens=budget, **checked)

    @property
    def truncation(self) -> Optional[ToolResultTruncation]:
        """The up-front cut of every result over its cap, or ``None``."""
        value = self.truncate_tool_results
        return value if isinstance(value, ToolResultTruncation) else None

    @property
    def last_resort(self) -> Optional[ToolResultTruncation]:
        """The cut of the largest results when nothing else fits, or ``None`` (``False``)."""
        if self.truncate_tool_results is False:
            return None
        return self.truncation or _LAST_RESORT

    @property
    def counter(self) -> Optional[CountTokens]:
        """What every figure is counted with: ``count_tokens``, else the default counting.

        The default is the media-aware estimate (``ctx_compact.media_aware_counter()``);
        with ``count_media=False``, the specification's estimator everywhere (``None``).
        """
        if self.count_tokens is not None or not self.count_media:
            return self.count_tokens
        return MEDIA_AWARE


# The last resort's options: what it cuts is decided by the budget, not by a cap.
_LAST_RESORT = ToolResultTruncation.checked(max_result_tokens=1)
_FIELDS = [f for f in dataclasses.fields(CompactionOptions) if f.name != "max_tokens"]
_DEFAULTS = {f.name: f.default for f in _FIELDS}


def spelled_out(inherit: bool = False) -> Callable[[F], F]:
    """Show the options in ``inspect.signature`` (``help``, editors) in place of ``**options``.

    Each with its default, or with ``INHERIT`` (``inherit``: ``CompactingSession.wrap``).
    """

    def spell_out(function: F) -> F:
        signature = inspect.signature(function)
        *own, _ = signature.parameters.values()
        annotations = Options.__annotations__
        options = [
            inspect.Parameter(
                f.name,
                inspect.Parameter.KEYWORD_ONLY,
                default=INHERIT if inherit else f.default,
                annotation=getattr(annotations[f.name], "__forward_arg__", annotations[f.name]),
            )
            for f in _FIELDS
        ]
        function.__signature__ = signature.replace(parameters=[*own, *options])  # type: ignore[attr-defined]
        return function

    return spell_out


def check_options(caller: str, options: Mapping[str, Any]) -> Dict[str, Any]:
    """Check the options other than ``max_tokens``; return them all, defaults filled in.

    Raises:
        TypeError: An unknown option, or one of the wrong type (an async
            ``count_tokens`` among them: counting is always synchronous).
        ValueError: A negative ``keep_*``, a ``messages_arg`` that is no
            identifier, or an ``on_overflow``/``validate`` outside its choices.
    """
    for name in options:
        if name not in _DEFAULTS:
            raise TypeError(f"{caller}() got an unexpected keyword argument {name!r}")
    merged = {**_DEFAULTS, **options}
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
    merged["truncate_tool_results"] = _truncating(merged["truncate_tool_results"])
    check_callable(merged["pin"], "pin")
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


def _truncating(value: Any) -> Any:
    """``truncate_tool_results`` checked: ``None`` and ``False`` as given, the core's options
    when they name a cap, else the options alone (``True``: none), the cap to come from
    the budget (``CompactionOptions.build``)."""
    if value is None or value is False or isinstance(value, ToolResultTruncation):
        return value
    if value is True:
        return {}
    if not isinstance(value, Mapping):
        raise must("truncate_tool_results", "None, True, False or a dict of its options", value)
    try:
        checked = ToolResultTruncation.checked(**{"max_result_tokens": 1, **value})
    except TypeError as exc:
        raise TypeError(f"'truncate_tool_results': {exc}") from None
    return checked if "max_result_tokens" in value else dict(value)


def _choice(name: str, value: Any, choices: Sequence[Any]) -> None:
    """Refuse ``value`` unless it is one of ``choices`` (``ValueError``, or ``TypeError`` for
    a value no choice could equal, such as a list)."""
    if value in choices:
        return
    expected = ", ".join(map(repr, choices[:-1])) + f" or {choices[-1]!r}"
    right_type = any(type(value) is type(choice) for choice in choices)
    raise must(name, expected, value, ValueError if right_type else TypeError)


def check_awaitables(
    kind: Kind,
    function_name: str,
    summarize: Optional[Callable[..., Any]],
    hooks: Sequence[Callable[..., Any]],
) -> None:
    """Refuse, at wrapping time, async helpers that a sync callable could not await."""
    if kind.is_async:
        return
    awaited = [("summarize", summarize)] if summarize is not None else []
    for what, helper in [*awaited, *(("on_compact hook", hook) for hook in hooks)]:
        if is_async_callable(helper):
            raise TypeError(
                f"{function_name} is a {kind.value} function, so it cannot await the async "
                f"{what} {helper!r}; pass a plain function, or wrap an async function"
            )
