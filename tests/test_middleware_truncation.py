"""truncate_tool_results= and pin= in the middleware: the last resort, caps up front, pins.

The SDK cases send through the real ``openai`` and ``anthropic`` clients to the testing kit,
which refuses a prompt over its context limit with the provider's own 400.
"""

from __future__ import annotations

import copy
import re
from typing import Any, Dict, List

import pytest

from ctx_compact import TruncatedToolResult, check_pairing, estimate_tokens, media_aware_counter
from ctx_compact.testing import FakeProvider
from middleware import BudgetExceededError, CompactingSession, CompactionEvent, budgeted

Message = Dict[str, Any]
LOG = "".join(f"2026-12-06 worker-{n % 7} request {n} served\n" for n in range(6000))
MARKER = re.compile(r"\[\.\.\. \d+ characters \(about \d+ tokens\) cut \.\.\.\]")


def agent(results: int = 3, size: int = 3000) -> List[Message]:
    """A task, then tool calls whose results grow; the newest, in the tail, is the largest."""
    messages: List[Message] = [
        {"role": "system", "content": "You are an operator."},
        {"role": "user", "content": "TASK: find the slow worker."},
    ]
    for n in range(results):
        call = {"id": f"c{n}", "type": "function", "function": {"name": "logs", "arguments": "{}"}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append(
            {"role": "tool", "tool_call_id": f"c{n}", "content": LOG[: size * (n + 1) * 10]}
        )
    return messages


def sent_to(events: List[CompactionEvent]) -> Any:
    def call(messages: List[Any]) -> List[Any]:
        return messages

    return budgeted(max_tokens=4000, on_compact=events.append)(call)


# --- the last resort, on by default ----------------------------------------------------


def test_a_tail_over_the_budget_is_cut_just_enough_by_default() -> None:
    events: List[CompactionEvent] = []
    messages = agent()
    original = copy.deepcopy(messages)
    sent = sent_to(events)(messages)
    [event] = events
    assert messages == original  # the caller's list is untouched
    assert event.fits
    assert event.tokens_after <= 4000
    assert event.tokens_after > 4000 - 100  # just enough
    assert sum(estimate_tokens(m, media_aware_counter()) for m in sent) == event.tokens_after
    assert check_pairing(sent) == []
    # The tail holds the two newest results; both come down to one size, no more than needed.
    first, newest = event.truncated_results
    assert isinstance(newest, TruncatedToolResult)
    assert (newest.index, newest.call_id, newest.tool, newest.call_index) == (7, "c2", "logs", 6)
    assert first.index == 5
    assert abs(first.tokens_after - newest.tokens_after) <= 2
    newest = sent[-1]["content"]
    assert newest.startswith(LOG[:40])
    assert newest.endswith(messages[-1]["content"][-40:])  # its last lines are sent
    assert len(MARKER.findall(newest)) == 1


def test_false_turns_the_last_resort_off() -> None:
    events: List[CompactionEvent] = []
    call = budgeted(max_tokens=4000, truncate_tool_results=False, on_compact=events.append)(
        lambda messages: messages
    )
    sent = call(agent())
    assert not events[0].fits
    assert events[0].truncated_results == ()
    assert sent[-1]["content"] == agent()[-1]["content"]


def test_on_overflow_raise_still_raises_what_no_cut_can_fit() -> None:
    call = budgeted(max_tokens=30, keep_head=2, on_overflow="raise")(lambda messages: messages)
    with pytest.raises(BudgetExceededError):
        call(agent())


# --- caps up front ---------------------------------------------------------------------


def test_a_cap_cuts_every_result_up_front_even_when_it_fits() -> None:
    events: List[CompactionEvent] = []
    call = budgeted(
        max_tokens=10**6,
        truncate_tool_results={"max_result_tokens": 500},
        on_compact=events.append,
    )(lambda messages: messages)
    sent = call(agent())
    [event] = events
    assert [c.index for c in event.truncated_results] == [3, 5, 7]
    assert all(c.tokens_after <= 500 for c in event.truncated_results)
    assert event.dropped == ()
    assert [m["role"] for m in sent] == [m["role"] for m in agent()]


def test_true_caps_at_a_quarter_of_the_budget() -> None:
    events: List[CompactionEvent] = []
    call = budgeted(max_tokens=8000, truncate_tool_results=True, on_compact=events.append)(
        lambda messages: messages
    )
    call(agent())
    assert events[0].truncated_results
    assert all(c.tokens_after <= 2000 for c in events[0].truncated_results)


@pytest.mark.parametrize(
    ("value", "error", "words"),
    [
        ("yes", TypeError, "'truncate_tool_results' must be None, True, False or a dict"),
        ({"max_result_tokens": 0}, ValueError, "max_result_tokens"),
        ({"cap": 10}, TypeError, "'truncate_tool_results'"),
    ],
)
def test_wrong_truncation_options_are_refused_when_decorating(
    value: Any, error: type, words: str
) -> None:
    with pytest.raises(error, match=re.escape(words)):
        budgeted(max_tokens=100, truncate_tool_results=value)(lambda messages: messages)


# --- pins ------------------------------------------------------------------------------


def test_a_pinned_message_stays_and_its_results_are_never_cleared_or_cut() -> None:
    events: List[CompactionEvent] = []
    messages = agent(results=5, size=300)
    pinned_call = messages[4]  # the second call; its result is messages[5]

    call = budgeted(
        max_tokens=5000,
        clear_tool_results=True,
        truncate_tool_results={"max_result_tokens": 900},
        pin=lambda m: m is pinned_call or str(m.get("content", "")).startswith("TASK"),
        on_compact=events.append,
    )(lambda messages: messages)
    sent = call(messages)
    [event] = events
    assert sent[1] is messages[1]
    assert messages[5] in sent  # the pinned group's result, whole
    assert 5 not in [c.index for c in event.cleared_results]
    assert 5 not in [c.index for c in event.truncated_results]
    assert check_pairing(sent) == []


def test_a_pinned_groups_thinking_is_never_cleared() -> None:
    events: List[CompactionEvent] = []
    messages: List[Message] = [{"role": "user", "content": "TASK: find the slow worker."}]
    for n in range(4):
        thought = {"type": "thinking", "thinking": f"Worker {n}? " * 40, "signature": "sig"}
        use = {"type": "tool_use", "id": f"tu{n}", "name": "logs", "input": {}}
        result = {"type": "tool_result", "tool_use_id": f"tu{n}", "content": f"worker {n} ok"}
        messages.append({"role": "assistant", "content": [thought, use]})
        messages.append({"role": "user", "content": [result]})
        messages.append({"role": "assistant", "content": f"Worker {n} is fine."})
        messages.append({"role": "user", "content": f"And worker {n + 1}?"})
    pinned_result = messages[6]  # the second exchange: its call, with thinking, is at 5

    def pin(message: Any) -> bool:
        return message is pinned_result

    whole = sum(estimate_tokens(m) for m in messages)
    call = budgeted(max_tokens=whole - 150, clear_thinking=True, pin=pin, on_compact=events.append)(
        lambda messages: messages
    )
    sent = call(messages)
    [event] = events
    assert event.fits
    assert event.dropped == ()
    # Oldest first, the pinned group's thinking passed over.
    assert [c.index for c in event.cleared_thinking] == [1, 9]
    assert sent[5] is messages[5]
    assert sent[6] is messages[6]
    unpinned: List[CompactionEvent] = []
    budgeted(max_tokens=whole - 150, clear_thinking=True, on_compact=unpinned.append)(
        lambda messages: messages
    )(messages)
    assert [c.index for c in unpinned[0].cleared_thinking] == [1, 5]


def test_pin_must_be_callable() -> None:
    with pytest.raises(TypeError, match="'pin' must be"):
        budgeted(max_tokens=100, pin="TASK")(lambda messages: messages)


# --- through the real SDKs, against the kit --------------------------------------------


def test_the_openai_sdk_request_that_was_refused_now_fits(provider: FakeProvider) -> None:
    openai = pytest.importorskip("openai")
    provider.context_limit = 4500
    client = openai.OpenAI(base_url=provider.base_url + "/v1", api_key="test", max_retries=0)
    messages = agent()
    off = CompactingSession(max_tokens=4000, intercept=["openai"], truncate_tool_results=False)
    with off, pytest.raises(openai.BadRequestError, match="maximum context length"):
        client.chat.completions.create(model="gpt-4o", messages=messages)
    with CompactingSession(max_tokens=4000, intercept=["openai"]) as session:
        client.chat.completions.create(model="gpt-4o", messages=messages)
    [event] = session.events
    assert event.fits
    assert [c.index for c in event.truncated_results] == [5, 7]
    body = provider.requests[-1].body
    assert body["messages"][-1]["content"].endswith(messages[-1]["content"][-40:])
    assert check_pairing(body["messages"]) == []


def test_the_anthropic_sdk_with_a_pinned_task(provider: FakeProvider) -> None:
    anthropic = pytest.importorskip("anthropic")
    provider.context_limit = 4500
    client = anthropic.Anthropic(base_url=provider.base_url, api_key="test", max_retries=0)
    history: List[Message] = [{"role": "user", "content": "TASK: find the slow worker."}]
    for n in range(4):
        use = {"type": "tool_use", "id": f"tu{n}", "name": "logs", "input": {}}
        result = {"type": "tool_result", "tool_use_id": f"tu{n}", "content": LOG[: 6000 * (n + 1)]}
        history.append({"role": "assistant", "content": [use]})
        history.append({"role": "user", "content": [result]})
    with CompactingSession(
        max_tokens=4000,
        intercept=["anthropic"],
        pin=lambda m: str(m.get("content")).startswith("TASK"),
    ) as session:
        client.messages.create(model="claude-x", max_tokens=100, messages=history)
    [event] = session.events
    assert event.fits
    sent = provider.requests[-1].body["messages"]
    assert sent[0] == history[0]
    assert check_pairing(sent) == []
