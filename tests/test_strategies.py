"""The middleware's strategies beyond dropping: clearing first, and keeping the prefix still."""

from __future__ import annotations

import copy
from datetime import datetime, timezone
from typing import Any, Dict, List

import pytest
from helpers import (
    assistant,
    call_item,
    claude,
    examples,
    output_item,
    reasoning_item,
    system,
    text_block,
    thinking_block,
    tool,
    tool_call,
    tool_result_block,
    tool_use_block,
    user,
)
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ctx_compact import check_pairing, compact, estimate_tokens
from middleware import CompactingSession, CompactionEvent, budgeted

Message = Dict[str, Any]


def chat_loop(turns: int, result_size: int = 400) -> List[Message]:
    """A system prompt, then one question, and ``turns`` tool exchanges with large results."""
    messages: List[Message] = [system("You read files."), user("Summarise the repository.")]
    for i in range(turns):
        messages.append(assistant(None, [tool_call(f"call_{i}", "read", f'{{"n":{i}}}')]))
        messages.append(tool(f"call_{i}", f"file {i}: " + "x" * result_size))
    return messages


def claude_turns(turns: int) -> List[Message]:
    """Turns of a user question, a thinking tool call, its result and an answer."""
    messages: List[Message] = []
    for i in range(turns):
        messages.append(claude("user", text_block(f"Question {i}?")))
        thinking = thinking_block(f"step {i} " * 40)
        messages.append(claude("assistant", thinking, tool_use_block(f"tu_{i}", "read")))
        messages.append(claude("user", tool_result_block(f"tu_{i}", "y" * 300)))
        messages.append(claude("assistant", text_block(f"Answer {i}.")))
    return messages


def recorder() -> Any:
    sent: List[List[Any]] = []
    events: List[CompactionEvent] = []

    def send(messages: List[Any]) -> List[Any]:
        sent.append(messages)
        return messages

    return send, sent, events


def total(messages: List[Any]) -> int:
    return sum(estimate_tokens(m) for m in messages)


# --- clear_tool_results= and clear_thinking= -----------------------------------------------


def test_clearing_alone_reaches_the_budget_and_drops_nothing() -> None:
    history = chat_loop(12)
    before = copy.deepcopy(history)
    budget = total(history) * 6 // 10
    send, sent, events = recorder()
    fn = budgeted(max_tokens=budget, clear_tool_results=True, on_compact=events.append)(send)
    fn(history)
    (event,) = events
    assert event.fits
    assert event.dropped == ()
    assert len(sent[0]) == len(history)
    assert event.cleared_results
    assert [c.call_id for c in event.cleared_results] == [
        f"call_{i}" for i in range(len(event.cleared_results))
    ]
    assert check_pairing(sent[0]) == []
    assert history == before  # the caller's messages are untouched
    assert event.tokens_before == total(history)
    assert event.tokens_after == total(sent[0])


def test_clearing_comes_first_then_dropping() -> None:
    history = chat_loop(12)
    send, sent, events = recorder()
    fn = budgeted(
        max_tokens=300, keep_tail=2, clear_tool_results={"keep": 1}, on_compact=events.append
    )(send)
    fn(history)
    (event,) = events
    assert event.cleared_results
    assert event.dropped
    assert event.fits
    assert check_pairing(sent[0]) == []


def test_nothing_is_cleared_while_the_history_fits() -> None:
    history = chat_loop(3)
    send, sent, events = recorder()
    budgeted(max_tokens=10_000, clear_tool_results=True, on_compact=events.append)(send)(history)
    assert events[0].cleared_results == ()
    assert all(a is b for a, b in zip(sent[0], history))


def test_clear_thinking_then_results_on_an_anthropic_loop() -> None:
    history = claude_turns(8)
    before = copy.deepcopy(history)
    send, sent, events = recorder()
    fn = budgeted(
        max_tokens=total(history) // 2,
        clear_thinking=True,
        clear_tool_results=True,
        on_compact=events.append,
    )(send)
    fn(history)
    (event,) = events
    assert event.cleared_thinking
    assert event.fits
    assert check_pairing(sent[0]) == []
    assert history == before


def position(history: List[Any], message: Any) -> int:
    """Where ``message`` is in ``history``, by identity."""
    return next(i for i, m in enumerate(history) if m is message)


def cleared_then_dropped(send: Any) -> Any:
    """``send`` compacted with clearing first, then a summary: the history, events, summarised."""
    history = chat_loop(12)
    summarised: List[List[Any]] = []
    events: List[CompactionEvent] = []

    def summarize(dropped: List[Any]) -> str:
        summarised.append(list(dropped))
        return "Read the earlier files."

    fn = budgeted(
        max_tokens=300,
        keep_tail=2,
        clear_tool_results={"keep": 1},
        summarize=summarize,
        on_compact=events.append,
    )(send)
    return history, fn, events, summarised


def check_the_callers_own(history: List[Any], events: List[Any], summarised: List[Any]) -> None:
    (event,) = events
    (given,) = summarised
    assert event.cleared_results
    assert event.dropped
    positions = [position(history, m) for m in event.dropped]  # each is the caller's object
    assert positions == list(range(positions[0], positions[0] + len(positions)))
    # Some of what was dropped had been cleared first; it is reported, and summarised, unedited.
    assert {c.index for c in event.cleared_results} & set(positions)
    assert len(given) == len(event.dropped)
    assert all(a is b for a, b in zip(given, event.dropped))
    assert not any(m.get("content") == "[cleared]" for m in given)


def test_what_was_cleared_then_dropped_reaches_the_summarizer_as_the_callers_own() -> None:
    history, fn, events, summarised = cleared_then_dropped(lambda messages: messages)
    fn(history)
    check_the_callers_own(history, events, summarised)


@pytest.mark.anyio
async def test_an_async_call_summarises_the_callers_own_messages_too() -> None:
    async def send(messages: List[Any]) -> List[Any]:
        return messages

    # The sync summarizer runs on a worker thread.
    history, fn, events, summarised = cleared_then_dropped(send)
    await fn(history)
    check_the_callers_own(history, events, summarised)


def responses_turns(turns: int) -> List[Message]:
    """Responses turns without ids: a question, reasoning, a call, its large output, an answer."""
    items: List[Message] = []
    for i in range(turns):
        call = call_item("function_call", f"call_{i}")
        del call["id"]  # so that its reasoning item may be removed
        items += [
            user(f"Question {i}?"),
            reasoning_item(f"rs_{i}"),
            call,
            output_item("function_call", f"call_{i}", "z" * 400),
            {"role": "assistant", "content": f"Answer {i}."},
        ]
    return items


def test_cleared_results_index_the_callers_list_after_reasoning_is_removed() -> None:
    history = responses_turns(6)
    send, sent, events = recorder()
    fn = budgeted(
        max_tokens=total(history) * 6 // 10,
        clear_thinking=True,
        clear_tool_results=True,
        on_compact=events.append,
    )(send)
    fn(history)
    (event,) = events
    assert any(c.kind == "reasoning" for c in event.cleared_thinking)
    assert event.cleared_results
    for cleared in event.cleared_results:
        assert history[cleared.index]["type"] == "function_call_output"
        assert history[cleared.index]["call_id"] == cleared.call_id
        assert history[cleared.call_index]["type"] == "function_call"
        assert history[cleared.call_index]["call_id"] == cleared.call_id
    for cleared in event.cleared_thinking:
        assert history[cleared.index]["type"] == "reasoning"
    assert event.messages_before == len(history)
    assert check_pairing(sent[0]) == []


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"clear_tool_results": "yes"}, TypeError, "clear_tool_results"),
        ({"clear_tool_results": {"keep": -1}}, ValueError, "keep"),
        ({"clear_tool_results": {"kept": 1}}, TypeError, "clear_tool_results"),
        ({"clear_thinking": 3}, TypeError, "clear_thinking"),
        ({"target_tokens": 0}, TypeError, "target_tokens"),
        (
            {"target_tokens": 2000},
            ValueError,
            r"'target_tokens' must be at most max_tokens \(1000\)",
        ),
    ],
)
def test_bad_strategy_options_fail_at_decoration(
    options: Dict[str, Any], error: type, match: str
) -> None:
    with pytest.raises(error, match=match):
        budgeted(max_tokens=1000, **options)
    with pytest.raises(error, match=match):
        CompactingSession(max_tokens=1000, **options)


# --- target_tokens: the prompt's prefix stays the same ------------------------------------


def chatbot_turns(turns: int) -> List[List[Message]]:
    """The history as re-sent on each turn of a growing chatbot (one list, growing)."""
    history: List[Message] = [system("You are terse.")]
    snapshots = []
    for i in range(turns):
        history.append(user(f"question {i} " + "q" * 60))
        snapshots.append(list(history))
        history.append(assistant(f"answer {i} " + "a" * 60))
    return snapshots


def starts_with(prompt: List[Any], previous: List[Any]) -> bool:
    return len(prompt) >= len(previous) and all(a == b for a, b in zip(prompt, previous))


def test_target_tokens_keeps_the_prefix_until_the_budget_is_met_again() -> None:
    def prompts(**options: Any) -> Any:
        send, sent, events = recorder()
        fn = budgeted(max_tokens=1000, keep_tail=1, on_compact=events.append, **options)(send)
        for history in chatbot_turns(60):
            fn(history)
        hits = [starts_with(now, before) for before, now in zip(sent, sent[1:])]
        return events, hits

    events, hits = prompts(target_tokens=600)
    _, plain_hits = prompts()
    assert all(event.fits for event in events)
    # Every reuse keeps the whole previous prompt as the prefix of the next one.
    reused = [event.cut_reused for event in events[1:]]
    assert all(hit for hit, was_reused in zip(hits, reused) if was_reused)
    assert sum(hits) >= 0.85 * len(hits)
    assert sum(hits) > sum(plain_hits)
    # Recompaction goes down to about the target, leaving room for the next calls.
    recompacted = [e for e in events if e.dropped and not e.cut_reused]
    assert recompacted
    assert all(600 - 60 < e.tokens_after <= 600 + 60 for e in recompacted)


def test_without_target_tokens_results_are_the_specifications() -> None:
    send, sent, events = recorder()
    fn = budgeted(max_tokens=1000, keep_tail=1, on_compact=events.append)(send)
    for history in chatbot_turns(40):
        fn(history)
        expected = compact(history, max_tokens=1000, keep_tail=1)
        assert sent[-1] == expected.messages
    assert not any(event.cut_reused for event in events)


def test_the_cut_is_the_cores_for_the_same_history_edited_or_not() -> None:
    send, sent, events = recorder()
    fn = budgeted(max_tokens=1000, target_tokens=600, keep_tail=1, on_compact=events.append)(send)
    turns = chatbot_turns(30)
    edited = [dict(m) for m in turns[25]]
    edited[2]["content"] = "an edited answer"  # inside what was dropped
    for history in [*turns[:25], edited, turns[26]]:
        fn(history)
        expected = compact(history, max_tokens=1000, keep_tail=1, target_tokens=600)
        assert sent[-1] == expected.messages
    assert events[-1].dropped


def test_a_rebuilt_history_is_recognised_by_its_content() -> None:
    def reuses(rebuild: bool) -> List[bool]:
        send, _, events = recorder()
        fn = budgeted(max_tokens=1000, target_tokens=600, keep_tail=1, on_compact=events.append)(
            send
        )
        for history in chatbot_turns(40):
            # New objects on every request, as a stateless server loads them.
            fn(copy.deepcopy(history) if rebuild else history)
        return [e.cut_reused for e in events]

    rebuilt = reuses(rebuild=True)
    assert sum(rebuilt) >= 10
    assert rebuilt == reuses(rebuild=False)


def test_interleaved_conversations_keep_their_own_cuts() -> None:
    send, sent, events = recorder()
    fn = budgeted(max_tokens=1000, target_tokens=600, keep_tail=1, on_compact=events.append)(send)
    alice = chatbot_turns(30)
    bob = [[dict(m, content=f"bob {m['content']}") for m in h] for h in chatbot_turns(30)]
    for a, b in zip(alice, bob):
        fn(a)
        fn(b)
    for who in (0, 1):
        prompts = sent[who::2]
        assert all(p[-1]["content"].startswith("bob") == bool(who) for p in prompts)
        assert sum(starts_with(now, before) for before, now in zip(prompts, prompts[1:])) >= 25


def test_the_summary_is_reused_with_the_cut() -> None:
    calls: List[int] = []

    def summarize(dropped: List[Any]) -> str:
        calls.append(len(dropped))
        return f"{len(dropped)} earlier messages"

    send, sent, events = recorder()
    fn = budgeted(
        max_tokens=1000,
        target_tokens=600,
        keep_tail=1,
        summarize=summarize,
        on_compact=events.append,
    )(send)
    for history in chatbot_turns(40):
        fn(history)
    reused = [e for e in events if e.cut_reused]
    assert reused
    assert len(calls) == sum(1 for e in events if e.dropped and not e.cut_reused)
    for before, now, event in zip(sent, sent[1:], events[1:]):
        if event.cut_reused:
            assert starts_with(now, before)


def test_cache_control_markers_on_kept_messages_are_kept() -> None:
    send, sent, events = recorder()
    fn = budgeted(max_tokens=1000, target_tokens=600, keep_tail=1, on_compact=events.append)(send)
    for history in chatbot_turns(30):
        history = list(history)
        history[0] = {
            "role": "system",
            "content": [
                {"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}
            ],
        }
        fn(history)
        assert sent[-1][0]["content"][0]["cache_control"] == {"type": "ephemeral"}


@settings(max_examples=examples(40), deadline=None)
@given(
    turns=st.integers(5, 40),
    budget=st.integers(300, 1500),
    share=st.floats(0.3, 1.0),
    keep_tail=st.integers(0, 3),
)
# A target the tail alone is bigger than: the history still fits max_tokens, and says so.
@example(turns=5, budget=300, share=0.3125, keep_tail=3)
def test_target_tokens_never_exceeds_the_budget_nor_breaks_pairing(
    turns: int, budget: int, share: float, keep_tail: int
) -> None:
    send, sent, events = recorder()
    fn = budgeted(
        max_tokens=budget,
        target_tokens=budget * share,
        keep_tail=keep_tail,
        on_compact=events.append,
    )(send)
    history: List[Message] = [system("s")]
    for i in range(turns):
        history.append(user(f"q{i} " + "q" * 50))
        history.append(assistant(None, [tool_call(f"c{i}")]))
        history.append(tool(f"c{i}", "r" * 80))
        fn(list(history))
        plain = compact(history, max_tokens=budget, keep_tail=keep_tail)
        event = events[-1]
        assert event.fits == plain.fits or event.fits
        assert event.fits == (event.tokens_after <= budget)
        if plain.fits:
            assert event.tokens_after <= budget
        assert check_pairing(sent[-1]) == []
        # What is sent is the caller's messages in order: the head, then a contiguous tail.
        ids = [id(m) for m in history]
        positions = [ids.index(id(m)) for m in sent[-1]]
        assert positions == sorted(positions)


def test_a_session_applies_the_strategies_to_the_calls_it_wraps() -> None:
    send, _, _ = recorder()
    with CompactingSession(max_tokens=1000, target_tokens=600, keep_tail=1) as session:
        wrapped = session.wrap(send)
        for history in chatbot_turns(40):
            wrapped(history)
    assert any(e.cut_reused for e in session.events)
    assert all(e.fits for e in session.events)


def by_repr(message: Any) -> int:
    """A counter for content JSON cannot hold (a ``datetime``, ``bytes``), as a custom one may."""
    return len(repr(message)) // 4


def stamped_turns(turns: int) -> List[List[Message]]:
    """``chatbot_turns`` with a ``datetime`` on each question and ``bytes`` on each answer."""
    history: List[Message] = [system("You are terse.")]
    snapshots = []
    for i in range(turns):
        sent_at = datetime(2026, 1, 1, 12, i % 60, tzinfo=timezone.utc)
        history.append({**user(f"question {i} " + "q" * 60), "sent_at": sent_at})
        snapshots.append(list(history))
        history.append({**assistant(f"answer {i} " + "a" * 60), "raw": f"answer {i}".encode()})
    return snapshots


def test_target_tokens_takes_content_that_only_the_counter_understands() -> None:
    send, _, events = recorder()
    fn = budgeted(
        max_tokens=1000,
        target_tokens=600,
        keep_tail=1,
        count_tokens=by_repr,
        on_compact=events.append,
    )(send)
    turns = stamped_turns(40)
    for history in turns[:35]:
        fn(copy.deepcopy(history))  # new objects per request: recognised by their content
    assert sum(e.cut_reused for e in events) >= 10
    assert all(e.fits for e in events)
    expected = compact(
        turns[34], max_tokens=1000, keep_tail=1, target_tokens=600, count_tokens=by_repr
    )
    assert list(events[-1].messages) == expected.messages


def test_target_tokens_takes_content_that_cannot_be_serialised_at_all() -> None:
    send, _, events = recorder()
    fn = budgeted(
        max_tokens=1000,
        target_tokens=600,
        keep_tail=1,
        count_tokens=lambda message: 40,
        on_compact=events.append,
    )(send)
    for history in chatbot_turns(40):
        fn([history[0], {**history[1], "callback": lambda: None}, *history[2:]])
    assert all(e.fits for e in events)
    assert any(e.dropped for e in events)
    assert any(e.cut_reused for e in events)  # the cut depends on the counts alone
