"""What ``budgeted`` and ``session.wrap`` return: a callable wrapped by an ``Interceptor``.

It pickles and copies like the function it wraps (see ``BudgetedFunction``).
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Sequence, TypeVar, cast

import wrapt

from ._callables import kind_of, qualified_name
from ._calls import Interceptor
from ._events import Hook
from ._options import CompactionOptions

F = TypeVar("F", bound=Callable[..., Any])


def wrap_callable(fn: F, options: CompactionOptions, hooks: Sequence[Hook]) -> F:
    """``fn`` wrapped with ``options`` and ``hooks``, in the shape of its kind, decided here once.

    Raises:
        TypeError: ``fn`` is not callable or cannot take the messages argument,
            or an async summarizer or hook meets a sync callable.
    """
    if not callable(fn) and not isinstance(fn, (classmethod, staticmethod)):
        raise TypeError(f"budgeted can only wrap a callable, not {type(fn).__name__}")
    interceptor = Interceptor(options, hooks, fn, kind_of(fn), qualified_name(fn))
    return cast(F, BudgetedFunction(fn, interceptor))


def _load(module: str, qualname: str) -> Any:
    return wrapt.resolve_path(module, qualname)[2]


class BoundBudgetedFunction(wrapt.BoundFunctionWrapper):  # type: ignore[misc]
    """A ``BudgetedFunction`` method as read off its class or an instance."""

    def __reduce_ex__(self, protocol: Any) -> Any:
        parent = self._self_parent
        if self._self_instance is None:  # read off the class: the function itself
            return parent.__reduce_ex__(protocol)
        # A bound method pickles as the attribute of its instance, as Python's own do.
        return getattr, (self._self_instance, parent.__name__)

    def __reduce__(self) -> Any:
        return self.__reduce_ex__(2)


class BudgetedFunction(wrapt.FunctionWrapper):  # type: ignore[misc]
    """A callable wrapped by an ``Interceptor``: what ``budgeted`` and ``session.wrap`` return.

    It pickles and copies like the function it wraps: by reference where the
    function can be imported under its name (a module-level function or a
    method), so the copy is this very object; by value otherwise (a function
    defined in ``__main__`` or a notebook, shipped by cloudpickle to a worker),
    so the copy carries the same options and hooks.
    """

    __bound_function_wrapper__ = BoundBudgetedFunction

    if sys.version_info >= (3, 10):
        # Honest about its class, where wrapt would report the function's: pickle
        # extensions (cloudpickle) that recognise a function by isinstance would
        # otherwise serialise the bare function and silently lose the budget.
        # From Python 3.10 inspect.iscoroutinefunction and the rest still see
        # through it; Python 3.9's inspect would not, so there it keeps wrapt's.
        @property  # type: ignore[misc]
        def __class__(self) -> type:
            return type(self)

    def __init__(self, fn: Any, interceptor: Interceptor) -> None:
        super().__init__(fn, interceptor.handle)
        self._self_interceptor = interceptor

    def __reduce_ex__(self, protocol: Any) -> Any:
        fn = self.__wrapped__
        module = getattr(fn, "__module__", None)
        qualname = getattr(fn, "__qualname__", None)
        if (
            isinstance(module, str)
            and isinstance(qualname, str)
            and module != "__main__"
            and "<locals>" not in qualname
        ):
            try:
                found = _load(module, qualname)
            except (ImportError, AttributeError):
                found = None
            if found is self:
                return _load, (module, qualname)
        interceptor = self._self_interceptor
        return wrap_callable, (fn, interceptor.options, interceptor.hooks)

    def __reduce__(self) -> Any:
        return self.__reduce_ex__(2)

    def __copy__(self) -> Any:
        return self

    def __deepcopy__(self, memo: Any) -> Any:
        return self
