"""The testing kit's Gemini routes, proved with the real google-genai SDK.

Sync, async (on asyncio: the SDK's async client needs it), streaming and chats, through the plugin's
``fake_gemini`` / ``fake_async_gemini`` fixtures. Runs in the ``providers``
extra's venv (``pip install -e ".[test,providers]"``).
"""

from __future__ import annotations

from typing import Any, List

import pytest
from google.genai import errors, types

from ctx_compact.testing import FakeProvider, count_tokens
from ctx_compact.testing.gemini import RESPONSE_COUNT, RESPONSE_NOT_AFTER_CALL, prompt_tokens

MODEL = "gemini-2.5-flash"


@pytest.fixture
def anyio_backend() -> str:
    """google-genai's async client asks asyncio for its running loop: it cannot run on trio."""
    return "asyncio"


def get_weather(city: str, days: int) -> str:
    """The weather in a city over the next days."""
    return f"Sunny in {city} for {days} days."


def call(city: str) -> types.Part:
    return types.Part.from_function_call(name="get_weather", args={"city": city, "days": 1})


def answer(city: str) -> types.Part:
    return types.Part.from_function_response(
        name="get_weather", response={"result": f"Sunny in {city}"}
    )


def tool_conversation() -> List[Any]:
    """UserContent and ModelContent, two parallel calls answered together, then text."""
    return [
        types.UserContent(parts=[types.Part.from_text(text="Weather in Paris and Rome?")]),
        types.ModelContent(parts=[call("Paris"), call("Rome")]),
        types.Content(role="user", parts=[answer("Paris"), answer("Rome")]),
        types.ModelContent(parts=[types.Part.from_text(text="Sunny in both.")]),
        types.UserContent(parts=[types.Part.from_text(text="Thanks")]),
    ]


def sent_prompt(provider: FakeProvider) -> int:
    body = provider.requests[-1].body
    return prompt_tokens(body["contents"], body.get("systemInstruction"))


def test_generate_content_with_a_tool_conversation(
    fake_gemini: Any, fake_provider: FakeProvider
) -> None:
    config = types.GenerateContentConfig(system_instruction="Be brief.")

    response = fake_gemini.models.generate_content(
        model=MODEL, contents=tool_conversation(), config=config
    )

    assert response.text == "Fake reply to 5 messages."
    assert response.candidates[0].finish_reason == types.FinishReason.STOP
    usage = response.usage_metadata
    assert usage.prompt_token_count == sent_prompt(fake_provider)
    assert usage.candidates_token_count == count_tokens("Fake reply to 5 messages.")
    assert usage.total_token_count == usage.prompt_token_count + usage.candidates_token_count
    assert response.model_version == MODEL
    (request,) = fake_provider.requests
    assert request.path == f"/v1/models/{MODEL}:generateContent"
    assert request.headers["x-goog-api-key"] == "test"
    assert [c["role"] for c in request.body["contents"]] == [
        "user",
        "model",
        "user",
        "model",
        "user",
    ]


def test_a_broken_conversation_raises_the_sdks_client_error(fake_gemini: Any) -> None:
    orphaned = tool_conversation()
    del orphaned[1]

    with pytest.raises(errors.ClientError) as raised:
        fake_gemini.models.generate_content(model=MODEL, contents=orphaned)

    assert (raised.value.code, raised.value.status) == (400, "INVALID_ARGUMENT")
    assert raised.value.message == RESPONSE_NOT_AFTER_CALL

    short = tool_conversation()
    short[2] = types.Content(role="user", parts=[answer("Paris")])
    with pytest.raises(errors.ClientError, match="number of function response parts"):
        fake_gemini.models.generate_content(model=MODEL, contents=short)
    assert RESPONSE_COUNT.startswith("Please ensure that the number of function response parts")


def test_the_context_limit_is_geminis_400(fake_gemini: Any, fake_provider: FakeProvider) -> None:
    fake_provider.context_limit = 20

    with pytest.raises(errors.ClientError) as raised:
        fake_gemini.models.generate_content(model=MODEL, contents=tool_conversation())

    prompt = sent_prompt(fake_provider)
    assert raised.value.message == (
        f"The input token count ({prompt}) exceeds the maximum number of tokens allowed (20)."
    )


def test_generate_content_stream(fake_gemini: Any, fake_provider: FakeProvider) -> None:
    chunks = list(
        fake_gemini.models.generate_content_stream(model=MODEL, contents="Tell me about Paris")
    )

    assert "".join(chunk.text for chunk in chunks) == "Fake reply to 1 messages."
    assert len(chunks) == 5
    assert chunks[-1].usage_metadata.candidates_token_count == count_tokens(
        "Fake reply to 1 messages."
    )
    assert chunks[-1].usage_metadata.prompt_token_count == sent_prompt(fake_provider)
    assert fake_provider.requests[-1].query == "alt=sse"


def test_count_tokens(fake_gemini: Any, fake_provider: FakeProvider) -> None:
    counted = fake_gemini.models.count_tokens(model=MODEL, contents=tool_conversation())

    assert counted.total_tokens == prompt_tokens(fake_provider.requests[-1].body["contents"])


def test_a_chat_runs_automatic_function_calling_against_the_scripted_model(
    fake_gemini: Any, fake_provider: FakeProvider
) -> None:
    fake_provider.tool_calls = 2
    chat = fake_gemini.chats.create(
        model=MODEL, config=types.GenerateContentConfig(tools=[get_weather])
    )

    first = chat.send_message("Weather in Paris?")
    second = chat.send_message("And in Rome?")

    # Each prompt: two calls the SDK answered by running get_weather, then text.
    assert first.text == "Fake reply to 5 messages."
    assert second.text == "Fake reply to 11 messages."
    assert len(fake_provider.requests) == 6
    history = chat.get_history()
    calls = [p.function_call for c in history for p in c.parts or [] if p.function_call]
    assert [(c.name, c.args) for c in calls] == [("get_weather", {"city": "fake", "days": 1})] * 4
    responses = [p.function_response for c in history for p in c.parts or [] if p.function_response]
    assert responses[0].response == {"result": "Sunny in fake for 1 days."}


def test_a_streamed_chat(fake_gemini: Any, fake_provider: FakeProvider) -> None:
    chat = fake_gemini.chats.create(model=MODEL)

    first = "".join(chunk.text for chunk in chat.send_message_stream("Hello"))
    second = "".join(chunk.text for chunk in chat.send_message_stream("Again"))

    # The SDK keeps each streamed chunk as a model content of its own: the second
    # request holds the prompt, the first reply's five chunks and the new prompt.
    assert (first, second) == ("Fake reply to 1 messages.", "Fake reply to 7 messages.")
    assert [len(r.body["contents"]) for r in fake_provider.requests] == [1, 7]


@pytest.mark.anyio
async def test_async_generate_content_and_stream(
    fake_async_gemini: Any, fake_provider: FakeProvider
) -> None:
    response = await fake_async_gemini.models.generate_content(
        model=MODEL, contents=tool_conversation()
    )
    assert response.text == "Fake reply to 5 messages."
    assert response.usage_metadata.prompt_token_count == sent_prompt(fake_provider)

    stream = await fake_async_gemini.models.generate_content_stream(model=MODEL, contents="Hi")
    text = "".join([chunk.text async for chunk in stream])
    assert text == "Fake reply to 1 messages."


@pytest.mark.anyio
async def test_an_async_chat_with_tools(
    fake_async_gemini: Any, fake_provider: FakeProvider
) -> None:
    fake_provider.tool_calls = 1
    chat = fake_async_gemini.chats.create(
        model=MODEL, config=types.GenerateContentConfig(tools=[get_weather])
    )

    reply = await chat.send_message("Weather in Oslo?")

    assert reply.text == "Fake reply to 3 messages."
    assert len(fake_provider.requests) == 2


@pytest.mark.anyio
async def test_async_errors_are_the_sdks_client_error(fake_async_gemini: Any) -> None:
    with pytest.raises(errors.ClientError) as raised:
        await fake_async_gemini.models.generate_content(
            model=MODEL, contents=tool_conversation()[2:]
        )

    assert raised.value.message == RESPONSE_NOT_AFTER_CALL
