"""Gemini ``contents``: grouping, pairing in Gemini's words, where a cut may resume, clearing.

Plain dicts only (as decoded from the API's JSON); google-genai objects are
tested in tests/sdks/test_gemini_objects.py. The property tests check every
result against the testing kit's independent validator
(``ctx_compact.testing.gemini.validate_contents``).
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
from ctx_compact.testing import gemini as kit
from middleware import CompactingSession, budgeted

Content = Dict[str, Any]
PROPERTY = settings(
    max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
# What the kit reports for the function turns (the rest are the fields' own checks).
PAIRING = {kit.RESPONSE_NOT_AFTER_CALL, kit.CALL_NOT_AFTER_USER, kit.RESPONSE_COUNT}


def text(role: str, words: str = "hello there") -> Content:
    return {"role": role, "parts": [{"text": words}]}


def calling(*names: str, ids: bool = False, camel: bool = True) -> Content:
    key = "functionCall" if camel else "function_call"
    parts: List[Any] = []
    for k, name in enumerate(names):
        call: Dict[str, Any] = {"name": name, "args": {"city": "Oslo"}}
        if ids:
            call["id"] = f"id_{name}"
        part: Dict[str, Any] = {key: call}
        if k == 0:
            part["thoughtSignature" if camel else "thought_signature"] = "c2ln"
        parts.append(part)
    return {"role": "model", "parts": parts}


def answering(*names: str, ids: bool = False, camel: bool = True, size: int = 40) -> Content:
    key = "functionResponse" if camel else "function_response"
    parts = []
    for name in names:
        response: Dict[str, Any] = {"name": name, "response": {"output": "x" * size}}
        if ids:
            response["id"] = f"id_{name}"
        parts.append({key: response})
    return {"role": "user", "parts": parts}


# --- grouping -------------------------------------------------------------------


@pytest.mark.parametrize("camel", [True, False])
@pytest.mark.parametrize("ids", [True, False])
def test_a_call_turn_stays_with_the_response_turn(camel: bool, ids: bool) -> None:
    contents = [
        text("user"),
        calling("a", "b", ids=ids, camel=camel),
        answering("a", "b", ids=ids, camel=camel),
        text("model"),
    ]
    assert group_bounds(contents) == [0, 1, 3, 4]
    assert check_pairing(contents) == []


def test_responses_match_calls_by_id_in_any_order() -> None:
    contents = [text("user"), calling("a", "b", ids=True), answering("b", "a", ids=True)]
    assert group_bounds(contents) == [0, 1, 3]


def test_without_ids_a_response_answers_the_call_at_its_position_by_name() -> None:
    swapped = [text("user"), calling("a", "b"), answering("b", "a")]
    assert group_bounds(swapped) == [0, 1, 2, 3]  # neither answers the call at its position
    partial = [text("user"), calling("a", "b"), answering("a", "c")]
    assert group_bounds(partial) == [0, 1, 3]


def test_a_function_response_turn_may_have_role_function_or_tool() -> None:
    for role in ("function", "tool"):
        response = {**answering("a"), "role": role}
        contents = [text("user"), calling("a"), response]
        assert group_bounds(contents) == [0, 1, 3]
        assert check_pairing(contents) == []


def test_a_content_without_role_is_a_user_turn() -> None:
    contents = [{"parts": [{"text": "hi"}]}, calling("a"), {"parts": answering("a")["parts"]}]
    assert group_bounds(contents) == [0, 1, 3]
    assert check_pairing(contents) == []


def test_wire_json_is_read_as_sent() -> None:
    wire = json.dumps([text("user"), calling("a", ids=True), answering("a", ids=True)])
    assert group_bounds(json.loads(wire)) == [0, 1, 3]


# --- pairing, in Gemini's words ---------------------------------------------------


def test_an_orphan_response_turn_is_reported_in_geminis_words() -> None:
    problems = check_pairing([text("user"), text("model"), answering("a")])
    assert [(p.index, p.code, p.provider) for p in problems] == [
        (2, "orphan_function_response", "gemini")
    ]
    assert problems[0].message == kit.RESPONSE_NOT_AFTER_CALL


def test_a_response_count_mismatch_is_reported() -> None:
    problems = check_pairing([text("user"), calling("a", "b"), answering("a")])
    assert [p.message for p in problems] == [kit.RESPONSE_COUNT]


def test_a_call_turn_after_a_model_turn_or_at_the_start_is_reported() -> None:
    problems = check_pairing([calling("a"), answering("a"), text("model"), calling("b")])
    assert [(p.index, p.message) for p in problems] == [
        (0, kit.CALL_NOT_AFTER_USER),
        (3, kit.CALL_NOT_AFTER_USER),
    ]


def test_an_unfinished_call_at_the_end_is_not_a_problem() -> None:
    assert check_pairing([text("user"), calling("a")]) == []


@pytest.mark.parametrize(
    ("message", "named"),
    [
        ({"role": "assistant", "parts": calling("a")["parts"]}, ["'functionCall' parts"]),
        ({"role": "user", "parts": calling("a")["parts"]}, ["'functionCall' parts", "model"]),
        ({"role": "model", "parts": answering("a")["parts"]}, ["'functionResponse' parts"]),
        ({**calling("a"), "content": "hi"}, ["'functionCall' parts", "'content'"]),
        (
            {
                **calling("a"),
                "role": "assistant",
                "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{}"}}],
            },
            ["'tool_calls'", "'functionCall' parts", "openai and gemini"],
        ),
        (
            {"role": "user", "parts": answering("a")["parts"], "content": [{"type": "text"}]},
            ["'functionResponse' parts"],
        ),
    ],
)
def test_function_parts_the_api_refuses_are_refused_naming_index_and_keys(
    message: Content, named: List[str]
) -> None:
    for call in (check_pairing, lambda m: compact(m, max_tokens=1)):
        with pytest.raises(InvalidMessageError) as caught:
            call([text("user"), message])
        assert caught.value.index == 1
        for name in named:
            assert name in caught.value.reason


# --- where a cut may resume ---------------------------------------------------------


def loop(turns: int, size: int = 200) -> List[Content]:
    contents = [text("user", "start")]
    for n in range(turns):
        contents += [calling(f"f{n}"), answering(f"f{n}", size=size)]
    return contents


def test_the_cut_resumes_at_a_model_turn_after_a_user_head() -> None:
    contents = loop(8)
    result = compact(contents, max_tokens=300)
    assert result.dropped
    assert result.messages[1]["role"] == "model"
    assert kit.validate_contents(result.messages) == []


def test_two_user_turns_never_meet_at_the_cut() -> None:
    # Only user turns start the middle groups after a user head: nothing can be dropped.
    contents = [text("user", "a" * 400), text("user", "b" * 400), text("user", "c" * 400)]
    contents += [text("model"), text("user")]
    result = compact(contents, max_tokens=50, keep_head=1, keep_tail=3)
    assert result.dropped == []
    assert not result.fits


def test_with_no_cut_the_provider_takes_the_result_does_not_fit() -> None:
    contents = [text("user", "x" * 800), text("model", "y" * 800), text("user"), calling("a")]
    contents += [answering("a")]
    result = compact(contents, max_tokens=20, keep_head=1, keep_tail=3)
    # The middle group (a model turn) may not be dropped: a user turn would follow the head.
    assert result.messages == contents
    assert not result.fits
    assert kit.validate_contents(result.messages) == []


def test_the_summary_joins_a_user_head_as_one_more_text_part() -> None:
    contents = loop(8)
    result = compact_with_summary(contents, max_tokens=400, summarize=lambda d: "earlier")
    head = result.messages[0]
    assert head == {"role": "user", "parts": [{"text": "start"}, {"text": "earlier"}]}
    assert contents[0] == text("user", "start")  # the caller's own is not changed
    assert result.messages[1]["role"] == "model"
    assert kit.validate_contents(result.messages) == []


def test_without_a_head_the_conversation_never_starts_at_a_call_turn() -> None:
    # Every group after the first starts with a call turn: no cut is possible.
    result = compact(loop(8), max_tokens=400, keep_head=0)
    assert result.dropped == []
    assert not result.fits


def test_without_a_head_the_summary_is_a_gemini_content_of_its_own() -> None:
    contents = [text("user", "start")]
    for n in range(8):
        contents += [text("model", "m" * 200), text("user", f"question {n}")]
    result = compact_with_summary(
        contents, max_tokens=400, keep_head=0, summarize=lambda d: "earlier"
    )
    assert result.messages[0] == {"role": "user", "parts": [{"text": "earlier"}]}
    assert result.messages[1]["role"] == "model"
    assert kit.validate_contents(result.messages) == []


# --- clearing -------------------------------------------------------------------------


def test_clearing_writes_the_placeholder_as_the_response_object() -> None:
    contents = loop(3, size=400)
    before = copy.deepcopy(contents)
    result = clear_tool_results(contents, max_tokens=100, keep=1, clear_inputs=True)
    assert contents == before
    assert [c.index for c in result.cleared] == [2, 4]
    assert [(c.call_id, c.tool, c.call_index) for c in result.cleared] == [
        ("f0", "f0", 1),
        ("f1", "f1", 3),
    ]
    cleared = result.messages[2]["parts"][0]["functionResponse"]
    assert cleared == {"name": "f0", "response": {"output": "[cleared]"}}
    assert result.messages[1]["parts"][0]["functionCall"]["args"] == {}
    assert result.messages[6] is contents[6]
    assert group_bounds(result.messages) == group_bounds(contents)
    assert kit.validate_contents(result.messages) == []
    again = clear_tool_results(result.messages, max_tokens=100, keep=1)
    assert again.cleared == []


def test_clearing_reads_ids_and_snake_case() -> None:
    contents = [
        text("user"),
        calling("a", ids=True, camel=False),
        answering("a", ids=True, camel=False, size=400),
        text("model"),
    ]
    result = clear_tool_results(contents, max_tokens=10, keep=0, exclude_tools=["b"])
    assert [(c.call_id, c.tool) for c in result.cleared] == [("id_a", "a")]
    part = result.messages[2]["parts"][0]["function_response"]
    assert part["response"] == {"output": "[cleared]"}
    assert part["id"] == "id_a"
    assert clear_tool_results(contents, max_tokens=10, keep=0, exclude_tools=["a"]).cleared == []


# --- properties --------------------------------------------------------------------


@st.composite
def histories(draw: st.DrawFn) -> List[Content]:
    """Valid contents: parallel calls, with and without ids, thought signatures, both
    spellings, function responses with role user or function, an unfinished call at the end."""
    camel = draw(st.booleans())
    contents: List[Content] = [text("user", "q" * draw(st.integers(1, 200)))]
    for n in range(draw(st.integers(0, 10))):
        kind = draw(st.sampled_from(["calls", "calls", "text", "user"]))
        if kind == "calls":
            names = [f"t{n}_{k}" for k in range(draw(st.integers(1, 3)))]
            ids = draw(st.booleans())
            call = calling(*names, ids=ids, camel=camel)
            if draw(st.booleans()):
                call["parts"].insert(0, {"text": "thinking", "thought": True})
            order = draw(st.permutations(names)) if ids else names
            response = answering(*order, ids=ids, camel=camel, size=draw(st.integers(0, 300)))
            if draw(st.integers(0, 4)) == 0:
                response["role"] = "function"
            contents += [call, response]
        elif kind == "text":
            contents += [text("model", "m" * draw(st.integers(1, 200))), text("user")]
        else:
            contents.append(text("user", "again"))
    if draw(st.booleans()):
        contents.append(calling("pending", camel=camel))
    assert kit.validate_contents(contents) == []
    return contents


keeps = st.integers(0, 5)
budgets = st.integers(1, 1500)


@PROPERTY
@given(histories(), budgets, keeps, keeps)
def test_no_compaction_the_validator_rejects(
    contents: List[Content], budget: int, keep_head: int, keep_tail: int
) -> None:
    before = copy.deepcopy(contents)
    options: Dict[str, Any] = {"max_tokens": budget, "keep_head": keep_head}
    options["keep_tail"] = keep_tail
    plain = compact(contents, **options)
    summarised = compact_with_summary(contents, summarize=lambda d: f"{len(d)} gone", **options)
    for result in (plain, summarised):
        if result.messages:  # an empty request is no pairing question
            assert kit.validate_contents(result.messages) == []
        assert check_pairing(result.messages) == []
    where = {id(c): i for i, c in enumerate(contents)}
    kept = [where[id(m)] for m in plain.messages]
    assert kept == sorted(kept)
    assert sorted(kept + [where[id(m)] for m in plain.dropped]) == list(range(len(contents)))
    assert contents == before


@PROPERTY
@given(histories(), budgets, st.integers(0, 3), st.booleans())
def test_no_clearing_the_validator_rejects(
    contents: List[Content], budget: int, keep: int, inputs: bool
) -> None:
    before = copy.deepcopy(contents)
    result = clear_tool_results(contents, max_tokens=budget, keep=keep, clear_inputs=inputs)
    assert kit.validate_contents(result.messages) == []
    assert group_bounds(result.messages) == group_bounds(contents)
    assert contents == before


def _damaged(draw: st.DrawFn) -> List[Content]:
    contents = draw(histories())
    gone = draw(st.sets(st.integers(0, max(len(contents) - 1, 0))))
    return [c for i, c in enumerate(contents) if i not in gone]


@PROPERTY
@given(st.data())
def test_check_pairing_flags_what_the_validator_rejects(data: st.DataObject) -> None:
    contents = _damaged(data.draw)
    rejected = {
        (p.index, p.message) for p in kit.validate_contents(contents) if p.message in PAIRING
    }
    flagged = {(p.index, p.message) for p in check_pairing(contents)}
    assert flagged == rejected


# --- every place that cuts: the command line and the middleware --------------------


@pytest.mark.parametrize("indent", ["0", "2"])
def test_the_command_line_cuts_where_gemini_resumes(
    indent: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "contents.json"
    path.write_text(json.dumps(loop(8)), encoding="utf-8")
    assert main([str(path), "--max-tokens", "300", "--indent", indent]) == 0
    kept = json.loads(capsys.readouterr().out)
    assert len(kept) < 17
    assert kit.validate_contents(kept) == []


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"summarize": lambda dropped: f"{len(dropped)} turns earlier"},
        {"summarize": lambda dropped: "earlier", "clear_tool_results": True},
        {"clear_tool_results": True, "target_tokens": 250},
    ],
)
def test_the_middleware_in_a_session_cuts_where_gemini_resumes(
    options: Dict[str, Any],
) -> None:
    ask = budgeted(max_tokens=400, messages_arg="contents", **options)(lambda contents: contents)
    contents = loop(0)
    with CompactingSession() as session:
        for n in range(20):
            sent = ask(contents)
            assert kit.validate_contents(sent) == []
            contents = [*contents, calling(f"g{n}"), answering(f"g{n}", size=150)]
    assert any(event.dropped or event.cleared_results for event in session.events)


# --- clearing thinking ------------------------------------------------------------------


def thought(words: str = "Let me think this through.", **extra: Any) -> Dict[str, Any]:
    return {"text": words, "thought": True, **extra}


def thinking_turns(turns: int, *, open_loop: bool = False) -> List[Content]:
    """``turns`` turns, each a question, a call turn with a thought, its response, an answer
    with a thought; with ``open_loop``, the last turn ends at its response."""
    contents: List[Content] = []
    for t in range(turns):
        call = calling(f"look_{t}")
        call["parts"].insert(0, thought(f"Turn {t}: I should look."))
        contents += [text("user", f"Question {t}?"), call, answering(f"look_{t}")]
        if not (open_loop and t == turns - 1):
            contents.append({"role": "model", "parts": [thought(), {"text": f"Answer {t}."}]})
    return contents


def thoughts_at(contents: List[Any]) -> List[int]:
    return [i for i, c in enumerate(contents) if any(p.get("thought") for p in c["parts"])]


def test_thought_parts_of_earlier_turns_are_cleared() -> None:
    contents = thinking_turns(3)
    before = copy.deepcopy(contents)
    result = clear_thinking(contents)
    assert result.cleared == [
        ClearedThinking(1, "thought", 0),
        ClearedThinking(3, "thought", 0),
        ClearedThinking(5, "thought", 0),
        ClearedThinking(7, "thought", 0),
    ]
    assert thoughts_at(result.messages) == [9, 11]  # the last turn keeps its thoughts
    # The call keeps its part, its thought signature and all, as the caller's object.
    assert result.messages[1]["parts"] == contents[1]["parts"][1:]
    assert result.messages[1]["parts"][0] is contents[1]["parts"][1]
    assert [m is c for m, c in zip(result.messages, contents)].count(False) == 4
    assert contents == before
    assert kit.validate_contents(result.messages) == []
    assert check_pairing(result.messages) == []
    assert result.tokens_after == sum(map(estimate_tokens, result.messages))
    assert result.tokens_after < result.tokens_before
    assert clear_thinking(result.messages).cleared == []


def test_a_function_response_turn_opens_no_turn() -> None:
    # One question: its call, the response (role "function" too) and the answer are one turn.
    for response_role in ("user", "function"):
        contents = thinking_turns(1)
        contents[2] = {**contents[2], "role": response_role}
        assert clear_thinking(contents).cleared == []
        assert [c.index for c in clear_thinking(contents, keep_turns=0).cleared] == [1, 3]


def test_a_content_without_a_role_opens_a_turn_as_the_users() -> None:
    contents = thinking_turns(2)
    del contents[4]["role"]  # the API's default role: the user's second question
    assert [c.index for c in clear_thinking(contents).cleared] == [1, 3]
    assert kit.validate_contents(clear_thinking(contents).messages) == []


def test_a_gemini_tool_loop_in_progress_keeps_its_thoughts_whatever_keep_turns_says() -> None:
    looping = thinking_turns(2, open_loop=True)
    for contents in (looping, looping[:-1]):  # at the response, and at the call awaiting it
        result = clear_thinking(contents, keep_turns=0)
        assert [c.index for c in result.cleared] == [1, 3]
        assert thoughts_at(result.messages) == [5]
        assert kit.validate_contents(result.messages) == []


def test_signed_thoughts_and_turns_of_thoughts_alone_stay() -> None:
    signed = {
        "role": "model",
        "parts": [
            thought(thoughtSignature="c2ln"),
            thought(thought_signature="c2ln"),
            {"text": "A."},
        ],
    }
    alone = {"role": "model", "parts": [thought()]}
    contents = [text("user", "Q0?"), signed, text("user", "Q1?"), alone, text("user", "Q2?")]
    result = clear_thinking(contents, keep_turns=0)
    assert result.cleared == []
    assert all(m is c for m, c in zip(result.messages, contents))
    # Both count as turns holding thinking: keep_turns=1 keeps the later one, not an older.
    older = [*thinking_turns(1), *contents]
    assert [c.index for c in clear_thinking(older).cleared] == [1, 3]


def test_parts_beside_a_cleared_thought_stay_the_callers() -> None:
    answer = {"text": "Answer."}
    contents = [
        text("user", "Q0?"),
        {"role": "model", "parts": (thought(), answer)},  # any sequence of parts
        text("user", "Q1?"),
    ]
    result = clear_thinking(contents, keep_turns=0)
    assert result.cleared == [ClearedThinking(1, "thought", 0)]
    assert result.messages[1] == {"role": "model", "parts": [answer]}
    assert result.messages[1]["parts"][0] is answer


@st.composite
def thinking_histories(draw: st.DrawFn) -> List[Content]:
    """``histories`` whose model text turns carry thoughts too: beside their text, signed,
    or alone."""
    contents = []
    for content in draw(histories()):
        if content["role"] == "model" and not kit.function_calls(content):
            kind = draw(st.sampled_from(["none", "beside", "signed", "alone"]))
            if kind == "beside":
                content = {**content, "parts": [thought(), *content["parts"]]}
            elif kind == "signed":
                content = {**content, "parts": [thought(thoughtSignature="c2ln"), {"text": "A"}]}
            elif kind == "alone":
                content = {**content, "parts": [thought()]}
        contents.append(content)
    assert kit.validate_contents(contents) == []
    return contents


def _signed(part: Dict[str, Any]) -> bool:
    return "thoughtSignature" in part or "thought_signature" in part


def _last_loop(contents: List[Content]) -> List[int]:
    """The contents of the last turn when its last model turn calls functions, else none."""
    opens = [
        i
        for i, c in enumerate(contents)
        if c.get("role", "user") == "user" and not kit.function_responses(c)
    ]
    start = opens[-1] if opens else 0
    models = [i for i in range(start, len(contents)) if contents[i]["role"] == "model"]
    return (
        list(range(start, len(contents)))
        if models and kit.function_calls(contents[models[-1]])
        else []
    )


@PROPERTY
@given(thinking_histories(), st.integers(0, 3), st.one_of(st.none(), budgets))
def test_no_thinking_clearing_the_validator_rejects(
    contents: List[Content], keep_turns: int, budget: Any
) -> None:
    before = copy.deepcopy(contents)
    result = clear_thinking(contents, keep_turns=keep_turns, max_tokens=budget)
    assert kit.validate_contents(result.messages) == []
    assert check_pairing(result.messages) == check_pairing(contents)
    assert group_bounds(result.messages) == group_bounds(contents)
    assert contents == before
    assert len(result.messages) == len(contents)
    loop = _last_loop(contents)
    for i, (out, given_content) in enumerate(zip(result.messages, contents)):
        gone = {c.block for c in result.cleared if c.index == i}
        parts = given_content["parts"]
        # Only unsigned thought parts go; a signed part and a call part always stay.
        assert all(parts[k].get("thought") and not _signed(parts[k]) for k in gone)
        assert out["parts"] == [p for k, p in enumerate(parts) if k not in gone]
        if i in loop:  # the tool loop in progress keeps its thoughts
            assert out is given_content
    assert result.tokens_after == sum(map(estimate_tokens, result.messages))
    if budget is None:
        assert clear_thinking(result.messages, keep_turns=keep_turns).cleared == []
