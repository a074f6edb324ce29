"""budgeted: compact the messages argument of any callable, keeping its kind."""

from __future__ import annotations

from typing import Any, Callable, List, Optional, TypeVar, cast

import wrapt

from ctx_compact._engine import CountTokens

from ._calls import Kind, kind_of, qualified_name
from ._events import Hooks
from ._policy import Budget, Policy

F = TypeVar("F", bound=Callable[..., Any])


def apply(fn: F, policy: Policy) -> F:
    """Wrap ``fn`` with ``policy``; the wrapper's shape is decided here, once."""
    if not callable(fn) and not isinstance(fn, (classmethod, staticmethod)):
        raise TypeError(f"budgeted can only wrap a callable, not {type(fn).__name__}")
    kind = kind_of(fn)
    budget = Budget(policy, fn, kind, qualified_name(fn))
    wrapper = {
        Kind.SYNC: budget.call,
        Kind.ASYNC: budget.acall,
        Kind.GENERATOR: budget.generator,
        Kind.ASYNC_GENERATOR: budget.agenerator,
    }[kind]
    return cast(F, wrapt.FunctionWrapper(fn, wrapper))


def budgeted(
    *,
    max_tokens: float,
    keep_head: int = 1,
    keep_tail: int = 4,
    count_tokens: Optional[CountTokens] = None,
    summarize: Optional[Callable[[List[Any]], Any]] = None,
    summary_role: str = "user",
    messages_arg: str = "messages",
    on_compact: Hooks = None,
    on_overflow: str = "call",
    validate: Optional[str] = None,
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
        count_tokens: ``(message) -> int``; the default is the core's estimator.
        summarize: ``(dropped) -> str``, sync or async, called when something
            was dropped; its text is inserted after the head. On async
            callables an async one is awaited and a sync one runs on a worker
            thread. Async summarizers are refused for sync callables.
        summary_role: The role of the inserted summary message.
        messages_arg: The name of the argument carrying the messages
            (``"input"`` for the OpenAI Responses API, ``"contents"`` elsewhere).
        on_compact: A hook or a list of hooks called with each event. Async
            hooks only on async callables. A hook that raises is logged on the
            ``ctx_compact.middleware`` logger and the call goes on.
        on_overflow: ``"call"`` makes the call with the best compaction even
            when it does not fit; ``"raise"`` raises ``BudgetExceededError``
            instead (after reporting the event).
        validate: ``None`` (the default) skips the pairing check; ``"report"``
            runs ``ctx_compact.check_pairing`` on the list about to be sent and
            puts the problems on the event; ``"raise"`` also raises
            ``UnpairedMessagesError`` instead of making a call the provider
            would reject.

    Returns:
        A decorator.

    Raises:
        TypeError, ValueError: A bad option, at decoration time; also when the
            decorated callable cannot accept ``messages_arg``, or when an async
            summarize or hook meets a sync callable.
    """
    policy = Policy.build(
        max_tokens=max_tokens,
        keep_head=keep_head,
        keep_tail=keep_tail,
        count_tokens=count_tokens,
        summarize=summarize,
        summary_role=summary_role,
        messages_arg=messages_arg,
        on_compact=on_compact,
        on_overflow=on_overflow,
        validate=validate,
    )

    def decorate(fn: F) -> F:
        return apply(fn, policy)

    return decorate
