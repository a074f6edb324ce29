"""The prompt size a provider reports in its response, read off any response shape."""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

from ._events import CompactionEvent
from .sdks import USAGE_FIELDS, USAGE_KEYS, field

# Results that never carry usage: answered without a lookup.
_NO_USAGE = frozenset({type(None), bool, int, float, str, bytes, list, tuple})


def provider_prompt_tokens(response: Any) -> Optional[int]:
    """The prompt size a provider reported in ``response``'s usage, or ``None``.

    Reads each SDK's usage (``sdks.Sdk.usage_keys`` and ``usage``): OpenAI's
    ``usage.prompt_tokens`` (Chat Completions, LiteLLM) and ``usage.input_tokens``
    (the Responses API; Anthropic, where the cached parts
    ``cache_creation_input_tokens`` and ``cache_read_input_tokens`` are counted
    separately and added back), google-genai's ``usage_metadata.prompt_token_count``
    (cached content included), Bedrock Converse's ``usage.inputTokens`` (with
    ``cacheReadInputTokens`` and ``cacheWriteInputTokens`` added back), on SDK
    objects and on plain dicts.
    """
    if type(response) in _NO_USAGE:
        return None
    try:
        for key in USAGE_KEYS:
            usage = field(response, key)
            if usage is None:
                continue
            for name, extras in USAGE_FIELDS:
                total = field(usage, name)
                if type(total) is not int:
                    continue
                for cached in extras:
                    extra = field(usage, cached)
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
