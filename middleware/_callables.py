"""What kind of callable is being wrapped, and where its messages argument is.

Both are decided once, when the callable is wrapped, never by inspecting a call.
"""

from __future__ import annotations

import contextlib
import enum
import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from ctx_compact._contract import CountTokens


def is_async_callable(fn: object) -> bool:
    """Whether calling ``fn`` gives an awaitable, looking through ``functools.wraps``."""
    if inspect.iscoroutinefunction(fn):
        return True
    target: Any = getattr(fn, "__func__", fn)
    with contextlib.suppress(ValueError):  # a __wrapped__ cycle
        target = inspect.unwrap(target)
    if inspect.iscoroutinefunction(target):
        return True
    if inspect.isfunction(fn) or inspect.ismethod(fn) or not callable(fn):
        return False
    # An object whose class defines `async def __call__`.
    return inspect.iscoroutinefunction(type(fn).__call__)


class Kind(enum.Enum):
    """The shape of a callable's result, which decides the wrapper's shape."""

    SYNC = "sync"
    ASYNC = "async"
    GENERATOR = "generator"
    ASYNC_GENERATOR = "async generator"

    @property
    def is_async(self) -> bool:
        """Whether calls of this kind run inside an event loop."""
        return self in (Kind.ASYNC, Kind.ASYNC_GENERATOR)


def _target(fn: Any) -> Any:
    if isinstance(fn, (classmethod, staticmethod)):
        fn = fn.__func__
    try:
        return inspect.unwrap(fn)
    except ValueError:  # a __wrapped__ cycle
        return fn


def kind_of(fn: Any) -> Kind:
    """Classify ``fn``, looking through classmethod/staticmethod and ``functools.wraps``."""
    target = _target(fn)
    if inspect.isasyncgenfunction(target) or inspect.isasyncgenfunction(fn):
        return Kind.ASYNC_GENERATOR
    if inspect.isgeneratorfunction(target) or inspect.isgeneratorfunction(fn):
        return Kind.GENERATOR
    if is_async_callable(fn) or is_async_callable(target):
        return Kind.ASYNC
    return Kind.SYNC


def qualified_name(fn: Any) -> str:
    """A readable qualified name for events and errors."""
    target = fn.__func__ if isinstance(fn, (classmethod, staticmethod)) else fn
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None)
    if name is None:
        name = type(target).__qualname__
    module = getattr(target, "__module__", None)
    return f"{module}.{name}" if module and module != "builtins" else str(name)


Arguments = Tuple[Tuple[Any, ...], Dict[str, Any]]


class Beside(NamedTuple):
    """Tokens a request sends beside its messages: counted against the budget, never dropped.

    Attributes:
        system: The system prompt's (a system message, the Responses API's
            ``instructions``, Gemini's ``system_instruction``).
        tools: The tool schemas'.
    """

    system: int = 0
    tools: int = 0

    @property
    def total(self) -> int:
        """``system + tools``."""
        return self.system + self.tools


class Located(NamedTuple):
    """Where one call carries its messages, and how to make the call with others.

    What a site (``ArgSpec`` for a function's argument, ``RequestSite`` for an
    SDK request's body) finds in one call.

    Attributes:
        value: The messages as the caller passed them.
        rebuild: ``(messages) -> (args, kwargs)``: the call's arguments with
            ``messages`` in their place; the caller's objects are left alone.
        beside: Tokens the request sends beside the messages that count
            against the budget but cannot be dropped (a system prompt, the
            Responses API's ``instructions``, tool schemas), as a ``Beside``.
        function: The name for the event, when the site knows better than
            the callable's (an SDK request names its route).
        counts: Each message's tokens, when the site counts them itself (a
            framework integration counting its messages as the framework's
            model sends them); ``None``: ``value`` is counted by ``recount``.
        recount: What counts the messages compaction makes from ``value`` (a
            summary, a cleared copy), and ``value`` itself without ``counts``;
            ``None``: the options' counter.
        request: What the call sends beside its messages, as far as the site
            sees it (an SDK request's body, a call's keyword arguments), for a
            summarizer that takes ``request``; ``None`` when it cannot say.
        api: The API whose request body ``request`` is (``"openai
            /chat/completions"``), when the site reads an SDK request's body.
    """

    value: Any
    rebuild: Callable[[List[Any]], Arguments]
    beside: Beside = Beside()
    function: Optional[str] = None
    counts: Optional[Sequence[int]] = None
    recount: Optional[CountTokens] = None
    request: Optional[Mapping[str, Any]] = None
    api: Optional[str] = None


@dataclass(frozen=True)
class ArgSpec:
    """Where a call carries its messages.

    Attributes:
        name: The argument's name.
        position: Its index among the positional parameters of the signature as
            given (``None`` when it can only be passed by keyword).
        keyword: Whether it may be passed by keyword.
        binds_first: Whether the signature as given still holds the parameter
            that binding to an instance or class consumes (``self``/``cls``).
    """

    name: str
    position: Optional[int]
    keyword: bool
    binds_first: bool

    @classmethod
    def of(cls, fn: Any, name: str, function_name: str) -> ArgSpec:
        """Bind ``name`` against ``fn``'s signature, failing if ``fn`` cannot accept it.

        ``name`` is an identifier already: ``check_options`` checked ``messages_arg``.
        """
        target = fn.__func__ if isinstance(fn, (classmethod, staticmethod)) else fn
        binds_first = not isinstance(fn, staticmethod) and not inspect.ismethod(target)
        binds_first = binds_first and (isinstance(fn, classmethod) or inspect.isfunction(target))
        try:
            signature = inspect.signature(target)
        except (TypeError, ValueError):
            # No signature to read (some builtins): the messages can only be found by keyword.
            return cls(name, None, True, False)
        found = _parameter(signature, name)
        if found is None:
            raise TypeError(
                f"{function_name}{signature} has no argument named {name!r} and takes no "
                f"**kwargs, so its messages cannot be found; pass messages_arg=... naming "
                f"the argument that carries them"
            )
        position, keyword = found
        return cls(name, position, keyword, binds_first)

    def find(
        self, instance: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]
    ) -> Tuple[bool, Any, Optional[int]]:
        """Find the messages in a call as wrapt presents it.

        Returns:
            ``(found, value, index)``: ``index`` is the position in ``args``, or
            ``None`` when the value came by keyword.
        """
        if self.keyword and self.name in kwargs:
            return True, kwargs[self.name], None
        if self.position is not None:
            # wrapt hands over args without self/cls when the call is bound.
            index = (
                self.position - 1 if self.binds_first and instance is not None else self.position
            )
            if 0 <= index < len(args):
                return True, args[index], index
        return False, None, None

    def locate(
        self, instance: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]
    ) -> Optional[Located]:
        """The call's messages and how to replace them, or ``None`` when it carries none."""
        found, value, index = self.find(instance, args, kwargs)
        if not found or value is None:
            return None
        if isinstance(value, str) and self.name != "messages":
            # APIs whose input may be one string (the Responses API's input="...",
            # Gemini's contents) have nothing to compact there. A string as
            # `messages` is a mistake, reported by CallRun before the call.
            return None
        name = self.name

        def rebuild(messages: List[Any]) -> Arguments:
            return replace(args, kwargs, name, index, messages)

        return Located(value, rebuild, request=MappingProxyType(kwargs))


def _parameter(signature: inspect.Signature, name: str) -> Optional[Tuple[Optional[int], bool]]:
    """Where ``name`` binds in ``signature``: its index among the positional parameters
    (``None``: by keyword only) and whether it may come by keyword; ``None`` when it cannot."""
    params = list(signature.parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    for index, param in enumerate(positional):
        if param.name == name:
            return index, param.kind is param.POSITIONAL_OR_KEYWORD
    takes_it = any(p.name == name and p.kind is p.KEYWORD_ONLY for p in params)
    if takes_it or any(p.kind is p.VAR_KEYWORD for p in params):
        return None, True
    return None


def replace(
    args: Tuple[Any, ...], kwargs: Dict[str, Any], name: str, index: Optional[int], value: Any
) -> Tuple[Tuple[Any, ...], Dict[str, Any]]:
    """New ``args``/``kwargs`` with the messages replaced; the originals are left alone."""
    if index is None:
        kwargs = dict(kwargs)
        kwargs[name] = value
        return args, kwargs
    return (*args[:index], value, *args[index + 1 :]), kwargs
