"""``validate="repair"``: a poisoned conversation gets through, repaired after compaction.

The real OpenAI SDK talks to the testing kit, which rejects an unpaired history
with OpenAI's own 400: without repair the call fails, with it the call goes
through and the event says what was wrong and what changed.
"""

from __future__ import annotations

from typing import Any, List

import openai
import pytest
from helpers import assistant, calling, tool, tool_call, user

from ctx_compact import RepairChange, check_pairing, estimate_tokens
from ctx_compact.testing import FakeProvider
from middleware import CompactingSession, CompactionEvent, budgeted

MODEL = "gpt-4o"


def recorder(received: List[Any]) -> Any:
    def ask(messages: List[Any]) -> None:
        received.extend(messages)

    return ask


def poisoned() -> List[Any]:
    """A history the provider rejects: a result whose call is gone, a call never answered."""
    return [
        {"role": "system", "content": "You are terse."},
        user("What is the weather in Denver?"),
        tool("call_lost", '{"tempF": 72}'),  # its call was dropped by some earlier tool
        assistant("It is 72F."),
        user("And in Austin?"),
        calling("call_austin"),  # the process died before the result was appended
        user("Hello?"),
    ]


def test_budgeted_sends_the_repaired_list_and_reports_it() -> None:
    events: List[CompactionEvent] = []
    received: List[Any] = []

    @budgeted(max_tokens=10_000, validate="repair", on_compact=events.append)
    def ask(messages: List[Any]) -> str:
        received.extend(messages)
        return "ok"

    history = poisoned()
    assert ask(history) == "ok"
    (event,) = events
    assert check_pairing(received) == []
    assert received == [history[0], history[1], history[3], history[4], history[6]]
    assert all(a is b for a, b in zip(received, [history[i] for i in (0, 1, 3, 4, 6)]))
    assert [p.code for p in event.problems] == ["orphan_tool_result", "missing_tool_results"]
    assert event.repairs == (
        RepairChange(2, "dropped_result", ("call_lost",), "openai", "orphan_tool_result"),
        RepairChange(5, "dropped_call", ("call_austin",), "openai", "missing_tool_results"),
        RepairChange(5, "dropped_empty", ("call_austin",), "openai", "missing_tool_results"),
    )
    assert event.messages == tuple(received)
    # The event's figures are those of what was sent.
    assert event.tokens_after == sum(map(estimate_tokens, received))


def test_repair_runs_on_what_compaction_kept() -> None:
    events: List[CompactionEvent] = []
    history = [user("start"), *([assistant("x" * 200), user("y" * 200)] * 5), tool("stray")]
    budgeted(max_tokens=300, validate="repair", on_compact=events.append)(lambda messages: None)(
        history
    )
    (event,) = events
    assert event.dropped  # compaction dropped the middle
    assert [c.action for c in event.repairs] == ["dropped_result"]
    assert history[-1] not in event.messages
    assert event.repairs[0].index == len(event.messages)  # a position in the compacted list
    assert event.fits


def test_a_well_paired_history_is_sent_as_it_is(weather: List[Any]) -> None:
    events: List[CompactionEvent] = []
    received: List[Any] = []
    budgeted(max_tokens=10_000, validate="repair", on_compact=events.append)(recorder(received))(
        weather
    )
    assert events[0].repairs == ()
    assert events[0].problems == ()
    assert all(a is b for a, b in zip(received, weather))


@pytest.mark.anyio
async def test_an_async_callable_gets_the_repaired_list() -> None:
    received: List[Any] = []

    @budgeted(max_tokens=10_000, validate="repair")
    async def ask(messages: List[Any]) -> None:
        received.extend(messages)

    await ask(poisoned())
    assert check_pairing(received) == []
    assert len(received) == 5


def test_a_session_repairs_the_calls_it_wraps() -> None:
    received: List[Any] = []
    with CompactingSession(max_tokens=10_000, validate="repair") as session:
        session.wrap(recorder(received))(poisoned())
    assert check_pairing(received) == []
    assert session.events[0].repairs[0].action == "dropped_result"


def test_the_openai_sdk_gets_a_400_without_repair_and_an_answer_with_it(
    fake_provider: FakeProvider,
) -> None:
    client = openai.OpenAI(base_url=fake_provider.openai_url, api_key="test", max_retries=0)
    with client:
        reporting = CompactingSession(max_tokens=10_000, intercept="openai", validate="report")
        with reporting as s, pytest.raises(openai.BadRequestError, match="preceeding message"):
            client.chat.completions.create(model=MODEL, messages=poisoned())
        assert s.events[0].problems[0].code == "orphan_tool_result"
        with CompactingSession(max_tokens=10_000, intercept="openai", validate="repair") as s:
            reply = client.chat.completions.create(model=MODEL, messages=poisoned())
    assert reply.choices[0].message.content
    (event,) = s.events
    sent = fake_provider.requests[-1].body["messages"]
    assert check_pairing(sent) == []
    assert len(sent) == 5
    assert [c.action for c in event.repairs] == ["dropped_result", "dropped_call", "dropped_empty"]
    assert event.provider_tokens == event.tokens_after  # the kit counts as the estimator does


def test_unanswered_calls_stay_dropped_in_the_middleware_answered_in_the_core() -> None:
    # The middleware drops an unanswered call (no placeholder is invented for the
    # model); repair_pairing(answer_unanswered=True) is there for a caller who wants one.
    received: List[Any] = []
    history = [user(), assistant("Checking.", [tool_call("a")]), user("?")]
    budgeted(max_tokens=10_000, validate="repair")(recorder(received))(history)
    assert received[1] == {"role": "assistant", "content": "Checking."}
