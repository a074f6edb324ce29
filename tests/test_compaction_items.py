"""Provider-native compaction items, and calls still awaiting their results at the end.

A Responses ``{"type": "compaction", "encrypted_content": ...}`` item and an Anthropic
``compaction`` block are the providers' own summaries of everything before them: the
conversation restarts there. Over budget, what comes before the latest one goes first,
the head is counted from it, and it is never dropped nor copied. Calls awaiting their
results at the end are kept with the tail whatever ``keep_tail`` says. Through the core,
the decorator and a session, ``--explain`` and the command line, and as properties
over generated histories, checked by the testing kit's own validators.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Dict, List

import pytest
from helpers import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctx_compact import check_pairing, clear_tool_results, compact, compact_with_summary
from ctx_compact._contract import measure, prepare
from ctx_compact.cli import main
from ctx_compact.testing._api import RequestRejected
from ctx_compact.testing.anthropic import validate_messages as validate_anthropic
from ctx_compact.testing.openai_chat import validate_chat_completions
from ctx_compact.testing.responses import validate_responses
from middleware import CompactingSession, budgeted

Message = Dict[str, Any]


def item(text: str, role: str = "user") -> Message:
    return {"type": "message", "role": role, "content": text}


def compaction_item(n: int) -> Message:
    return {"type": "compaction", "id": f"cmp_{n}", "encrypted_content": f"gAAA{n}" * 20}


def call(call_id: str) -> Message:
    return {"type": "function_call", "call_id": call_id, "name": "f", "arguments": "{}"}


def output(call_id: str, size: int = 40) -> Message:
    return {"type": "function_call_output", "call_id": call_id, "output": "x" * size}


def responses_history() -> List[Message]:
    """Turns, a compaction item, more turns: the shape of a long server-compacted loop."""
    history = [item("You are terse.", "developer")]
    for turn in range(4):
        history += [item(f"question {turn} " * 6), call(f"a{turn}"), output(f"a{turn}")]
    history.append(compaction_item(1))
    for turn in range(4, 8):
        history += [item(f"question {turn} " * 6), call(f"a{turn}"), output(f"a{turn}")]
    return history


def total(messages: List[Any]) -> int:
    return measure(messages, None)[0][-1]


def responses_ok(items: List[Any]) -> None:
    validate_responses({"model": "m", "input": list(items)})


def anthropic_ok(messages: List[Any]) -> None:
    validate_anthropic({"model": "m", "max_tokens": 1, "messages": list(messages)})


# --- the Responses compaction item ---------------------------------------------------


def test_an_input_that_fits_is_unchanged_items_before_the_compaction_included():
    history = responses_history()
    result = compact(history, max_tokens=total(history))
    assert result.messages == history
    assert result.dropped == []


def test_over_budget_what_precedes_the_latest_compaction_item_goes_first():
    history = responses_history()
    at = history.index(compaction_item(1))
    after = total(history[at:])
    result = compact(history, max_tokens=after, keep_head=1, keep_tail=4)
    assert result.messages == history[at:]
    assert result.messages[0] is history[at]  # the caller's own object
    assert result.dropped == history[:at]
    assert result.fits
    assert result.tokens_after == after
    responses_ok(result.messages)


@pytest.mark.parametrize("keep_head", [0, 1, 3])
@pytest.mark.parametrize("budget", [1, 60, 150, 300, 600])
def test_the_item_is_never_dropped_and_the_head_counts_from_it(keep_head, budget):
    history = responses_history()
    at = history.index(compaction_item(1))
    result = compact(history, max_tokens=budget, keep_head=keep_head, keep_tail=2)
    assert result.messages[0] is history[at]
    assert history[at + 1 : at + keep_head] == result.messages[1:keep_head]
    assert [m for m in history if m in result.messages or m in result.dropped] == history
    responses_ok(result.messages)
    assert json.dumps(result.messages[0]) == json.dumps(compaction_item(1))


def test_only_the_latest_compaction_item_starts_the_conversation():
    history = [compaction_item(0), *responses_history()[1:]]
    at = history.index(compaction_item(1))
    result = compact(history, max_tokens=total(history) - 1, keep_tail=2)
    assert result.messages[0] is history[at]
    assert history[0] in result.dropped


def test_a_compaction_item_at_the_end_is_kept_alone():
    history = [*responses_history(), compaction_item(2)]
    result = compact(history, max_tokens=5, keep_head=1, keep_tail=0)
    assert result.messages == [history[-1]]


def test_the_summary_stands_for_what_is_dropped_after_the_item_only():
    history = responses_history()
    at = history.index(compaction_item(1))
    seen: List[List[Any]] = []

    def summarize(dropped: List[Any]) -> str:
        seen.append(dropped)
        return "earlier turns"

    # Only the part before the item goes: nothing for a summary to stand for.
    result = compact_with_summary(history, max_tokens=total(history[at:]), summarize=summarize)
    assert seen == []
    assert result.summary is None
    assert result.messages == history[at:]
    # More goes: the summary is of the messages after the item's head only.
    result = compact_with_summary(history, max_tokens=120, keep_tail=2, summarize=summarize)
    [dropped] = seen
    assert all(history.index(m) > at for m in dropped)
    assert result.messages[0] is history[at]
    assert result.messages[1] == {"role": "user", "content": "earlier turns"}
    # The summary's own tokens may push the cut on: more goes after those.
    assert result.dropped[: at + len(dropped)] == history[:at] + dropped


def test_explain_rows_name_the_compaction_item():
    history = responses_history()
    at = history.index(compaction_item(1))
    plan = prepare(
        history, max_tokens=150, count_tokens=None, keep_head=0, keep_tail=2, target_tokens=None
    )
    rows = plan.rows(0, 2)
    assert {r.reason for r in rows[:at]} == {"before the latest compaction item"}
    assert all(r.status == "dropped" for r in rows[:at])
    assert rows[at].reason == "latest compaction item (group kept whole)"
    assert rows[at].status == "kept"


def test_the_command_line_drops_what_precedes_the_item(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    history = responses_history()
    at = history.index(compaction_item(1))
    path = tmp_path / "items.json"
    path.write_text(json.dumps(history), encoding="utf-8")
    budget = str(total(history[at:]))
    assert main([str(path), "--max-tokens", budget, "--keep-tail", "2", "--explain"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == history[at:]
    assert "dropped: before the latest compaction item" in err
    # The plain path (indented output) decides the same.
    assert main([str(path), "--max-tokens", budget, "--keep-tail", "2", "--indent", "2"]) == 0
    assert json.loads(capsys.readouterr().out) == history[at:]


def test_the_middleware_decides_as_the_core_does():
    history = responses_history()
    options: Dict[str, Any] = {"max_tokens": 200, "keep_tail": 2}
    ask = budgeted(**options)(lambda messages: messages)
    expected = compact(history, **options)
    with CompactingSession() as session:
        for _ in range(2):
            assert ask(copy.deepcopy(history)) == expected.messages
            event = session.events[-1]
            assert list(event.dropped) == expected.dropped
            assert event.tokens_after == expected.tokens_after


# --- the Anthropic compaction block --------------------------------------------------


def anthropic_history() -> List[Message]:
    history: List[Message] = [{"role": "user", "content": "Refactor the module."}]
    for turn in range(3):
        history += [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"t{turn}", "name": "read", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": f"t{turn}", "content": "x" * 80}
                ],
            },
        ]
    history += [
        {
            "role": "assistant",
            "content": [
                {"type": "compaction", "content": "Summary: read three files. " * 4},
                {"type": "tool_use", "id": "t9", "name": "read", "input": {}},
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t9", "content": "y"}]},
        {"role": "assistant", "content": "Done reading."},
        {"role": "user", "content": "Now write the tests." * 4},
    ]
    return history


@pytest.mark.parametrize("budget", [1, 80, 160, 300])
@pytest.mark.parametrize("keep_head", [0, 1])
def test_an_anthropic_compaction_block_restarts_the_conversation(budget, keep_head):
    history = anthropic_history()
    at = 7  # the assistant message holding the block, answered by the next message
    assert history[at]["content"][0]["type"] == "compaction"
    assert total(history) > budget
    result = compact(history, max_tokens=budget, keep_head=keep_head, keep_tail=1)
    assert result.messages[:2] == history[at : at + 2]  # never split from its tool_result
    assert result.messages[0] is history[at]
    assert result.dropped[:at] == history[:at]
    assert check_pairing(result.messages) == []
    anthropic_ok(result.messages)


# --- calls awaiting their results at the end -----------------------------------------


def test_chat_calls_awaiting_results_are_kept_whatever_keep_tail_says():
    calling = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": f"c{k}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            for k in (1, 2)
        ],
    }
    history = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "x" * 400},
        calling,
        {"role": "tool", "tool_call_id": "c1", "content": "one"},
    ]
    result = compact(history, max_tokens=10, keep_head=1, keep_tail=0)
    assert result.messages == [history[0], calling, history[3]]
    rows = prepare(
        history, max_tokens=10, count_tokens=None, keep_head=1, keep_tail=0, target_tokens=None
    ).rows(1, 0)
    assert [r.reason for r in rows[2:]] == ["tail (calls awaiting their results)"] * 2
    # The providers refuse such a request (a call's result is missing): still reported.
    assert [p.code for p in check_pairing(result.messages)] == ["missing_tool_results"]
    with pytest.raises(RequestRejected):
        validate_chat_completions({"model": "m", "messages": result.messages})


def test_parallel_responses_calls_awaiting_outputs_are_kept_together():
    history = [item("q " * 200), item("go"), call("a"), call("b")]
    result = compact(history, max_tokens=5, keep_head=0, keep_tail=1)
    assert result.messages == [history[2], history[3]]


def test_an_approval_request_awaiting_its_human_is_kept():
    request = {
        "type": "mcp_approval_request",
        "id": "mcpr_1",
        "server_label": "deploy",
        "name": "ship",
        "arguments": "{}",
    }
    history = [item("q " * 200), request]
    assert compact(history, max_tokens=5, keep_head=0, keep_tail=0).messages == [request]


def test_an_anthropic_tool_use_awaiting_its_result_is_kept():
    uses = {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}],
    }
    history = [{"role": "user", "content": "x" * 400}, uses]
    assert compact(history, max_tokens=5, keep_head=0, keep_tail=0).messages == [uses]


def test_answered_calls_at_the_end_are_not_kept_past_keep_tail():
    history = [item("q " * 200), call("a"), output("a")]
    assert compact(history, max_tokens=5, keep_head=0, keep_tail=0).messages == []


# --- properties over generated histories ---------------------------------------------


@st.composite
def responses_histories(draw: st.DrawFn) -> List[Message]:
    """Responses inputs: messages, calls answered later or never, compaction items,
    and calls or approvals left waiting at the end."""
    items: List[Message] = []
    open_calls: List[str] = []
    for n in range(draw(st.integers(0, 14))):
        kind = draw(st.sampled_from(["message", "call", "output", "compaction"]))
        if kind == "message":
            items.append(item("m" * draw(st.integers(0, 60))))
        elif kind == "call":
            open_calls.append(f"c{n}")
            items.append(call(f"c{n}"))
        elif kind == "output" and open_calls:
            items.append(output(open_calls.pop(draw(st.integers(0, len(open_calls) - 1)))))
        elif kind == "compaction":
            items.append(compaction_item(n))
    for call_id in open_calls:  # answered, unless left waiting at the very end
        if not draw(st.booleans()):
            items.append(output(call_id))
    if draw(st.booleans()):
        items.append(call("waiting"))
    return items


@settings(max_examples=examples(250), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(responses_histories(), st.integers(1, 500), st.integers(0, 3), st.integers(0, 4))
def test_generated_responses_histories(items, budget, keep_head, keep_tail):
    result = compact(items, max_tokens=budget, keep_head=keep_head, keep_tail=keep_tail)
    kept = result.messages
    restarts: List[int] = []
    bounds = measure(items, None, restarts)[1]
    if restarts and result.dropped:
        latest = items[restarts[-1]]
        assert any(m is latest for m in kept)
        # Everything before the item's group goes (a call answered after it stays).
        start = max(b for b in bounds if b <= restarts[-1])
        assert all(any(m is d for d in result.dropped) for m in items[:start])
    if items and items[-1] == call("waiting") and result.dropped:
        assert kept[-1] is items[-1]
    for history in (items, kept):
        try:
            responses_ok(history)
        except RequestRejected:
            accepted = False
        else:
            accepted = True
        # What the provider refuses, check_pairing reports (and the other way round).
        assert accepted == (check_pairing(history) == [])
    waiting_only = all(p.ids == ("waiting",) for p in check_pairing(items))
    if waiting_only:
        assert all(p.ids == ("waiting",) for p in check_pairing(kept))


@st.composite
def anthropic_histories(draw: st.DrawFn) -> List[Message]:
    """Anthropic turns: text, tool loops (a compaction block sometimes opening the calling
    turn), and a tool_use left waiting at the end."""
    messages: List[Message] = [{"role": "user", "content": "task " * draw(st.integers(1, 20))}]
    for n in range(draw(st.integers(0, 8))):
        blocks: List[Message] = []
        if draw(st.booleans()):
            blocks.append({"type": "compaction", "content": f"summary {n} " * 5})
        blocks.append({"type": "tool_use", "id": f"t{n}", "name": "f", "input": {}})
        result = {
            "type": "tool_result",
            "tool_use_id": f"t{n}",
            "content": "r" * draw(st.integers(0, 80)),
        }
        messages += [
            {"role": "assistant", "content": blocks},
            {"role": "user", "content": [result]},
        ]
    if draw(st.booleans()):
        waiting = {"type": "tool_use", "id": "waiting", "name": "f", "input": {}}
        messages.append({"role": "assistant", "content": [waiting]})
    return messages


@settings(max_examples=examples(250), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(anthropic_histories(), st.integers(1, 500), st.integers(0, 3), st.integers(0, 4))
def test_generated_anthropic_histories(messages, budget, keep_head, keep_tail):
    result = compact(messages, max_tokens=budget, keep_head=keep_head, keep_tail=keep_tail)
    kept = result.messages
    holding = [
        i
        for i, m in enumerate(messages)
        if m["role"] == "assistant" and any(b["type"] == "compaction" for b in m["content"])
    ]
    if holding and result.dropped:
        assert kept[0] is messages[holding[-1]]
        assert kept[1] is messages[holding[-1] + 1]  # its tool_result, never split from it
    waits = messages[-1]["role"] == "assistant"
    if waits and result.dropped:
        assert kept[-1] is messages[-1]
    for history in (messages, kept):
        if not history:
            continue
        try:
            anthropic_ok(history)
        except RequestRejected:
            accepted = False
        else:
            accepted = True
        assert accepted == (check_pairing(history) == [])


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(responses_histories(), st.integers(1, 500), st.integers(0, 3))
def test_clearing_generated_responses_histories(items, budget, keep):
    cleared = clear_tool_results(items, max_tokens=budget, keep=keep).messages
    for before, after in zip(items, cleared):
        if before.get("type") == "compaction":
            assert after is before  # passed through, never a copy
    try:
        responses_ok(items)
    except RequestRejected:
        return
    responses_ok(cleared)


def test_gemini_and_bedrock_calls_awaiting_results_are_kept_where_the_turn_may_resume():
    bedrock = [
        {"role": "user", "content": [{"text": "x" * 400}]},
        {"role": "assistant", "content": [{"text": "ok"}]},
        {"role": "user", "content": [{"text": "go"}]},
        {
            "role": "assistant",
            "content": [{"toolUse": {"toolUseId": "t", "name": "f", "input": {}}}],
        },
    ]
    assert compact(bedrock, max_tokens=10, keep_head=0, keep_tail=0).messages == bedrock[2:]
    gemini = [
        {"role": "user", "parts": [{"text": "x" * 400}]},
        {"role": "model", "parts": [{"text": "ok"}]},
        {"role": "user", "parts": [{"text": "go"}]},
        {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}}}]},
    ]
    assert compact(gemini, max_tokens=10, keep_head=0, keep_tail=0).messages == gemini[2:]


def test_a_call_followed_by_an_answer_to_something_else_is_not_taken_as_waiting():
    # The output answers no call after the last message: broken input, left as the
    # specification decides it (keep_tail=0 keeps nothing).
    history = [item("q " * 200), call("a"), output("elsewhere")]
    assert compact(history, max_tokens=5, keep_head=0, keep_tail=0).messages == []
    # A call answered later in the run keeps its group, and the call still waiting in it.
    history = [item("q " * 200), call("a"), call("b"), output("a")]
    assert compact(history, max_tokens=5, keep_head=0, keep_tail=0).messages == history[1:]


def test_the_middleware_summary_stands_for_what_goes_after_the_item():
    history = responses_history()
    at = history.index(compaction_item(1))
    given: List[List[Any]] = []

    def summarize(dropped: List[Any]) -> str:
        given.append(list(dropped))
        return f"{len(dropped)} items before"

    ask = budgeted(max_tokens=120, keep_tail=2, summarize=summarize)(lambda messages: messages)
    with CompactingSession() as session:
        sent = ask(history)
        event = session.events[-1]
    # The call goes out with the summary of its own cut: everything it drops after the
    # item's head; what precedes the item is dropped too, unsummarised.
    assert sent[0] is history[at]
    assert sent[1] == {"role": "user", "content": f"{len(given[-1])} items before"}
    assert list(event.dropped) == history[:at] + given[-1]
    assert all(history.index(m) > at for m in given[-1])
