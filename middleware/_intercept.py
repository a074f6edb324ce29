"""Intercepting a third-party method by name for the duration of a session.

The method is replaced by a wrapt wrapper the first time a session asks for it,
and put back, exactly as it was, when the last session using it exits. The
wrapper compacts only calls made in the context of a session that intercepts
the method; every other call passes through untouched.
"""

from __future__ import annotations

import importlib
import inspect
import threading
from dataclasses import dataclass
from typing import Any, Dict, Tuple, Union

import wrapt

from ._calls import Kind, kind_of, qualified_name
from ._context import active_sessions

Target = Union[str, Tuple[Any, str]]

_MISSING = object()
_lock = threading.Lock()
_patches: Dict[Tuple[int, str], _Patch] = {}


@dataclass
class _Patch:
    owner: Any
    attr: str
    own: Any  # what owner.__dict__ held, or _MISSING when the attribute was inherited
    descriptor: Any  # what was wrapped
    kind: Kind
    name: str
    wrapper: Any = None
    users: int = 0

    @property
    def key(self) -> Tuple[int, str]:
        return (id(self.owner), self.attr)


def resolve(target: Target) -> Tuple[Any, str]:
    """Turn ``"package.module.Class.method"`` or ``(Class, "method")`` into ``(owner, name)``.

    Raises:
        TypeError: ``target`` is neither form.
        LookupError: The module, class or attribute does not exist.
    """
    if isinstance(target, tuple) and len(target) == 2 and isinstance(target[1], str):
        owner, attr = target
    elif isinstance(target, str) and "." in target:
        path, attr = target.rsplit(".", 1)
        parts = path.split(".")
        owner = None
        for split in range(len(parts), 0, -1):
            try:
                owner = importlib.import_module(".".join(parts[:split]))
            except ImportError:
                continue
            try:
                for part in parts[split:]:
                    owner = getattr(owner, part)
            except AttributeError:
                raise LookupError(f"cannot intercept {target!r}: {part!r} not found") from None
            break
        if owner is None:
            raise LookupError(f"cannot intercept {target!r}: no module of it can be imported")
    else:
        raise TypeError(
            f"intercept takes 'package.module.Class.method' or (Class, 'method'), got {target!r}"
        )
    try:
        inspect.getattr_static(owner, attr)
    except AttributeError:
        raise LookupError(f"cannot intercept {target!r}: {owner!r} has no {attr!r}") from None
    return owner, attr


def _active_interceptor(patch: _Patch) -> Any:
    for session in reversed(active_sessions()):
        budget = session._intercepted.get(patch.key)
        if budget is not None:
            return budget
    return None


def _make_wrapper(patch: _Patch) -> Any:
    def intercepted(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        budget = _active_interceptor(patch)
        if budget is None:
            return wrapped(*args, **kwargs)
        if patch.kind is Kind.ASYNC:
            return budget.acall(wrapped, instance, args, kwargs)
        if patch.kind is Kind.ASYNC_GENERATOR:
            return budget.agenerator(wrapped, instance, args, kwargs)
        return budget.call(wrapped, instance, args, kwargs)

    return wrapt.FunctionWrapper(patch.descriptor, intercepted)


def acquire(target: Target) -> _Patch:
    """Install the interception of ``target`` if it is not installed yet, and count a user."""
    owner, attr = resolve(target)
    with _lock:
        patch = _patches.get((id(owner), attr))
        if patch is None:
            descriptor = inspect.getattr_static(owner, attr)
            patch = _Patch(
                owner=owner,
                attr=attr,
                own=owner.__dict__.get(attr, _MISSING) if hasattr(owner, "__dict__") else _MISSING,
                descriptor=descriptor,
                kind=kind_of(descriptor),
                name=f"{qualified_name(owner)}.{attr}",
            )
            patch.wrapper = _make_wrapper(patch)
            setattr(owner, attr, patch.wrapper)
            _patches[patch.key] = patch
        patch.users += 1
        return patch


def release(patch: _Patch) -> None:
    """Count a user out; the last one puts the original attribute back exactly."""
    with _lock:
        patch.users -= 1
        if patch.users > 0:
            return
        del _patches[patch.key]
        if patch.own is _MISSING:
            delattr(patch.owner, patch.attr)
        else:
            setattr(patch.owner, patch.attr, patch.own)
