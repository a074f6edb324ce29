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

import media_files as files  # noqa: E402
from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    AudioUrl,
    BinaryContent,
    DocumentUrl,
    ImageUrl,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
    VideoUrl,
)
from pydantic_ai.models.anthropic import AnthropicModel  # noqa: E402
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel  # noqa: E402
from pydantic_ai.providers.anthropic import AnthropicProvider  # noqa: E402
from pydantic_ai.providers.openai import OpenAIProvider  # noqa: E402

from ctx_compact import (  # noqa: E402
    InvalidMessageError,
    check_pairing,
    compact,
    estimate_tokens,
    media_aware_counter,
)
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


# --- files in pydantic-ai messages: counted as billed ------------------------------

PHOTO = files.png(1024, 768)  # 1,049 tokens on Claude, 765 on gpt-4o
COUNT = media_aware_counter()


def photo() -> Any:
    return BinaryContent(PHOTO, media_type="image/png")


def without_files(message: Any) -> int:
    """The count of ``message``'s text alone: its view with the files' blocks taken out."""
    from ctx_compact._views import message_view

    view = message_view(message, None)
    kept = []
    for block in view["content"]:
        if block.get("type") == "tool_result" and isinstance(block["content"], list):
            inner = [b for b in block["content"] if b["type"] == "text"]
            block = {**block, "content": inner}
        if block.get("type") in ("text", "tool_result"):
            kept.append(block)
    return estimate_tokens({**view, "content": kept})


@pytest.mark.parametrize(
    ("item", "billed"),
    [
        (photo(), 1049),  # Anthropic's formula on the PNG's own size
        (ImageUrl("https://example.com/cat.png"), 1600),  # unknown size: the largest
        (BinaryContent(files.pdf(2), media_type="application/pdf"), 2 * 3100),
        (DocumentUrl("https://example.com/report.pdf"), 3100),  # one page
        (BinaryContent(files.wav(5.0), media_type="audio/wav"), 50),  # 10 a second
        (AudioUrl("https://example.com/call.mp3"), 600),  # a minute
        (VideoUrl("https://example.com/clip.mp4"), 60 * 263),  # a minute
    ],
    ids=["png", "image-url", "pdf", "document-url", "wav", "audio-url", "video-url"],
)
def test_a_file_in_a_prompt_counts_as_its_provider_bills_it(item: Any, billed: int) -> None:
    message = ModelRequest(parts=[UserPromptPart(["What is in this file?", item])])

    assert COUNT(message) == without_files(message) + billed


def test_a_tools_photo_counts_as_its_provider_bills_it() -> None:
    alone = ModelRequest(parts=[ToolReturnPart("get_photo", photo(), "c1")])
    with_text = ModelRequest(parts=[ToolReturnPart("get_photo", ["Oslo at noon.", photo()], "c2")])

    assert COUNT(alone) == without_files(alone) + 1049
    assert COUNT(with_text) == without_files(with_text) + 1049


def test_a_photo_chat_is_compacted_by_what_its_photos_cost() -> None:
    history: List[Any] = []
    for turn in range(6):
        call = ToolCallPart("get_photo", {"city": f"City {turn}"}, tool_call_id=f"c{turn}")
        history += [
            ModelRequest(parts=[UserPromptPart([f"Turn {turn}: and this one?", photo()])]),
            ModelResponse(parts=[call]),
            ModelRequest(parts=[ToolReturnPart("get_photo", photo(), f"c{turn}")]),
            ModelResponse(parts=[TextPart(f"Two harbours, turn {turn}.")]),
        ]

    result = compact(history, max_tokens=5000, count_tokens=COUNT)

    # Each turn holds two photos (2,098 tokens): two turns fit, not the six the names would.
    kept_photos = sum(
        1
        for m in result.messages
        for p in m.parts
        if isinstance(p, (UserPromptPart, ToolReturnPart)) and "BinaryContent" in repr(p.content)
    )
    assert result.fits
    assert kept_photos == 4
    assert check_pairing(list(result.messages)) == []
