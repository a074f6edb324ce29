"""Where an SDK request carries its messages: its body, by the SDK's routes.

An SDK whose interception points take a request (``request(options)``, OpenAI's
and Anthropic's base clients) declares the routes whose body holds messages
(``sdks.Sdk.routes``); ``RequestSite`` finds them there and sends a copy of the
request with the compacted list.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Dict, List, Optional, Tuple

from ctx_compact._contract import CountTokens, count_value

from ._callables import ArgSpec, Arguments, Beside, Located, replace
from .sdks import Route, Sdk


class RequestSite:
    """Where an SDK request carries its messages: its options' ``json_data``, by route.

    The request is made with a copy of the options (``copy.copy``) whose body is
    a new dict holding the compacted list: neither the SDK's objects nor the
    caller's are changed. A request to any other route (embeddings, token
    counting, a ``GET``), or whose input is one string, passes through. A key
    that holds ``None`` or one of the SDK's sentinels (``NOT_GIVEN``, ``omit``)
    is absent: nothing is counted for it.

    Args:
        sdk: The SDK, with its routes.
        request: The SDK's ``request`` function, whose ``options`` argument is bound.
        count_tokens: The options' counter, for the parts counted beside the messages.
    """

    def __init__(self, sdk: Sdk, request: Any, count_tokens: Optional[CountTokens]) -> None:
        self.sdk = sdk.name
        self.routes = sdk.routes
        self.count_tokens = count_tokens
        self.arg = ArgSpec.of(request, "options", f"{sdk.name} request")
        self.absent = sdk.sentinel_types()

    def given(self, value: Any) -> bool:
        """Whether a body's ``value`` was given: neither ``None`` nor one of the SDK's sentinels."""
        return value is not None and not isinstance(value, self.absent)

    def route(self, url: str) -> Optional[Route]:
        """The route of ``url`` (a path, or a full URL; a query is ignored)."""
        path = url.split("?", 1)[0].rstrip("/")
        return next((route for route in self.routes if path.endswith(route.path)), None)

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
            count_value(body[key], self.count_tokens)
            for key in route.counted
            if self.given(body.get(key))
        )
        key = route.key

        def rebuild(new: List[Any]) -> Arguments:
            sent = copy.copy(options)
            sent.json_data = {**body, key: new}
            return replace(args, kwargs, "options", index, sent)

        api = f"{self.sdk} {route.path}"
        return Located(
            messages, rebuild, Beside(fixed), api, request=MappingProxyType(body), api=api
        )
