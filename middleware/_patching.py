"""Intercepting a third-party method by name for the duration of a session.

The method is replaced by a wrapt wrapper the first time a session asks for it,
and put back, exactly as it was, when the last session using it exits. Each
patch knows which session states intercept it and with what interceptor; the
wrapper compacts only calls made in the context of such a session, and every
other call passes through untouched.
"""

from __future__ import annotations

import dataclasses
import inspect
import threading
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple, Union

import wrapt

from ._callables import Kind, kind_of, qualified_name
from ._calls import Interceptor, Site
from ._options import CompactionOptions, check_awaitables
from ._requests import RequestSite
from ._state import SessionState, active_states, inside_exclusive_call, inside_summarizer
from .sdks import SdkTarget

Target = Union[str, Tuple[Any, str]]

_MISSING = object()
_lock = threading.Lock()
_patches: Dict[Tuple[int, str], Patch] = {}


@dataclass(eq=False)
class Patch:
    """One patched attribute: what it was, and who intercepts it now."""

    owner: Any
    attr: str
    own: Any  # what owner.__dict__ held, or _MISSING when the attribute was inherited
    descriptor: Any  # what was wrapped
    kind: Kind
    name: str
    interceptors: Dict[SessionState, Interceptor] = field(default_factory=dict)
    wrapper: Any = None

    @property
    def key(self) -> Tuple[int, str]:
        return (id(self.owner), self.attr)

    def active_interceptor(self) -> Optional[Interceptor]:
        """The interceptor of the innermost active session that intercepts this attribute."""
        found = (self.interceptors.get(state) for state in reversed(active_states()))
        return next((interceptor for interceptor in found if interceptor is not None), None)


def is_target(target: object) -> bool:
    """Whether ``target`` has the shape of one interception target."""
    if isinstance(target, str):
        return "." in target
    return isinstance(target, tuple) and len(target) == 2 and isinstance(target[1], str)


def resolve(target: Target) -> Tuple[Any, str]:
    """Turn ``"package.module.Class.method"`` or ``(Class, "method")`` into ``(owner, name)``.

    Raises:
        TypeError: ``target`` is neither form.
        LookupError: The module, class or attribute does not exist.
    """
    if not is_target(target):
        raise TypeError(
            f"intercept takes 'package.module.Class.method' or (Class, 'method'), got {target!r}"
        )
    if isinstance(target, tuple):
        owner, attr = target
        try:
            inspect.getattr_static(owner, attr)
        except AttributeError:
            raise LookupError(f"cannot intercept {target!r}: {owner!r} has no {attr!r}") from None
        return owner, attr
    parts = target.split(".")
    # The longest prefix that is a module; the rest is an attribute path inside it.
    for split in range(len(parts) - 1, 0, -1):
        try:
            owner, attr, _ = wrapt.resolve_path(".".join(parts[:split]), ".".join(parts[split:]))
        except ModuleNotFoundError:
            continue
        except AttributeError as exc:
            raise LookupError(f"cannot intercept {target!r}: {exc}") from None
        return owner, attr
    raise LookupError(f"cannot intercept {target!r}: no module of it can be imported")


def _make_wrapper(patch: Patch) -> Any:
    def intercepted(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        passes = inside_exclusive_call() or inside_summarizer()
        interceptor = None if passes else patch.active_interceptor()
        if interceptor is None:
            return wrapped(*args, **kwargs)
        return interceptor.handle(wrapped, instance, args, kwargs)

    return wrapt.FunctionWrapper(patch.descriptor, intercepted)


def _acquire(owner: Any, attr: str) -> Patch:
    patch = _patches.get((id(owner), attr))
    if patch is None:
        if inspect.isclass(owner) or inspect.ismodule(owner):
            descriptor = inspect.getattr_static(owner, attr)
        else:
            # An instance: its bound method, replaced for this instance only.
            descriptor = getattr(owner, attr)
        patch = Patch(
            owner=owner,
            attr=attr,
            own=owner.__dict__.get(attr, _MISSING) if hasattr(owner, "__dict__") else _MISSING,
            descriptor=descriptor,
            kind=kind_of(descriptor),
            name=f"{qualified_name(owner)}.{attr}",
        )
        patch.wrapper = _make_wrapper(patch)
        try:
            setattr(owner, attr, patch.wrapper)
        except (AttributeError, TypeError) as exc:  # __slots__, a read-only type
            raise TypeError(f"cannot intercept {patch.name}: {exc}") from None
        _patches[patch.key] = patch
    return patch


def _put_back(patch: Patch) -> None:
    del _patches[patch.key]
    if patch.own is _MISSING:
        delattr(patch.owner, patch.attr)
    else:
        setattr(patch.owner, patch.attr, patch.own)


def intercept(
    target: Union[Target, SdkTarget], state: SessionState, options: CompactionOptions
) -> None:
    """Compact the calls of ``target`` made in ``state``'s context, until ``release``.

    The state holds the patch; intercepting the same target twice is one interception.

    Raises:
        TypeError, LookupError: ``target`` cannot be resolved or wrapped.
    """
    point = target if isinstance(target, SdkTarget) else None
    owner, attr = resolve(target.path if isinstance(target, SdkTarget) else target)
    with _lock:
        patch = _acquire(owner, attr)
        try:
            if state in patch.interceptors:
                return
            check_awaitables(patch.kind, patch.name, None, state.hooks)
            site, options = _site(point, patch.descriptor, options)
            patch.interceptors[state] = Interceptor(
                options,
                (),
                patch.descriptor,
                patch.kind,
                point.name if point is not None else patch.name,
                exclusive=True,
                site=site,
                stream=point is not None and point.point.stream,
            )
        finally:
            if not patch.interceptors:
                _put_back(patch)
    state.hold(patch)


def _site(
    target: Optional[SdkTarget], fn: Any, options: CompactionOptions
) -> Tuple[Optional[Site], CompactionOptions]:
    """Where an SDK point's calls carry their messages (``None``: in ``fn``'s messages
    argument), and the options for it."""
    sdk = target.sdk if target is not None else None
    if sdk is None:
        return None, options
    if sdk.site is not None:
        return sdk.site(fn, options.counter), options
    if sdk.routes:
        return RequestSite(sdk, fn, options.counter), options
    if sdk.messages_arg is not None:
        return None, dataclasses.replace(options, messages_arg=sdk.messages_arg)
    return None, options


def release(patch: Patch, state: SessionState) -> None:
    """End ``state``'s interception; the last one puts the original attribute back exactly."""
    with _lock:
        patch.interceptors.pop(state, None)
        if not patch.interceptors:
            _put_back(patch)
