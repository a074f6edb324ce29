"""What each option of the public functions means, said once: ``with_option_docs`` writes
their ``Args:`` sections from ``OPTION_DOCS`` (docs/option_docs.py shows them in the API
reference)."""

from __future__ import annotations

import inspect
from typing import Any, Callable, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

OPTION_DOCS = {
    "messages": "A list (or other sequence) of message mappings. Never mutated.",
    "max_tokens": "The budget: a finite positive number.",
    "count_tokens": "``(message) -> int``; the default is the specification's estimator: "
    "compact JSON, UTF-16 length, divided by 4, rounded up.",
    "keep_head": "Leading messages always kept.",
    "keep_tail": "Trailing messages always kept.",
    "summary_role": 'The inserted message\'s role; ``"user"`` by default because some '
    "providers reject a second ``system`` message.",
    "target_tokens": "``None`` (the default) for the specification's cut; a number up to "
    "``max_tokens`` for the cut that keeps the provider's prompt cache (docs/prompt-cache.md): "
    "the cut one process would have made had it been called after every message of the "
    "history, moving only after more than ``max_tokens - target_tokens`` tokens of growth. "
    "Equal to ``max_tokens``, it is the specification's cut.",
    "pin": "``None``, or a predicate ``(message) -> bool`` called once with each of your "
    "messages: the group of a message it accepts is never dropped and stays in place between "
    "the head and the tail (a summary still goes right after the head). What it raises "
    "reaches you.",
}


def with_option_docs(**own: str) -> Callable[[F], F]:
    """Write the ``Args:`` section of the decorated function's docstring, before ``Returns:``.

    Each parameter, in signature order, is described by ``own`` or else by ``OPTION_DOCS``.
    """

    def document(function: F) -> F:
        names = inspect.signature(function).parameters
        args = "".join(f"    {name}: {own.get(name) or OPTION_DOCS[name]}\n" for name in names)
        doc = inspect.cleandoc(function.__doc__ or "")
        function.__doc__ = doc.replace("\nReturns:", f"\nArgs:\n{args}\nReturns:", 1)
        return function

    return document
