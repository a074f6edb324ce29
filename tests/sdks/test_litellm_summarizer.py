"""llm_summarizer with LiteLLM itself (the ``litellm`` module, ``litellm.acompletion``),
against the testing kit's OpenAI routes.

LiteLLM has no client object: the summarizer's calls find their provider as
any call without ``api_base`` does, here through ``OPENAI_API_BASE``. The user's
calls go through a ``CompactingSession(intercept="litellm")`` or ``@budgeted``.
Runs only where LiteLLM is installed; LiteLLM runs on asyncio only, so its async
tests do too.
"""

from __future__ import annotations

import json
from typing import Any, Iterator, List, Tuple

import pytest

litellm = pytest.importorskip("litellm")

from ctx_compact.testing import FakeProvider, RecordedRequest, count_tokens  # noqa: E402
from middleware import (  # noqa: E402
    CompactingSession,
    CompactionEvent,
    SummaryUsage,
    budgeted,
    llm_summarizer,
)
from middleware.sdks import summary_client  # noqa: E402

from ._conversations import OPENAI_BUDGET as BUDGET  # noqa: E402
from ._conversations import Message, openai_history  # noqa: E402
from ._summarizing import HEADINGS, Script, is_summarization  # noqa: E402

MODEL = "openai/gpt-4o"
SUMMARY_MODEL = "openai/gpt-4o-mini"

pytestmark = [
    pytest.mark.filterwarnings(
        r"ignore:Items? .* on TypedDict class .* using the `ReadOnly` qualifier:UserWarning"
    ),
    pytest.mark.filterwarnings(r"ignore:Accessing the 'model_(computed_)?fields' attribute"),
    # An event loop LiteLLM leaves unclosed (with its AF_UNIX self-pipe) may be
    # collected during any later test; the HTTP sockets (AF_INET) stay checked.
    pytest.mark.filterwarnings(
        r"ignore:Exception ignored in. <(socket\.socket fd=\d+, family=1,|function BaseEventLoop)"
        r":pytest.PytestUnraisableExceptionWarning"
    ),
]


@pytest.fixture
def script() -> Script:
    return Script()


@pytest.fixture
def server(script: Script, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProvider]:
    with FakeProvider(reply=script) as provider:
        # Where a call that names no api_base goes: the summarizer's, and the user's here.
        monkeypatch.setenv("OPENAI_API_BASE", provider.openai_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        yield provider
        script.released.set()


def split(server: FakeProvider) -> Tuple[List[RecordedRequest], RecordedRequest]:
    """The summarization requests the server received, and the user's one request."""
    summaries = [r for r in server.requests if is_summarization(r)]
    (user,) = [r for r in server.requests if not is_summarization(r)]
    return summaries, user


def billed(request: RecordedRequest) -> int:
    return sum(map(count_tokens, request.body["messages"]))


def assert_summary_sent(event: CompactionEvent, user: RecordedRequest) -> None:
    assert event.summary == "SUMMARY-1"
    assert "SUMMARY-1" in json.dumps(user.body["messages"])
    assert event.fits


def test_the_module_summarizes_an_intercepted_call_with_its_own_model(
    server: FakeProvider,
) -> None:
    summarize = llm_summarizer(litellm, max_summary_tokens=300, cache_aligned=False)
    with CompactingSession(max_tokens=BUDGET, intercept="litellm", summarize=summarize) as session:
        reply = litellm.completion(model=MODEL, messages=openai_history())

    assert reply.choices[0].message.content == "The answer."
    (event,) = session.events
    (request,), user = split(server)
    assert_summary_sent(event, user)
    assert request.body["model"] == user.body["model"] == "gpt-4o"
    system = request.body["messages"][0]
    assert system["role"] == "system"
    assert all(heading in system["content"] for heading in HEADINGS)
    assert request.body["max_tokens"] == 300
    usage = SummaryUsage(billed(request), 0, count_tokens("SUMMARY-1"), requests=1)
    assert event.summary_usage == usage
    assert session.stats.summary_usage == usage
    assert session.stats.calls == 1  # the summarizer's request is not the user's


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The forecast for a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]


def test_a_summary_repeats_the_calls_prefix_where_the_call_went(
    server: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The call names its api_base; where a call naming none would go, nothing listens.
    monkeypatch.setenv("OPENAI_API_BASE", "http://127.0.0.1:9/v1")
    history = openai_history()
    with CompactingSession(
        max_tokens=BUDGET, intercept="litellm", summarize=llm_summarizer(litellm)
    ) as session:
        litellm.completion(
            model=MODEL, messages=history, tools=TOOLS, api_base=server.openai_url, api_key="k"
        )
    (event,) = session.events
    (request,), user = split(server)
    assert_summary_sent(event, user)
    *repeated, instruction = request.body["messages"]
    # The conversation as sent (the head, then the dropped messages), then one instruction.
    # (LiteLLM leaves out a "content": None.)
    sent = [{k: v for k, v in m.items() if v is not None} for m in history[: len(repeated)]]
    assert repeated == json.loads(json.dumps(sent))
    assert len(repeated) == 1 + len(event.dropped)
    assert instruction["role"] == "user"
    assert all(heading in instruction["content"] for heading in HEADINGS)
    assert (request.body["model"], request.body["tools"]) == ("gpt-4o", TOOLS)
    assert "tool_choice" not in request.body  # the call's own: none given
    assert request.body["max_tokens"] == 2000


def test_completion_itself_with_a_named_model_and_instructions(server: FakeProvider) -> None:
    events: List[CompactionEvent] = []
    summarize = llm_summarizer(
        litellm.completion, model=SUMMARY_MODEL, instructions="Summarize tersely."
    )

    @budgeted(max_tokens=BUDGET, summarize=summarize, on_compact=events.append)
    def ask(messages: List[Message]) -> Any:
        return litellm.completion(model=MODEL, messages=messages)

    ask(openai_history())
    (request,), user = split(server)
    assert request.body["model"] == "gpt-4o-mini"
    assert request.body["messages"][0] == {"role": "system", "content": "Summarize tersely."}
    assert_summary_sent(events[0], user)


def test_a_streamed_call_gets_its_summary_too(server: FakeProvider) -> None:
    with CompactingSession(
        max_tokens=BUDGET, intercept="litellm", summarize=llm_summarizer(litellm)
    ) as session:
        chunks = list(litellm.completion(model=MODEL, messages=openai_history(), stream=True))

    assert chunks
    (event,) = session.events
    (request,), user = split(server)
    assert user.body["stream"] is True
    assert "stream" not in request.body  # the summary itself is one plain request
    assert_summary_sent(event, user)


def test_without_a_model_a_decorated_function_costs_the_summary_saying_why(
    server: FakeProvider,
) -> None:
    events: List[CompactionEvent] = []

    @budgeted(max_tokens=BUDGET, summarize=llm_summarizer(litellm), on_compact=events.append)
    def ask(messages: List[Message]) -> Any:
        return litellm.completion(model=MODEL, messages=messages)

    ask(openai_history())
    (event,) = events
    assert event.summary is None
    assert (event.summary_error or "").startswith(
        "ValueError: the call being compacted names no model the summarizer can see"
    )
    assert len(server.requests) == 1


def test_an_unreachable_provider_costs_only_the_summary(
    server: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeProvider() as gone:
        monkeypatch.setenv("OPENAI_API_BASE", gone.openai_url)  # nothing listens there
    route = {"api_base": server.openai_url, "api_key": "test"}
    with CompactingSession(
        max_tokens=BUDGET,
        intercept="litellm",
        summarize=llm_summarizer(litellm, model=SUMMARY_MODEL),
    ) as session:
        reply = litellm.completion(model=MODEL, messages=openai_history(), **route)

    assert reply.choices[0].message.content == "The answer."
    (event,) = session.events
    assert event.summary is None
    # LiteLLM maps the connection error to its InternalServerError.
    assert (event.summary_error or "").endswith("Connection error.")
    assert event.fits
    (user,) = server.requests
    assert len(user.body["messages"]) == len(event.messages)


def test_what_is_a_litellm_client() -> None:
    module, sync, async_ = map(summary_client, (litellm, litellm.completion, litellm.acompletion))
    assert module is not None
    assert sync is not None
    assert async_ is not None
    assert (module.apis[0].method, module.is_async) == ("completion", False)
    assert (sync.apis[0].method, sync.is_async) == ("__call__", False)
    assert (async_.apis[0].method, async_.is_async) == ("__call__", True)
    assert summary_client(litellm.embedding) is None
    assert summary_client(json) is None


def test_the_usage_read_counts_the_cached_input() -> None:
    found = summary_client(litellm)
    assert found is not None
    response = litellm.ModelResponse(
        choices=[{"index": 0, "message": {"role": "assistant", "content": "S"}}],
        usage={
            "prompt_tokens": 100,
            "completion_tokens": 7,
            "total_tokens": 107,
            "prompt_tokens_details": {"cached_tokens": 80},
        },
    )
    assert found.apis[0].usage(response) == (100, 80, 7)
    assert found.apis[0].text(response) == "S"


# --- litellm.acompletion -------------------------------------------------------------------


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_acompletion_makes_an_async_summarizer(server: FakeProvider) -> None:
    events: List[CompactionEvent] = []
    summarize = llm_summarizer(litellm.acompletion, model=SUMMARY_MODEL, max_summary_tokens=300)

    @budgeted(max_tokens=BUDGET, summarize=summarize, on_compact=events.append)
    async def ask(messages: List[Message]) -> Any:
        return await litellm.acompletion(model=MODEL, messages=messages)

    async with CompactingSession(max_tokens=BUDGET, intercept="litellm") as session:
        reply = await ask(openai_history())

    assert reply.choices[0].message.content == "The answer."
    (event,) = events
    (request,), user = split(server)
    assert_summary_sent(event, user)
    assert request.body["model"] == "gpt-4o-mini"
    assert request.body["max_tokens"] == 300
    assert event.summary_usage == SummaryUsage(
        billed(request), 0, count_tokens("SUMMARY-1"), requests=1
    )
    # The session saw the user's call and the decorated one, not the summarizer's.
    assert [e.summary for e in session.events] == [None, "SUMMARY-1"]


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_an_async_intercepted_call_is_summarized_with_its_own_model(
    server: FakeProvider,
) -> None:
    events: List[CompactionEvent] = []
    ask = budgeted(
        max_tokens=BUDGET, summarize=llm_summarizer(litellm.acompletion), on_compact=events.append
    )(litellm.acompletion)
    await ask(model=MODEL, messages=openai_history())

    (event,) = events
    (request,), user = split(server)
    assert request.body["model"] == user.body["model"] == "gpt-4o"
    assert_summary_sent(event, user)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_an_unreachable_provider_costs_an_async_call_only_the_summary(
    server: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeProvider() as gone:
        monkeypatch.setenv("OPENAI_API_BASE", gone.openai_url)  # nothing listens there
    route = {"api_base": server.openai_url, "api_key": "test"}
    events: List[CompactionEvent] = []

    @budgeted(
        max_tokens=BUDGET,
        summarize=llm_summarizer(litellm.acompletion, model=SUMMARY_MODEL),
        on_compact=events.append,
    )
    async def ask(messages: List[Message]) -> Any:
        return await litellm.acompletion(model=MODEL, messages=messages, **route)

    await ask(openai_history())
    (event,) = events
    assert event.summary is None
    # LiteLLM maps the connection error to its InternalServerError.
    assert (event.summary_error or "").endswith("Connection error.")
    assert len(server.requests) == 1
