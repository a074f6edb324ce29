"""llm_summarizer with a real ``google.genai.Client`` (and its ``client.aio``), against the
testing kit's Gemini routes.

The user's calls go through a ``CompactingSession(intercept="gemini")`` or
``@budgeted``; the summarizer's own ``generateContent`` request is read off the
provider. Runs in the ``providers`` extra's venv; the async tests on asyncio
only (google-genai's async client needs it).
"""

from __future__ import annotations

import json
from typing import Any, Dict, Iterator, List, Tuple

import pytest
from google import genai
from google.genai import types

from ctx_compact.testing import FakeProvider, RecordedRequest, count_tokens
from ctx_compact.testing.gemini import prompt_tokens
from middleware import CompactingSession, CompactionEvent, SummaryUsage, budgeted, llm_summarizer
from middleware.sdks import summary_client

from ._summarizing import HEADINGS, Script, is_summarization

MODEL = "gemini-2.5-flash"
SUMMARY_MODEL = "gemini-2.5-flash-lite"
BUDGET = 600
Content = Dict[str, Any]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def history(turns: int = 30) -> List[Content]:
    contents: List[Content] = []
    for turn in range(turns):
        contents.append({"role": "user", "parts": [{"text": f"Turn {turn}: the weather in Oslo?"}]})
        contents.append({"role": "model", "parts": [{"text": f"Turn {turn}: rain, 9 °C."}]})
    contents.append({"role": "user", "parts": [{"text": "And tomorrow?"}]})
    return contents


def new_client(url: str) -> genai.Client:
    options = types.HttpOptions(base_url=url, retry_options=types.HttpRetryOptions(attempts=1))
    return genai.Client(api_key="test", http_options=options)


@pytest.fixture
def script() -> Script:
    return Script()


@pytest.fixture
def server(script: Script) -> Iterator[FakeProvider]:
    with FakeProvider(reply=script) as provider:
        yield provider
        script.released.set()


@pytest.fixture
def client(server: FakeProvider) -> Iterator[genai.Client]:
    made = new_client(server.gemini_url)
    try:
        yield made
    finally:
        made.close()


def split(server: FakeProvider) -> Tuple[List[RecordedRequest], RecordedRequest]:
    """The summarization requests the server received, and the user's one request."""
    summaries = [r for r in server.requests if is_summarization(r)]
    (user,) = [r for r in server.requests if not is_summarization(r)]
    return summaries, user


def model_of(request: RecordedRequest) -> str:
    return request.path.rsplit("/", 1)[1].split(":")[0]


def billed(request: RecordedRequest) -> int:
    return prompt_tokens(request.body["contents"], request.body.get("systemInstruction"))


def assert_summary_sent(event: CompactionEvent, user: RecordedRequest) -> None:
    assert event.summary == "SUMMARY-1"
    assert "SUMMARY-1" in json.dumps(user.body["contents"])
    assert event.fits


def test_an_intercepted_call_is_summarized_with_its_own_model(
    server: FakeProvider, client: genai.Client
) -> None:
    summarize = llm_summarizer(client, max_summary_tokens=300, cache_aligned=False)
    with CompactingSession(max_tokens=BUDGET, intercept="gemini", summarize=summarize) as session:
        reply = client.models.generate_content(
            model=MODEL,
            contents=history(),
            config=types.GenerateContentConfig(system_instruction="Be brief."),
        )

    assert reply.text == "The answer."
    (event,) = session.events
    (request,), user = split(server)
    assert_summary_sent(event, user)
    assert model_of(request) == model_of(user) == MODEL
    (system,) = request.body["systemInstruction"]["parts"]
    assert all(heading in system["text"] for heading in HEADINGS)
    assert request.body["generationConfig"]["maxOutputTokens"] == 300
    assert "tools" not in request.body
    usage = SummaryUsage(billed(request), 0, count_tokens("SUMMARY-1"), requests=1)
    assert event.summary_usage == usage
    assert session.stats.summary_usage == usage
    assert session.stats.calls == 1  # the summarizer's request is not the user's


WEATHER = {
    "function_declarations": [
        {"name": "get_weather", "parameters": {"type": "OBJECT", "properties": {}}}
    ]
}


@pytest.mark.parametrize("forced", [False, True])
def test_a_summary_repeats_the_calls_prefix_for_the_implicit_cache(
    server: FakeProvider, client: genai.Client, forced: bool
) -> None:
    # The first call fits; the second drops what the first sent, so its summary's prefix
    # (the system instruction, tools, the head and the dropped contents) is read from the cache.
    contents = history(60)
    config = types.GenerateContentConfig(
        system_instruction="You plan trips. " * 100,
        tools=[WEATHER],
        tool_config={"function_calling_config": {"mode": "ANY" if forced else "AUTO"}},
    )
    with CompactingSession(
        max_tokens=2000, target_tokens=1000, intercept="gemini", summarize=llm_summarizer(client)
    ) as session:
        for end in (81, 121):
            client.models.generate_content(model=MODEL, contents=contents[:end], config=config)
    first, summarizing, _ = server.requests
    assert is_summarization(summarizing)
    (event,) = [e for e in session.events if e.dropped]
    body = summarizing.body
    assert body["systemInstruction"] == first.body["systemInstruction"]
    assert body["tools"] == first.body["tools"]
    # The call's tool config, unless it forces a call: then the summary turns calls off.
    mode = "NONE" if forced else "AUTO"
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": mode}}
    assert body["generationConfig"]["maxOutputTokens"] == 2000
    *repeated, instruction = body["contents"]
    assert repeated == contents[: len(repeated)] == first.body["contents"][: len(repeated)]
    assert len(repeated) == 1 + len(event.dropped)
    assert instruction["role"] == "user"
    assert all(heading in instruction["parts"][0]["text"] for heading in HEADINGS)
    # Read from the cache: the whole prefix, unless the tool config changed.
    shared = prompt_tokens(repeated, body["systemInstruction"])
    assert server.billing[1].cache_read_tokens == (0 if forced else shared)
    assert event.summary_usage is not None
    assert event.summary_usage.cached_input_tokens == server.billing[1].cache_read_tokens


def test_a_named_model_and_instructions_are_sent(
    server: FakeProvider, client: genai.Client
) -> None:
    events: List[CompactionEvent] = []
    summarize = llm_summarizer(client, model=SUMMARY_MODEL, instructions="Summarize tersely.")

    @budgeted(max_tokens=BUDGET, summarize=summarize, on_compact=events.append)
    def ask(messages: List[Content]) -> Any:
        return client.models.generate_content(model=MODEL, contents=messages)

    ask(history())
    (request,), user = split(server)
    assert model_of(request) == SUMMARY_MODEL
    assert request.body["systemInstruction"]["parts"] == [{"text": "Summarize tersely."}]
    assert_summary_sent(events[0], user)


def test_a_streamed_call_gets_its_summary_too(server: FakeProvider, client: genai.Client) -> None:
    with CompactingSession(
        max_tokens=BUDGET, intercept="gemini", summarize=llm_summarizer(client)
    ) as session:
        chunks = list(client.models.generate_content_stream(model=MODEL, contents=history()))

    assert chunks
    (event,) = session.events
    (request,), user = split(server)
    assert request.path.endswith(f"{MODEL}:generateContent")
    assert_summary_sent(event, user)


def test_without_a_model_a_decorated_function_costs_the_summary_saying_why(
    server: FakeProvider, client: genai.Client
) -> None:
    events: List[CompactionEvent] = []

    @budgeted(max_tokens=BUDGET, summarize=llm_summarizer(client), on_compact=events.append)
    def ask(messages: List[Content]) -> Any:
        return client.models.generate_content(model=MODEL, contents=messages)

    ask(history())
    (event,) = events
    assert event.summary is None
    assert (event.summary_error or "").startswith(
        "ValueError: the call being compacted names no model the summarizer can see"
    )
    assert len(server.requests) == 1


def test_a_failing_client_costs_only_the_summary(
    server: FakeProvider, client: genai.Client
) -> None:
    with FakeProvider() as gone:
        port = gone.gemini_url  # closed below: nothing listens there
    unreachable = new_client(port)
    try:
        with CompactingSession(
            max_tokens=BUDGET,
            intercept="gemini",
            summarize=llm_summarizer(unreachable, model=SUMMARY_MODEL),
        ) as session:
            reply = client.models.generate_content(model=MODEL, contents=history())
    finally:
        unreachable.close()

    assert reply.text == "The answer."
    (event,) = session.events
    assert event.summary is None
    assert (event.summary_error or "").startswith("ConnectError: ")
    assert event.fits
    (user,) = server.requests
    assert len(user.body["contents"]) == len(event.messages)


def test_the_usage_read_counts_the_cached_input_and_the_thoughts(client: genai.Client) -> None:
    found = summary_client(client)
    assert found is not None
    assert not found.is_async
    response = types.GenerateContentResponse.model_validate(
        {
            "candidates": [
                {
                    "content": {
                        "role": "model",
                        "parts": [{"text": "Thinking...", "thought": True}, {"text": "S"}],
                    }
                }
            ],
            "usage_metadata": {
                "prompt_token_count": 100,
                "cached_content_token_count": 80,
                "candidates_token_count": 7,
                "thoughts_token_count": 3,
            },
        }
    )
    assert found.apis[0].usage(response) == (100, 80, 10)
    assert found.apis[0].text(response) == "S"


# --- client.aio ----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_client_aio_makes_an_async_summarizer(server: FakeProvider) -> None:
    events: List[CompactionEvent] = []
    client = new_client(server.gemini_url)
    summarize = llm_summarizer(client.aio, model=SUMMARY_MODEL, max_summary_tokens=300)
    try:

        @budgeted(max_tokens=BUDGET, summarize=summarize, on_compact=events.append)
        async def ask(messages: List[Content]) -> Any:
            return await client.aio.models.generate_content(model=MODEL, contents=messages)

        async with CompactingSession(max_tokens=BUDGET, intercept="gemini") as session:
            reply = await ask(history())
    finally:
        await client.aio.aclose()
        client.close()

    assert reply.text == "The answer."
    (event,) = events
    (request,), user = split(server)
    assert_summary_sent(event, user)
    assert model_of(request) == SUMMARY_MODEL
    assert request.body["generationConfig"]["maxOutputTokens"] == 300
    assert event.summary_usage == SummaryUsage(
        billed(request), 0, count_tokens("SUMMARY-1"), requests=1
    )
    # The session saw the user's call and the decorated one, not the summarizer's.
    assert [e.summary for e in session.events] == [None, "SUMMARY-1"]


@pytest.mark.anyio
async def test_an_async_intercepted_call_is_summarized_with_its_own_model(
    server: FakeProvider,
) -> None:
    events: List[CompactionEvent] = []
    client = new_client(server.gemini_url)
    summarize = llm_summarizer(client.aio)
    try:
        ask = budgeted(
            max_tokens=BUDGET,
            summarize=summarize,
            on_compact=events.append,
            messages_arg="contents",
        )(client.aio.models.generate_content)
        await ask(model=MODEL, contents=history())
    finally:
        await client.aio.aclose()
        client.close()

    (event,) = events
    (request,), user = split(server)
    assert model_of(request) == model_of(user) == MODEL
    assert_summary_sent(event, user)


@pytest.mark.anyio
async def test_a_failing_async_client_costs_only_the_summary(server: FakeProvider) -> None:
    with FakeProvider() as gone:
        port = gone.gemini_url  # closed below: nothing listens there
    events: List[CompactionEvent] = []
    client, unreachable = new_client(server.gemini_url), new_client(port)
    try:

        @budgeted(
            max_tokens=BUDGET,
            summarize=llm_summarizer(unreachable.aio, model=SUMMARY_MODEL),
            on_compact=events.append,
        )
        async def ask(messages: List[Content]) -> Any:
            return await client.aio.models.generate_content(model=MODEL, contents=messages)

        reply = await ask(history())
    finally:
        for made in (client, unreachable):
            await made.aio.aclose()
            made.close()

    assert reply.text == "The answer."
    (event,) = events
    assert event.summary is None
    assert "Connect" in (event.summary_error or ""), event.summary_error
    assert len(server.requests) == 1


@pytest.mark.anyio
async def test_a_sync_clients_summarizer_serves_an_async_streamed_call(
    server: FakeProvider, client: genai.Client
) -> None:
    # A session intercepting the whole SDK has sync points too, which cannot await an
    # async summarizer: a sync client's summarizer serves its async calls on a worker thread.
    async with CompactingSession(
        max_tokens=BUDGET, intercept="gemini", summarize=llm_summarizer(client)
    ) as session:
        stream = await client.aio.models.generate_content_stream(model=MODEL, contents=history())
        chunks = [chunk async for chunk in stream]
    await client.aio.aclose()

    assert chunks
    (event,) = session.events
    (request,), user = split(server)
    assert model_of(request) == model_of(user) == MODEL
    assert user.path.endswith(":streamGenerateContent")
    assert_summary_sent(event, user)
