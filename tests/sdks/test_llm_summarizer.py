"""llm_summarizer with the real ``openai`` and ``anthropic`` clients, against the local provider.

The provider (ctx_compact.testing) plays a model that answers a summarization
request (one asking to keep the summary under a bound) with ``SUMMARY-N`` and anything else with an
answer; the assertions read what it received. The user's calls go through
``@budgeted`` and through a ``CompactingSession`` that intercepts the same SDK,
so each test also proves that the summarizer's own request is neither compacted
nor reported as a call of the user's.

Async tests run on asyncio and trio through the ``anyio_backend`` fixture.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Tuple

import anyio
import pytest

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

from ctx_compact import check_pairing, estimate_tokens  # noqa: E402
from ctx_compact.testing import FakeProvider, RecordedRequest, count_tokens  # noqa: E402
from middleware import (  # noqa: E402
    CompactingSession,
    CompactionEvent,
    SummaryUsage,
    budgeted,
    llm_summarizer,
)
from middleware.sdks import summary_client  # noqa: E402

from ._conversations import (  # noqa: E402
    ANTHROPIC_BUDGET,
    OPENAI_BUDGET,
    TRIO_STREAM_WARNING,
    anthropic_history,
    openai_history,
)

MODEL = "main-model"
SUMMARY_MODEL = "summary-model"
HEADINGS = (
    "## Goal and standing instructions",
    "## Decisions",
    "## Identifiers, paths, URLs, numbers and names",
    "## Tool results",
    "## Errors and resolutions",
    "## Open tasks and the latest request",
)
Message = Dict[str, Any]
# What every summarization request asks, in either shape.
ASKED = "Keep the summary under"

pytestmark = pytest.mark.filterwarnings(TRIO_STREAM_WARNING)


class Script:
    """The provider's model: ``SUMMARY-N`` for a summarization request, after ``delay`` s."""

    def __init__(self) -> None:
        self.summaries = 0
        self.delay = 0.0
        self.released = threading.Event()
        self._lock = threading.Lock()

    def __call__(self, messages: List[Any]) -> str:
        if ASKED not in json.dumps(messages, ensure_ascii=False):
            return "The answer."
        if self.delay:
            self.released.wait(self.delay)
        with self._lock:
            self.summaries += 1
            return f"SUMMARY-{self.summaries}"


@dataclass(frozen=True)
class Sdk:
    """One SDK as these tests use it: its clients, history, call and request body."""

    name: str
    sync: Callable[[str], Any]
    async_: Callable[[str], Any]
    history: Callable[[], List[Message]]
    budget: int
    max_tokens_key: str

    def create(self, client: Any, messages: List[Any], **extra: Any) -> Any:
        if self.name == "openai":
            return client.chat.completions.create(model=MODEL, messages=messages, **extra)
        return client.messages.create(model=MODEL, max_tokens=256, messages=messages, **extra)

    def system(self, request: RecordedRequest) -> str:
        body = request.body
        return str(body["messages"][0]["content"] if self.name == "openai" else body["system"])

    def prompt(self, request: RecordedRequest) -> str:
        """The summarization request's user message."""
        (user,) = [m for m in request.body["messages"] if m["role"] == "user"]
        return str(user["content"])

    def billed(self, request: RecordedRequest) -> int:
        """The input tokens the provider reports for a text-only request."""
        system = [request.body["system"]] if self.name == "anthropic" else []
        return sum(map(count_tokens, [*system, *request.body["messages"]]))

    def size(self, request: RecordedRequest) -> int:
        """The request's prompt messages in the library's estimate."""
        messages = list(request.body["messages"])
        if self.name == "anthropic":
            messages.insert(0, {"role": "system", "content": request.body["system"]})
        return sum(map(estimate_tokens, messages))


SDKS = [
    Sdk(
        "openai",
        lambda url: openai.OpenAI(base_url=url + "/v1", api_key="test", max_retries=0),
        lambda url: openai.AsyncOpenAI(base_url=url + "/v1", api_key="test", max_retries=0),
        openai_history,
        OPENAI_BUDGET,
        "max_completion_tokens",
    ),
    Sdk(
        "anthropic",
        lambda url: anthropic.Anthropic(base_url=url, api_key="test", max_retries=0),
        lambda url: anthropic.AsyncAnthropic(base_url=url, api_key="test", max_retries=0),
        anthropic_history,
        ANTHROPIC_BUDGET,
        "max_tokens",
    ),
]


@pytest.fixture(params=SDKS, ids=[s.name for s in SDKS])
def sdk(request: pytest.FixtureRequest) -> Sdk:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def script() -> Script:
    return Script()


@pytest.fixture
def server(script: Script) -> Iterator[FakeProvider]:
    with FakeProvider(reply=script) as provider:
        yield provider
        script.released.set()


@pytest.fixture
def client(sdk: Sdk, server: FakeProvider) -> Iterator[Any]:
    with sdk.sync(server.base_url) as made:
        yield made


def is_summarization(request: RecordedRequest) -> bool:
    return ASKED in json.dumps(request.body, ensure_ascii=False)


def summarizing(sdk: Sdk, server: FakeProvider) -> Tuple[List[RecordedRequest], RecordedRequest]:
    """The summarization requests the server received, and the user's one request."""
    requests = [r for r in server.requests if is_summarization(r)]
    (user,) = [r for r in server.requests if not is_summarization(r)]
    return requests, user


def dropped_texts(event: CompactionEvent) -> List[str]:
    return [json.dumps(m, separators=(",", ":"), ensure_ascii=False) for m in event.dropped]


def assert_in_order(texts: List[str], within: str) -> None:
    where = [within.index(text) for text in texts]
    assert where == sorted(where)


def assert_summary_sent(sdk: Sdk, event: CompactionEvent, user: RecordedRequest) -> None:
    sent = user.body["messages"]
    assert event.summary == "SUMMARY-1"
    assert "SUMMARY-1" in json.dumps(sent)
    assert check_pairing(sent) == []
    assert event.fits


# --- sync clients --------------------------------------------------------------------------


def test_a_decorated_call_inside_a_session_sends_the_models_summary(
    sdk: Sdk, server: FakeProvider, client: Any
) -> None:
    summarize = llm_summarizer(client, model=SUMMARY_MODEL, max_summary_tokens=300)
    decorated: List[CompactionEvent] = []

    @budgeted(max_tokens=sdk.budget, summarize=summarize, on_compact=decorated.append)
    def ask(messages: List[Any]) -> Any:
        return sdk.create(client, messages)

    history = sdk.history()
    with CompactingSession(max_tokens=sdk.budget, intercept=sdk.name) as session:
        ask(history)

    (event,) = decorated
    (request,), user = summarizing(sdk, server)
    assert_summary_sent(sdk, event, user)
    # The summarizer's request: the default prompt, the bound on its reply, and every
    # dropped message whole, far over the session's budget: it was not compacted.
    system = sdk.system(request)
    assert all(heading in system for heading in HEADINGS)
    assert request.body[sdk.max_tokens_key] == 300
    assert_in_order(dropped_texts(event), sdk.prompt(request))
    assert sdk.size(request) > sdk.budget
    # The session saw the user's two steps (the request, reported first as it ends first,
    # and the decorated call), not the summarizer's request.
    assert [e.summary for e in session.events] == [None, "SUMMARY-1"]
    assert session.stats.calls == 2
    assert all(SUMMARY_MODEL not in json.dumps(e.messages, default=str) for e in session.events)


def test_a_sessions_own_summarizer_uses_the_client_it_intercepts(
    sdk: Sdk, server: FakeProvider, client: Any
) -> None:
    summarize = llm_summarizer(client, model=SUMMARY_MODEL, instructions="Summarize tersely.")
    with CompactingSession(
        max_tokens=sdk.budget, intercept=sdk.name, summarize=summarize
    ) as session:
        sdk.create(client, sdk.history())

    (event,) = session.events
    (request,), user = summarizing(sdk, server)
    assert_summary_sent(sdk, event, user)
    assert sdk.system(request) == "Summarize tersely."
    assert_in_order(dropped_texts(event), sdk.prompt(request))


def test_the_next_summary_rolls_the_previous_one_on(
    sdk: Sdk, server: FakeProvider, client: Any
) -> None:
    events: List[CompactionEvent] = []
    ask = budgeted(
        max_tokens=sdk.budget,
        summarize=llm_summarizer(client, model=SUMMARY_MODEL),
        on_compact=events.append,
    )(lambda messages: sdk.create(client, messages))
    history = sdk.history()
    # An earlier state of the conversation: it ends after one of the model's answers.
    shorter = max(
        i
        for i in range(len(history) * 3 // 4)
        if history[i - 1]["role"] == "assistant" and check_pairing(history[:i]) == []
    )
    ask(history[:shorter])
    ask(history)

    first, second = (r for r in server.requests if r.body["model"] == SUMMARY_MODEL)
    assert "<previous_summary>" not in sdk.prompt(first)
    prompt = sdk.prompt(second)
    assert prompt.startswith("<previous_summary>\nSUMMARY-1\n</previous_summary>")
    # Only what was dropped since: the first summary's messages are not sent again.
    assert dropped_texts(events[0])[-1] not in prompt
    assert_in_order(dropped_texts(events[1])[len(events[0].dropped) :], prompt)
    assert events[1].summary == "SUMMARY-2"


def test_an_oversized_input_is_summarized_in_chunks_within_the_bound(
    sdk: Sdk, server: FakeProvider, client: Any
) -> None:
    bound = 1000
    events: List[CompactionEvent] = []
    summarize = llm_summarizer(client, model=SUMMARY_MODEL, max_input_tokens=bound)
    with CompactingSession(
        max_tokens=sdk.budget, intercept=sdk.name, summarize=summarize, on_compact=events.append
    ) as session:
        sdk.create(client, sdk.history())

    (event,) = events
    requests, user = summarizing(sdk, server)
    assert len(requests) >= 3
    assert all(sdk.size(r) <= bound for r in requests)
    for number, request in enumerate(requests[1:], start=1):
        expected = f"<previous_summary>\nSUMMARY-{number}\n</previous_summary>"
        assert sdk.prompt(request).startswith(expected)
    # Each dropped message went into one chunk, in order; the last chunk's summary is sent.
    fed = "".join(sdk.prompt(r) for r in requests)
    texts = dropped_texts(event)
    assert_in_order(texts, fed)
    assert all(fed.count(text) == 1 for text in texts)
    assert event.summary == f"SUMMARY-{len(requests)}"
    assert event.summary in json.dumps(user.body["messages"])
    # What every chunk's request cost, as the provider reported it, on the event and in stats.
    assert event.summary_usage == SummaryUsage(
        input_tokens=sum(map(sdk.billed, requests)),
        cached_input_tokens=0,
        output_tokens=sum(count_tokens(f"SUMMARY-{n}") for n in range(1, len(requests) + 1)),
        requests=len(requests),
    )
    assert session.stats.summary_usage == event.summary_usage


def test_a_streamed_call_gets_its_summary_too(sdk: Sdk, server: FakeProvider, client: Any) -> None:
    summarize = llm_summarizer(client)
    with CompactingSession(
        max_tokens=sdk.budget, intercept=sdk.name, summarize=summarize
    ) as session:
        chunks = list(sdk.create(client, sdk.history(), stream=True))

    assert chunks
    (event,) = session.events  # reported once the stream ended
    (request,), user = summarizing(sdk, server)
    assert user.body["stream"] is True
    assert "stream" not in request.body  # the summary itself is one plain request
    assert_summary_sent(sdk, event, user)


def test_a_summary_reused_from_the_store_costs_nothing(
    sdk: Sdk, server: FakeProvider, client: Any
) -> None:
    events: List[CompactionEvent] = []
    ask = budgeted(
        max_tokens=sdk.budget,
        summarize=llm_summarizer(client, model=SUMMARY_MODEL),
        on_compact=events.append,
    )(lambda messages: sdk.create(client, messages))
    with CompactingSession() as session:
        ask(sdk.history())
        ask(sdk.history())

    first, again = events
    assert first.summary == again.summary == "SUMMARY-1"
    assert first.summary_usage is not None
    assert first.summary_usage.requests == 1
    assert again.summary_usage is None
    assert session.stats.summary_usage == first.summary_usage


def test_the_usage_read_counts_the_cached_input(sdk: Sdk, client: Any) -> None:
    found = summary_client(client)
    assert found is not None
    if sdk.name == "openai":
        response = openai.types.chat.ChatCompletion.model_validate(
            {
                "id": "c",
                "object": "chat.completion",
                "created": 0,
                "model": MODEL,
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": "S"},
                    }
                ],
                "usage": {
                    "prompt_tokens": 100,
                    "completion_tokens": 7,
                    "total_tokens": 107,
                    "prompt_tokens_details": {"cached_tokens": 80},
                },
            }
        )
    else:
        response = anthropic.types.Message.model_validate(
            {
                "id": "m",
                "type": "message",
                "role": "assistant",
                "model": MODEL,
                "content": [{"type": "text", "text": "S"}],
                "stop_reason": "end_turn",
                "usage": {
                    "input_tokens": 15,
                    "cache_read_input_tokens": 80,
                    "cache_creation_input_tokens": 5,
                    "output_tokens": 7,
                },
            }
        )
    assert found.apis[0].usage(response) == (100, 80, 7)
    assert found.apis[0].text(response) == "S"


def test_a_slow_model_costs_only_the_summary(
    sdk: Sdk, server: FakeProvider, client: Any, script: Script
) -> None:
    script.delay = 10.0
    summarize = llm_summarizer(client, model=SUMMARY_MODEL, timeout=0.3)
    with CompactingSession(
        max_tokens=sdk.budget, intercept=sdk.name, summarize=summarize
    ) as session:
        started = time.monotonic()
        reply = sdk.create(client, sdk.history())
        took = time.monotonic() - started

    (event,) = session.events
    assert event.summary is None
    assert event.summary_error == (
        "TimeoutError: the summarizer took longer than its timeout of 0.3 s"
    )
    assert event.fits
    assert took < 5  # the model answers after 10 s
    assert "The answer." in json.dumps(reply.model_dump())


def test_a_failing_client_costs_only_the_summary(
    sdk: Sdk, server: FakeProvider, client: Any
) -> None:
    with FakeProvider() as gone:
        port = gone.base_url  # closed below: nothing listens there
    with (
        sdk.sync(port) as unreachable,
        CompactingSession(
            max_tokens=sdk.budget,
            intercept=sdk.name,
            summarize=llm_summarizer(unreachable, model=SUMMARY_MODEL),
        ) as session,
    ):
        sdk.create(client, sdk.history())

    (event,) = session.events
    assert event.summary is None
    assert (event.summary_error or "").startswith("APIConnectionError: ")
    (user,) = server.requests
    assert user.body["messages"] == [json.loads(json.dumps(m)) for m in event.messages]


@pytest.mark.parametrize("how", ["intercepted", "bound"])
def test_without_a_model_it_summarizes_with_the_model_of_the_call(
    sdk: Sdk, server: FakeProvider, client: Any, how: str
) -> None:
    events: List[CompactionEvent] = []
    options: Dict[str, Any] = {
        "max_tokens": sdk.budget,
        "summarize": llm_summarizer(client),
        "on_compact": events.append,
    }
    if how == "intercepted":
        with CompactingSession(intercept=sdk.name, **options):
            sdk.create(client, sdk.history())
    else:
        method = client.chat.completions if sdk.name == "openai" else client.messages
        budgeted(**options)(method.create)(
            model=MODEL,
            messages=sdk.history(),
            **({} if sdk.name == "openai" else {"max_tokens": 9}),
        )

    (request,), user = summarizing(sdk, server)
    assert request.body["model"] == user.body["model"] == MODEL
    assert_summary_sent(sdk, events[0], user)


def test_without_a_model_a_decorated_function_costs_the_summary_saying_why(
    sdk: Sdk, server: FakeProvider, client: Any
) -> None:
    events: List[CompactionEvent] = []
    ask = budgeted(
        max_tokens=sdk.budget, summarize=llm_summarizer(client), on_compact=events.append
    )(lambda messages: sdk.create(client, messages))
    ask(sdk.history())

    (event,) = events
    assert event.summary is None
    assert (event.summary_error or "").startswith(
        "ValueError: the call being compacted names no model the summarizer can see"
    )
    assert len(server.requests) == 1  # the user's only


# --- async clients -------------------------------------------------------------------------


@pytest.mark.anyio
async def test_an_async_client_makes_an_async_summarizer_a_session_lets_through(
    sdk: Sdk, server: FakeProvider
) -> None:
    decorated: List[CompactionEvent] = []
    async with sdk.async_(server.base_url) as client:

        @budgeted(
            max_tokens=sdk.budget,
            summarize=llm_summarizer(client, model=SUMMARY_MODEL, max_input_tokens=1000),
            on_compact=decorated.append,
        )
        async def ask(messages: List[Any]) -> Any:
            return await sdk.create(client, messages)

        async with CompactingSession(max_tokens=sdk.budget, intercept=sdk.name) as session:
            await ask(sdk.history())

    (event,) = decorated
    requests, user = summarizing(sdk, server)
    assert len(requests) >= 2  # chunked, each within the bound
    assert all(sdk.size(r) <= 1000 for r in requests)
    assert event.summary == f"SUMMARY-{len(requests)}"
    assert event.summary in json.dumps(user.body["messages"])
    assert [e.summary for e in session.events] == [None, event.summary]
    assert event.summary_usage is not None
    assert event.summary_usage.requests == len(requests)
    assert event.summary_usage.input_tokens == sum(map(sdk.billed, requests))
    assert session.stats.summary_usage == event.summary_usage


@pytest.mark.anyio
async def test_a_sync_clients_summarizer_serves_an_async_session(
    sdk: Sdk, server: FakeProvider
) -> None:
    # A session intercepting a whole SDK has sync points too, which cannot await an
    # async summarizer: a sync client's summarizer runs on a worker thread.
    with sdk.sync(server.base_url) as sync_client:
        async with (
            sdk.async_(server.base_url) as client,
            CompactingSession(
                max_tokens=sdk.budget,
                intercept=sdk.name,
                summarize=llm_summarizer(sync_client, model=SUMMARY_MODEL),
            ) as session,
        ):
            await sdk.create(client, sdk.history())

    (event,) = session.events
    (request,), user = summarizing(sdk, server)
    assert_summary_sent(sdk, event, user)
    assert_in_order(dropped_texts(event), sdk.prompt(request))


@pytest.mark.anyio
async def test_an_async_streamed_call_gets_its_summary_too(sdk: Sdk, server: FakeProvider) -> None:
    events: List[CompactionEvent] = []
    async with sdk.async_(server.base_url) as client:
        ask = budgeted(
            max_tokens=sdk.budget, summarize=llm_summarizer(client), on_compact=events.append
        )(client.chat.completions.create if sdk.name == "openai" else client.messages.create)
        extra = {} if sdk.name == "openai" else {"max_tokens": 9}
        stream = await ask(model=MODEL, messages=sdk.history(), stream=True, **extra)
        chunks = [chunk async for chunk in stream]

    assert chunks
    (event,) = events
    (request,), user = summarizing(sdk, server)
    assert request.body["model"] == MODEL
    assert user.body["stream"] is True
    assert_summary_sent(sdk, event, user)


@pytest.mark.anyio
async def test_a_slow_model_is_cancelled_at_the_timeout(
    sdk: Sdk, server: FakeProvider, script: Script
) -> None:
    script.delay = 10.0
    events: List[CompactionEvent] = []
    async with sdk.async_(server.base_url) as client:

        @budgeted(
            max_tokens=sdk.budget,
            summarize=llm_summarizer(client, model=SUMMARY_MODEL, timeout=0.3),
            on_compact=events.append,
        )
        async def ask(messages: List[Any]) -> Any:
            return await sdk.create(client, messages)

        with anyio.fail_after(5):
            await ask(sdk.history())
    (event,) = events
    assert event.summary is None
    assert (event.summary_error or "").startswith("TimeoutError")
    (user,) = [r for r in server.requests if r.body["model"] == MODEL]
    assert len(user.body["messages"]) == len(event.messages)


@pytest.mark.anyio
async def test_a_failing_async_client_costs_only_the_summary(
    sdk: Sdk, server: FakeProvider
) -> None:
    with FakeProvider() as gone:
        port = gone.base_url  # closed below: nothing listens there
    events: List[CompactionEvent] = []
    async with sdk.async_(server.base_url) as client, sdk.async_(port) as unreachable:

        @budgeted(
            max_tokens=sdk.budget,
            summarize=llm_summarizer(unreachable, model=SUMMARY_MODEL),
            on_compact=events.append,
        )
        async def ask(messages: List[Any]) -> Any:
            return await sdk.create(client, messages)

        await ask(sdk.history())
    (event,) = events
    assert event.summary is None
    assert (event.summary_error or "").startswith("APIConnectionError: ")
    assert len(server.requests) == 1


def test_a_subclass_of_a_client_is_that_client() -> None:
    with openai.AzureOpenAI(
        api_key="test", api_version="2024-10-21", azure_endpoint="http://127.0.0.1:9"
    ) as azure:
        found = summary_client(azure)
    assert found is not None
    assert found.apis[0].method == "chat.completions.create"
    assert not found.is_async
    assert summary_client(object()) is None
