"""llm_summarizer for calls of OpenAI's Responses API, with the real ``openai`` clients.

A summary of a Responses call is a Responses request: cache-aligned, it repeats the
conversation's prefix as the previous request sent it (its model, instructions and
tools, the input items, reasoning ones included, the previous summary's message as
inserted, then the items dropped since) and ends with one instruction message, so
the local provider's prompt cache serves all but that message. Where the server
holds part of the prefix (``previous_response_id``, ``conversation``) the request
is the plain prompt. ``llm_summarizer(client.responses)`` asks the Responses API for
every summary.

Async tests run on asyncio and trio through the ``anyio_backend`` fixture.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Iterator, List

import pytest

openai = pytest.importorskip("openai")

from ctx_compact.testing import FakeProvider, RecordedRequest, count_tokens  # noqa: E402
from ctx_compact.testing.responses import output_item, response, usage  # noqa: E402
from middleware import (  # noqa: E402
    CompactingSession,
    CompactionEvent,
    SummaryUsage,
    budgeted,
    llm_summarizer,
)
from middleware.sdks import Alignment, summary_client  # noqa: E402

from ._conversations import (  # noqa: E402
    OPENAI_BUDGET,
    TRIO_STREAM_WARNING,
    openai_history,
    responses_history,
)
from .test_llm_summarizer import (  # noqa: E402
    ASKED,
    HEADINGS,
    MODEL,
    SUMMARY_MODEL,
    Script,
    dropped_texts,
)

Message = Dict[str, Any]

pytestmark = pytest.mark.filterwarnings(TRIO_STREAM_WARNING)

INSTRUCTIONS = "You are a travel assistant. Use get_weather for forecasts."
TOOLS = [
    {
        "type": "function",
        "name": "get_weather",
        "description": "The forecast for a city on a day.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
]
CACHE_KEY = "traveller-42"
# What the user's calls send beside the input.
EXTRA: Dict[str, Any] = {
    "instructions": INSTRUCTIONS,
    "tools": TOOLS,
    "prompt_cache_key": CACHE_KEY,
}
# An earlier state of the conversation, ending after one of the model's answers.
SHORTER = 84
SUMMARY_1 = {"role": "user", "content": "SUMMARY-1"}


@pytest.fixture
def server() -> Iterator[FakeProvider]:
    script = Script()
    with FakeProvider(reply=script) as provider:
        yield provider
        script.released.set()


def sync_client(url: str) -> Any:
    return openai.OpenAI(base_url=url + "/v1", api_key="test", max_retries=0)


def async_client(url: str) -> Any:
    return openai.AsyncOpenAI(base_url=url + "/v1", api_key="test", max_retries=0)


def as_sent(value: Any) -> Any:
    return json.loads(json.dumps(value))


def openai_rule(tokens: int) -> int:
    """The cached tokens OpenAI reports for a shared prefix of ``tokens``."""
    return tokens // 128 * 128 if tokens >= 1024 else 0


def is_summarization(request: RecordedRequest) -> bool:
    return ASKED in json.dumps(request.body, ensure_ascii=False)


def is_plain(request: RecordedRequest, model: str = MODEL) -> bool:
    """The plain prompt as a Responses request: the instructions as ``instructions``,
    the dropped items as JSON in one user input, no tools."""
    body = request.body
    return (
        request.path == "/v1/responses"
        and set(body) == {"model", "instructions", "input", "max_output_tokens", "store"}
        and body["model"] == model
        and all(heading in body["instructions"] for heading in HEADINGS)
        and isinstance(body["input"], str)
        and "<messages>\n" in body["input"]
        and ASKED in body["input"]
        and body["max_output_tokens"] == 2000
        and body["store"] is False
    )


def assert_aligned(
    server: FakeProvider, events: List[CompactionEvent], history: List[Message]
) -> None:
    """The two calls' summarization requests repeat what the conversation had sent, and
    the provider's cache serves the second all but its instruction."""
    first, main1, second, main2 = server.requests
    for summarizing in (first, second):
        body = summarizing.body
        assert summarizing.path == "/v1/responses"
        assert body["model"] == MODEL
        assert body["instructions"] == INSTRUCTIONS
        assert body["tools"] == TOOLS
        assert body["tool_choice"] == "none"
        assert body["max_output_tokens"] == 2000
        assert body["prompt_cache_key"] == CACHE_KEY
        assert body["store"] is False
        assert "stream" not in body  # the summary itself is one plain request
    # The first summary: the head and the dropped items (reasoning ones too), as given.
    *repeated, instruction = first.body["input"]
    assert repeated == as_sent(history[: len(repeated)])
    assert any(item.get("type") == "reasoning" for item in repeated)
    head = list(events[0].messages).index(SUMMARY_1)
    assert len(repeated) == head + len(events[0].dropped)
    assert instruction["role"] == "user"
    assert all(heading in instruction["content"] for heading in HEADINGS)
    assert f"Summarize the last {len(events[0].dropped)} messages" in instruction["content"]
    # The second: the previous request's input exactly, up to the items dropped since.
    *repeated, instruction = second.body["input"]
    assert repeated == main1.body["input"][: len(repeated)]
    note = main1.body["input"].index(SUMMARY_1)
    assert repeated[note] == SUMMARY_1
    since = events[1].dropped[len(events[0].dropped) :]
    assert repeated[note + 1 :] == as_sent(list(since))
    assert "update it with the last" in instruction["content"]
    # The provider's cache serves all but the instruction (in OpenAI's steps of 128).
    bill = server.billing[2]
    assert bill.cache_read_tokens == openai_rule(bill.input_tokens - count_tokens(instruction))
    assert bill.cache_read_tokens > bill.input_tokens // 2
    assert events[1].summary_usage == SummaryUsage(
        bill.input_tokens, bill.cache_read_tokens, bill.output_tokens, requests=1
    )
    # The summary still lands, rolled on.
    assert [e.summary for e in events] == ["SUMMARY-1", "SUMMARY-2"]
    assert {"role": "user", "content": "SUMMARY-2"} in main2.body["input"]


# --- the aligned requests ------------------------------------------------------------------


def test_a_sessions_summary_repeats_the_previous_requests_prefix(server: FakeProvider) -> None:
    events: List[CompactionEvent] = []
    history = responses_history()
    with (
        sync_client(server.base_url) as client,
        CompactingSession(
            max_tokens=OPENAI_BUDGET,
            intercept="openai",
            summarize=llm_summarizer(client),
            on_compact=events.append,
        ),
    ):
        for items in (history[:SHORTER], history):
            client.responses.create(model=MODEL, input=items, **EXTRA)
    assert_aligned(server, events, history)


def test_a_streamed_calls_summary_repeats_it_too(server: FakeProvider) -> None:
    events: List[CompactionEvent] = []
    history = responses_history()
    with (
        sync_client(server.base_url) as client,
        CompactingSession(
            max_tokens=OPENAI_BUDGET,
            intercept="openai",
            summarize=llm_summarizer(client),
            on_compact=events.append,
        ),
    ):
        for items in (history[:SHORTER], history):
            stream = client.responses.create(model=MODEL, input=items, stream=True, **EXTRA)
            assert [e.type for e in stream][-1] == "response.completed"
    assert server.requests[1].body["stream"] is True
    assert_aligned(server, events, history)


def test_a_budgeted_bound_create_is_aligned_too(server: FakeProvider) -> None:
    events: List[CompactionEvent] = []
    history = responses_history()
    with sync_client(server.base_url) as client:
        ask = budgeted(
            max_tokens=OPENAI_BUDGET,
            messages_arg="input",
            summarize=llm_summarizer(client),
            on_compact=events.append,
        )(client.responses.create)
        for items in (history[:SHORTER], history):
            ask(model=MODEL, input=items, **EXTRA)
    assert_aligned(server, events, history)


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
async def test_an_async_sessions_summary_repeats_it_too(server: FakeProvider, stream: bool) -> None:
    # A session intercepting a whole SDK has sync points too, which cannot await an
    # async summarizer: a sync client's summarizer runs on a worker thread.
    events: List[CompactionEvent] = []
    history = responses_history()
    with sync_client(server.base_url) as summarizing:
        async with (
            async_client(server.base_url) as client,
            CompactingSession(
                max_tokens=OPENAI_BUDGET,
                intercept="openai",
                summarize=llm_summarizer(summarizing),
                on_compact=events.append,
            ),
        ):
            for items in (history[:SHORTER], history):
                if stream:
                    made = await client.responses.create(
                        model=MODEL, input=items, stream=True, **EXTRA
                    )
                    assert [e.type async for e in made][-1] == "response.completed"
                else:
                    await client.responses.create(model=MODEL, input=items, **EXTRA)
    assert_aligned(server, events, history)


@pytest.mark.anyio
async def test_an_async_clients_summary_of_a_bound_create_repeats_it_too(
    server: FakeProvider,
) -> None:
    events: List[CompactionEvent] = []
    history = responses_history()
    async with async_client(server.base_url) as client:
        ask = budgeted(
            max_tokens=OPENAI_BUDGET,
            messages_arg="input",
            summarize=llm_summarizer(client),
            on_compact=events.append,
        )(client.responses.create)
        for items in (history[:SHORTER], history):
            stream = await ask(model=MODEL, input=items, stream=True, **EXTRA)
            assert [e.type async for e in stream][-1] == "response.completed"
    assert_aligned(server, events, history)


@pytest.mark.parametrize("beta", [False, True], ids=["responses", "beta.responses"])
def test_the_responses_resource_sends_the_aligned_request_itself(
    server: FakeProvider, beta: bool
) -> None:
    # The beta resource's responses have no output_text: the summary is read off the
    # output items either way.
    events: List[CompactionEvent] = []
    history = responses_history()
    with sync_client(server.base_url) as client:
        resource = client.beta.responses if beta else client.responses
        with CompactingSession(
            max_tokens=OPENAI_BUDGET,
            intercept="openai",
            summarize=llm_summarizer(resource),
            on_compact=events.append,
        ):
            for items in (history[:SHORTER], history):
                resource.create(model=MODEL, input=items, **EXTRA)
    assert [e.summary_error for e in events] == [None, None]
    assert_aligned(server, events, history)


# --- where it falls back to the plain prompt -----------------------------------------------


@pytest.mark.parametrize("held", ["previous_response_id", "conversation"])
def test_a_prefix_the_server_holds_gets_the_plain_prompt(server: FakeProvider, held: str) -> None:
    events: List[CompactionEvent] = []
    value = {"previous_response_id": "resp_earlier", "conversation": "conv_earlier"}[held]
    with (
        sync_client(server.base_url) as client,
        CompactingSession(
            max_tokens=OPENAI_BUDGET,
            intercept="openai",
            summarize=llm_summarizer(client),
            on_compact=events.append,
        ),
    ):
        if held == "previous_response_id":
            # The provider keeps no responses: it refuses the user's request, after the summary.
            with pytest.raises(openai.BadRequestError, match="resp_earlier"):
                client.responses.create(
                    model=MODEL, input=responses_history(), **EXTRA, **{held: value}
                )
        else:
            client.responses.create(
                model=MODEL, input=responses_history(), **EXTRA, **{held: value}
            )

    summarizing, user = server.requests
    assert is_plain(summarizing)  # on the call's own API, with its model
    assert user.body[held] == value
    (event,) = events
    assert event.summary == "SUMMARY-1"
    assert_in_order(dropped_texts(event), summarizing.body["input"])


@pytest.mark.parametrize("case", ["cache_aligned=False", "another model", "over the bound"])
def test_where_it_cannot_align_a_responses_call_gets_the_plain_prompt(
    server: FakeProvider, case: str
) -> None:
    options: Dict[str, Any] = {
        "cache_aligned=False": {"cache_aligned": False},
        "another model": {"model": SUMMARY_MODEL},
        "over the bound": {"max_input_tokens": 1000},
    }[case]
    with (
        sync_client(server.base_url) as client,
        CompactingSession(
            max_tokens=OPENAI_BUDGET,
            intercept="openai",
            summarize=llm_summarizer(client, **options),
        ) as session,
    ):
        client.responses.create(model=MODEL, input=responses_history(), **EXTRA)

    *summarizing, _user = server.requests
    assert len(summarizing) > 1 if case == "over the bound" else len(summarizing) == 1
    model = SUMMARY_MODEL if case == "another model" else MODEL
    assert all(is_plain(r, model) for r in summarizing)
    assert session.events[0].summary == f"SUMMARY-{len(summarizing)}"


def test_a_chat_call_is_still_summarized_on_chat_completions(server: FakeProvider) -> None:
    with (
        sync_client(server.base_url) as client,
        CompactingSession(
            max_tokens=OPENAI_BUDGET, intercept="openai", summarize=llm_summarizer(client)
        ) as session,
    ):
        client.chat.completions.create(model=MODEL, messages=openai_history())

    summarizing, _user = server.requests
    assert summarizing.path == "/v1/chat/completions"
    assert summarizing.body["max_completion_tokens"] == 2000
    assert session.events[0].summary == "SUMMARY-1"


# --- llm_summarizer(client.responses): the Responses API for every summary -----------------


def assert_in_order(texts: List[str], within: str) -> None:
    where = [within.index(text) for text in texts]
    assert where == sorted(where)


def test_the_responses_resource_sends_a_chat_calls_summary_as_a_plain_prompt(
    server: FakeProvider,
) -> None:
    with (
        sync_client(server.base_url) as client,
        CompactingSession(
            max_tokens=OPENAI_BUDGET,
            intercept="openai",
            summarize=llm_summarizer(client.responses),
        ) as session,
    ):
        client.chat.completions.create(model=MODEL, messages=openai_history())

    summarizing, user = server.requests
    assert is_plain(summarizing)
    assert user.path == "/v1/chat/completions"
    (event,) = session.events
    assert event.summary == "SUMMARY-1"
    assert_in_order(dropped_texts(event), summarizing.body["input"])
    bill = server.billing[0]
    assert event.summary_usage == SummaryUsage(
        bill.input_tokens, bill.cache_read_tokens, bill.output_tokens, requests=1
    )


@pytest.mark.anyio
async def test_the_async_responses_resource_makes_an_async_summarizer(
    server: FakeProvider,
) -> None:
    events: List[CompactionEvent] = []
    async with async_client(server.base_url) as client:
        summarize = llm_summarizer(client.responses, model=SUMMARY_MODEL, max_input_tokens=1000)

        @budgeted(max_tokens=OPENAI_BUDGET, summarize=summarize, on_compact=events.append)
        async def ask(messages: List[Any]) -> Any:
            return await client.chat.completions.create(model=MODEL, messages=messages)

        await ask(openai_history())

    *summarizing, _user = server.requests
    assert len(summarizing) >= 2  # chunked, each within the bound
    assert all(is_plain(r, SUMMARY_MODEL) for r in summarizing)
    (event,) = events
    assert event.summary == f"SUMMARY-{len(summarizing)}"
    assert event.summary_usage is not None
    assert event.summary_usage.requests == len(summarizing)
    assert event.summary_usage.input_tokens == sum(b.input_tokens for b in server.billing[:-1])


# --- a failing summarizer ------------------------------------------------------------------


@pytest.mark.parametrize("resource", [False, True], ids=["client", "client.responses"])
def test_a_failing_summarizer_costs_only_the_summary(server: FakeProvider, resource: bool) -> None:
    with FakeProvider() as gone:
        port = gone.base_url  # closed below: nothing listens there
    with (
        sync_client(server.base_url) as client,
        sync_client(port) as unreachable,
        CompactingSession(
            max_tokens=OPENAI_BUDGET,
            intercept="openai",
            summarize=llm_summarizer(unreachable.responses if resource else unreachable),
        ) as session,
    ):
        reply = client.responses.create(model=MODEL, input=responses_history(), **EXTRA)

    assert reply.output_text == "The answer."
    (event,) = session.events
    assert event.summary is None
    assert (event.summary_error or "").startswith("APIConnectionError: ")
    (user,) = server.requests
    assert user.body["input"] == as_sent(list(event.messages))


@pytest.mark.anyio
async def test_a_failing_async_summarizer_costs_only_the_summary(server: FakeProvider) -> None:
    with FakeProvider() as gone:
        port = gone.base_url  # closed below: nothing listens there
    events: List[CompactionEvent] = []
    async with async_client(server.base_url) as client, async_client(port) as unreachable:
        ask = budgeted(
            max_tokens=OPENAI_BUDGET,
            messages_arg="input",
            summarize=llm_summarizer(unreachable.responses),
            on_compact=events.append,
        )(client.responses.create)
        stream = await ask(model=MODEL, input=responses_history(), stream=True, **EXTRA)
        assert [e.type async for e in stream][-1] == "response.completed"

    (event,) = events
    assert event.summary is None
    assert (event.summary_error or "").startswith("APIConnectionError: ")
    assert len(server.requests) == 1


# --- the declarations, piece by piece ------------------------------------------------------


def test_which_api_each_openai_client_asks() -> None:
    with openai.OpenAI(api_key="test") as client:
        whole, resource = summary_client(client), summary_client(client.responses)
    assert whole is not None
    assert resource is not None
    assert [api.method for api in whole.apis] == ["chat.completions.create", "responses.create"]
    assert [api.method for api in resource.apis] == ["create"]
    assert not whole.is_async
    assert not resource.is_async
    asynchronous = summary_client(openai.AsyncOpenAI(api_key="test").responses)
    assert asynchronous is not None
    assert asynchronous.is_async


def responses_aligned(body: Dict[str, Any], api: Any = "openai /responses") -> Any:
    found = summary_client(openai.OpenAI(api_key="test").responses)
    assert found is not None
    (made,) = found.apis
    return made.align(Alignment(body, [{"role": "user", "content": "Hi"}], "I", 9), api)


def test_the_aligned_request_keeps_what_the_cache_needs() -> None:
    body = {"model": MODEL, "input": [], "instructions": "Rules.", "prompt_cache_key": "k"}
    assert responses_aligned(body) == {
        "model": MODEL,
        "instructions": "Rules.",
        "input": [{"role": "user", "content": "Hi"}, {"role": "user", "content": "I"}],
        "max_output_tokens": 9,
        "prompt_cache_key": "k",
        "store": False,
    }
    # A call's keyword arguments holding input are a Responses call's; not given is absent.
    given = {**body, "previous_response_id": openai.NOT_GIVEN, "tools": openai.NOT_GIVEN}
    assert responses_aligned(given, None) == responses_aligned(body)


@pytest.mark.parametrize(
    "body",
    [
        {"model": MODEL, "input": [], "previous_response_id": "resp_1"},
        {"model": MODEL, "input": [], "conversation": {"id": "conv_1"}},
        {"model": MODEL, "input": [], "prompt": {"id": "pmpt_1"}},
        {"model": MODEL, "messages": []},
    ],
    ids=["previous_response_id", "conversation", "prompt", "keyword arguments of chat"],
)
def test_no_aligned_request_where_the_server_holds_the_prefix(body: Dict[str, Any]) -> None:
    assert responses_aligned(body, None if "messages" in body else "openai /responses") is None
    assert responses_aligned({"model": MODEL, "input": []}, "openai /chat/completions") is None


def test_the_text_and_usage_read_off_a_response() -> None:
    found = summary_client(openai.OpenAI(api_key="test").responses)
    assert found is not None
    (api,) = found.apis
    figures = usage(100, 7, 80)
    figures["input_tokens_details"]["cache_write_tokens"] = 0  # this SDK's release reads it
    answered = response("r", {"model": MODEL}, 0, [output_item("m", "S")], figures)
    read = openai.types.responses.Response.model_validate(answered)
    assert api.usage(read) == (100, 80, 7)
    assert api.text(read) == "S"
    refused = {
        "type": "message",
        "id": "m",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "refusal", "refusal": "I cannot."}],
    }
    cut = {"type": "reasoning", "id": "rs", "summary": []}  # cut at the bound while reasoning
    for output in (refused, cut):
        read = openai.types.responses.Response.model_validate(
            response("r", {"model": MODEL}, 0, [output], None, status="incomplete")
        )
        assert api.text(read) == ""
        assert api.usage(read) is None
