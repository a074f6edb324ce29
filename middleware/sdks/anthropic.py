"""Anthropic's SDK (``anthropic``): the Messages API, also under ``beta``.

Its requests pass through the base clients' ``request`` as OpenAI's do; the
system prompt is sent beside the messages and counted, never dropped.
"""

from __future__ import annotations

from . import Point, Route, Sdk, figures

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
)
