"""The prompt size a provider reports in its response, read off any response shape."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Optional

from ._events import CompactionEvent
from .sdks import USAGE_FIELDS

# Results that never carry usage: answered without a lookup.
_NO_USAGE = frozenset({type(None), bool, int, float, str, bytes, list, tuple})


def _field(obj: Any, name: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def provider_prompt_tokens(response: Any) -> Optional[int]:
    """The prompt size a provider reported in ``response.usage``, or ``None``.

    Reads each SDK's usage fields (``sdks.Sdk.usage``): OpenAI's
    ``usage.prompt_tokens`` (Chat Completions, LiteLLM) and ``usage.input_tokens``
    (the Responses API; Anthropic, where the cached parts
    ``cache_creation_input_tokens`` and ``cache_read_input_tokens`` are counted
    separately and added back), on SDK objects and on plain dicts.
    """
    if type(response) in _NO_USAGE:
        return None
    try:
        usage = _field(response, "usage")
        if usage is None:
            return None
        for name, extras in USAGE_FIELDS:
            total = _field(usage, name)
            if type(total) is not int:
                continue
            for cached in extras:
                extra = _field(usage, cached)
                if type(extra) is int:
                    total += extra
            return total
        return None
    except Exception:  # a response object whose attributes misbehave: no figure
        return None


def with_response(event: CompactionEvent, response: Any) -> CompactionEvent:
    """``event`` with the provider's prompt size from ``response``, when it has one."""
    provider = provider_prompt_tokens(response)
    if provider is None:
        return event
    return dataclasses.replace(event, provider_tokens=provider)
