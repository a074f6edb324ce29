"""Compaction in front of the real ``anthropic`` SDK, proved against the local provider.

A long Messages history (assistant turns with ``thinking`` and parallel
``tool_use`` blocks, user turns opening with the matching ``tool_result``
blocks, a top-level ``system``) that is over budget goes through the real
``Anthropic`` and ``AsyncAnthropic`` clients three ways: a decorated function
around ``create``, the bound method ``budgeted(...)(client.messages.create)``,
and a session that intercepts ``Messages.create`` by name. The server
(ctx_compact.testing) rejects broken tool pairing with Anthropic's own 400,
so an accepted request proves the compacted list is one Anthropic takes; the
same history trimmed by a naive "drop the oldest N" to the same budget is
rejected. The assertions read what the server received.

Async tests run on asyncio and trio through the ``anyio_backend`` fixture.
"""

from __future__ import annotations

import copy
import inspect
import json
from collections.abc import Mapping
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

anthropic = pytest.importorskip("anthropic")

from anthropic.resources.messages import AsyncMessages, Messages  # noqa: E402

from ctx_compact import check_pairing, estimate_tokens  # noqa: E402
from ctx_compact.testing import FakeProvider, count_tokens  # noqa: E402
from middleware import (  # noqa: E402
    CompactingSession,
    CompactionEvent,
    UnpairedMessagesError,
    budgeted,
)

from ._conversations import (  # noqa: E402
    ANTHROPIC_BUDGET,
    Message,
    anthropic_history,
    naive_trim,
)

# Older models (claude-sonnet-4-5, ...) raise a DeprecationWarning in the SDK.
MODEL = "claude-sonnet-4-6"
REPLY_TOKENS = 64
BUDGET = ANTHROPIC_BUDGET
SYSTEM = "You are a travel assistant. Use get_weather for forecasts. Réponds brièvement."
SYNC_TARGET = "anthropic.resources.messages.Messages.create"
ASYNC_TARGET = "anthropic.resources.messages.AsyncMessages.create"
HOWS = ("decorated", "bound", "intercepted")


def unexpected_result(index: int, block: int, tool_use_id: str) -> str:
    """Anthropic's wording for a ``tool_result`` whose ``tool_use`` is not in the previous turn."""
    return (
        f"messages.{index}.content.{block}: unexpected `tool_use_id` found in `tool_result` "
        f"blocks: {tool_use_id}. Each `tool_result` block must have a corresponding `tool_use` "
        f"block in the previous message."
    )


# --- the conversation -------------------------------------------------------------


def reply_content(blocks: List[Message]) -> List[Any]:
    """``response.content`` of a reply holding ``blocks``: the SDK's own block objects.

    ``model_validate`` of the response JSON is how the SDK builds its
    ``Message``: only the fields present are set.
    """
    reply = anthropic.types.Message.model_validate(
        {
            "id": "msg_earlier",
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "content": blocks,
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
    )
    return list(reply.content)


def sdk_history() -> List[Message]:
    """``anthropic_history()`` as a client keeps it.

    Every assistant turn with block content was appended as
    ``{"role": "assistant", "content": response.content}``: a dict holding the
    SDK's pydantic blocks (``ThinkingBlock``, ``ToolUseBlock``, ``TextBlock``).
    """
    return [
        {"role": "assistant", "content": reply_content(m["content"])}
        if m["role"] == "assistant" and isinstance(m["content"], list)
        else m
        for m in anthropic_history()
    ]


def broken_history() -> List[Message]:
    """``anthropic_history()`` without its last calling turn: its results answer nothing.

    The orphaned results sit in the kept tail, so no compaction can drop them.
    """
    history = anthropic_history()
    del history[max(i for i, m in enumerate(history) if m["role"] == "assistant" and tool_ids(m))]
    return history


def tool_ids(message: Message) -> List[str]:
    content = message["content"]
    return (
        [b["id"] for b in content if b["type"] == "tool_use"] if isinstance(content, list) else []
    )


def wire(message: Message) -> Message:
    """What the SDK sends for a message: SDK blocks in its content become their set fields."""
    content = message["content"]
    if not isinstance(content, list):
        return message
    return {
        **message,
        "content": [
            b if isinstance(b, Mapping) else b.model_dump(mode="json", exclude_unset=True)
            for b in content
        ],
    }


# --- sending it -------------------------------------------------------------------


@pytest.fixture
def client(provider: FakeProvider) -> Iterator[Any]:
    with anthropic.Anthropic(base_url=provider.base_url, api_key="test", max_retries=0) as c:
        yield c


def async_client(provider: FakeProvider) -> Any:
    return anthropic.AsyncAnthropic(base_url=provider.base_url, api_key="test", max_retries=0)


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
    request: Dict[str, Any] = {
        "model": MODEL,
        "max_tokens": REPLY_TOKENS,
        "system": SYSTEM,
        **extra,
    }
    if how == "decorated":

        @budgeted(**options)
        def ask(messages: List[Any]) -> Any:
            return client.messages.create(messages=messages, **request)

        return ask(history)
    if how == "bound":
        create = budgeted(**options)(client.messages.create)
        return create(messages=history, **request)
    assert how == "intercepted"
    with CompactingSession(intercept=[SYNC_TARGET], **options):
        return client.messages.create(messages=history, **request)


async def asend(
    how: str,
    client: Any,
    history: List[Any],
    events: List[CompactionEvent],
    validate: Optional[str] = None,
    **extra: Any,
) -> Any:
    """``send`` for ``AsyncAnthropic``."""
    options: Dict[str, Any] = {
        "max_tokens": BUDGET,
        "on_compact": events.append,
        "validate": validate,
    }
    request: Dict[str, Any] = {
        "model": MODEL,
        "max_tokens": REPLY_TOKENS,
        "system": SYSTEM,
        **extra,
    }
    if how == "decorated":

        @budgeted(**options)
        async def ask(messages: List[Any]) -> Any:
            return await client.messages.create(messages=messages, **request)

        return await ask(history)
    if how == "bound":
        create = budgeted(**options)(client.messages.create)
        return await create(messages=history, **request)
    assert how == "intercepted"
    async with CompactingSession(intercept=[ASYNC_TARGET], **options):
        return await client.messages.create(messages=history, **request)


def received(
    provider: FakeProvider,
    history: List[Any],
    snapshot: List[Any],
    events: List[CompactionEvent],
) -> Tuple[CompactionEvent, List[Message]]:
    """Check the one request the server received against the event; return both.

    The request holds the caller's own messages, compacted to the budget, with
    no pairing problem, and the system prompt; the caller's history is as it was.
    """
    assert history == snapshot, "the caller's history was mutated"
    (event,) = events
    (request,) = provider.requests
    sent: List[Message] = request.body["messages"]
    assert request.body["system"] == SYSTEM
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


def input_tokens(event: CompactionEvent) -> int:
    """What the server reports as ``usage.input_tokens``: the messages sent plus the system."""
    return event.tokens_after + count_tokens(SYSTEM)


# --- the conversation is what the tests say it is ---------------------------------


def test_the_history_is_long_tool_heavy_over_budget_and_breaks_under_a_naive_trim() -> None:
    history = anthropic_history()

    assert 60 <= len(history) <= 100
    assert sum(map(estimate_tokens, history)) > 2 * BUDGET
    assert any(len(tool_ids(m)) > 1 for m in history)  # parallel tool_use
    assert any(not json.dumps(m, ensure_ascii=False).isascii() for m in history)
    assert check_pairing(history) == []
    naive = naive_trim(history, BUDGET)
    assert naive[1]["content"][0]["type"] == "tool_result"  # the cut splits an exchange
    assert check_pairing(naive) != []
    # The SDK blocks are counted as the JSON they are sent as: the same figures.
    assert list(map(estimate_tokens, sdk_history())) == list(map(estimate_tokens, history))
    assert {p.code for p in check_pairing(broken_history())} == {"unexpected_tool_result"}


# --- sync client ------------------------------------------------------------------


@pytest.mark.parametrize("how", HOWS)
def test_the_compacted_history_is_accepted(how: str, provider: FakeProvider, client: Any) -> None:
    history = anthropic_history()
    snapshot = copy.deepcopy(history)
    events: List[CompactionEvent] = []

    response = send(how, client, history, events)

    event, sent = received(provider, history, snapshot, events)
    assert response.content[0].text == f"Fake reply to {len(sent)} messages."
    # The provider's figure is on the event: the estimate of what was sent, plus the system.
    assert event.provider_tokens == response.usage.input_tokens == input_tokens(event)


def test_a_naive_trim_to_the_same_budget_is_rejected(client: Any) -> None:
    naive = naive_trim(anthropic_history(), BUDGET)
    first_result = naive[1]["content"][0]["tool_use_id"]

    with pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.create(model=MODEL, max_tokens=REPLY_TOKENS, system=SYSTEM, messages=naive)

    assert caught.value.status_code == 400
    assert caught.value.body["type"] == "error"
    assert caught.value.body["error"] == {
        "type": "invalid_request_error",
        "message": unexpected_result(1, 0, first_result),
    }
    # ctx-compact's validator names the same problem, in the provider's words.
    assert check_pairing(naive)[0].message == unexpected_result(1, 0, first_result)


@pytest.mark.parametrize("how", HOWS)
def test_a_stream_is_compacted(how: str, provider: FakeProvider, client: Any) -> None:
    history = anthropic_history()
    snapshot = copy.deepcopy(history)
    events: List[CompactionEvent] = []

    stream = send(how, client, history, events, stream=True)
    stream_events = list(stream)

    event, sent = received(provider, history, snapshot, events)
    text = "".join(e.delta.text for e in stream_events if e.type == "content_block_delta")
    assert text == f"Fake reply to {len(sent)} messages."
    # The usage comes with the first event, read as the caller iterates: the
    # event is reported when the stream ends, with message_start's figure.
    assert stream_events[0].message.usage.input_tokens == input_tokens(event)
    assert event.provider_tokens == input_tokens(event)


def test_the_stream_helper_compacts_as_a_bound_method(provider: FakeProvider, client: Any) -> None:
    # messages.stream() posts by itself, not through create: decorate it as well.
    history = anthropic_history()
    snapshot = copy.deepcopy(history)
    events: List[CompactionEvent] = []
    stream = budgeted(max_tokens=BUDGET, on_compact=events.append)(client.messages.stream)

    with stream(
        model=MODEL, max_tokens=REPLY_TOKENS, system=SYSTEM, messages=history
    ) as message_stream:
        text = "".join(message_stream.text_stream)
        final = message_stream.get_final_message()

    event, sent = received(provider, history, snapshot, events)
    assert text == f"Fake reply to {len(sent)} messages."
    assert final.usage.input_tokens == input_tokens(event)


def test_replies_appended_as_sdk_content_blocks(provider: FakeProvider, client: Any) -> None:
    # history.append({"role": "assistant", "content": response.content}), as users do:
    # dicts whose content holds the SDK's pydantic blocks, tool_use among them.
    history = sdk_history()
    events: List[CompactionEvent] = []

    @budgeted(max_tokens=BUDGET, on_compact=events.append)
    def ask(messages: List[Any]) -> Any:
        return client.messages.create(
            model=MODEL, max_tokens=REPLY_TOKENS, system=SYSTEM, messages=messages
        )

    for turn in range(3):
        snapshot = copy.deepcopy(history)
        provider.clear()
        events.clear()

        response = ask(history)

        event, sent = received(provider, history, snapshot, events)
        assert event.provider_tokens == response.usage.input_tokens == input_tokens(event)
        history.append({"role": "assistant", "content": response.content})
        history.append({"role": "user", "content": f"And on day {turn + 1}? Und morgen?"})

    kept_blocks = [
        b for m in event.messages if isinstance(m["content"], list) for b in m["content"]
    ]
    assert any(isinstance(b, anthropic.types.ToolUseBlock) for b in kept_blocks)
    assert sent[-2] == {
        "role": "assistant",
        "content": [{"type": "text", "text": sent[-2]["content"][0]["text"]}],
    }


@pytest.mark.parametrize("how", HOWS)
def test_validate_raise_refuses_a_broken_history_before_any_request(
    how: str, provider: FakeProvider, client: Any
) -> None:
    events: List[CompactionEvent] = []

    with pytest.raises(UnpairedMessagesError) as caught:
        send(how, client, broken_history(), events, validate="raise")

    assert provider.requests == []
    problems = caught.value.problems
    assert {(p.code, p.provider) for p in problems} == {("unexpected_tool_result", "anthropic")}
    sent = caught.value.event.messages
    assert [p.message for p in problems] == [
        unexpected_result(p.index, k, sent[p.index]["content"][k]["tool_use_id"])
        for k, p in enumerate(problems)
    ]
    # The refused call is still reported, with its problems.
    assert [event.problems for event in events] == [problems]


def test_validate_report_names_the_problem_the_provider_then_rejects(
    provider: FakeProvider, client: Any
) -> None:
    events: List[CompactionEvent] = []

    @budgeted(max_tokens=BUDGET, validate="report", on_compact=events.append)
    def ask(messages: List[Any]) -> Any:
        return client.messages.create(
            model=MODEL, max_tokens=REPLY_TOKENS, system=SYSTEM, messages=messages
        )

    with pytest.raises(anthropic.BadRequestError) as caught:
        ask(broken_history())

    (event,) = events
    assert caught.value.body["error"]["message"] == event.problems[0].message
    assert len(provider.requests) == 1


@pytest.mark.parametrize("owner", [Messages, AsyncMessages])
def test_interception_puts_the_original_method_back_exactly(owner: Any) -> None:
    original = owner.__dict__["create"]
    target = f"anthropic.resources.messages.{owner.__name__}.create"

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
    history = anthropic_history()
    request: Dict[str, Any] = {"model": MODEL, "max_tokens": REPLY_TOKENS, "messages": history}
    with CompactingSession(max_tokens=BUDGET, intercept=[SYNC_TARGET]) as session:
        client.messages.create(**request)

    client.messages.create(**request)

    first, second = provider.requests
    assert len(first.body["messages"]) < len(history)
    assert second.body["messages"] == history
    assert session.stats.calls == 1


# --- async client -----------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("how", HOWS)
async def test_async_the_compacted_history_is_accepted(how: str, provider: FakeProvider) -> None:
    history = anthropic_history()
    snapshot = copy.deepcopy(history)
    events: List[CompactionEvent] = []

    async with async_client(provider) as client:
        response = await asend(how, client, history, events)

    event, sent = received(provider, history, snapshot, events)
    assert response.content[0].text == f"Fake reply to {len(sent)} messages."
    assert event.provider_tokens == response.usage.input_tokens == input_tokens(event)


@pytest.mark.anyio
async def test_async_a_naive_trim_to_the_same_budget_is_rejected(provider: FakeProvider) -> None:
    naive = naive_trim(anthropic_history(), BUDGET)

    async with async_client(provider) as client:
        with pytest.raises(anthropic.BadRequestError) as caught:
            await client.messages.create(model=MODEL, max_tokens=REPLY_TOKENS, messages=naive)

    assert caught.value.status_code == 400
    assert caught.value.body["error"]["message"] == unexpected_result(
        1, 0, naive[1]["content"][0]["tool_use_id"]
    )


@pytest.mark.anyio
@pytest.mark.parametrize("how", HOWS)
async def test_async_a_stream_is_compacted(how: str, provider: FakeProvider) -> None:
    history = anthropic_history()
    snapshot = copy.deepcopy(history)
    events: List[CompactionEvent] = []

    async with async_client(provider) as client:
        stream = await asend(how, client, history, events, stream=True)
        stream_events = [e async for e in stream]

    event, sent = received(provider, history, snapshot, events)
    text = "".join(e.delta.text for e in stream_events if e.type == "content_block_delta")
    assert text == f"Fake reply to {len(sent)} messages."
    assert stream_events[0].message.usage.input_tokens == input_tokens(event)


@pytest.mark.anyio
async def test_async_replies_appended_as_sdk_content_blocks(provider: FakeProvider) -> None:
    history = sdk_history()
    events: List[CompactionEvent] = []

    async with async_client(provider) as client:
        for turn in range(2):
            snapshot = copy.deepcopy(history)
            provider.clear()
            events.clear()

            response = await asend("intercepted", client, history, events)

            event, _ = received(provider, history, snapshot, events)
            assert event.provider_tokens == response.usage.input_tokens == input_tokens(event)
            history.append({"role": "assistant", "content": response.content})
            history.append({"role": "user", "content": f"And on day {turn + 1}?"})


@pytest.mark.anyio
async def test_async_validate_raise_refuses_a_broken_history_before_any_request(
    provider: FakeProvider,
) -> None:
    async with async_client(provider) as client:
        create = budgeted(max_tokens=BUDGET, validate="raise")(client.messages.create)
        with pytest.raises(UnpairedMessagesError, match="unexpected `tool_use_id`"):
            await create(model=MODEL, max_tokens=REPLY_TOKENS, messages=broken_history())

    assert provider.requests == []
