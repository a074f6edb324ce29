"""A middleware event's breakdown, and a session's: the history the call received, each
message marked with what the call did to it."""

from __future__ import annotations

import copy
import pickle
from typing import Any, Dict, List

import anyio
import pytest
from helpers import (
    assistant,
    budgets,
    conversations,
    examples,
    keeps,
    system,
    tool,
    tool_call,
    user,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from ctx_compact import CATEGORIES, breakdown, media_aware_counter
from middleware import CompactingSession, CompactionEvent, budgeted
from middleware.integrations._common import Compactor

Message = Dict[str, Any]


def agent_history(turns: int = 8, output: str = "line of output\n" * 60) -> List[Message]:
    messages = [system(), user("TASK: fix the build.")]
    for n in range(turns):
        messages.append(assistant(None, [tool_call(f"c{n}", "read")]))
        messages.append(tool(f"c{n}", output))
    messages.append(assistant("Fixed."))
    return messages


def run(messages: List[Message], **options: Any) -> CompactionEvent:
    events: List[CompactionEvent] = []

    @budgeted(on_compact=events.append, **options)
    def ask(messages: List[Message]) -> int:
        return len(messages)

    ask(messages)
    (event,) = events
    return event


def test_an_events_breakdown_is_the_history_the_call_received() -> None:
    messages = agent_history()
    event = run(messages, max_tokens=600, keep_tail=3)
    result = event.breakdown()

    assert result.tokens == sum(result.categories.values()) == event.tokens_before
    assert (result.max_tokens, result.tokens_after, result.fits) == (
        event.max_tokens,
        event.tokens_after,
        event.fits,
    )
    assert len(result.rows) == event.messages_before == len(messages)
    dropped = [messages[row.index] for row in result.rows if row.status == "dropped"]
    assert dropped == list(event.dropped) != []
    assert {row.status for row in result.rows} == {"kept", "dropped"}
    assert result.tools["read"]["results"] > 0
    # The same figures the core gives for the same history.
    assert result.categories == breakdown(messages).categories


def test_summarized_cleared_truncated_and_pinned_rows() -> None:
    messages = agent_history()
    messages[17] = tool("c7", "line of output\n" * 2000)  # the newest result, oversized
    event = run(
        messages,
        max_tokens=600,
        keep_tail=4,
        clear_tool_results={"keep": 1},
        truncate_tool_results={"max_result_tokens": 300},
        pin=lambda m: str(m.get("content")).startswith("TASK"),
        summarize=lambda dropped: f"{len(dropped)} messages about reading files.",
    )
    result = event.breakdown()
    statuses = [row.status for row in result.rows]

    assert event.summary is not None
    assert [messages.index(m) for m in event.dropped] == [2, 3, 4, 5, 6, 7]  # never the pin
    assert statuses == [
        "kept",
        "pinned",
        *["summarized"] * 6,
        *["kept", "cleared"] * 4,
        "kept",
        "truncated",
        "kept",
    ]
    assert [entry.index for entry in event.truncated_results] == [17]
    assert {entry.index for entry in event.cleared_results} >= {9, 11, 13, 15}
    assert sum(result.categories.values()) == event.tokens_before
    assert result.rows[2].reason == "dropped, and in the summary"
    assert result.rows[17].reason == (
        f"its tool result cut to {event.truncated_results[0].tokens_after:,} tokens"
    )


def test_what_is_sent_beside_the_messages_is_the_system_and_tools_categories() -> None:
    seen: List[CompactionEvent] = []
    compactor = Compactor("T", "test hook", 900, {"on_compact": seen.append}, wraps_call=False)
    schema = {"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}}
    beside = compactor.beside([system("Be brief.")], tools=[schema] * 3)
    messages = agent_history()[1:]

    compactor.compacted(messages, beside)

    result = seen[0].breakdown()
    assert result.categories["system"] == beside.system > 0
    assert result.categories["tools"] == beside.tools > 0
    assert result.tokens == seen[0].tokens_before
    assert "tool schemas" in result.html()


def test_a_sessions_breakdown_is_its_last_requests() -> None:
    with CompactingSession(max_tokens=600, keep_tail=3, max_events=0) as session:
        with pytest.raises(LookupError, match="no call yet"):
            session.breakdown()
        ask = session.wrap(lambda messages: len(messages))
        ask(agent_history(4))
        ask(agent_history(8))
        result = session.breakdown()

    assert session.events == []
    assert len(result.rows) == len(agent_history(8))
    assert "dropped" in {row.status for row in result.rows}
    assert "<!doctype html>" in result._repr_html_()


def test_an_async_calls_event_has_its_breakdown() -> None:
    events: List[CompactionEvent] = []

    @budgeted(max_tokens=600, keep_tail=3, on_compact=events.append)
    async def ask(messages: List[Message]) -> int:
        return len(messages)

    anyio.run(ask, agent_history())
    assert events[0].breakdown().tokens == events[0].tokens_before


def test_a_copied_or_unpickled_event_says_where_its_breakdown_is() -> None:
    event = run(agent_history(), max_tokens=600, count_tokens=lambda m: len(str(m)) // 4)
    assert event.breakdown().tokens == event.tokens_before

    for other in (pickle.loads(pickle.dumps(event)), copy.deepcopy(event), copy.copy(event)):
        assert other == event
        with pytest.raises(ValueError, match="copied or unpickled"):
            other.breakdown()


@settings(deadline=None, max_examples=examples(60))
@given(conversations(), budgets(), keeps, keeps, st.booleans())
def test_any_call_s_breakdown_sums_to_its_event_and_marks_what_it_dropped(
    messages: List[Message], budget: float, head: int, tail: int, media: bool
) -> None:
    count = media_aware_counter() if media else None
    event = run(messages, max_tokens=budget, keep_head=head, keep_tail=tail, count_tokens=count)
    result = event.breakdown()

    assert sum(result.categories.values()) == result.tokens == event.tokens_before
    assert list(result.categories) == list(CATEGORIES)
    gone = [messages[row.index] for row in result.rows if row.status == "dropped"]
    assert gone == list(event.dropped)
    kept = [messages[row.index] for row in result.rows if row.status != "dropped"]
    assert kept == list(event.messages)
