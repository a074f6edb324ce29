"""Anthropic's SDK (``anthropic``): the Messages API, also under ``beta``.

Its requests pass through the base clients' ``request`` as OpenAI's do; the
system prompt is sent beside the messages and counted, never dropped.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from . import Point, PromptMessages, Route, Sdk, SummaryApi, figures


def _summary_request(
    model: str, prompt: PromptMessages, max_tokens: int, timeout: Optional[float]
) -> Dict[str, Any]:
    # The system prompt is a parameter of its own, beside the messages.
    system = "\n\n".join(m["content"] for m in prompt if m["role"] == "system")
    messages = [m for m in prompt if m["role"] != "system"]
    request: Dict[str, Any] = {
        "model": model,
        "system": system,
        "messages": messages,
        "max_tokens": max_tokens,
    }
    if timeout is not None:  # None would lift the client's own timeout
        request["timeout"] = timeout
    return request


def _summary_text(response: Any) -> str:
    # Text blocks only: a thinking block is not part of the summary.
    return "".join(
        block.text for block in response.content if getattr(block, "type", None) == "text"
    )


def _summary_usage(response: Any) -> Optional[Tuple[int, int, int]]:
    usage = response.usage
    if usage is None:
        return None
    # input_tokens leaves out the cached parts: added back, as for provider_tokens.
    read = usage.cache_read_input_tokens or 0
    written = usage.cache_creation_input_tokens or 0
    return usage.input_tokens + read + written, read, usage.output_tokens


SDK = Sdk(
    name="anthropic",
    points=(
        Point("anthropic._base_client", "SyncAPIClient.request", "anthropic"),
        Point("anthropic._base_client", "AsyncAPIClient.request", "anthropic"),
    ),
    routes=(Route("/v1/messages", "messages", ("system",)),),
    # The body holds an Omit for system, tools, stream, ... unless they are given.
    sentinels=("anthropic._types", ("NotGiven", "Omit")),
    streams=frozenset({"Stream"}),
    async_streams=frozenset({"AsyncStream"}),
    raw_responses=frozenset({"LegacyAPIResponse", "APIResponse", "AsyncAPIResponse"}),
    # usage.input_tokens leaves out the cached parts: added back.
    usage=(("input_tokens", ("cache_creation_input_tokens", "cache_read_input_tokens")),),
    # The message_start event holds the message with its usage.
    usage_holders=("message",),
    overflow_figures=(figures(r"prompt is too long: (\d+) tokens > (\d+) maximum", 1, 2),),
    summary=SummaryApi(
        clients=frozenset({"Anthropic"}),
        async_clients=frozenset({"AsyncAnthropic"}),
        method="messages.create",
        request=_summary_request,
        text=_summary_text,
        usage=_summary_usage,
    ),
)
