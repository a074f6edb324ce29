"""OpenAI's SDK (``openai``): Chat Completions and the Responses API.

Every request of every client passes through the base clients' ``request``
(``create``/``parse``/``stream``, ``beta``, ``with_raw_response``,
``with_streaming_response``, clients captured before the session), looked up on
the class at call time; the body is already plain JSON in ``options.json_data``.

``llm_summarizer`` takes a client (``OpenAI``, ``AsyncOpenAI``), which asks Chat
Completions, and the Responses API for a summary of a Responses call; or the
client's ``responses`` resource, which asks the Responses API for every summary.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Dict, Optional, Tuple

from . import Alignment, Point, PromptMessages, Route, Sdk, SummaryApi, figures

_CHAT = Route("/chat/completions", "messages")
_RESPONSES = Route("/responses", "input", ("instructions",))
# Request keys by which the server holds part of the conversation's prefix: a summary
# repeating the rest could not be served from the cache.
_SERVER_HELD = ("previous_response_id", "conversation", "prompt")


def _summary_request(model: str, prompt: PromptMessages, max_tokens: int) -> Dict[str, Any]:
    return {"model": model, "messages": prompt, "max_completion_tokens": max_tokens}


def _aligned_request(made: Alignment) -> Dict[str, Any]:
    # The system prompt is among the messages, at their head.
    instruction = {"role": "user", "content": made.instruction}
    request = _summary_request(made.body["model"], [*made.messages, instruction], made.max_tokens)
    return _tools_off(made.body, request)


def _tools_off(body: Mapping[str, Any], request: Dict[str, Any]) -> Dict[str, Any]:
    """``request`` with the body's tools, turned off, and its prompt cache key."""
    tools = body.get("tools")
    if isinstance(tools, list) and tools:
        request["tools"] = tools
        request["tool_choice"] = "none"
    key = body.get("prompt_cache_key")
    if isinstance(key, str):  # routes the request to the machine that holds the cache
        request["prompt_cache_key"] = key
    return request


def _summary_text(response: Any) -> str:
    # A refusal or a reply cut at max_completion_tokens before any text holds None.
    return response.choices[0].message.content or ""


def _summary_usage(response: Any) -> Optional[Tuple[int, int, int]]:
    usage = response.usage
    if usage is None:
        return None
    details = usage.prompt_tokens_details
    cached = (details.cached_tokens or 0) if details is not None else 0
    return usage.prompt_tokens, cached, usage.completion_tokens


def _responses_request(model: str, items: Any, max_tokens: int) -> Dict[str, Any]:
    # Nothing ever continues from a summary: the server need not keep it.
    return {"model": model, "input": items, "max_output_tokens": max_tokens, "store": False}


def _responses_prompt(model: str, prompt: PromptMessages, max_tokens: int) -> Dict[str, Any]:
    system, user = prompt
    request = _responses_request(model, user["content"], max_tokens)
    return {**request, "instructions": system["content"]}


def _responses_aligned(made: Alignment) -> Optional[Dict[str, Any]]:
    body = made.body
    if any(body.get(key) for key in _SERVER_HELD):  # not given: a falsy sentinel
        return None
    instruction = {"role": "user", "content": made.instruction}
    request = _responses_request(body["model"], [*made.messages, instruction], made.max_tokens)
    instructions = body.get("instructions")
    if isinstance(instructions, str):
        request["instructions"] = instructions
    return _tools_off(body, request)


def _responses_text(response: Any) -> str:
    # The output messages' text parts (what Response.output_text joins, which a beta
    # response lacks): a refusal has none, nor a reply cut at max_output_tokens while
    # the model was still reasoning.
    return "".join(
        part.text
        for item in response.output
        if item.type == "message"
        for part in item.content
        if part.type == "output_text" and part.text is not None
    )


def _responses_usage(response: Any) -> Optional[Tuple[int, int, int]]:
    usage = response.usage
    if usage is None:
        return None
    details = usage.input_tokens_details
    cached = (details.cached_tokens or 0) if details is not None else 0
    return usage.input_tokens, cached, usage.output_tokens


# The Responses API, as the client's ``responses`` resource asks it.
_RESPONSES_SUMMARY = SummaryApi(
    clients=frozenset({"Responses"}),
    async_clients=frozenset({"AsyncResponses"}),
    method="create",
    request=_responses_prompt,
    text=_responses_text,
    usage=_responses_usage,
    aligned=_responses_aligned,
    route=f"openai {_RESPONSES.path}",
    key=_RESPONSES.key,
)


SDK = Sdk(
    name="openai",
    points=(
        Point("openai._base_client", "SyncAPIClient.request", "openai"),
        Point("openai._base_client", "AsyncAPIClient.request", "openai"),
    ),
    routes=(
        _CHAT,
        _RESPONSES,
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
    summary=(
        # A client asks Chat Completions, which every OpenAI-compatible server speaks...
        SummaryApi(
            clients=frozenset({"OpenAI"}),
            async_clients=frozenset({"AsyncOpenAI"}),
            method="chat.completions.create",
            request=_summary_request,
            text=_summary_text,
            usage=_summary_usage,
            aligned=_aligned_request,
            route=f"openai {_CHAT.path}",
        ),
        # ...and the Responses API for a Responses call, whose model may be served there only.
        replace(
            _RESPONSES_SUMMARY,
            clients=frozenset({"OpenAI"}),
            async_clients=frozenset({"AsyncOpenAI"}),
            method="responses.create",
        ),
        _RESPONSES_SUMMARY,
    ),
)
