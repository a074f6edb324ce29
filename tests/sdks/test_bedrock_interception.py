"""``CompactingSession(intercept="bedrock")``: boto3 Bedrock Runtime's converse and converse_stream.

Real ``boto3`` clients talk to the testing kit's Bedrock Converse routes
(``/model/{id}/converse``, ``/model/{id}/converse-stream``, the stream in AWS's
event-stream encoding), which count tokens as the default estimator does,
reject broken ``toolUse``/``toolResult`` pairing and role alternation with
Bedrock's own ``ValidationException`` and, with ``context_limit``, refuse long
prompts with "Input is too long for requested model.". Clients made before and
inside the block must both be covered, every other call must pass through, and
leaving the block must put botocore's ``BaseClient._make_api_call`` back.
boto3 has no async client. Runs in the ``providers`` extra's venv.
"""

from __future__ import annotations

import copy
import inspect
import json
from typing import Any, Dict, Iterator, List

import boto3
import botocore.client
import pytest
from botocore.exceptions import ClientError

from ctx_compact import estimate_tokens
from ctx_compact._contract import count_value
from ctx_compact.testing import FakeProvider, count_tokens
from middleware import CompactingSession, CompactionEvent

from ._conversations import CITIES, forecast

Message = Dict[str, Any]

BUDGET = 1200
MODEL = "anthropic.claude-sonnet-4-6"
SYSTEM = [{"text": "You are a travel assistant. Answer briefly."}]
TOOL_CONFIG = {
    "tools": [
        {
            "toolSpec": {
                "name": "get_weather",
                "description": "The forecast for a city on a day.",
                "inputSchema": {
                    "json": {
                        "type": "object",
                        "properties": {"city": {"type": "string"}, "day": {"type": "integer"}},
                        "required": ["city", "day"],
                    }
                },
            }
        }
    ]
}


def bedrock_history(turns: int = 16) -> List[Message]:
    """Each turn asks for 1 to 3 cities, answered by parallel ``toolUse`` blocks.

    The next user message holds the ``toolResult`` blocks (out of order on odd
    turns, followed by the user's text on every third); roles alternate, as
    Bedrock requires; some text is non-ASCII.
    """
    messages: List[Message] = []
    n = 0
    for turn in range(turns):
        cities = [CITIES[(turn + k * 3) % len(CITIES)] for k in range(1 + turn % 3)]
        ask = f"Turn {turn}: the weather in {' and '.join(cities)}?"
        messages.append({"role": "user", "content": [{"text": ask}]})
        ids = []
        for _ in cities:
            n += 1
            ids.append(f"tooluse_{n:03d}")
        content: List[Message] = [{"text": "Let me check."}] if turn % 2 else []
        content += [
            {"toolUse": {"toolUseId": i, "name": "get_weather", "input": {"city": c, "day": turn}}}
            for i, c in zip(ids, cities)
        ]
        messages.append({"role": "assistant", "content": content})
        results: List[Message] = [
            {"toolResult": {"toolUseId": i, "content": [{"json": json.loads(forecast(c, turn))}]}}
            for i, c in zip(ids, cities)
        ]
        if turn % 2:
            results.reverse()
        if turn % 3 == 2:
            results.append({"text": "Thanks! Summarise, please. 🙏"})
        messages.append({"role": "user", "content": results})
        reply = f"Forecasts for {', '.join(cities)}. ☀️"
        messages.append({"role": "assistant", "content": [{"text": reply}]})
    messages.append({"role": "user", "content": [{"text": "Which city should I visit first? 🙂"}]})
    return messages


def chatter(turns: int = 60) -> List[Message]:
    """Text turns only: a request without tools may leave out ``toolConfig``."""
    messages: List[Message] = []
    for turn in range(turns):
        messages.append({"role": "user", "content": [{"text": f"Question {turn}, briefly?"}]})
        messages.append({"role": "assistant", "content": [{"text": f"Answer {turn}, briefly."}]})
    messages.append({"role": "user", "content": [{"text": "And now?"}]})
    return messages


# What the session counts for the tool specifications, which the kit does not bill.
TOOLS = count_tokens(TOOL_CONFIG)


def new_client(provider: FakeProvider) -> Any:
    return boto3.client(
        "bedrock-runtime",
        endpoint_url=provider.base_url,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )


@pytest.fixture
def client(provider: FakeProvider) -> Iterator[Any]:
    made = new_client(provider)
    yield made
    made.close()


def wire_tokens(body: Dict[str, Any]) -> int:
    """What the kit counts for a recorded body: its messages and system blocks."""
    total = sum(estimate_tokens(m) for m in body["messages"])
    if body.get("system") is not None:
        total += count_tokens(body["system"])
    return total


def check_one(provider: FakeProvider, event: CompactionEvent, seen: int) -> None:
    (request,) = provider.requests
    assert event.tokens_before > BUDGET >= event.tokens_after
    assert event.compacted
    assert event.fits
    assert not event.retried
    assert event.provider_tokens == seen == wire_tokens(request.body)
    assert event.tokens_after == seen + TOOLS
    assert request.body["messages"] == list(event.messages)
    assert request.body["messages"][0]["role"] == "user"


# --- converse and converse_stream ----------------------------------------------------------


def test_converse_is_compacted_with_the_system_blocks_counted(
    provider: FakeProvider, client: Any
) -> None:
    history = bedrock_history()
    snapshot = copy.deepcopy(history)
    with CompactingSession(max_tokens=BUDGET, intercept="bedrock") as session:
        response = client.converse(
            modelId=MODEL, messages=history, system=SYSTEM, toolConfig=TOOL_CONFIG
        )
    assert history == snapshot  # the caller's list and messages are untouched
    (event,) = session.events
    assert event.function == "bedrock Converse"
    assert provider.requests[0].path == f"/model/{MODEL}/converse"
    check_one(provider, event, response["usage"]["inputTokens"])
    assert provider.requests[0].body["system"] == SYSTEM
    assert all(any(m is h for h in history) for m in event.messages)
    # Its breakdown: the system blocks and the tool specs apart, summing to the event.
    result = session.breakdown()
    assert result.categories["system"] == count_value(SYSTEM, None)
    assert result.categories["tools"] == count_value(TOOL_CONFIG, None)
    assert sum(result.categories.values()) == result.tokens == event.tokens_before
    assert [history[row.index] for row in result.rows if row.status == "dropped"] == list(
        event.dropped
    )


def test_converse_stream_reports_its_metadata_events_usage(
    provider: FakeProvider, client: Any
) -> None:
    with CompactingSession(max_tokens=BUDGET, intercept="bedrock") as session:
        response = client.converse_stream(
            modelId=MODEL, messages=bedrock_history(), toolConfig=TOOL_CONFIG
        )
        assert session.events == []  # the usage comes in the stream's last event
        events = list(response["stream"])
    (event,) = session.events
    assert event.function == "bedrock ConverseStream"
    assert provider.requests[0].path == f"/model/{MODEL}/converse-stream"
    (metadata,) = [e["metadata"] for e in events if "metadata" in e]
    check_one(provider, event, metadata["usage"]["inputTokens"])
    text = "".join(
        e["contentBlockDelta"]["delta"]["text"] for e in events if "contentBlockDelta" in e
    )
    assert text.startswith("Fake reply")


def test_a_stream_closed_early_is_still_counted(provider: FakeProvider, client: Any) -> None:
    with CompactingSession(max_tokens=BUDGET, intercept="bedrock") as session:
        stream = client.converse_stream(
            modelId=MODEL, messages=bedrock_history(), toolConfig=TOOL_CONFIG
        )["stream"]
        next(iter(stream))
        stream.close()
    (event,) = session.events
    assert event.compacted
    assert event.provider_tokens is None


def test_tool_config_is_counted_against_the_budget(provider: FakeProvider, client: Any) -> None:
    budget = 300
    with CompactingSession(max_tokens=budget, intercept="bedrock") as session:
        client.converse(modelId=MODEL, messages=chatter())
        client.converse(modelId=MODEL, messages=chatter(), toolConfig=TOOL_CONFIG)
    plain, with_tools = session.events
    assert plain.tokens_after == plain.provider_tokens <= budget
    assert with_tools.tokens_after == with_tools.provider_tokens + TOOLS <= budget
    assert len(with_tools.messages) < len(plain.messages)


def test_other_operations_and_services_pass_through(provider: FakeProvider, client: Any) -> None:
    s3 = boto3.client(
        "s3",
        endpoint_url=provider.base_url,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )
    body = json.dumps({"messages": bedrock_history()})
    with CompactingSession(max_tokens=1, intercept="bedrock") as session:
        with pytest.raises(ClientError):
            client.invoke_model(modelId=MODEL, body=body)
        with pytest.raises(ClientError):
            s3.list_buckets()
    s3.close()
    assert session.events == []
    assert len(provider.requests[0].body["messages"]) == len(bedrock_history())


# --- clients made before and inside the block; restore exactness --------------------------


def test_clients_made_before_and_inside_the_block_are_covered(provider: FakeProvider) -> None:
    before = new_client(provider)
    converse = before.converse  # a bound method kept, as frameworks do
    with CompactingSession(max_tokens=BUDGET, intercept="bedrock") as session:
        inside = new_client(provider)
        seen = [
            converse(modelId=MODEL, messages=bedrock_history(), toolConfig=TOOL_CONFIG)["usage"][
                "inputTokens"
            ],
            inside.converse(modelId=MODEL, messages=bedrock_history(), toolConfig=TOOL_CONFIG)[
                "usage"
            ]["inputTokens"],
        ]
    assert [e.provider_tokens for e in session.events] == seen
    assert all(e.compacted and figure <= BUDGET for e, figure in zip(session.events, seen))
    # After the block, both clients send what they are given.
    before.converse(modelId=MODEL, messages=bedrock_history(), toolConfig=TOOL_CONFIG)
    inside.converse(modelId=MODEL, messages=bedrock_history(), toolConfig=TOOL_CONFIG)
    assert [len(r.body["messages"]) for r in provider.requests[2:]] == [65, 65]
    before.close()
    inside.close()


def test_the_patched_attribute_is_the_original_object_after_the_block() -> None:
    original = vars(botocore.client.BaseClient)["_make_api_call"]
    session = CompactingSession(max_tokens=BUDGET, intercept="bedrock")
    with session:
        assert vars(botocore.client.BaseClient)["_make_api_call"] is not original
    assert vars(botocore.client.BaseClient)["_make_api_call"] is original
    with pytest.raises(KeyError), session:
        raise KeyError("boom")
    assert vars(botocore.client.BaseClient)["_make_api_call"] is original


def test_the_point_is_where_every_operation_goes(client: Any) -> None:
    # Pinned: the generated operation methods call _make_api_call, which the
    # dynamically built client classes inherit and do not override.
    function = vars(botocore.client.BaseClient)["_make_api_call"]
    assert list(inspect.signature(function).parameters) == ["self", "operation_name", "api_params"]
    assert "_make_api_call" not in vars(type(client))
    assert "self._make_api_call(" in inspect.getsource(type(client).converse)
    assert client.meta.service_model.service_name == "bedrock-runtime"


# --- on_overflow="retry" on Bedrock's context-length error ---------------------------------


def undercount_a_fifth(message: Any) -> int:
    """20% low: within what the figureless retry (a quarter off) makes up for."""
    return int(estimate_tokens(message) * 0.8)


@pytest.mark.parametrize("operation", ["converse", "converse_stream"])
def test_a_request_refused_for_length_is_recompacted_and_retried_once(
    operation: str, provider: FakeProvider, client: Any
) -> None:
    provider.context_limit = BUDGET
    with CompactingSession(
        max_tokens=BUDGET,
        intercept="bedrock",
        count_tokens=undercount_a_fifth,
        on_overflow="retry",
    ) as session:
        if operation == "converse":
            seen = client.converse(
                modelId=MODEL, messages=bedrock_history(), toolConfig=TOOL_CONFIG
            )["usage"]
        else:
            events = list(
                client.converse_stream(
                    modelId=MODEL, messages=bedrock_history(), toolConfig=TOOL_CONFIG
                )["stream"]
            )
            seen = events[-1]["metadata"]["usage"]
    refused, accepted = provider.requests
    assert wire_tokens(refused.body) > BUDGET
    assert seen["inputTokens"] == wire_tokens(accepted.body) <= BUDGET
    (event,) = session.events
    assert event.retried
    assert event.provider_tokens == seen["inputTokens"]


def test_without_retry_the_refusal_reaches_the_caller(provider: FakeProvider, client: Any) -> None:
    provider.context_limit = BUDGET
    with (
        CompactingSession(
            max_tokens=BUDGET, intercept="bedrock", count_tokens=undercount_a_fifth
        ) as session,
        pytest.raises(ClientError, match="Input is too long for requested model"),
    ):
        client.converse(modelId=MODEL, messages=bedrock_history(), toolConfig=TOOL_CONFIG)
    (event,) = session.events
    assert not event.retried
    assert len(provider.requests) == 1


# --- a long tool-using run under the provider's context limit ----------------------------


def test_a_long_tool_using_run_under_the_limit_is_never_refused(
    provider: FakeProvider, client: Any
) -> None:
    limit = 900
    provider.context_limit = limit
    provider.tool_calls = 3  # three calls after each question, then an answer
    messages: List[Message] = []
    calls = 0
    with CompactingSession(max_tokens=limit, intercept="bedrock", validate="raise") as session:
        for question in range(12):
            city = CITIES[question % len(CITIES)]
            messages.append(
                {"role": "user", "content": [{"text": f"Plan day {question} in {city}."}]}
            )
            while True:
                response = client.converse(
                    modelId=MODEL, messages=messages, system=SYSTEM, toolConfig=TOOL_CONFIG
                )
                turn = response["output"]["message"]
                messages.append(turn)
                uses = [b["toolUse"] for b in turn["content"] if "toolUse" in b]
                if not uses:
                    break
                calls += len(uses)
                messages.append(
                    {
                        "role": "user",
                        "content": [
                            {
                                "toolResult": {
                                    "toolUseId": use["toolUseId"],
                                    "content": [{"json": json.loads(forecast(city, question))}],
                                }
                            }
                            for use in uses
                        ],
                    }
                )
    assert calls == 36
    assert len(provider.requests) == len(session.events) == 48
    assert sum(e.compacted for e in session.events) >= 20
    assert all(e.provider_tokens is not None and e.provider_tokens <= limit for e in session.events)


REASONING = {"reasoningContent": {"reasoningText": {"text": "Check each city.", "signature": "s"}}}


def _reasons(message: Message) -> bool:
    return any("reasoningContent" in block for block in message["content"])


def test_clear_thinking_takes_earlier_reasoning_off_before_anything_is_dropped(
    provider: FakeProvider, client: Any
) -> None:
    history = bedrock_history()
    for message in history:
        if message["role"] == "assistant" and any("toolUse" in b for b in message["content"]):
            message["content"] = [REASONING, *message["content"]]
    snapshot = copy.deepcopy(history)
    with CompactingSession(max_tokens=BUDGET, intercept="bedrock", clear_thinking=True) as session:
        client.converse(modelId=MODEL, messages=history, toolConfig=TOOL_CONFIG)
    (event,) = session.events
    assert history == snapshot
    reasoning = [i for i, m in enumerate(history) if _reasons(m)]
    # Every turn's but the last one holding any (the trailing question holds none yet).
    assert [c.index for c in event.cleared_thinking] == reasoning[:-1]
    assert {c.kind for c in event.cleared_thinking} == {"reasoningContent"}
    sent = provider.requests[0].body["messages"]  # the kit took it: no ValidationException
    assert [m for m in sent if _reasons(m)] in ([], [history[reasoning[-1]]])
