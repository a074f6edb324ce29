"""LiteLLM's ``openai/`` and ``anthropic/`` routes against the local provider.

``completion`` and ``acompletion`` are imported before any session, as user code
does (``from litellm import completion``), so interception must reach them.
The ``openai/`` route goes through the openai SDK, so ``intercept="openai"``
covers it too; the ``anthropic/`` route is LiteLLM's own HTTP call, which sends
a translated (and larger) body. See ``_scenario.py`` for the scenario.
"""

from __future__ import annotations

import asyncio
import json
import os
import warnings
from typing import Any, Dict, Iterator, List, Union

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
pytest.importorskip("litellm")

from litellm import acompletion, completion
from litellm.llms.custom_httpx.async_client_cleanup import (
    close_litellm_async_clients,
)

from ctx_compact.testing import FakeProvider

from ._scenario import (
    CLAUDE_MODEL,
    LIMIT,
    OPENAI_MODEL,
    TURNS,
    Run,
    get_report,
    prompts,
)

Message = Dict[str, Any]

# LiteLLM builds pydantic schemas on its first call, from TypedDicts of its own
# that use ReadOnly items; pydantic warns about each.
pytestmark = pytest.mark.filterwarnings(
    r"ignore:Items? .* on TypedDict class .* using the `ReadOnly` qualifier:UserWarning"
)

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_report",
            "description": "Get the detailed weather report for a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]


@pytest.fixture(autouse=True)
def _close_the_loop_litellm_leaves() -> Iterator[None]:
    # A sync completion() leaves an event loop set on the thread (LiteLLM calls
    # asyncio.get_event_loop()); a later asyncio.run() unsets it without closing it.
    yield
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            loop = asyncio.get_event_loop()
        except RuntimeError:
            return
    if not loop.is_running():
        loop.close()
        asyncio.set_event_loop(None)


def route_args(route: str, provider: FakeProvider) -> Dict[str, Any]:
    if route == "openai/":
        return {"model": f"openai/{OPENAI_MODEL}", "api_base": provider.base_url + "/v1"}
    return {"model": f"anthropic/{CLAUDE_MODEL}", "api_base": provider.base_url}


def as_message(reply: Any) -> Message:
    message = reply.choices[0].message
    calls = [
        {
            "id": call.id,
            "type": "function",
            "function": {"name": call.function.name, "arguments": call.function.arguments},
        }
        for call in message.tool_calls or []
    ]
    return {
        "role": "assistant",
        "content": message.content,
        **({"tool_calls": calls} if calls else {}),
    }


def merged(chunks: Any) -> Message:
    """The assistant message a stream of chunks spells, in OpenAI format."""
    text, calls = "", {}
    for chunk in chunks:
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        text += delta.content or ""
        for call in delta.tool_calls or []:
            entry = calls.setdefault(call.index, {"id": None, "name": "", "arguments": ""})
            entry["id"] = call.id or entry["id"]
            entry["name"] += call.function.name or ""
            entry["arguments"] += call.function.arguments or ""
    tool_calls = [
        {
            "id": c["id"],
            "type": "function",
            "function": {"name": c["name"], "arguments": c["arguments"]},
        }
        for _, c in sorted(calls.items())
    ]
    if tool_calls:
        return {"role": "assistant", "content": text or None, "tool_calls": tool_calls}
    return {"role": "assistant", "content": text}


def answer_calls(messages: List[Message], reply: Message) -> None:
    messages.append(reply)
    for call in reply.get("tool_calls", []):
        content = get_report(**json.loads(call["function"]["arguments"]))
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": content})


def converse(route: str, provider: FakeProvider) -> List[Message]:
    """Sync calls, streamed every other turn."""
    args = {**route_args(route, provider), "api_key": "t", "tools": TOOLS, "max_tokens": 256}
    messages: List[Message] = [{"role": "system", "content": "Be terse."}]

    def call(stream: bool) -> Message:
        if stream:
            return merged(completion(messages=messages, stream=True, **args))
        return as_message(completion(messages=messages, **args))

    for index, prompt in enumerate(prompts()):
        messages.append({"role": "user", "content": prompt})
        answer_calls(messages, call(index % 2 == 1))
        messages.append(call(index % 2 == 1))
    return messages


async def aconverse(route: str, provider: FakeProvider) -> List[Message]:
    args = {**route_args(route, provider), "api_key": "t", "tools": TOOLS, "max_tokens": 256}
    messages: List[Message] = [{"role": "system", "content": "Be terse."}]
    for prompt in prompts():
        messages.append({"role": "user", "content": prompt})
        answer_calls(messages, as_message(await acompletion(messages=messages, **args)))
        messages.append(as_message(await acompletion(messages=messages, **args)))
    return messages


CASES = [
    ("openai/", "litellm"),
    ("anthropic/", "litellm"),
    ("openai/", "openai"),
    ("openai/", ["litellm", "openai"]),
]


@pytest.mark.parametrize(("route", "intercept"), CASES)
def test_sync_and_streamed_turns_stay_within_the_limit(
    provider: FakeProvider, route: str, intercept: Union[str, List[str]]
) -> None:
    label = intercept if isinstance(intercept, str) else "+".join(intercept)
    with Run(
        f"LiteLLM completion (intercept={label})", route, provider, intercept=intercept
    ) as run:
        converse(route, provider)

    run.check(expected_requests=2 * TURNS)


@pytest.mark.parametrize("route", ["openai/", "anthropic/"])
def test_async_turns_stay_within_the_limit(provider: FakeProvider, route: str) -> None:
    async def main() -> Any:
        try:
            with Run(
                "LiteLLM acompletion (intercept=litellm)", route, provider, intercept="litellm"
            ) as run:
                await aconverse(route, provider)
            return run
        finally:
            await close_litellm_async_clients()

    run = asyncio.run(main())

    run.check(expected_requests=2 * TURNS, usage_on_every_response=True)


@pytest.mark.parametrize("route", ["openai/", "anthropic/"])
def test_a_lower_provider_limit_is_met_by_retrying(provider: FakeProvider, route: str) -> None:
    provider.context_limit = LIMIT - 300
    with Run(
        f"LiteLLM completion (limit {LIMIT - 300}, retry)",
        route,
        provider,
        intercept="litellm",
        on_overflow="retry",
    ) as run:
        converse(route, provider)

    run.check(limit=LIMIT - 300)
