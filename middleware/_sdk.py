"""Intercepting an SDK as a whole: where each SDK's requests pass, and where their messages are.

``intercept="openai"`` (or ``"anthropic"``, ``"litellm"``) names a set of
interception points instead of one method:

- openai and anthropic: ``request`` of the base clients
  (``<sdk>._base_client.SyncAPIClient.request`` and ``AsyncAPIClient.request``).
  Every request of every client of the SDK passes there, looked up on the class
  at call time: ``create``/``parse``/``stream``, the Responses API, the ``beta``
  namespaces, ``with_raw_response``/``with_streaming_response`` and clients or
  bound methods captured before the session. The body is already plain JSON in
  ``options.json_data``; ``RequestSite`` finds the messages there by route.
- litellm: the module globals ``_PYTHON_COMPLETION``/``_PYTHON_ACOMPLETION`` of
  ``litellm.chat_completions.dispatch``, which ``litellm.completion`` and
  ``litellm.acompletion`` (also as imported before the session) read at every call.

The tests in tests/test_sdk_interception.py pin these points, so an SDK release
that moves them fails there loudly, and ``resolve`` raises ``LookupError`` at
the session's entry.
"""

from __future__ import annotations

import copy
import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from ctx_compact._contract import CountTokens, default_count_tokens

from ._callables import ArgSpec, Arguments, Located

SDK_NAMES = ("openai", "anthropic", "litellm")


@dataclass(frozen=True)
class Route:
    """One API an SDK request may go to, and where its messages are in the body.

    Attributes:
        path: The end of the request's path (``/chat/completions``).
        key: The body's key holding the messages.
        counted: Keys sent beside them, counted against the budget, never dropped.
    """

    path: str
    key: str
    counted: Tuple[str, ...] = ()


ROUTES: Dict[str, Tuple[Route, ...]] = {
    "openai": (
        Route("/chat/completions", "messages"),
        Route("/responses", "input", ("instructions",)),
    ),
    "anthropic": (Route("/v1/messages", "messages", ("system",)),),
}

# (module, attribute path, name for events) of each SDK's interception points;
# an SDK request's event names its route instead.
POINTS: Dict[str, Tuple[Tuple[str, str, str], ...]] = {
    "openai": (
        ("openai._base_client", "SyncAPIClient.request", "openai"),
        ("openai._base_client", "AsyncAPIClient.request", "openai"),
    ),
    "anthropic": (
        ("anthropic._base_client", "SyncAPIClient.request", "anthropic"),
        ("anthropic._base_client", "AsyncAPIClient.request", "anthropic"),
    ),
    "litellm": (
        ("litellm.chat_completions.dispatch", "_PYTHON_COMPLETION", "litellm.completion"),
        ("litellm.chat_completions.dispatch", "_PYTHON_ACOMPLETION", "litellm.acompletion"),
    ),
}


# Each SDK's "not given" sentinels, by module and class name. The request options
# keep them for every optional key the caller left out (Anthropic's body holds an
# ``Omit`` for ``system``, ``tools``, ``stream``, ... unless they are given); a key
# holding one is absent, not a value to count.
SENTINELS: Dict[str, Tuple[str, Tuple[str, ...]]] = {
    "openai": ("openai._types", ("NotGiven", "Omit")),
    "anthropic": ("anthropic._types", ("NotGiven", "Omit")),
}


def sentinel_types(sdk: str) -> Tuple[type, ...]:
    """The classes of ``sdk``'s "not given" sentinels that its installed release defines."""
    module_name, names = SENTINELS[sdk]
    module = importlib.import_module(module_name)
    found = (getattr(module, name, None) for name in names)
    return tuple(kind for kind in found if isinstance(kind, type))


@dataclass(frozen=True)
class SdkTarget:
    """One interception point of an SDK named in ``intercept=``."""

    sdk: str
    module: str
    attr: str
    name: str

    @property
    def path(self) -> str:
        """The point as ``intercept`` takes it: ``"module.attr"``."""
        return f"{self.module}.{self.attr}"


def is_sdk_name(target: object) -> bool:
    """Whether ``target`` names a whole SDK (``"openai"``, ``"anthropic"``, ``"litellm"``)."""
    return isinstance(target, str) and target in SDK_NAMES


def sdk_targets(name: str) -> List[SdkTarget]:
    """The interception points of the SDK ``name``."""
    return [SdkTarget(name, *point) for point in POINTS[name]]


def _count_fixed(value: Any, count_tokens: Optional[CountTokens]) -> int:
    if count_tokens is None:
        return default_count_tokens(value)
    # A custom counter counts messages: the part is counted as the message it stands for.
    return int(count_tokens({"role": "system", "content": value}))


class RequestSite:
    """Where an SDK request carries its messages: its options' ``json_data``, by route.

    The request is made with a copy of the options (``copy.copy``) whose body is
    a new dict holding the compacted list: neither the SDK's objects nor the
    caller's are changed. A request to any other route (embeddings, token
    counting, a ``GET``), or whose input is one string, passes through. A key
    that holds ``None`` or one of the SDK's sentinels (``NOT_GIVEN``, ``omit``)
    is absent: nothing is counted for it.

    Args:
        sdk: ``"openai"`` or ``"anthropic"``.
        request: The SDK's ``request`` function, whose ``options`` argument is bound.
        count_tokens: The options' counter, for the parts counted beside the messages.
    """

    def __init__(self, sdk: str, request: Any, count_tokens: Optional[CountTokens]) -> None:
        self.sdk = sdk
        self.routes = ROUTES[sdk]
        self.count_tokens = count_tokens
        self.arg = ArgSpec.of(request, "options", f"{sdk} request")
        self.absent = sentinel_types(sdk)

    def given(self, value: Any) -> bool:
        """Whether a body's ``value`` was given: neither ``None`` nor one of the SDK's sentinels."""
        return value is not None and not isinstance(value, self.absent)

    def route(self, url: str) -> Optional[Route]:
        """The route of ``url`` (a path, or a full URL; a query is ignored)."""
        path = url.split("?", 1)[0].rstrip("/")
        for route in self.routes:
            if path.endswith(route.path):
                return route
        return None

    def locate(
        self, instance: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]
    ) -> Optional[Located]:
        """The request's messages and how to send others, or ``None`` to pass it through."""
        found, options, index = self.arg.find(instance, args, kwargs)
        if not found:
            return None
        url = getattr(options, "url", None)
        body = getattr(options, "json_data", None)
        if not isinstance(url, str) or not isinstance(body, Mapping):
            return None
        route = self.route(url)
        if route is None:
            return None
        messages = body.get(route.key)
        if not isinstance(messages, list):
            return None
        fixed = sum(
            _count_fixed(body[key], self.count_tokens)
            for key in route.counted
            if self.given(body.get(key))
        )
        key = route.key

        def rebuild(new: List[Any]) -> Arguments:
            sent = copy.copy(options)
            sent.json_data = {**body, key: new}
            if index is None:
                return args, {**kwargs, "options": sent}
            return (*args[:index], sent, *args[index + 1 :]), kwargs

        return Located(messages, rebuild, fixed, f"{self.sdk} {route.path}")
