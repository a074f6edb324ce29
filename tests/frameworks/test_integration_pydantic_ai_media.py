"""middleware.integrations.pydantic_ai with photos: each request counted as its model sends it.

A pydantic-ai agent whose tool returns a photo (``BinaryContent``, a 1024x768
PNG) and whose prompts carry photos (``BinaryContent``, ``ImageUrl``) holds
``TURNS`` turns (every other one streamed) against the local provider, with each
model class (``OpenAIChatModel``, ``OpenAIResponsesModel``, ``AnthropicModel``)
and each form of the integration. The provider's context limit is the budget
and it bills each photo as its provider does (765 tokens on OpenAI, 1,049 on
Anthropic; a photo by URL at the provider's largest), so a photo counted as
anything less is a context-window error. Every request's count (the event's
``tokens_after``) must be at least what was sent: the provider's
``usage.input_tokens`` plus the tools' definitions it does not count but a real
provider bills.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Dict, List, Optional, Tuple

import anthropic
import media_files as files
import openai
import pytest
from pydantic_ai import Agent, BinaryContent, ImageUrl, RunContext, Tool
from pydantic_ai.capabilities import AbstractCapability, ProcessHistory
from pydantic_ai.messages import ModelRequest, ToolReturnPart
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.tools import ToolDefinition

from ctx_compact.testing import FakeProvider, RecordedRequest, count_tokens
from middleware import CompactionEvent
from middleware.integrations.pydantic_ai import CompactionCapability, history_processor

from ._scenario import API_PATHS, CLAUDE_MODEL, OPENAI_MODEL

LIMIT = 5000
TURNS = 8
INSTRUCTIONS = "Describe the pictures in one line."
PHOTO = files.png(1024, 768)


def get_photo(city: str) -> BinaryContent:
    """Get a photo of a city."""
    return BinaryContent(PHOTO, media_type="image/png")


async def until_answered(ctx: RunContext[Any], tool: ToolDefinition) -> Optional[ToolDefinition]:
    # The local model calls a tool it is offered after each user message, and Chat
    # Completions carries the tool's photo in a user message: offered until it answered.
    last = ctx.messages[-1] if ctx.messages else None
    answered = isinstance(last, ModelRequest) and any(
        isinstance(part, ToolReturnPart) for part in last.parts
    )
    return None if answered else tool


def prompt(turn: int) -> Any:
    text = f"Turn {turn + 1}: what is in this picture, and in the one of Oslo?"
    if turn % 3 == 0:
        return [text, BinaryContent(PHOTO, media_type="image/png")]
    if turn % 3 == 1:
        return [text, ImageUrl("https://example.com/harbour.png")]
    return text


class Billed(AbstractCapability[Any]):  # type: ignore[misc]
    """Notes each response's ``usage.input_tokens``: what the provider counted."""

    def __init__(self) -> None:
        super().__init__()
        self.tokens: List[int] = []

    async def wrap_model_request(
        self, ctx: Any, *, request_context: Any, handler: Callable[[Any], Any]
    ) -> Any:
        response = await handler(request_context)
        self.tokens.append(response.usage.input_tokens)
        return response


def chat(provider: FakeProvider) -> Tuple[Any, Any]:
    client = openai.AsyncOpenAI(base_url=provider.openai_url, api_key="t", max_retries=0)
    return client, OpenAIChatModel(OPENAI_MODEL, provider=OpenAIProvider(openai_client=client))


def responses(provider: FakeProvider) -> Tuple[Any, Any]:
    client = openai.AsyncOpenAI(base_url=provider.openai_url, api_key="t", max_retries=0)
    model = OpenAIResponsesModel(OPENAI_MODEL, provider=OpenAIProvider(openai_client=client))
    return client, model


def claude(provider: FakeProvider) -> Tuple[Any, Any]:
    client = anthropic.AsyncAnthropic(base_url=provider.base_url, api_key="t", max_retries=0)
    return client, AnthropicModel(CLAUDE_MODEL, provider=AnthropicProvider(anthropic_client=client))


MODELS: Dict[str, Callable[[FakeProvider], Tuple[Any, Any]]] = {
    "OpenAIChatModel": chat,
    "OpenAIResponsesModel": responses,
    "AnthropicModel": claude,
}


def hook(form: str, seen: List[CompactionEvent], limit: int, tool: Any) -> Any:
    if form == "CompactionCapability":
        return CompactionCapability(limit, on_compact=seen.append)
    processor = history_processor(
        limit, instructions=INSTRUCTIONS, tools=[tool], on_compact=seen.append
    )
    return ProcessHistory(processor)


def converse(
    provider: FakeProvider,
    name: str,
    form: str,
    limit: int = LIMIT,
    tool: Callable[..., Any] = get_photo,
    prompts: Callable[[int], Any] = prompt,
) -> Tuple[List[Any], List[int], Any]:
    """The turns, with the hook; the events, the provider's counts and the requests sent."""
    seen: List[CompactionEvent] = []
    billed = Billed()
    provider.tool_calls = 1
    provider.context_limit = limit  # a request counted short is refused

    async def main() -> None:
        client, model = MODELS[name](provider)
        async with client:
            agent = Agent(
                model,
                tools=[Tool(tool, prepare=until_answered)],
                instructions=INSTRUCTIONS,
                capabilities=[billed, hook(form, seen, limit, tool)],
            )
            history: List[Any] = []
            for turn in range(TURNS):
                if turn % 2:
                    async with agent.run_stream(prompts(turn), message_history=history) as run:
                        await run.get_output()
                    history = run.all_messages()
                else:
                    result = await agent.run(prompts(turn), message_history=history)
                    history = result.all_messages()

    start = len(provider.requests)
    asyncio.run(main())
    requests = [r for r in provider.requests[start:] if r.path in API_PATHS]
    return seen, billed.tokens, requests


def check_counted(
    events: List[Any], billed: List[int], requests: List[Any], limit: int
) -> List[int]:
    """Every request counted at least as what was sent, and within the budget; returns how
    much more each was counted than sent."""
    assert len(requests) == 2 * TURNS
    assert len(events) == len(billed) == len(requests)
    sent = [tokens + tools_tokens(r) for tokens, r in zip(billed, requests)]
    counted = [event.tokens_after for event in events]
    short = [(i, c, s) for i, (c, s) in enumerate(zip(counted, sent)) if c < s]
    assert short == [], f"requests counted below what was sent (index, counted, sent): {short}"
    assert all(s <= limit for s in sent)
    assert any(event.dropped for event in events), "no request needed compacting"
    return [c - s for c, s in zip(counted, sent)]


def tools_tokens(request: RecordedRequest) -> int:
    # Not counted by the local provider; a real one bills them.
    return sum(count_tokens(tool) for tool in request.body.get("tools") or [])


def images(value: Any) -> int:
    """How many image parts (Chat's, Responses', Anthropic's) ``value`` holds, at any depth."""
    if isinstance(value, list):
        return sum(map(images, value))
    if not isinstance(value, dict):
        return 0
    own = value.get("type") in ("image_url", "input_image", "image")
    return int(own) + sum(map(images, value.values()))


@pytest.mark.parametrize("form", ["CompactionCapability", "history_processor"])
@pytest.mark.parametrize("name", list(MODELS))
def test_a_photo_chat_is_counted_as_each_model_sends_and_bills_it(
    fake_provider: FakeProvider, name: str, form: str
) -> None:
    events, billed, requests = converse(fake_provider, name, form)

    over = check_counted(events, billed, requests, LIMIT)
    # Photos were kept as far as the budget goes, not all dropped.
    assert images(requests[-1].body) >= 3
    if form == "CompactionCapability":
        assert [event.provider_tokens for event in events] == billed
        assert max(over) <= LIMIT // 100
    else:
        # The processor counts the tools it is given, also on a request that offers none.
        assert max(over) <= max(map(tools_tokens, requests))


def get_album(city: str) -> List[Any]:
    """Get the captioned photos of a city."""
    photo = BinaryContent(PHOTO, media_type="image/png")
    return [f"Two photos of {city}.", photo, {"taken": "noon", "by": "Ana"}, photo]


def documents(turn: int) -> Any:
    text = f"Turn {turn + 1}: and what does this say?"
    if turn % 3 == 0:
        return [text, BinaryContent(files.pdf(1), media_type="application/pdf")]
    if turn % 3 == 1:
        return [text, ImageUrl("https://example.com/map.png", vendor_metadata={"detail": "low"})]
    return text


@pytest.mark.parametrize("name", list(MODELS))
def test_documents_and_captioned_albums_are_counted_as_sent(
    fake_provider: FakeProvider, name: str
) -> None:
    limit = 9000
    events, billed, requests = converse(
        fake_provider, name, "CompactionCapability", limit, get_album, documents
    )

    over = check_counted(events, billed, requests, limit)
    assert max(over) <= limit // 100
