"""budgeted: compact the messages argument of any callable, keeping its kind."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, TypeVar

from ._events import Hooks, check_hooks
from ._options import CompactionOptions, Options, spelled_out
from ._wrapped import wrap_callable

if TYPE_CHECKING:
    from typing_extensions import Unpack

F = TypeVar("F", bound=Callable[..., Any])


@spelled_out()
def budgeted(
    max_tokens: float, *, on_compact: Hooks = None, **options: Unpack[Options]
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
        on_compact: A hook or a list of hooks called with each event. Async
            hooks only on async callables. A hook that raises is logged on the
            ``ctx_compact.middleware`` logger and the call goes on.
        **options: The compaction options (``Options``).

    Returns:
        A decorator.

    Raises:
        TypeError, ValueError: A bad option, at decoration time; also when the
            decorated callable cannot accept ``messages_arg``, or when an async
            summarize or hook meets a sync callable.
    """
    if callable(max_tokens):  # @budgeted without parentheses: the function came as the budget
        raise TypeError(
            "budgeted takes keyword options and is used with parentheses: @budgeted(max_tokens=...)"
        )
    compaction = CompactionOptions.build("budgeted", max_tokens, options)
    hooks = check_hooks(on_compact)

    def decorate(fn: F) -> F:
        return wrap_callable(fn, compaction, hooks)

    return decorate
