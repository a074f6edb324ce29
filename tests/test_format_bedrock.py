"""Bedrock Converse messages: grouping, pairing in Bedrock's words, where a cut may resume,
clearing.

Plain dicts, as boto3 takes them. The property tests check every result against
the testing kit's independent validator
(``ctx_compact.testing.bedrock.validate_messages``).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Dict, List

import pytest
from helpers import examples
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ctx_compact import (
    ClearedThinking,
    InvalidMessageError,
    check_pairing,
    clear_thinking,
    clear_tool_results,
    compact,
    compact_with_summary,
    estimate_tokens,
)
from ctx_compact._grouping import group_bounds
from ctx_compact.cli import main
from ctx_compact.testing import bedrock as kit
from middleware import CompactingSession, budgeted

Message = Dict[str, Any]
PROPERTY = settings(
    max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
PAIRING_STARTS = ("A conversation must", "The number of toolResult", "Expected toolResult")


def text(role: str, words: str = "hello there") -> Message:
    return {"role": role, "content": [{"text": words}]}


def using(*ids: str, reasoning: bool = False) -> Message:
    content: List[Any] = []
    if reasoning:
        content.append({"reasoningContent": {"reasoningText": {"text": "hm", "signature": "s"}}})
    for use_id in ids:
        content.append({"toolUse": {"toolUseId": use_id, "name": f"tool_{use_id}", "input": {}}})
    return {"role": "assistant", "content": content}


def answering(*ids: str, size: int = 40, status: str = "success") -> Message:
    return {
        "role": "user",
        "content": [
            {"toolResult": {"toolUseId": i, "content": [{"text": "x" * size}], "status": status}}
            for i in ids
        ],
    }


# --- grouping -------------------------------------------------------------------


def test_a_tool_use_message_stays_with_its_results() -> None:
    messages = [
        text("user"),
        using("a", "b", reasoning=True),
        answering("b", "a"),
        text("assistant"),
    ]
    assert group_bounds(messages) == [0, 1, 3, 4]
    assert check_pairing(messages) == []


def test_results_answering_none_of_the_previous_uses_join_nothing() -> None:
    messages = [text("user"), using("a"), answering("z")]
    assert group_bounds(messages) == [0, 1, 2, 3]


def test_wire_json_is_read_as_sent() -> None:
    wire = json.dumps([text("user"), using("a"), answering("a")])
    assert group_bounds(json.loads(wire)) == [0, 1, 3]


# --- pairing, in Bedrock's words ---------------------------------------------------


def test_results_beyond_the_previous_turns_uses_are_reported() -> None:
    problems = check_pairing([text("user"), text("assistant"), answering("a")])
    assert [(p.index, p.code, p.provider, p.message) for p in problems] == [
        (2, "too_many_tool_results", "bedrock", kit.EXCESS_RESULTS.format(index=2))
    ]


def test_unanswered_uses_are_reported_at_the_next_message() -> None:
    problems = check_pairing([text("user"), using("a", "b"), answering("a"), text("assistant")])
    assert [(p.index, p.ids, p.message) for p in problems] == [
        (2, ("b",), kit.MISSING_RESULTS.format(index=2, ids="b"))
    ]


def test_the_first_message_and_alternation_are_reported() -> None:
    problems = check_pairing([text("assistant"), text("user"), text("user")])
    assert [(p.index, p.message) for p in problems] == [
        (0, kit.START_WITH_USER),
        (2, kit.ALTERNATE),
    ]


def test_an_unfinished_call_at_the_end_is_reported_at_the_call() -> None:
    problems = check_pairing([text("user"), using("a")])
    assert [(p.index, p.message) for p in problems] == [
        (1, kit.MISSING_RESULTS.format(index=2, ids="a"))
    ]


@pytest.mark.parametrize(
    ("message", "named"),
    [
        ({"role": "user", "content": using("a")["content"]}, ["'toolUse' blocks"]),
        ({"role": "assistant", "content": answering("a")["content"]}, ["'toolResult' blocks"]),
        (
            {"role": "assistant", "content": [*using("a")["content"], {"type": "tool_use"}]},
            ["'toolUse' blocks", "'tool_use' blocks", "anthropic and bedrock"],
        ),
        (
            {"role": "user", "content": answering("a")["content"], "parts": [{"functionCall": {}}]},
            ["'toolResult' blocks", "gemini"],
        ),
    ],
)
def test_tool_blocks_the_api_refuses_are_refused_naming_index_and_keys(
    message: Message, named: List[str]
) -> None:
    for call in (check_pairing, lambda m: compact(m, max_tokens=1)):
        with pytest.raises(InvalidMessageError) as caught:
            call([text("user"), message])
        assert caught.value.index == 1
        for name in named:
            assert name in caught.value.reason


# --- where a cut may resume ---------------------------------------------------------


def loop(turns: int, size: int = 200) -> List[Message]:
    messages = [text("user", "start")]
    for n in range(turns):
        messages += [using(f"u{n}"), answering(f"u{n}", size=size)]
    return messages


def test_the_cut_resumes_with_an_assistant_message_after_a_user_head() -> None:
    result = compact(loop(8), max_tokens=300)
    assert result.dropped
    assert result.messages[1]["role"] == "assistant"
    assert kit.validate_messages(result.messages) == []


def test_without_a_head_the_conversation_resumes_at_a_user_message() -> None:
    messages = [text("user", "start")]
    for n in range(8):
        messages += [text("assistant", "a" * 200), text("user", f"question {n}")]
    result = compact(messages, max_tokens=300, keep_head=0)
    assert result.dropped
    assert result.messages[0]["role"] == "user"
    assert kit.validate_messages(result.messages) == []


def test_with_no_cut_the_provider_takes_the_result_does_not_fit() -> None:
    # After a user head only an assistant message may follow, and the tail starts with a user.
    messages = [text("user", "x" * 800), text("assistant", "y" * 800), text("user"), using("a")]
    messages += [answering("a")]
    result = compact(messages, max_tokens=20, keep_head=1, keep_tail=3)
    assert result.messages == messages
    assert not result.fits


def test_the_summary_joins_a_user_head_as_one_more_text_block() -> None:
    messages = loop(8)
    result = compact_with_summary(messages, max_tokens=400, summarize=lambda d: "earlier")
    assert result.messages[0] == {
        "role": "user",
        "content": [{"text": "start"}, {"text": "earlier"}],
    }
    assert messages[0] == text("user", "start")
    assert result.messages[1]["role"] == "assistant"
    assert result.summary == "earlier"
    assert kit.validate_messages(result.messages) == []


def test_the_summary_counts_as_what_it_adds_to_the_head() -> None:
    messages = loop(8)
    result = compact_with_summary(messages, max_tokens=400, summarize=lambda d: "earlier")
    assert result.tokens_after == sum(estimate_tokens(m) for m in result.messages)


# --- clearing -------------------------------------------------------------------------


def test_clearing_writes_the_placeholder_as_one_text_block() -> None:
    messages = loop(3, size=400)
    before = copy.deepcopy(messages)
    result = clear_tool_results(messages, max_tokens=100, keep=1, clear_inputs=True)
    assert messages == before
    assert [(c.index, c.call_id, c.tool, c.call_index) for c in result.cleared] == [
        (2, "u0", "tool_u0", 1),
        (4, "u1", "tool_u1", 3),
    ]
    block = result.messages[2]["content"][0]["toolResult"]
    assert block == {"toolUseId": "u0", "content": [{"text": "[cleared]"}], "status": "success"}
    assert result.messages[1]["content"][0]["toolUse"]["input"] == {}
    assert result.messages[6] is messages[6]
    assert kit.validate_messages(result.messages) == []
    assert clear_tool_results(result.messages, max_tokens=100, keep=1).cleared == []


# --- properties --------------------------------------------------------------------


@st.composite
def histories(draw: st.DrawFn, pending: bool = True) -> List[Message]:
    """Valid conversations: parallel tool uses, reasoning blocks, error results, text turns;
    with ``pending``, maybe an unfinished call at the end (which Bedrock rejects as it
    stands: its results are due in the next message)."""
    messages: List[Message] = [text("user", "q" * draw(st.integers(1, 200)))]
    for n in range(draw(st.integers(0, 10))):
        if draw(st.integers(0, 3)):
            ids = [f"t{n}_{k}" for k in range(draw(st.integers(1, 3)))]
            messages.append(using(*ids, reasoning=draw(st.booleans())))
            order = draw(st.permutations(ids))
            status = draw(st.sampled_from(["success", "error"]))
            messages.append(answering(*order, size=draw(st.integers(1, 300)), status=status))
        else:
            messages += [text("assistant", "a" * draw(st.integers(1, 200))), text("user")]
    if pending and draw(st.booleans()):
        messages.append(using("pending"))
    else:
        assert kit.validate_messages(messages) == []
    return messages


def _beyond_the_end(problems: List[Any], messages: List[Message]) -> List[Any]:
    """The problems but one: Bedrock's for a call still awaiting its result at the end."""
    end = [p for p in problems if p.index == len(messages) and messages[-1] == using("pending")]
    return [p for p in problems if p not in end]


keeps = st.integers(0, 5)
budgets = st.integers(1, 1500)


@PROPERTY
@given(histories(), budgets, keeps, keeps)
def test_no_compaction_the_validator_rejects(
    messages: List[Message], budget: int, keep_head: int, keep_tail: int
) -> None:
    before = copy.deepcopy(messages)
    options: Dict[str, Any] = {"max_tokens": budget, "keep_head": keep_head}
    options["keep_tail"] = keep_tail
    plain = compact(messages, **options)
    summarised = compact_with_summary(messages, summarize=lambda d: f"{len(d)} gone", **options)
    for result in (plain, summarised):
        if result.messages:  # an empty request is no pairing question
            problems = kit.validate_messages(result.messages)
            assert _beyond_the_end(problems, result.messages) == []
        assert result.fits == (result.tokens_after <= budget)
    assert messages == before


@PROPERTY
@given(histories(), budgets, st.integers(0, 3), st.booleans())
def test_no_clearing_the_validator_rejects(
    messages: List[Message], budget: int, keep: int, inputs: bool
) -> None:
    before = copy.deepcopy(messages)
    result = clear_tool_results(messages, max_tokens=budget, keep=keep, clear_inputs=inputs)
    assert _beyond_the_end(kit.validate_messages(result.messages), result.messages) == []
    assert group_bounds(result.messages) == group_bounds(messages)
    assert messages == before


@PROPERTY
@given(st.data())
def test_check_pairing_flags_what_the_validator_rejects(data: st.DataObject) -> None:
    messages = data.draw(histories())
    gone = data.draw(st.sets(st.integers(0, len(messages) - 1)))
    damaged = [m for i, m in enumerate(messages) if i not in gone]
    assume(damaged)
    # The kit numbers a call's missing results at the end past the list; check_pairing
    # reports them at the call.
    n = len(damaged)
    rejected = {(min(p.index, n - 1), p.message) for p in kit.validate_messages(damaged)}
    flagged = {(p.index, p.message) for p in check_pairing(damaged)}
    assert flagged == rejected


# --- every place that cuts: the command line and the middleware --------------------


@pytest.mark.parametrize("indent", ["0", "2"])
def test_the_command_line_cuts_where_bedrock_resumes(
    indent: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "messages.json"
    path.write_text(json.dumps(loop(8)), encoding="utf-8")
    assert main([str(path), "--max-tokens", "300", "--indent", indent]) == 0
    kept = json.loads(capsys.readouterr().out)
    assert len(kept) < 17
    assert kit.validate_messages(kept) == []


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"summarize": lambda dropped: f"{len(dropped)} messages earlier"},
        {"summarize": lambda dropped: "earlier", "clear_tool_results": True},
        {"clear_tool_results": True, "target_tokens": 250},
    ],
)
def test_the_middleware_in_a_session_cuts_where_bedrock_resumes(
    options: Dict[str, Any],
) -> None:
    ask = budgeted(max_tokens=400, **options)(lambda messages: messages)
    messages = loop(0)
    with CompactingSession() as session:
        for n in range(20):
            sent = ask(messages)
            assert kit.validate_messages(sent) == []
            messages = [*messages, using(f"g{n}"), answering(f"g{n}", size=150)]
    assert any(event.dropped or event.cleared_results for event in session.events)


# --- clearing thinking ------------------------------------------------------------------

SIGNED = {"reasoningContent": {"reasoningText": {"text": "hm", "signature": "s"}}}
REDACTED = {"reasoningContent": {"redactedContent": "cmVkYWN0ZWQ="}}


def reasoning_turns(turns: int, *, open_loop: bool = False) -> List[Message]:
    """``turns`` turns, each a question, a tool use with reasoning, its result, an answer with
    redacted reasoning; with ``open_loop``, the last turn ends at its result."""
    messages: List[Message] = []
    for t in range(turns):
        messages += [text("user", f"Question {t}?"), using(f"u{t}", reasoning=True)]
        messages.append(answering(f"u{t}"))
        if not (open_loop and t == turns - 1):
            messages.append({"role": "assistant", "content": [REDACTED, {"text": f"Answer {t}."}]})
    return messages


def reasoning_at(messages: List[Any]) -> List[int]:
    return [i for i, m in enumerate(messages) if any("reasoningContent" in b for b in m["content"])]


def test_reasoning_blocks_of_earlier_turns_are_cleared() -> None:
    messages = reasoning_turns(3)
    before = copy.deepcopy(messages)
    result = clear_thinking(messages)
    assert result.cleared == [ClearedThinking(i, "reasoningContent", 0) for i in (1, 3, 5, 7)]
    assert reasoning_at(result.messages) == [9, 11]  # the last turn keeps its reasoning
    assert result.messages[1] == {"role": "assistant", "content": messages[1]["content"][1:]}
    assert result.messages[1]["content"][0] is messages[1]["content"][1]
    assert [m is o for m, o in zip(result.messages, messages)].count(False) == 4
    assert messages == before
    assert kit.validate_messages(result.messages) == []
    assert check_pairing(result.messages) == []
    assert result.tokens_after == sum(map(estimate_tokens, result.messages))
    assert result.tokens_after < result.tokens_before
    assert clear_thinking(result.messages).cleared == []


def test_a_tool_result_message_opens_no_turn() -> None:
    messages = reasoning_turns(1)  # one question: its tool use, the result and the answer
    assert clear_thinking(messages).cleared == []
    assert [c.index for c in clear_thinking(messages, keep_turns=0).cleared] == [1, 3]


def test_a_bedrock_tool_loop_in_progress_keeps_its_reasoning_whatever_keep_turns_says() -> None:
    # Bedrock, as Anthropic, wants the reasoning of the assistant turn whose tool uses the
    # results answer, while the loop goes on.
    looping = reasoning_turns(2, open_loop=True)
    for messages in (looping, looping[:-1]):  # at the results, and at the use awaiting them
        result = clear_thinking(messages, keep_turns=0)
        assert [c.index for c in result.cleared] == [1, 3]
        assert reasoning_at(result.messages) == [5]
    assert kit.validate_messages(clear_thinking(looping, keep_turns=0).messages) == []


def test_a_message_of_reasoning_alone_is_left_whole() -> None:
    alone = {"role": "assistant", "content": [SIGNED]}
    messages = [text("user", "Hm?"), alone, text("user", "Well?")]
    assert clear_thinking(messages, keep_turns=0).cleared == []
    # It still counts as a turn holding reasoning: keep_turns=1 keeps it, not an older one.
    older = [*reasoning_turns(1), *messages]
    assert [c.index for c in clear_thinking(older).cleared] == [1, 3]


def test_max_tokens_clears_reasoning_only_as_far_as_needed() -> None:
    messages = reasoning_turns(3)
    total = sum(map(estimate_tokens, messages))
    assert clear_thinking(messages, max_tokens=total).cleared == []
    result = clear_thinking(messages, max_tokens=total - 1)
    assert [c.index for c in result.cleared] == [1]
    assert result.fits


@st.composite
def reasoning_histories(draw: st.DrawFn) -> List[Message]:
    """``histories`` whose text answers may carry reasoning too: beside their text or alone."""
    messages = []
    for message in draw(histories()):
        if message["role"] == "assistant" and not kit.tool_uses(message):
            kind = draw(st.sampled_from(["none", "signed", "redacted", "alone"]))
            if kind == "signed":
                message = {**message, "content": [SIGNED, *message["content"]]}
            elif kind == "redacted":
                message = {**message, "content": [REDACTED, SIGNED, *message["content"]]}
            elif kind == "alone":
                message = {**message, "content": [SIGNED]}
        messages.append(message)
    return messages


def _last_loop(messages: List[Message]) -> List[int]:
    """The messages of the last turn when its last assistant message uses tools, else none."""
    opens = [i for i, m in enumerate(messages) if m["role"] == "user" and not kit.tool_results(m)]
    start = opens[-1] if opens else 0
    replies = [i for i in range(start, len(messages)) if messages[i]["role"] == "assistant"]
    if replies and kit.tool_uses(messages[replies[-1]]):
        return list(range(start, len(messages)))
    return []


@PROPERTY
@given(reasoning_histories(), st.integers(0, 3), st.one_of(st.none(), budgets))
def test_no_thinking_clearing_the_validator_rejects(
    messages: List[Message], keep_turns: int, budget: Any
) -> None:
    before = copy.deepcopy(messages)
    result = clear_thinking(messages, keep_turns=keep_turns, max_tokens=budget)
    assert _beyond_the_end(kit.validate_messages(result.messages), result.messages) == (
        _beyond_the_end(kit.validate_messages(messages), messages)
    )
    assert check_pairing(result.messages) == check_pairing(messages)
    assert group_bounds(result.messages) == group_bounds(messages)
    assert messages == before
    loop = _last_loop(messages)
    for i, (out, given_message) in enumerate(zip(result.messages, messages)):
        gone = {c.block for c in result.cleared if c.index == i}
        content = given_message["content"]
        assert all("reasoningContent" in content[k] for k in gone)
        # All of a message's reasoning goes at once: what is left never starts with text
        # after reasoning Bedrock would want first.
        assert not gone or not any("reasoningContent" in b for b in out["content"])
        assert out["content"] == [b for k, b in enumerate(content) if k not in gone]
        if i in loop:  # the tool loop in progress keeps its reasoning
            assert out is given_message
    assert result.tokens_after == sum(map(estimate_tokens, result.messages))
    if budget is None:
        assert clear_thinking(result.messages, keep_turns=keep_turns).cleared == []
