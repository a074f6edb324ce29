"""llm_summarizer with a real boto3 ``bedrock-runtime`` client, against the testing kit's
Converse routes.

The user's calls go through a ``CompactingSession(intercept="bedrock")`` or
``@budgeted``; the summarizer's own ``converse`` request is read off the
provider. boto3 has no async client: an async session's calls are summarized by
the sync client's summarizer, on a worker thread. Runs in the ``providers``
extra's venv.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Iterator, List, Tuple
from urllib.parse import unquote

import anyio
import boto3
import pytest
from botocore.config import Config

from ctx_compact.testing import FakeProvider, RecordedRequest, count_tokens
from ctx_compact.testing.bedrock import input_tokens
from middleware import CompactingSession, CompactionEvent, SummaryUsage, budgeted, llm_summarizer
from middleware.sdks import summary_client

from ._summarizing import HEADINGS, Script, is_summarization

MODEL = "anthropic.claude-3-5-haiku-20241022-v1:0"
SUMMARY_MODEL = "amazon.nova-micro-v1:0"
BUDGET = 600
Message = Dict[str, Any]


def history(turns: int = 30) -> List[Message]:
    messages: List[Message] = []
    for turn in range(turns):
        messages.append({"role": "user", "content": [{"text": f"Turn {turn}: rain in Oslo?"}]})
        messages.append({"role": "assistant", "content": [{"text": f"Turn {turn}: yes, 9 °C."}]})
    messages.append({"role": "user", "content": [{"text": "And tomorrow?"}]})
    return messages


def new_client(url: str) -> Any:
    """A client of its own session, given the region and keys: no credentials are looked up."""
    return boto3.session.Session().client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=url,
        aws_access_key_id="test",
        aws_secret_access_key="test",
        config=Config(retries={"max_attempts": 1, "mode": "standard"}),
    )


@pytest.fixture
def script() -> Script:
    return Script()


@pytest.fixture
def server(script: Script) -> Iterator[FakeProvider]:
    with FakeProvider(reply=script) as provider:
        yield provider
        script.released.set()


@pytest.fixture
def client(server: FakeProvider) -> Iterator[Any]:
    made = new_client(server.bedrock_url)
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
    return unquote(request.path.split("/")[2])


def assert_summary_sent(event: CompactionEvent, user: RecordedRequest) -> None:
    assert event.summary == "SUMMARY-1"
    assert "SUMMARY-1" in json.dumps(user.body["messages"])
    assert event.fits


def test_an_intercepted_call_is_summarized_with_its_own_model(
    server: FakeProvider, client: Any
) -> None:
    summarize = llm_summarizer(client, max_summary_tokens=300, cache_aligned=False)
    with CompactingSession(max_tokens=BUDGET, intercept="bedrock", summarize=summarize) as session:
        reply = client.converse(modelId=MODEL, messages=history(), system=[{"text": "Be brief."}])

    assert reply["output"]["message"]["content"] == [{"text": "The answer."}]
    (event,) = session.events
    (request,), user = split(server)
    assert_summary_sent(event, user)
    assert model_of(request) == model_of(user) == MODEL
    (system,) = request.body["system"]
    assert all(heading in system["text"] for heading in HEADINGS)
    assert request.body["inferenceConfig"] == {"maxTokens": 300}
    assert "toolConfig" not in request.body
    billed = input_tokens(request.body["messages"], request.body["system"])
    usage = SummaryUsage(billed, 0, count_tokens("SUMMARY-1"), requests=1)
    assert event.summary_usage == usage
    assert session.stats.summary_usage == usage
    assert session.stats.calls == 1  # the summarizer's request is not the user's


SYSTEM = [{"text": "You are a weather assistant."}, {"cachePoint": {"type": "default"}}]
TOOL_CONFIG = {
    "tools": [
        {
            "toolSpec": {
                "name": "get_weather",
                "inputSchema": {"json": {"type": "object", "properties": {}}},
            }
        }
    ],
    "toolChoice": {"any": {}},
}


def test_a_summary_repeats_the_calls_prefix_for_the_cache(
    server: FakeProvider, client: Any
) -> None:
    # Two calls: the second's summary repeats the first's request up to the messages
    # dropped since, with the call's system prompt and tools, a cachePoint after them.
    events: List[CompactionEvent] = []
    messages = history(60)
    with CompactingSession(
        max_tokens=BUDGET,
        intercept="bedrock",
        summarize=llm_summarizer(client),
        on_compact=events.append,
    ):
        for end in (61, 121):
            client.converse(
                modelId=MODEL, messages=messages[:end], system=SYSTEM, toolConfig=TOOL_CONFIG
            )
    first, main1, second, _ = server.requests
    assert [is_summarization(r) for r in server.requests] == [True, False, True, False]
    for summarizing in (first, second):
        assert model_of(summarizing) == MODEL
        assert summarizing.body["system"] == SYSTEM
        # The tools as sent; a choice that forces a tool is left out.
        assert summarizing.body["toolConfig"] == {"tools": TOOL_CONFIG["tools"]}
        *repeated, last = summarizing.body["messages"]
        *joined, instruction = last["content"]
        assert "Call no tool." in instruction["text"]
        if joined:  # the prefix ended with a user message: the instruction joined it
            repeated.append({**last, "content": joined})
        *content, mark = repeated[-1]["content"]
        assert mark == {"cachePoint": {"type": "default"}}
        repeated[-1] = {**repeated[-1], "content": content}
        if summarizing is first:
            assert repeated == messages[: len(repeated)]
        else:  # the previous request's prefix, then the messages dropped since
            head = len(repeated) - (len(events[1].dropped) - len(events[0].dropped))
            assert repeated[:head] == main1.body["messages"][:head]
            since = messages[len(events[0].dropped) + 1 : len(events[1].dropped) + 1]
            assert repeated[head:] == since
    assert [e.summary for e in events] == ["SUMMARY-1", "SUMMARY-2"]


def marked_last(messages: List[Message]) -> List[Message]:
    """``messages`` with a cachePoint ending the last, as a call caching its prefix sends them."""
    *earlier, last = messages
    return [*earlier, {**last, "content": [*last["content"], {"cachePoint": {"type": "default"}}]}]


def test_a_summary_reads_the_messages_the_calls_cached(server: FakeProvider, client: Any) -> None:
    # Each call marks its last message; the third is compacted, and its summary's prefix
    # runs past the end of the first call's, which the provider's cache serves.
    events: List[CompactionEvent] = []
    messages = history(120)
    with CompactingSession(
        max_tokens=2600,
        target_tokens=1400,
        intercept="bedrock",
        summarize=llm_summarizer(client),
        on_compact=events.append,
    ):
        for end in (101, 161, 241):
            client.converse(modelId=MODEL, messages=marked_last(messages[:end]), system=SYSTEM)
    (event,) = [e for e in events if e.dropped]
    assert event.summary == "SUMMARY-1"
    first, _, summarizing, _ = server.billing
    request = server.requests[2]
    assert is_summarization(request)
    assert len(request.body["messages"]) > 101  # its prefix runs past the first call's
    # Read: the system prompt and the first call's messages, all that call wrote.
    read = input_tokens(request.body["messages"][:101], SYSTEM)
    assert summarizing.cache_read_tokens == read == first.cache_write_tokens
    assert event.summary_usage is not None
    assert event.summary_usage.cached_input_tokens == read


def test_a_named_model_and_instructions_are_sent(server: FakeProvider, client: Any) -> None:
    events: List[CompactionEvent] = []
    summarize = llm_summarizer(client, model=SUMMARY_MODEL, instructions="Summarize tersely.")

    @budgeted(max_tokens=BUDGET, summarize=summarize, on_compact=events.append)
    def ask(messages: List[Message]) -> Any:
        return client.converse(modelId=MODEL, messages=messages)

    ask(history())
    (request,), user = split(server)
    assert model_of(request) == SUMMARY_MODEL
    assert request.body["system"] == [{"text": "Summarize tersely."}]
    assert_summary_sent(events[0], user)


def test_a_streamed_call_gets_its_summary_too(server: FakeProvider, client: Any) -> None:
    with CompactingSession(
        max_tokens=BUDGET, intercept="bedrock", summarize=llm_summarizer(client)
    ) as session:
        response = client.converse_stream(modelId=MODEL, messages=history())
        events = list(response["stream"])

    assert events
    (event,) = session.events
    (request,), user = split(server)
    assert request.path.endswith("/converse")
    assert user.path.endswith("/converse-stream")
    assert_summary_sent(event, user)


def test_without_a_model_a_decorated_function_costs_the_summary_saying_why(
    server: FakeProvider, client: Any
) -> None:
    events: List[CompactionEvent] = []

    @budgeted(max_tokens=BUDGET, summarize=llm_summarizer(client), on_compact=events.append)
    def ask(messages: List[Message]) -> Any:
        return client.converse(modelId=MODEL, messages=messages)

    ask(history())
    (event,) = events
    assert event.summary is None
    assert (event.summary_error or "").startswith(
        "ValueError: the call being compacted names no model the summarizer can see"
    )
    assert len(server.requests) == 1


def test_a_failing_client_costs_only_the_summary(server: FakeProvider, client: Any) -> None:
    with FakeProvider() as gone:
        port = gone.bedrock_url  # closed below: nothing listens there
    unreachable = new_client(port)
    try:
        with CompactingSession(
            max_tokens=BUDGET,
            intercept="bedrock",
            summarize=llm_summarizer(unreachable, model=SUMMARY_MODEL),
        ) as session:
            reply = client.converse(modelId=MODEL, messages=history())
    finally:
        unreachable.close()

    assert reply["output"]["message"]["content"] == [{"text": "The answer."}]
    (event,) = session.events
    assert event.summary is None
    assert (event.summary_error or "").startswith("EndpointConnectionError: ")
    assert event.fits
    (user,) = server.requests
    assert len(user.body["messages"]) == len(event.messages)


def test_the_usage_read_counts_the_cached_input(client: Any) -> None:
    found = summary_client(client)
    assert found is not None
    assert not found.is_async
    response = {
        "output": {
            "message": {
                "role": "assistant",
                "content": [
                    {"reasoningContent": {"reasoningText": {"text": "Thinking..."}}},
                    {"text": "S"},
                ],
            }
        },
        "usage": {
            "inputTokens": 15,
            "cacheReadInputTokens": 80,
            "cacheWriteInputTokens": 5,
            "outputTokens": 7,
        },
    }
    assert found.apis[0].usage(response) == (100, 80, 7)
    assert found.apis[0].text(response) == "S"


def test_another_services_client_is_no_summarizer_client() -> None:
    other = boto3.session.Session().client(
        "s3", region_name="us-east-1", aws_access_key_id="t", aws_secret_access_key="t"
    )
    try:
        assert summary_client(other) is None
        with pytest.raises(TypeError, match=r"'client' must be a client \(.*BedrockRuntime"):
            llm_summarizer(other)
    finally:
        other.close()


@pytest.mark.anyio
async def test_an_async_session_is_summarized_on_a_worker_thread(server: FakeProvider) -> None:
    client = new_client(server.bedrock_url)
    events: List[CompactionEvent] = []
    try:

        @budgeted(
            max_tokens=BUDGET,
            summarize=llm_summarizer(client, model=SUMMARY_MODEL),
            on_compact=events.append,
        )
        async def ask(messages: List[Message]) -> Any:
            return await anyio.to_thread.run_sync(
                lambda: client.converse(modelId=MODEL, messages=messages)
            )

        await ask(history())
    finally:
        client.close()

    (event,) = events
    (request,), user = split(server)
    assert model_of(request) == SUMMARY_MODEL
    assert_summary_sent(event, user)
