"""Ollama's native tool messages: calls without ids answered by ``tool`` messages in order.

Grouping, the pairing check, compaction at several budgets, ``--explain`` rows, the
session cache's increments and the command line, against the testing kit's own
independent reading of how Ollama pairs them (``ctx_compact.testing.ollama``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest
from helpers import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctx_compact import check_pairing, clear_tool_results, compact
from ctx_compact._contract import group_bounds
from ctx_compact.cli import main
from ctx_compact.testing import ollama

Message = Dict[str, Any]


def call(name: str, city: str = "Paris") -> Message:
    return {"function": {"name": name, "arguments": {"city": city}}}


def calls(*names: str) -> Message:
    return {"role": "assistant", "content": "", "tool_calls": [call(n) for n in names]}


def result(content: str, tool_name: Optional[str] = None) -> Message:
    message: Message = {"role": "tool", "content": content}
    if tool_name is not None:
        message["tool_name"] = tool_name
    return message


def agent_loop(turns: int) -> List[Message]:
    """An Ollama agent's history: each turn a question, parallel calls, their results, a reply."""
    messages: List[Message] = [{"role": "system", "content": "You answer with the tools."}]
    for turn in range(turns):
        messages.append({"role": "user", "content": f"Weather and time in city {turn}?"})
        messages.append(calls("get_weather", "get_time"))
        messages.append(result(f"{{'temp': {turn}}} " * 8, "get_weather"))
        messages.append(result(f"{turn}:00 " * 8, "get_time"))
        messages.append({"role": "assistant", "content": f"It is warm in city {turn}."})
    return messages


def test_a_valid_ollama_history_has_no_pairing_problems():
    history = agent_loop(12)
    assert ollama.validate_messages(history) == []
    assert check_pairing(history) == []


def test_calls_and_their_results_are_one_group():
    history = agent_loop(2)
    # system, then per turn: user | assistant + two tool messages | reply.
    assert group_bounds(history) == [0, 1, 2, 5, 6, 7, 10, 11]


def test_results_pair_by_tool_name_in_any_order_and_by_position_without_one():
    history = [
        {"role": "user", "content": "go"},
        calls("a", "b", "c"),
        result("b", "b"),
        result("first open call: a"),
        result("c", "c"),
    ]
    assert group_bounds(history) == [0, 1, 5]
    assert check_pairing(history) == []
    assert ollama.validate_messages(history) == []


def test_an_id_less_result_with_no_call_before_it_is_an_orphan():
    history = [{"role": "user", "content": "go"}, result("stray", "get_weather")]
    [problem] = check_pairing(history)
    assert (problem.index, problem.code, problem.provider) == (1, "orphan_tool_result", "ollama")
    assert problem.ids == ("get_weather",)
    assert "no assistant message with 'tool_calls' opens its run" in problem.message
    assert group_bounds(history) == [0, 1, 2]


def test_a_result_beyond_the_calls_or_naming_another_tool_answers_nothing():
    history = [calls("a"), result("a"), result("one too many"), result("x", "other")]
    problems = check_pairing(history)
    assert [(p.index, p.code, p.provider) for p in problems] == [
        (2, "orphan_tool_result", "ollama"),
        (3, "orphan_tool_result", "ollama"),
    ]
    assert "no unanswered id-less call of 'other'" in problems[1].message
    # Neither joins the call's group: each can be dropped alone.
    assert group_bounds(history) == [0, 2, 3, 4]
    assert [p.index for p in ollama.validate_messages(history)] == [2, 3]


def test_unanswered_id_less_calls_are_reported_by_their_tool_names():
    history = [calls("a", "b"), result("a", "a"), {"role": "user", "content": "next"}]
    [problem] = check_pairing(history)
    assert (problem.index, problem.code, problem.provider) == (0, "missing_tool_results", "ollama")
    assert problem.ids == ("b",)


def test_mixed_calls_pair_each_by_its_own_kind():
    # One assistant message with a call that has an id and one that has none: the id is
    # answered only by its tool_call_id, the id-less call only by a message without one.
    mixed = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "a", "arguments": "{}"}},
            call("b"),
        ],
    }
    answered = [mixed, result("b"), {"role": "tool", "tool_call_id": "call_1", "content": "a"}]
    assert check_pairing(answered) == []
    assert group_bounds(answered) == [0, 3]
    assert ollama.validate_messages(answered) == []
    # The id-less answer does not answer the call with an id, which stays unanswered.
    half = [mixed, result("a", "a")]
    codes = [(p.code, p.provider, p.ids) for p in check_pairing(half)]
    assert codes == [
        ("missing_tool_results", "openai", ("call_1",)),
        ("missing_tool_results", "ollama", ("b",)),
        ("orphan_tool_result", "ollama", ("a",)),
    ]
    assert len(ollama.validate_messages(half)) == 3


@pytest.mark.parametrize("max_tokens", [60, 150, 300, 600, 1200, 2500])
@pytest.mark.parametrize("keep_tail", [0, 1, 2, 4])
def test_no_compaction_of_an_agent_loop_sends_a_result_without_its_call(max_tokens, keep_tail):
    history = agent_loop(16)
    for length in range(2, len(history) + 1):
        prompt = history[:length]
        kept = compact(prompt, max_tokens=max_tokens, keep_head=1, keep_tail=keep_tail).messages
        # Compaction adds no problem to what the prompt had (a loop cut mid-turn has
        # calls still waiting for results).
        assert len(ollama.validate_messages(kept)) <= len(ollama.validate_messages(prompt))
        assert not [p for p in check_pairing(kept) if p.code == "orphan_tool_result"]


def test_explain_rows_show_the_calls_and_results_as_one_group(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    path = tmp_path / "ollama.json"
    path.write_text(json.dumps(agent_loop(3)), encoding="utf-8")
    assert main([str(path), "--max-tokens", "200", "--keep-tail", "2", "--explain"]) == 0
    rows = [line.split() for line in capsys.readouterr().err.splitlines()[2:]]
    groups = {row[0]: row[3] for row in rows if row and row[0].isdigit()}
    assert groups["2"] == groups["3"] == groups["4"] == "2-4"
    assert groups["7"] == groups["8"] == groups["9"] == "7-9"


def test_the_command_lines_check_finds_nothing_in_a_valid_history(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    path = tmp_path / "ollama.json"
    path.write_text(json.dumps(agent_loop(4)), encoding="utf-8")
    assert main(["check", str(path)]) == 0
    assert capsys.readouterr().out == ""


# --- generated histories ---------------------------------------------------------


@st.composite
def ollama_histories(draw: st.DrawFn) -> List[Message]:
    """Ollama histories: parallel id-less calls answered in order or by name, some results
    missing, repeated or stray, some calls left waiting at the end."""
    messages: List[Message] = [{"role": "system", "content": "tools"}]
    tools = ["get_weather", "get_time", "search"]
    for _ in range(draw(st.integers(0, 10))):
        kind = draw(st.sampled_from(["plain", "plain", "exchange", "exchange", "stray"]))
        if kind == "plain":
            role = draw(st.sampled_from(["user", "assistant"]))
            messages.append({"role": role, "content": "x" * draw(st.integers(0, 80))})
        elif kind == "exchange":
            names = draw(st.lists(st.sampled_from(tools), min_size=1, max_size=3))
            messages.append(calls(*names))
            answers = draw(st.permutations(names))[: draw(st.integers(0, len(names) + 1))]
            for name in answers:
                named = draw(st.booleans())
                content = "r" * draw(st.integers(0, 60))
                messages.append(result(content, name if named else None))
        else:
            messages.append(result("stray", draw(st.sampled_from([*tools, None]))))
    return messages


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ollama_histories(),
    st.integers(1, 400),
    st.integers(0, 3),
    st.integers(0, 5),
)
def test_generated_histories_compact_without_new_problems(messages, max_tokens, head, tail):
    before = ollama.validate_messages(messages)
    kept = compact(messages, max_tokens=max_tokens, keep_head=head, keep_tail=tail).messages
    if not before:
        assert ollama.validate_messages(kept) == []
    # What the validator finds, check_pairing finds too, at the same messages.
    for history in (messages, kept):
        flagged = {p.index for p in check_pairing(history)}
        assert {p.index for p in ollama.validate_messages(history)} <= flagged


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ollama_histories(), st.integers(1, 400), st.integers(0, 3))
def test_clearing_generated_histories_keeps_the_pairing(messages, max_tokens, keep):
    before = ollama.validate_messages(messages)
    cleared = clear_tool_results(messages, max_tokens=max_tokens, keep=keep)
    assert ollama.validate_messages(cleared.messages) == before
    assert [(p.index, p.code) for p in check_pairing(cleared.messages)] == [
        (p.index, p.code) for p in check_pairing(messages)
    ]
