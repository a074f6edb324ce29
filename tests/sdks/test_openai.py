"""Compaction in front of the real ``openai`` SDK, proved against the local provider.

A long, tool-heavy Chat Completions history that is over budget goes through the
real ``OpenAI`` and ``AsyncOpenAI`` clients in the three ways a user can put
ctx-compact in front of them: a decorated function around ``create``, the bound
method ``budgeted(...)(client.chat.completions.create)``, and a session that
intercepts ``Completions.create`` by name. The server (ctx_compact.testing)
rejects broken tool pairing with OpenAI's own 400, so every accepted request is
proof that the compacted list is one OpenAI takes; the same history trimmed by a
naive "drop the oldest N" to the same budget is rejected. The assertions read
what the server received.

Async tests run on asyncio and trio through the ``anyio_backend`` fixture.
"""

from __future__ import annotations

import copy
import inspect
import json
from collections.abc import Mapping
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

openai = pytest.importorskip("openai")

from openai.resources.chat.completions import AsyncCompletions, Completions  # noqa: E402
from openai.types.chat import ChatCompletionMessage  # noqa: E402

from ctx_compact import check_pairing, estimate_tokens  # noqa: E402
from ctx_compact.testing import FakeProvider  # noqa: E402
from middleware import (  # noqa: E402
    CompactingSession,
    CompactionEvent,
    UnpairedMessagesError,
    budgeted,
)

from ._conversations import (  # noqa: E402
    OPENAI_BUDGET,
    ORPHAN_TOOL,
    TRIO_STREAM_WARNING,
    Message,
    naive_trim,
    openai_history,
)

MODEL = "gpt-4o"
BUDGET = OPENAI_BUDGET
SYNC_TARGET = "openai.resources.chat.completions.Completions.create"
ASYNC_TARGET = "openai.resources.chat.completions.AsyncCompletions.create"
HOWS = ("decorated", "bound", "intercepted")


# --- the conversation -------------------------------------------------------------


def sdk_history() -> List[Any]:
    """``openai_history()`` as a client keeps it: the assistant turns are SDK objects.

    ``model_validate`` of the JSON is how the SDK's own response message
    (``response.choices[0].message``) is built: only the fields present are set.
    """
    return [
        ChatCompletionMessage.model_validate(m) if m["role"] == "assistant" else m
        for m in openai_history()
    ]


def broken_history() -> List[Message]:
    """``openai_history()`` without its last calling message: its result is an orphan.

    The orphan sits in the kept tail, so no compaction can drop it.
    """
    history = openai_history()
    del history[max(i for i, m in enumerate(history) if m.get("tool_calls"))]
    return history


def wire(message: Any) -> Any:
    """What the SDK sends for a message: a dict as is, a pydantic model as its set fields."""
    if isinstance(message, Mapping):
        return message
    return message.model_dump(mode="json", exclude_unset=True)


# --- sending it -------------------------------------------------------------------


@pytest.fixture
def client(provider: FakeProvider) -> Iterator[Any]:
    with openai.OpenAI(base_url=provider.base_url + "/v1", api_key="test", max_retries=0) as c:
        yield c


def async_client(provider: FakeProvider) -> Any:
    return openai.AsyncOpenAI(base_url=provider.base_url + "/v1", api_key="test", max_retries=0)


def send(
    how: str,
    client: Any,
    history: List[Any],
    events: List[CompactionEvent],
    validate: Optional[str] = None,
    **extra: Any,
) -> Any:
    """Send ``history`` through ``client`` with ctx-compact in front, the way ``how`` says."""
    options: Dict[str, Any] = {
        "max_tokens": BUDGET,
        "on_compact": events.append,
        "validate": validate,
    }
    if how == "decorated":

        @budgeted(**options)
        def ask(messages: List[Any]) -> Any:
            return client.chat.completions.create(model=MODEL, messages=messages, **extra)

        return ask(history)
    if how == "bound":
        create = budgeted(**options)(client.chat.completions.create)
        return create(model=MODEL, messages=history, **extra)
    assert how == "intercepted"
    with CompactingSession(intercept=[SYNC_TARGET], **options):
        return client.chat.completions.create(model=MODEL, messages=history, **extra)


async def asend(
    how: str,
    client: Any,
    history: List[Any],
    events: List[CompactionEvent],
    validate: Optional[str] = None,
    **extra: Any,
) -> Any:
    """``send`` for ``AsyncOpenAI``."""
    options: Dict[str, Any] = {
        "max_tokens": BUDGET,
        "on_compact": events.append,
        "validate": validate,
    }
    if how == "decorated":

        @budgeted(**options)
        async def ask(messages: List[Any]) -> Any:
            return await client.chat.completions.create(model=MODEL, messages=messages, **extra)

        return await ask(history)
    if how == "bound":
        create = budgeted(**options)(client.chat.completions.create)
        return await create(model=MODEL, messages=history, **extra)
    assert how == "intercepted"
    async with CompactingSession(intercept=[ASYNC_TARGET], **options):
        return await client.chat.completions.create(model=MODEL, messages=history, **extra)


def received(
    provider: FakeProvider,
    history: List[Any],
    snapshot: List[Any],
    events: List[CompactionEvent],
) -> Tuple[CompactionEvent, List[Message]]:
    """Check the one request the server received against the event; return both.

    The request holds the caller's own messages, compacted to the budget, with
    no pairing problem; the caller's history is as it was.
    """
    assert history == snapshot, "the caller's history was mutated"
    (event,) = events
    (request,) = provider.requests
    sent: List[Message] = request.body["messages"]
    assert event.messages_before == len(history)
    assert event.tokens_before == sum(map(estimate_tokens, history)) > BUDGET
    assert event.compacted
    assert event.fits
    assert len(sent) == len(event.messages) < len(history)
    assert sent == [wire(m) for m in event.messages]
    # The caller's own objects, in their order, the first and the last kept.
    where = {id(m): i for i, m in enumerate(history)}
    positions = [where[id(m)] for m in event.messages]
    assert positions == sorted(positions)
    assert (positions[0], positions[-1]) == (0, len(history) - 1)
    assert sum(map(estimate_tokens, sent)) == event.tokens_after <= BUDGET
    assert check_pairing(sent) == []
    return event, sent


# --- the conversation is what the tests say it is ---------------------------------


def test_the_history_is_long_tool_heavy_over_budget_and_breaks_under_a_naive_trim() -> None:
    history = openai_history()

    assert 60 <= len(history) <= 100
    assert sum(map(estimate_tokens, history)) > 2 * BUDGET
    assert any(len(m.get("tool_calls") or ()) > 1 for m in history)  # parallel calls
    assert any(not json.dumps(m, ensure_ascii=False).isascii() for m in history)
    assert check_pairing(history) == []
    naive = naive_trim(history, BUDGET)
    assert naive[1]["role"] == "tool"  # the naive cut lands inside a tool exchange
    assert check_pairing(naive) != []
    assert check_pairing(broken_history())[0].code == "orphan_tool_result"


# --- sync client ------------------------------------------------------------------


@pytest.mark.parametrize("how", HOWS)
def test_the_compacted_history_is_accepted(how: str, provider: FakeProvider, client: Any) -> None:
    history = openai_history()
    snapshot = copy.deepcopy(history)
    events: List[CompactionEvent] = []

    response = send(how, client, history, events)

    event, sent = received(provider, history, snapshot, events)
    assert response.choices[0].message.content == f"Fake reply to {len(sent)} messages."
    # The provider's figure is on the event, and it is the estimate of what was sent.
    assert event.provider_tokens == response.usage.prompt_tokens == event.tokens_after


def test_a_naive_trim_to_the_same_budget_is_rejected(client: Any) -> None:
    naive = naive_trim(openai_history(), BUDGET)

    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model=MODEL, messages=naive)

    assert caught.value.status_code == 400
    assert caught.value.body == {
        "message": ORPHAN_TOOL,
        "type": "invalid_request_error",
        "param": "messages.[1].role",
        "code": None,
    }
    # ctx-compact's validator names the same problem, in the provider's words.
    assert check_pairing(naive)[0].message == ORPHAN_TOOL


@pytest.mark.parametrize("how", HOWS)
def test_a_stream_is_compacted(how: str, provider: FakeProvider, client: Any) -> None:
    history = openai_history()
    snapshot = copy.deepcopy(history)
    events: List[CompactionEvent] = []

    stream = send(how, client, history, events, stream=True, stream_options={"include_usage": True})
    chunks = list(stream)

    event, sent = received(provider, history, snapshot, events)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == f"Fake reply to {len(sent)} messages."
    # A stream carries its usage in its last chunk, which arrives after the call
    # returned: the event is reported when the stream ends, with that figure.
    assert chunks[-1].usage.prompt_tokens == event.tokens_after
    assert event.provider_tokens == event.tokens_after


@pytest.mark.parametrize("validate", [None, "raise"])
def test_a_stream_nobody_hears_is_the_sdks_own_object(
    validate: Optional[str], provider: FakeProvider, client: Any
) -> None:
    def ask(messages: List[Any]) -> Any:
        return client.chat.completions.create(model=MODEL, messages=messages, stream=True)

    # No hook and no session: nothing reports, so nothing stands between the caller and it.
    alone = budgeted(max_tokens=BUDGET, validate=validate)(ask)(openai_history())
    assert type(alone) is openai.Stream
    alone.close()
    # With a hook the stream is observed for its usage, behind a proxy.
    events: List[CompactionEvent] = []
    heard = budgeted(max_tokens=BUDGET, validate=validate, on_compact=events.append)(ask)(
        openai_history()
    )
    assert isinstance(heard, openai.Stream)
    assert type(heard) is not openai.Stream
    assert not events
    heard.close()
    assert len(events) == 1


def test_the_stream_helper_goes_through_the_intercepted_create(
    provider: FakeProvider, client: Any
) -> None:
    history = openai_history()
    snapshot = copy.deepcopy(history)
    events: List[CompactionEvent] = []

    with (
        CompactingSession(max_tokens=BUDGET, intercept=[SYNC_TARGET], on_compact=events.append),
        client.chat.completions.stream(
            model=MODEL, messages=history, stream_options={"include_usage": True}
        ) as stream,
    ):
        completion = stream.get_final_completion()

    _, sent = received(provider, history, snapshot, events)
    assert completion.choices[0].message.content == f"Fake reply to {len(sent)} messages."
    assert completion.usage.prompt_tokens == sum(map(estimate_tokens, sent))


def test_sdk_response_messages_in_the_history(provider: FakeProvider, client: Any) -> None:
    history = sdk_history()
    events: List[CompactionEvent] = []

    @budgeted(max_tokens=BUDGET, on_compact=events.append)
    def ask(messages: List[Any]) -> Any:
        return client.chat.completions.create(model=MODEL, messages=messages)

    for turn in range(3):
        snapshot = copy.deepcopy(history)
        provider.clear()
        events.clear()

        response = ask(history)

        event, sent = received(provider, history, snapshot, events)
        assert event.provider_tokens == response.usage.prompt_tokens == event.tokens_after
        reply = response.choices[0].message
        assert isinstance(reply, ChatCompletionMessage)
        history.append(reply)  # as users do
        history.append({"role": "user", "content": f"And on day {turn + 1}? ¿Y mañana?"})

    # The SDK objects were passed on as themselves and sent as the JSON the SDK
    # makes of them: the reply of the turn before went back with its set fields.
    assert any(isinstance(m, ChatCompletionMessage) and m.tool_calls for m in event.messages)
    assert sent[-2]["content"].startswith("Fake reply to ")
    assert set(sent[-2]) == {"role", "content", "refusal", "annotations"}


@pytest.mark.parametrize("how", HOWS)
def test_validate_raise_refuses_a_broken_history_before_any_request(
    how: str, provider: FakeProvider, client: Any
) -> None:
    events: List[CompactionEvent] = []

    with pytest.raises(UnpairedMessagesError) as caught:
        send(how, client, broken_history(), events, validate="raise")

    assert provider.requests == []
    (problem,) = caught.value.problems
    assert (problem.code, problem.provider, problem.message) == (
        "orphan_tool_result",
        "openai",
        ORPHAN_TOOL,
    )
    # The refused call is still reported, with its problems.
    assert [event.problems for event in events] == [caught.value.problems]


def test_validate_report_names_the_problem_the_provider_then_rejects(
    provider: FakeProvider, client: Any
) -> None:
    events: List[CompactionEvent] = []

    @budgeted(max_tokens=BUDGET, validate="report", on_compact=events.append)
    def ask(messages: List[Any]) -> Any:
        return client.chat.completions.create(model=MODEL, messages=messages)

    with pytest.raises(openai.BadRequestError) as caught:
        ask(broken_history())

    (event,) = events
    (problem,) = event.problems
    assert caught.value.body["message"] == problem.message
    assert caught.value.param == f"messages.[{problem.index}].role"
    assert len(provider.requests) == 1


@pytest.mark.parametrize("owner", [Completions, AsyncCompletions])
def test_interception_puts_the_original_method_back_exactly(owner: Any) -> None:
    original = owner.__dict__["create"]
    target = f"openai.resources.chat.completions.{owner.__name__}.create"

    with CompactingSession(max_tokens=BUDGET, intercept=[target]):
        assert owner.__dict__["create"] is not original
        assert inspect.signature(owner.create) == inspect.signature(original)
    assert owner.__dict__["create"] is original

    with (
        pytest.raises(RuntimeError, match="boom"),
        CompactingSession(max_tokens=BUDGET, intercept=[target]),
    ):
        raise RuntimeError("boom")
    assert owner.__dict__["create"] is original


def test_after_the_session_calls_are_sent_untouched(provider: FakeProvider, client: Any) -> None:
    history = openai_history()
    with CompactingSession(max_tokens=BUDGET, intercept=[SYNC_TARGET]) as session:
        client.chat.completions.create(model=MODEL, messages=history)

    client.chat.completions.create(model=MODEL, messages=history)

    first, second = provider.requests
    assert len(first.body["messages"]) < len(history)
    assert second.body["messages"] == history
    assert session.stats.calls == 1


# --- async client -----------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("how", HOWS)
async def test_async_the_compacted_history_is_accepted(how: str, provider: FakeProvider) -> None:
    history = openai_history()
    snapshot = copy.deepcopy(history)
    events: List[CompactionEvent] = []

    async with async_client(provider) as client:
        response = await asend(how, client, history, events)

    event, sent = received(provider, history, snapshot, events)
    assert response.choices[0].message.content == f"Fake reply to {len(sent)} messages."
    assert event.provider_tokens == response.usage.prompt_tokens == event.tokens_after


@pytest.mark.anyio
async def test_async_a_naive_trim_to_the_same_budget_is_rejected(provider: FakeProvider) -> None:
    naive = naive_trim(openai_history(), BUDGET)

    async with async_client(provider) as client:
        with pytest.raises(openai.BadRequestError) as caught:
            await client.chat.completions.create(model=MODEL, messages=naive)

    assert caught.value.status_code == 400
    assert caught.value.body["message"] == ORPHAN_TOOL


@pytest.mark.filterwarnings(TRIO_STREAM_WARNING)
@pytest.mark.anyio
@pytest.mark.parametrize("how", HOWS)
async def test_async_a_stream_is_compacted(how: str, provider: FakeProvider) -> None:
    history = openai_history()
    snapshot = copy.deepcopy(history)
    events: List[CompactionEvent] = []

    async with async_client(provider) as client:
        stream = await asend(
            how, client, history, events, stream=True, stream_options={"include_usage": True}
        )
        chunks = [chunk async for chunk in stream]

    event, sent = received(provider, history, snapshot, events)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == f"Fake reply to {len(sent)} messages."
    assert chunks[-1].usage.prompt_tokens == event.tokens_after
    assert event.provider_tokens == event.tokens_after


@pytest.mark.filterwarnings(TRIO_STREAM_WARNING)
@pytest.mark.anyio
async def test_async_the_stream_helper_goes_through_the_intercepted_create(
    provider: FakeProvider,
) -> None:
    history = openai_history()
    snapshot = copy.deepcopy(history)
    events: List[CompactionEvent] = []

    async with async_client(provider) as client:
        session = CompactingSession(
            max_tokens=BUDGET, intercept=[ASYNC_TARGET], on_compact=events.append
        )
        async with (
            session,
            client.chat.completions.stream(
                model=MODEL, messages=history, stream_options={"include_usage": True}
            ) as stream,
        ):
            completion = await stream.get_final_completion()

    _, sent = received(provider, history, snapshot, events)
    assert completion.choices[0].message.content == f"Fake reply to {len(sent)} messages."


@pytest.mark.anyio
async def test_async_sdk_response_messages_in_the_history(provider: FakeProvider) -> None:
    history = sdk_history()
    events: List[CompactionEvent] = []

    async with async_client(provider) as client:
        for turn in range(2):
            snapshot = copy.deepcopy(history)
            provider.clear()
            events.clear()

            response = await asend("intercepted", client, history, events)

            event, _ = received(provider, history, snapshot, events)
            assert event.provider_tokens == response.usage.prompt_tokens == event.tokens_after
            history.append(response.choices[0].message)
            history.append({"role": "user", "content": f"And on day {turn + 1}?"})


@pytest.mark.anyio
async def test_async_validate_raise_refuses_a_broken_history_before_any_request(
    provider: FakeProvider,
) -> None:
    async with async_client(provider) as client:
        create = budgeted(max_tokens=BUDGET, validate="raise")(client.chat.completions.create)
        with pytest.raises(UnpairedMessagesError, match="preceeding message with 'tool_calls'"):
            await create(model=MODEL, messages=broken_history())

    assert provider.requests == []
