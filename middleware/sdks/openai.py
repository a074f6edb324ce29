"""OpenAI's SDK (``openai``): Chat Completions and the Responses API.

Every request of every client passes through the base clients' ``request``
(``create``/``parse``/``stream``, ``beta``, ``with_raw_response``,
``with_streaming_response``, clients captured before the session), looked up on
the class at call time; the body is already plain JSON in ``options.json_data``.
"""

from __future__ import annotations

from . import Point, Route, Sdk, figures

SDK = Sdk(
    name="openai",
    points=(
        Point("openai._base_client", "SyncAPIClient.request", "openai"),
        Point("openai._base_client", "AsyncAPIClient.request", "openai"),
    ),
    routes=(
        Route("/chat/completions", "messages"),
        Route("/responses", "input", ("instructions",)),
    ),
    sentinels=("openai._types", ("NotGiven", "Omit")),
    streams=frozenset({"Stream"}),
    async_streams=frozenset({"AsyncStream"}),
    raw_responses=frozenset({"LegacyAPIResponse", "APIResponse", "AsyncAPIResponse"}),
    # Chat Completions' usage.prompt_tokens; the Responses API's usage.input_tokens.
    usage=(("prompt_tokens", ()), ("input_tokens", ())),
    # The Responses API's response.completed event holds the response.
    usage_holders=("response",),
    # Chat Completions names both figures; the Responses API neither.
    overflow_codes=frozenset({"context_length_exceeded"}),
    overflow_figures=(
        figures(
            r"maximum context length is (\d+) tokens\. However, your messages resulted in "
            r"(\d+) tokens",
            tokens=2,
            limit=1,
        ),
    ),
)
