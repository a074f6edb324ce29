"""pydantic-ai against the local provider: its OpenAI chat, Responses and Anthropic models.

The Anthropic model sends through ``client.beta.messages.create``; each model's
client is used once before the session, so interception must reach clients
captured before the block. See ``_scenario.py`` for the scenario and its checks.
"""

from __future__ import annotations

import asyncio
from typing import Any, List, Optional

import pytest

pytest.importorskip("pydantic_ai")
anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")

from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.messages import ModelRequest, ModelResponse  # noqa: E402
from pydantic_ai.models.anthropic import AnthropicModel  # noqa: E402
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel  # noqa: E402
from pydantic_ai.providers.anthropic import AnthropicProvider  # noqa: E402
from pydantic_ai.providers.openai import OpenAIProvider  # noqa: E402

from ctx_compact import InvalidMessageError, check_pairing, compact  # noqa: E402
from ctx_compact.testing import FakeProvider  # noqa: E402
from middleware import budgeted  # noqa: E402

from ._scenario import (  # noqa: E402
    CLAUDE_MODEL,
    LIMIT,
    OPENAI_MODEL,
    TURNS,
    Run,
    get_report,
    pairing_problem,
    prompts,
)


def openai_chat(client: Any) -> Any:
    return OpenAIChatModel(OPENAI_MODEL, provider=OpenAIProvider(openai_client=client))


def openai_responses(client: Any) -> Any:
    return OpenAIResponsesModel(OPENAI_MODEL, provider=OpenAIProvider(openai_client=client))


def anthropic_model(client: Any) -> Any:
    return AnthropicModel(CLAUDE_MODEL, provider=AnthropicProvider(anthropic_client=client))


MODELS = {
    "OpenAIChatModel": ("openai", "/v1/chat/completions", openai_chat),
    "OpenAIResponsesModel": ("openai", "/v1/responses", openai_responses),
    "AnthropicModel": ("anthropic", "/v1/messages (beta)", anthropic_model),
}


def client_for(sdk: str, provider: FakeProvider) -> Any:
    if sdk == "openai":
        return openai.AsyncOpenAI(base_url=provider.base_url + "/v1", api_key="t", max_retries=0)
    return anthropic.AsyncAnthropic(base_url=provider.base_url, api_key="t", max_retries=0)


async def converse(agent: Any, turns: List[str]) -> List[Any]:
    """Hold the conversation, streaming every other turn; return the full history."""
    history: List[Any] = []
    for index, prompt in enumerate(turns):
        if index % 2:
            async with agent.run_stream(prompt, message_history=history) as streamed:
                await streamed.get_output()
            history = streamed.all_messages()
        else:
            history = (await agent.run(prompt, message_history=history)).all_messages()
    return history


# Without instructions AnthropicModel sends no `system`: the SDK leaves its sentinel.
@pytest.mark.parametrize("instructions", ["Be terse.", None], ids=["instructions", "none"])
@pytest.mark.parametrize("name", list(MODELS))
def test_fourteen_tool_turns_stay_within_the_limit(
    provider: FakeProvider, name: str, instructions: Optional[str]
) -> None:
    sdk, route, make_model = MODELS[name]

    async def main() -> Any:
        async with client_for(sdk, provider) as client:
            agent = Agent(make_model(client), tools=[get_report], instructions=instructions)
            await agent.run("Warm-up before the session.")  # the client is captured before
            with Run(f"pydantic-ai {name}", route, provider, intercept=sdk) as run:
                history = await converse(agent, prompts())
            return run, history

    run, history = asyncio.run(main())

    run.check(expected_requests=2 * TURNS)
    # The framework's own history is untouched: only what was sent was compacted.
    assert len(history) == 4 * TURNS


# --- pydantic-ai's own message lists through the core ---------------------------


def real_history(provider: FakeProvider, turns: int) -> List[Any]:
    provider.context_limit = None

    async def main() -> List[Any]:
        async with client_for("openai", provider) as client:
            agent = Agent(openai_chat(client), tools=[get_report], instructions="Be terse.")
            return await converse(agent, prompts()[:turns])

    history = asyncio.run(main())
    provider.context_limit = LIMIT
    return history


def test_compact_keeps_each_tool_call_with_its_return(provider: FakeProvider) -> None:
    history = real_history(provider, 6)

    result = compact(history, max_tokens=600)

    kept = list(result.messages)
    assert result.dropped, "the budget should force dropping"
    assert all(any(m is own for own in history) for m in kept)  # the caller's own objects
    assert check_pairing(kept) == []
    assert isinstance(kept[-1], ModelResponse)
    call_ids = {
        p.tool_call_id
        for m in kept
        if isinstance(m, ModelResponse)
        for p in m.parts
        if p.part_kind == "tool-call"
    }
    return_ids = {
        p.tool_call_id
        for m in kept
        if isinstance(m, ModelRequest)
        for p in m.parts
        if p.part_kind == "tool-return"
    }
    assert call_ids == return_ids


def test_check_pairing_reports_a_call_without_its_return(provider: FakeProvider) -> None:
    history = real_history(provider, 1)
    # [request(prompt), response(call), request(return), response(text)]: drop the return.
    broken = [history[0], history[1], history[3]]

    problems = check_pairing(broken)

    assert [problem.index for problem in problems] == [1]


def test_budgeted_compacts_message_history(provider: FakeProvider) -> None:
    history = real_history(provider, 10)
    seen: List[Any] = []

    async def main() -> Any:
        async with client_for("openai", provider) as client:
            agent = Agent(openai_chat(client), tools=[get_report], instructions="Be terse.")

            @budgeted(
                max_tokens=LIMIT - 300, messages_arg="message_history", on_compact=seen.append
            )
            async def ask(prompt: str, message_history: List[Any]) -> Any:
                return await agent.run(prompt, message_history=message_history)

            return await ask("One more: Oslo?", message_history=history)

    start = len(provider.requests)
    result = asyncio.run(main())

    sent = provider.requests[start:]
    assert len(sent) == 2
    assert all(pairing_problem(r) is None for r in sent)
    (event,) = seen
    assert event.dropped
    assert all(any(m is own for own in history) for m in event.messages)
    assert result.output


def test_an_unclassifiable_model_is_refused() -> None:
    pydantic = pytest.importorskip("pydantic")

    class Note(pydantic.BaseModel):
        text: str

    with pytest.raises(InvalidMessageError):
        compact([Note(text="hello")], max_tokens=100)
