"""budgeted: compact the messages argument of any callable, keeping its kind."""

from __future__ import annotations

from typing import Any, Callable, Optional, TypeVar

from ctx_compact._contract import KEEP_HEAD, KEEP_TAIL, CountTokens

from ._events import Hooks, check_hooks
from ._options import (
    Clearing,
    CompactionOptions,
    OnOverflow,
    Summarize,
    Validate,
    given_options,
)
from ._store import SummaryStore
from ._wrapped import wrap_callable

F = TypeVar("F", bound=Callable[..., Any])


def budgeted(
    max_tokens: float,
    *,
    keep_head: int = KEEP_HEAD,
    keep_tail: int = KEEP_TAIL,
    count_tokens: Optional[CountTokens] = None,
    count_media: bool = True,
    summarize: Optional[Summarize] = None,
    summary_role: str = "user",
    messages_arg: str = "messages",
    on_overflow: OnOverflow = "call",
    validate: Validate = None,
    clear_tool_results: Clearing = None,
    clear_thinking: Clearing = None,
    target_tokens: Optional[float] = None,
    store: Optional[SummaryStore] = None,
    on_compact: Hooks = None,
) -> Callable[[F], F]:
    """Keep the ``messages`` argument of every call of the decorated callable inside a budget.

    Works on plain, coroutine, generator and async generator functions (the
    kind is kept), instance, class and static methods, bound methods of other
    objects (``budgeted(max_tokens=...)(client.chat.completions.create)``),
    ``**kwargs``-only functions and objects with an ``async def __call__``.
    The messages are found by keyword or by position, by binding against the
    signature (computed once); a call without them passes through untouched.
    The wrapped callable receives a new, compacted list; the caller's list and
    messages are never mutated. Each intercepted call produces one
    ``CompactionEvent`` for the hooks and for every active ``CompactingSession``,
    reported once the call returns (with the provider's prompt size when the
    response carries ``usage``) or raises.

    Args:
        max_tokens: The budget (required): a finite positive number.
        keep_head: Leading messages always kept.
        keep_tail: Trailing messages always kept.
        count_tokens: ``(message) -> int``; the default is the media-aware
            estimate (``ctx_compact.media_aware_counter()``): the
            specification's estimate on a message without media, and an
            image, PDF or recording at the tokens its provider bills for it
            (docs/media.md).
        count_media: ``False`` counts with the specification's estimator
            everywhere, a media part as the length of its JSON (base64
            included); ignored when ``count_tokens`` is given.
        summarize: ``(dropped) -> str``, sync or async, called when something
            was dropped; its text is inserted after the head. On async
            callables an async one is awaited and a sync one runs on a worker
            thread. Async summarizers are refused for sync callables. The
            summary of a cut is kept (in ``store``) and reused while the cut
            stands. A summarizer with a keyword argument ``previous``
            (``(dropped, *, previous=None) -> str``) rolls: it is given the
            previous summary of the conversation and only the messages
            dropped since (docs/summaries.md). One that raises does not fail
            the call: it goes on without a summary, the event's
            ``summary_error`` says why, and the next call tries again.
        summary_role: The role of the inserted summary message.
        messages_arg: The name of the argument carrying the messages
            (``"input"`` for the OpenAI Responses API, ``"contents"`` elsewhere).
        on_compact: A hook or a list of hooks called with each event. Async
            hooks only on async callables. A hook that raises is logged on the
            ``ctx_compact.middleware`` logger and the call goes on.
        on_overflow: ``"call"`` makes the call with the best compaction even
            when it does not fit; ``"raise"`` raises ``BudgetExceededError``
            instead (after reporting the event); ``"retry"`` calls as ``"call"``
            does and, when the provider refuses the prompt for its length
            (OpenAI's ``context_length_exceeded``, Anthropic's ``prompt is too
            long``, LiteLLM's ``ContextWindowExceededError``), compacts again
            to the provider's own figures from the error and retries once (the
            event then has ``retried=True``; sessions learn the figures).
        validate: ``None`` (the default) skips the pairing check; ``"report"``
            runs ``ctx_compact.check_pairing`` on the list about to be sent and
            puts the problems on the event; ``"raise"`` also raises
            ``UnpairedMessagesError`` instead of making a call the provider
            would reject; ``"repair"`` runs ``ctx_compact.repair_pairing`` on
            it instead and sends what it returns (orphaned results dropped,
            misplaced ones moved to their calls, unanswered calls dropped), so
            a conversation that is already poisoned still gets through; the
            event's ``problems`` and ``repairs`` say what was wrong and what
            changed.
        clear_tool_results: ``True`` (or a dict of ``ctx_compact.clear_tool_results``'
            options: ``keep``, ``exclude_tools``, ``placeholder``, ``clear_inputs``):
            while the call is over budget, the oldest tool results are replaced
            by a placeholder before anything is dropped (docs/prompt-cache.md).
        clear_thinking: ``True`` (or ``{"keep_turns": n}``): old thinking blocks
            and reasoning items are cleared first, likewise.
        target_tokens: Cut (and clear tool results) in steps of ``max_tokens -
            target_tokens``, as ``ctx_compact.compact(..., target_tokens=...)``
            does: down to about ``target_tokens``, then the same cut until the
            history has grown by more than a step, so the prompt's prefix (and the
            provider's prompt cache) stays the same. A function of the history
            alone, the same in every process (at most ``max_tokens``).
        store: Where summaries are kept, keyed by the content of the dropped
            prefix and the summarizer: a ``SQLiteStore`` shared by the processes
            of a machine, a ``RedisStore`` shared by a fleet, or any
            ``SummaryStore``. Every process sharing it sends the same summary for
            the same cut, and only the first pays for it. By default each
            decorated callable keeps its recent summaries in memory. A store
            can cost a call its summary, never the call: what it answers that
            is not a string is a miss, and once it raised or spent its
            ``timeout`` it is not asked again in that call (the event's
            ``store_error`` says why).

    Returns:
        A decorator.

    Raises:
        TypeError, ValueError: A bad option, at decoration time; also when the
            decorated callable cannot accept ``messages_arg``, or when an async
            summarize or hook meets a sync callable.
    """
    options = given_options(locals())
    if callable(max_tokens):  # @budgeted without parentheses: the function came as the budget
        raise TypeError(
            "budgeted takes keyword options and is used with parentheses: @budgeted(max_tokens=...)"
        )
    compaction = CompactionOptions.build("budgeted", max_tokens, options)
    hooks = check_hooks(on_compact)

    def decorate(fn: F) -> F:
        return wrap_callable(fn, compaction, hooks)

    return decorate
