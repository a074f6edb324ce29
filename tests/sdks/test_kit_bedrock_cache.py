"""The testing kit's Bedrock prompt cache through boto3: ``cachePoint`` blocks as breakpoints.

Expected figures are worked out here from ``count_tokens`` of what precedes a
``cachePoint``. Runs in the ``providers`` extra's venv (``tests/conftest.py``).
"""

from __future__ import annotations

import copy
from typing import Any, Dict, List

from ctx_compact.testing import FakeProvider, count_tokens
from middleware import CompactingSession

MODEL_ID = "anthropic.claude-3-5-haiku-20241022-v1:0"
POINT = {"cachePoint": {"type": "default"}}
RULES = "You review pull requests for the payments team. " * 100
Message = Dict[str, Any]


def conversation(turns: int = 4) -> List[Message]:
    messages: List[Message] = []
    for turn in range(turns):
        messages.append({"role": "user", "content": [{"text": f"diff {turn}: " + "line " * 60}]})
        messages.append(
            {"role": "assistant", "content": [{"text": f"review {turn}: " + "x " * 60}]}
        )
    messages.append({"role": "user", "content": [{"text": "Summarize."}]})
    return messages


def figures(usage: Dict[str, Any]) -> List[int]:
    return [
        usage.get("cacheReadInputTokens", 0),
        usage.get("cacheWriteInputTokens", 0),
        usage["inputTokens"],
    ]


def test_a_system_cache_point_is_written_then_read(fake_bedrock: Any) -> None:
    system = [{"text": RULES}, POINT]
    messages = conversation()
    prefix = count_tokens([{"text": RULES}])
    total = count_tokens(system) + sum(count_tokens(m) for m in messages)
    assert prefix >= 1024

    first = fake_bedrock.converse(modelId=MODEL_ID, system=system, messages=messages)
    second = fake_bedrock.converse(modelId=MODEL_ID, system=system, messages=messages)

    # inputTokens leaves out what the cache read or wrote, as Bedrock reports it.
    assert figures(first["usage"]) == [0, prefix, total - prefix]
    assert figures(second["usage"]) == [prefix, 0, total - prefix]
    assert second["usage"]["totalTokens"] == total + second["usage"]["outputTokens"]


def test_a_moving_cache_point_reads_what_the_last_request_wrote(fake_bedrock: Any) -> None:
    earlier = conversation(turns=8)
    later = [*earlier, {"role": "assistant", "content": [{"text": "Done."}]}]
    later.append({"role": "user", "content": [{"text": "Next."}]})
    first_request = copy.deepcopy(earlier)
    first_request[-1]["content"].append(POINT)
    second_request = copy.deepcopy(later)
    second_request[-1]["content"].append(POINT)

    fake_bedrock.converse(modelId=MODEL_ID, messages=first_request)
    second = fake_bedrock.converse(modelId=MODEL_ID, messages=second_request)

    # Read: the earlier messages as this request sends them (the old point gone).
    read = sum(count_tokens(m) for m in later[: len(earlier)])
    through_last = sum(count_tokens(m) for m in later)
    total = sum(count_tokens(m) for m in second_request)
    assert read >= 1024
    assert figures(second["usage"]) == [read, through_last - read, total - through_last]


def test_without_a_cache_point_nothing_is_cached(fake_bedrock: Any) -> None:
    system = [{"text": RULES}]
    fake_bedrock.converse(modelId=MODEL_ID, system=system, messages=conversation())

    usage = fake_bedrock.converse(modelId=MODEL_ID, system=system, messages=conversation())["usage"]

    assert "cacheReadInputTokens" not in usage
    assert usage["inputTokens"] == count_tokens(system) + sum(map(count_tokens, conversation()))


def test_a_stream_reports_the_same_figures(fake_bedrock: Any) -> None:
    system = [{"text": RULES}, POINT]
    plain = fake_bedrock.converse(modelId=MODEL_ID, system=system, messages=conversation())

    stream = fake_bedrock.converse_stream(modelId=MODEL_ID, system=system, messages=conversation())
    usage = next(e["metadata"]["usage"] for e in stream["stream"] if "metadata" in e)

    cold = figures(plain["usage"])
    assert figures(usage) == [cold[1], 0, cold[2]]


def test_provider_tokens_is_the_prompts_total_with_caching_on(
    fake_provider: FakeProvider, fake_bedrock: Any
) -> None:
    system = [{"text": RULES}, POINT]
    history = conversation(turns=16)

    with CompactingSession(intercept=["bedrock"], max_tokens=1800, keep_tail=2) as session:
        replies = [
            fake_bedrock.converse(modelId=MODEL_ID, system=system, messages=history)
            for _ in range(2)
        ]

    assert replies[1]["usage"]["cacheReadInputTokens"] == count_tokens([{"text": RULES}])
    sent = [request.body for request in fake_provider.requests]
    totals = [count_tokens(system) + sum(map(count_tokens, body["messages"])) for body in sent]
    assert len(session.events) == 2
    assert [event.provider_tokens for event in session.events] == totals
    assert [bill.input_tokens for bill in fake_provider.billing] == totals
