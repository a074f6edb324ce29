"""clear_tool_results and clear_thinking: clearing old content instead of dropping turns."""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any, Dict, List, Optional, Sequence

import pytest
from helpers import (
    RESPONSES_CALLS,
    assistant,
    call_item,
    claude,
    conversations,
    examples,
    message_item,
    output_item,
    reasoning_item,
    redacted_thinking_block,
    system,
    text_block,
    thinking_block,
    tool,
    tool_call,
    tool_result_block,
    tool_use_block,
    user,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from ctx_compact import (
    ClearedThinking,
    ClearedToolResult,
    InvalidMessageError,
    check_pairing,
    clear_thinking,
    clear_tool_results,
    estimate_tokens,
)
from ctx_compact._contract import ToolResultClearing, count_all, group_bounds, message_views

Message = Dict[str, Any]
BIG = "x" * 400  # a tool output worth ~100 tokens


def total(messages: Sequence[Any]) -> int:
    return sum(estimate_tokens(m) for m in messages)


def chat_history(results: int, tools: Sequence[str] = ("read",)) -> List[Message]:
    messages = [system(), user("Look into it.")]
    for n in range(results):
        name = tools[n % len(tools)]
        messages.append(assistant(None, [tool_call(f"call_{n}", name, '{"path":"a.txt"}')]))
        messages.append(tool(f"call_{n}", BIG))
    messages.append(assistant("Done."))
    return messages


def anthropic_history(results: int, tools: Sequence[str] = ("read",)) -> List[Message]:
    messages = [user("Look into it.")]
    for n in range(results):
        name = tools[n % len(tools)]
        messages.append(claude("assistant", thinking_block(), tool_use_block(f"toolu_{n}", name)))
        messages.append(claude("user", tool_result_block(f"toolu_{n}", BIG)))
    messages.append(claude("assistant", text_block("Done.")))
    return messages


def responses_history(results: int, tools: Sequence[str] = ("read",)) -> List[Message]:
    messages: List[Message] = [{"role": "user", "content": "Look into it."}]
    for n in range(results):
        call = call_item("function_call", f"fc_{n}")
        call["name"] = tools[n % len(tools)]
        messages.append(call)
        messages.append(output_item("function_call", f"fc_{n}", BIG))
    messages.append(message_item("Done."))
    return messages


HISTORIES = {"chat": chat_history, "anthropic": anthropic_history, "responses": responses_history}


def result_content(message: Any) -> Any:
    """The content of the (first) tool result a message holds, in any format."""
    if message.get("role") == "tool":
        return message["content"]
    if message.get("role") == "user":
        content = message["content"]
        return content[0]["content"] if isinstance(content, list) else None
    return message.get("output", message.get("result"))


# --- clear_tool_results: each format -------------------------------------------


@pytest.mark.parametrize("fmt", sorted(HISTORIES))
def test_oldest_results_are_cleared_first_until_it_fits(fmt: str) -> None:
    messages = HISTORIES[fmt](6)
    before = total(messages)
    budget = before - 250  # three results' worth of savings, roughly

    result = clear_tool_results(messages, max_tokens=budget)

    assert result.fits
    assert result.tokens_after <= budget
    assert (result.tokens_before, result.tokens_after) == (before, total(result.messages))
    cleared_at = [c.index for c in result.cleared]
    result_at = [i for i, m in enumerate(messages) if result_content(m) == BIG]
    assert cleared_at == result_at[: len(cleared_at)]  # a prefix: oldest first
    assert 0 < len(cleared_at) < 6
    # It stopped as soon as it fitted: without the last clearing it would not have.
    last = cleared_at[-1]
    saved = estimate_tokens(messages[last]) - estimate_tokens(result.messages[last])
    assert result.tokens_after + saved > budget
    for i in cleared_at:
        assert result_content(result.messages[i]) == "[cleared]"
    assert len(result.messages) == len(messages)
    assert check_pairing(result.messages) == []


def test_chat_result_keeps_its_role_and_id() -> None:
    messages = chat_history(4)
    result = clear_tool_results(messages, max_tokens=1, keep=1, placeholder="(old output)")
    assert result.messages[3] == {
        "role": "tool",
        "tool_call_id": "call_0",
        "content": "(old output)",
    }
    assert [c.call_id for c in result.cleared] == ["call_0", "call_1", "call_2"]
    assert result.cleared[0] == ClearedToolResult(
        index=3, call_id="call_0", tool="read", call_index=2, input_cleared=False
    )
    assert not result.fits  # clearing alone cannot reach a budget of 1; nothing is dropped


def test_anthropic_blocks_keep_their_other_fields_and_neighbours() -> None:
    results = claude(
        "user",
        {**tool_result_block("toolu_a", BIG), "is_error": True},
        {**tool_result_block("toolu_b", BIG), "cache_control": {"type": "ephemeral"}},
        text_block("Both done; go on."),
    )
    messages = [
        user("Go."),
        claude("assistant", tool_use_block("toolu_a"), tool_use_block("toolu_b")),
        results,
        claude("assistant", text_block("Fine.")),
    ]
    result = clear_tool_results(messages, max_tokens=1, keep=0)
    edited = result.messages[2]["content"]
    assert edited[0] == {
        "type": "tool_result",
        "tool_use_id": "toolu_a",
        "content": "[cleared]",
        "is_error": True,
    }
    assert edited[1]["cache_control"] == {"type": "ephemeral"}
    assert edited[2] is results["content"][2]  # untouched blocks are the caller's own
    assert [(c.index, c.call_id) for c in result.cleared] == [(2, "toolu_a"), (2, "toolu_b")]


@pytest.mark.parametrize("kind", sorted(RESPONSES_CALLS))
def test_each_responses_output_kind(kind: str) -> None:
    messages = [
        {"role": "user", "content": "Go."},
        call_item(kind, "c1"),
        output_item(kind, "c1", BIG),
        message_item(),
    ]
    if kind == "computer_call":
        # Its output must be a screenshot object: it has no place for a placeholder.
        messages[2]["output"] = {"type": "computer_screenshot", "image_url": "data:" + BIG}
    if kind == "shell_call":
        messages[2]["output"] = [
            {"stdout": BIG, "stderr": "warn", "outcome": {"type": "exit", "exit_code": 0}},
            {"stdout": BIG, "stderr": "", "outcome": {"type": "exit", "exit_code": 1}},
        ]
    result = clear_tool_results(messages, max_tokens=1, keep=0)
    out = result.messages[2]
    if kind in ("computer_call", "tool_search_call"):
        # A screenshot object, or the tool list the model may use: never cleared.
        assert result.cleared == []
        assert out is messages[2]
        return
    assert [(c.index, c.call_id, c.call_index) for c in result.cleared] == [(2, "c1", 1)]
    if kind == "shell_call":
        assert out["output"] == [
            {"stdout": "[cleared]", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}
        ]
    else:
        field = "result" if kind == "program" else "output"
        assert out[field] == "[cleared]"
    assert check_pairing(result.messages) == []
    assert result.cleared[0].tool == messages[1].get("name", kind)


def test_a_shell_output_is_cleared_only_where_it_saves_something() -> None:
    # As a text result no longer than the placeholder is left alone, a shell call's
    # output is cleared only where its one placeholder chunk is shorter than it was,
    # and never where it is not the list of chunks the API requires.
    exit0 = {"type": "exit", "exit_code": 0}
    outputs = {
        "short": [{"stdout": "ok", "stderr": "", "outcome": exit0}],
        "cleared": [{"stdout": "[cleared]", "stderr": "", "outcome": exit0}],
        "not chunks": "a plain string, not the API's list of chunks " + BIG,
        "empty": [],
        "long": [{"stdout": BIG, "stderr": "", "outcome": exit0}],
    }
    for name, output in outputs.items():
        item = output_item("shell_call", "c1", BIG)
        item["output"] = output
        messages = [{"role": "user", "content": "Go."}, call_item("shell_call", "c1"), item]
        result = clear_tool_results(messages, max_tokens=1, keep=0)
        if name == "long":
            assert result.messages[2]["output"] == outputs["cleared"]
            assert len(result.cleared) == 1
        else:
            assert result.cleared == [], name
            assert result.messages[2] is item, name


def test_program_output_clears_its_result() -> None:
    messages = [
        {"type": "program", "id": "p1", "call_id": "c1", "code": "run()", "fingerprint": "f"},
        {
            "type": "program_output",
            "id": "po1",
            "call_id": "c1",
            "result": BIG,
            "status": "completed",
        },
    ]
    result = clear_tool_results(messages, max_tokens=1, keep=0, clear_inputs=True)
    assert result.messages[1]["result"] == "[cleared]"
    assert result.messages[0] is messages[0]  # the program is the call itself: kept
    assert result.cleared[0].input_cleared is False


def test_tool_search_output_is_never_cleared() -> None:
    tools = [{"type": "function", "name": "read", "description": BIG, "parameters": {}}]
    messages = [
        {"type": "tool_search_call", "call_id": "s1", "arguments": {}},
        {"type": "tool_search_output", "call_id": "s1", "tools": tools, "output": BIG},
    ]
    assert clear_tool_results(messages, max_tokens=1, keep=0).cleared == []


# --- keep, exclude_tools, clear_inputs -------------------------------------------


@pytest.mark.parametrize("fmt", sorted(HISTORIES))
@pytest.mark.parametrize("keep", [0, 1, 3, 6, 10])
def test_keep_leaves_the_most_recent_results(fmt: str, keep: int) -> None:
    messages = HISTORIES[fmt](6)
    result = clear_tool_results(messages, max_tokens=1, keep=keep)
    assert len(result.cleared) == max(6 - keep, 0)
    kept = [m for m in result.messages if result_content(m) == BIG]
    assert len(kept) == min(keep, 6)


@pytest.mark.parametrize("fmt", sorted(HISTORIES))
def test_exclude_tools_names_the_tool_of_the_matching_call(fmt: str) -> None:
    messages = HISTORIES[fmt](6, tools=("read", "search"))
    result = clear_tool_results(messages, max_tokens=1, keep=0, exclude_tools=["search"])
    assert [c.tool for c in result.cleared] == ["read", "read", "read"]
    searched = [m for m in result.messages if result_content(m) == BIG]
    assert len(searched) == 3
    # A tuple, a set or a frozenset work alike.
    again = clear_tool_results(messages, max_tokens=1, keep=0, exclude_tools={"search", "x"})
    assert again.messages == result.messages


def test_excluded_results_still_count_towards_keep() -> None:
    messages = chat_history(4, tools=("read", "search"))
    result = clear_tool_results(messages, max_tokens=1, keep=2, exclude_tools=("search",))
    assert [c.call_id for c in result.cleared] == ["call_0"]


def test_clear_inputs_chat() -> None:
    messages = chat_history(2)
    result = clear_tool_results(messages, max_tokens=1, keep=1, clear_inputs=True)
    (entry,) = result.cleared
    assert (entry.call_index, entry.input_cleared) == (2, True)
    call = result.messages[2]["tool_calls"][0]
    assert call == {
        "id": "call_0",
        "type": "function",
        "function": {"name": "read", "arguments": "{}"},
    }
    assert json.loads(call["function"]["arguments"]) == {}
    assert result.messages[4] is messages[4]  # the kept exchange is the caller's own
    assert result.tokens_after == total(result.messages)


def test_clear_inputs_anthropic_keeps_the_thinking_block_as_is() -> None:
    messages = anthropic_history(2)
    result = clear_tool_results(messages, max_tokens=1, keep=1, clear_inputs=True)
    content = result.messages[1]["content"]
    assert content[1] == {"type": "tool_use", "id": "toolu_0", "name": "read", "input": {}}
    assert content[0] is messages[1]["content"][0]  # signed thinking: never copied


def test_clear_inputs_responses() -> None:
    custom = call_item("custom_tool_call", "c2")
    shell = call_item("local_shell_call", "c3")
    messages = [
        *responses_history(1),
        custom,
        output_item("custom_tool_call", "c2", BIG),
        shell,
        output_item("local_shell_call", "c3", BIG),
    ]
    result = clear_tool_results(messages, max_tokens=1, keep=0, clear_inputs=True)
    out = result.messages
    assert out[1]["arguments"] == "{}"
    assert out[4]["input"] == "[cleared]"  # a custom tool's input is free text
    assert out[6] is shell  # a shell action is the call itself
    assert [c.input_cleared for c in result.cleared] == [True, True, False]
    assert check_pairing(out) == []


def test_result_without_a_call_is_cleared_with_no_tool_name() -> None:
    messages = [user("Hi."), tool("ghost", BIG)]
    (entry,) = clear_tool_results(messages, max_tokens=1, keep=0, clear_inputs=True).cleared
    assert (entry.tool, entry.call_index, entry.input_cleared) == (None, None, False)


def test_a_call_without_arguments_is_not_copied() -> None:
    messages = [
        {"role": "assistant", "content": None, "tool_calls": [{"id": "a", "type": "function"}]},
        tool("a", BIG),
    ]
    result = clear_tool_results(messages, max_tokens=1, keep=0, clear_inputs=True)
    assert result.messages[0] is messages[0]
    assert result.cleared[0].input_cleared is False


def test_short_and_empty_results_are_not_cleared() -> None:
    messages = [
        assistant(None, [tool_call("a"), tool_call("b"), tool_call("c")]),
        tool("a", "ok"),
        tool("b", ""),
        {"role": "tool", "tool_call_id": "c", "content": []},
    ]
    result = clear_tool_results(messages, max_tokens=1, keep=0)
    assert result.cleared == []
    assert result.messages == messages


# --- the caller's data ---------------------------------------------------------


@pytest.mark.parametrize("fmt", sorted(HISTORIES))
def test_input_untouched_and_untouched_messages_are_the_callers_own(fmt: str) -> None:
    messages = HISTORIES[fmt](5)
    snapshot = copy.deepcopy(messages)
    result = clear_tool_results(messages, max_tokens=total(messages) - 150, clear_inputs=True)
    assert messages == snapshot
    edited = {c.index for c in result.cleared} | {c.call_index for c in result.cleared}
    assert edited
    for i, (out, original) in enumerate(zip(result.messages, messages)):
        assert (out is original) == (i not in edited), i


def test_an_input_that_fits_comes_back_as_is() -> None:
    messages = chat_history(3)
    result = clear_tool_results(messages, max_tokens=total(messages))
    assert result.cleared == []
    assert result.fits
    assert result.messages is not messages
    assert all(a is b for a, b in zip(result.messages, messages))


def test_sdk_objects_are_edited_as_their_json() -> None:
    openai_chat = pytest.importorskip("openai.types.chat")
    anthropic_types = pytest.importorskip("anthropic.types")
    reply = openai_chat.ChatCompletionMessage.model_validate(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read", "arguments": '{"path":"a"}'},
                }
            ],
        }
    )
    thinking = anthropic_types.ThinkingBlock(type="thinking", thinking="hm", signature="s")
    use = anthropic_types.ToolUseBlock(type="tool_use", id="toolu_1", name="read", input={"p": 1})
    claude_reply = {"role": "assistant", "content": [thinking, use]}
    messages = [
        user("Go."),
        reply,
        tool("call_1", BIG),
        claude_reply,
        claude("user", tool_result_block("toolu_1", BIG)),
    ]
    result = clear_tool_results(messages, max_tokens=1, keep=0, clear_inputs=True)
    out = result.messages
    assert out[1] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "read", "arguments": "{}"}}
        ],
    }
    assert reply.tool_calls[0].function.arguments == '{"path":"a"}'  # the SDK object is unchanged
    assert out[3]["content"][0] is thinking
    assert out[3]["content"][1] == {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "read",
        "input": {},
    }
    assert use.input == {"p": 1}
    assert check_pairing(out) == []
    assert result.tokens_after == total(out)


def test_an_sdk_function_inside_a_dict_tool_call_loses_its_arguments() -> None:
    chat = pytest.importorskip("openai.types.chat")
    tool_call = chat.ChatCompletionMessageToolCall.model_validate(
        {"id": "call_1", "type": "function", "function": {"name": "read", "arguments": '{"p":1}'}}
    )
    # A reply rebuilt by hand around the SDK's own Function object.
    reply = {
        "role": "assistant",
        "tool_calls": [{"id": "call_1", "type": "function", "function": tool_call.function}],
    }
    messages = [user("Go."), reply, tool("call_1", BIG)]
    result = clear_tool_results(messages, max_tokens=1, keep=0, clear_inputs=True)
    assert result.messages[1]["tool_calls"] == [
        {"id": "call_1", "type": "function", "function": {"name": "read", "arguments": "{}"}}
    ]
    assert result.cleared[0].input_cleared is True
    assert tool_call.function.arguments == '{"p":1}'  # the SDK object is unchanged
    assert reply["tool_calls"][0]["function"] is tool_call.function
    assert check_pairing(result.messages) == []


def test_responses_sdk_items_are_edited_as_their_json() -> None:
    responses = pytest.importorskip("openai.types.responses")
    reasoning = responses.ResponseReasoningItem.model_validate(
        {"type": "reasoning", "id": "rs_1", "summary": []}
    )
    call = responses.ResponseFunctionToolCall.model_validate(
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "c1",
            "name": "read",
            "arguments": '{"path":"a"}',
            "status": "completed",
        }
    )
    messages = [
        {"role": "user", "content": "Go."},
        reasoning,
        call,
        output_item("function_call", "c1", BIG),
    ]
    result = clear_tool_results(messages, max_tokens=1, keep=0, clear_inputs=True)
    out = result.messages
    assert out[1] is reasoning
    assert out[2] == {**call.model_dump(mode="json", exclude_unset=True), "arguments": "{}"}
    assert call.arguments == '{"path":"a"}'
    assert check_pairing(out) == []
    # The reasoning item is required by the call passed back with its id (fc_1).
    assert clear_thinking(messages, keep_turns=0).cleared == []


def test_thinking_in_sdk_blocks_is_removed_from_a_copy() -> None:
    anthropic_types = pytest.importorskip("anthropic.types")
    thinking = anthropic_types.ThinkingBlock(type="thinking", thinking="hm", signature="s")
    text = anthropic_types.TextBlock(type="text", text="Paris.")
    reply = {"role": "assistant", "content": [thinking, text]}
    messages = [user("Capital of France?"), reply, user("And Spain?")]
    assert clear_thinking(messages).cleared == []  # the last turn with thinking keeps it
    result = clear_thinking(messages, keep_turns=0)
    assert result.cleared == [ClearedThinking(1, "thinking", 0)]
    assert result.messages[1] == {"role": "assistant", "content": [text]}
    assert result.messages[1]["content"][0] is text
    assert reply["content"] == [thinking, text]


def test_custom_count_tokens_sees_mappings_and_figures_are_exact() -> None:
    seen: List[Any] = []

    def count(message: Any) -> int:
        seen.append(message)
        return len(json.dumps(message))

    messages = anthropic_history(3)
    result = clear_tool_results(messages, max_tokens=1500, keep=1, count_tokens=count)
    assert all(isinstance(m, dict) for m in seen)
    assert result.tokens_after == sum(len(json.dumps(m)) for m in result.messages)
    assert result.fits
    assert len(result.cleared) == 2


# --- properties ---------------------------------------------------------------


@st.composite
def anthropic_conversations(draw: st.DrawFn) -> List[Message]:
    """Anthropic histories: text turns, (parallel) tool exchanges with thinking, some unanswered."""
    messages: List[Message] = []
    n = 0
    for _ in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(["user", "exchange", "exchange", "answer"]))
        if kind == "user":
            messages.append(user(draw(st.sampled_from(["Go on.", BIG]))))
        elif kind == "answer":
            messages.append(claude("assistant", thinking_block(), text_block("Done.")))
        else:
            ids = [f"toolu_{n + k}" for k in range(draw(st.integers(1, 3)))]
            n += len(ids)
            names = [draw(st.sampled_from(["read", "search"])) for _ in ids]
            head = [thinking_block()] if draw(st.booleans()) else []
            uses = [tool_use_block(i, name) for i, name in zip(ids, names)]
            messages.append(claude("assistant", *head, *uses))
            answered = draw(st.lists(st.sampled_from(ids), max_size=len(ids), unique=True))
            if answered:
                size = st.sampled_from(["ok", "", BIG, "y" * 90])
                messages.append(
                    claude("user", *(tool_result_block(i, draw(size)) for i in answered))
                )
    return messages


@st.composite
def responses_conversations(draw: st.DrawFn) -> List[Message]:
    """Responses input items: calls of every kind with their outputs, reasoning, messages."""
    messages: List[Message] = []
    for n in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(["user", "reasoning", "message", *sorted(RESPONSES_CALLS)]))
        if kind == "user":
            messages.append({"role": "user", "content": "Go on."})
        elif kind == "reasoning":
            messages.append(reasoning_item(f"rs_{n}"))
        elif kind == "message":
            messages.append(message_item(item_id=f"msg_{n}"))
        else:
            messages.append(call_item(kind, f"c{n}"))
            if draw(st.booleans()):
                messages.append(output_item(kind, f"c{n}", draw(st.sampled_from(["ok", BIG]))))
    return messages


any_history = st.one_of(conversations(), anthropic_conversations(), responses_conversations()).map(
    lambda ms: [*ms, tool(None, BIG)] if len(ms) % 5 == 4 else ms
)

options = st.fixed_dictionaries(
    {
        "max_tokens": st.integers(1, 2000),
        "keep": st.integers(0, 4),
        "exclude_tools": st.sampled_from([(), ("search",), ("read", "get_weather")]),
        "clear_inputs": st.booleans(),
    }
)


@settings(max_examples=examples(150), deadline=None)
@given(any_history, options)
def test_clearing_invariants(messages: List[Message], opts: Dict[str, Any]) -> None:
    snapshot = copy.deepcopy(messages)
    result = clear_tool_results(messages, **opts)
    out = result.messages

    assert messages == snapshot  # never mutated
    assert len(out) == len(messages)  # nothing dropped
    edited = {c.index for c in result.cleared} | {
        c.call_index for c in result.cleared if c.input_cleared
    }
    for i, (new, original) in enumerate(zip(out, messages)):
        assert (new is original) == (i not in edited)
    # Pairing and grouping are untouched: the same problems (if any), the same groups.
    assert check_pairing(out) == check_pairing(messages)
    assert group_bounds(message_views(out)) == group_bounds(message_views(messages))
    # The figures are exact.
    assert result.tokens_before == total(messages)
    assert result.tokens_after == total(out)
    assert result.fits == (result.tokens_after <= opts["max_tokens"])
    if result.tokens_before <= opts["max_tokens"]:
        assert result.cleared == []
    for entry in result.cleared:
        assert entry.tool not in opts["exclude_tools"] or entry.tool is None
    # Idempotent: clearing the result again changes nothing.
    again = clear_tool_results(out, **opts)
    assert again.cleared == []
    assert again.messages == out


@settings(max_examples=examples(100), deadline=None)
@given(st.one_of(anthropic_conversations(), responses_conversations()), st.integers(0, 3))
def test_thinking_clearing_keeps_valid_pairing(messages: List[Message], keep_turns: int) -> None:
    snapshot = copy.deepcopy(messages)
    result = clear_thinking(messages, keep_turns=keep_turns)
    assert messages == snapshot
    if not check_pairing(messages):
        assert check_pairing(result.messages) == []
    removed = {c.index for c in result.cleared if c.kind == "reasoning"}
    assert len(result.messages) == len(messages) - len(removed)
    assert result.tokens_after == total(result.messages)
    untouched = [m for i, m in enumerate(messages) if i not in {c.index for c in result.cleared}]
    assert all(any(m is o for o in result.messages) for m in untouched)
    assert clear_thinking(result.messages, keep_turns=keep_turns).cleared == []


# --- a tool-heavy history -------------------------------------------------------


def test_figure_tool_heavy_anthropic_history_fits_by_clearing_alone() -> None:
    """A 40-exchange Anthropic agent history, a budget clearing alone can reach."""
    messages: List[Message] = [user("Audit the repository and list every problem.")]
    for n in range(40):
        name = ("read_file", "grep", "run_tests")[n % 3]
        messages.append(
            claude(
                "assistant",
                thinking_block(f"Step {n}: next I should use {name}."),
                text_block(f"Running {name}."),
                tool_use_block(f"toolu_{n:02d}", name),
            )
        )
        output = f"{name} output {n}: " + "line of output\n" * (60 + n % 7)
        messages.append(claude("user", tool_result_block(f"toolu_{n:02d}", output)))
    messages.append(claude("assistant", text_block("Found 3 problems.")))
    snapshot = copy.deepcopy(messages)
    before = total(messages)
    budget = before // 3

    result = clear_tool_results(messages, max_tokens=budget)

    assert result.fits
    assert result.tokens_after <= budget
    assert check_pairing(result.messages) == []
    assert len(result.messages) == len(messages)  # every message kept
    assert [m["role"] for m in result.messages] == [m["role"] for m in messages]
    assert messages == snapshot  # the input untouched
    assert result.tokens_before == before
    assert 3 <= len(result.cleared) < 37  # it stopped before the three most recent results
    assert [c.index for c in result.cleared] == [2 * k + 2 for k in range(len(result.cleared))]


# --- errors ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "error", "name"),
    [
        ({"max_tokens": 0}, TypeError, "max_tokens"),
        ({"max_tokens": True}, TypeError, "max_tokens"),
        ({"keep": -1}, ValueError, "keep"),
        ({"keep": "3"}, TypeError, "keep"),
        ({"exclude_tools": "search"}, TypeError, "exclude_tools"),
        ({"exclude_tools": [1]}, TypeError, "exclude_tools"),
        ({"exclude_tools": [["read"]]}, TypeError, "exclude_tools"),
        ({"exclude_tools": 3}, TypeError, "exclude_tools"),
        ({"placeholder": None}, TypeError, "placeholder"),
        ({"placeholder": ""}, ValueError, "placeholder"),
        ({"clear_inputs": 1}, TypeError, "clear_inputs"),
        ({"count_tokens": 5}, TypeError, "count_tokens"),
    ],
)
def test_bad_options_name_the_option(options: Dict[str, Any], error: type, name: str) -> None:
    kwargs: Dict[str, Any] = {"max_tokens": 100, **options}
    with pytest.raises(error, match=name) as info:
        clear_tool_results(chat_history(1), **kwargs)
    assert not isinstance(info.value, InvalidMessageError)


def test_options_object_validates_once() -> None:
    assert ToolResultClearing.checked(exclude_tools=["a"]) == ToolResultClearing(
        exclude_tools=frozenset({"a"})
    )
    with pytest.raises(ValueError, match="keep"):
        ToolResultClearing.checked(keep=-2)


@pytest.mark.parametrize(
    ("messages", "index"),
    [
        ([user(), "not a message"], 1),
        ([user(), {"role": "assistant", "content": None, "tool_calls": "call_1"}], 1),
        ([user(), assistant(None, [["call_1"]])], 1),
        ([user(), user(), {"role": "user", "content": {1, 2}}], 2),
    ],
)
def test_malformed_messages_name_the_index(messages: List[Any], index: int) -> None:
    with pytest.raises(InvalidMessageError) as info:
        clear_tool_results(messages, max_tokens=100)
    assert info.value.index == index


def test_bad_counts_name_the_index() -> None:
    messages = chat_history(2)
    with pytest.raises(InvalidMessageError) as info:
        clear_tool_results(messages, max_tokens=1, count_tokens=lambda m: -1)
    assert info.value.index == 0


def test_messages_must_be_a_sequence() -> None:
    with pytest.raises(TypeError, match="messages"):
        clear_tool_results("hello", max_tokens=100)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="messages"):
        clear_thinking({"role": "user"})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("options", "error", "name"),
    [
        ({"keep_turns": -1}, ValueError, "keep_turns"),
        ({"keep_turns": 1.5}, TypeError, "keep_turns"),
        ({"max_tokens": -5}, TypeError, "max_tokens"),
        ({"count_tokens": "len"}, TypeError, "count_tokens"),
    ],
)
def test_bad_thinking_options_name_the_option(
    options: Dict[str, Any], error: type, name: str
) -> None:
    with pytest.raises(error, match=name):
        clear_thinking(anthropic_history(1), **options)


# --- clear_thinking -------------------------------------------------------------


def claude_turns(turns: int, *, open_loop: bool = False) -> List[Message]:
    """``turns`` Anthropic turns, each a question, a tool exchange with thinking, an answer."""
    messages: List[Message] = []
    for t in range(turns):
        messages.append(user(f"Question {t}?"))
        messages.append(
            claude("assistant", thinking_block(f"Turn {t}."), tool_use_block(f"toolu_{t}"))
        )
        messages.append(claude("user", tool_result_block(f"toolu_{t}")))
        if not (open_loop and t == turns - 1):
            messages.append(
                claude("assistant", redacted_thinking_block(), text_block(f"Answer {t}."))
            )
    return messages


def thinking_at(messages: Sequence[Message]) -> List[int]:
    return [
        i
        for i, m in enumerate(messages)
        if m.get("role") == "assistant"
        and any(b.get("type") in ("thinking", "redacted_thinking") for b in m["content"])
    ]


def test_thinking_of_earlier_turns_is_cleared() -> None:
    messages = claude_turns(3)
    snapshot = copy.deepcopy(messages)
    result = clear_thinking(messages)
    assert thinking_at(result.messages) == [9, 11]  # the last turn keeps its thinking
    assert result.cleared == [
        ClearedThinking(1, "thinking", 0),
        ClearedThinking(3, "redacted_thinking", 0),
        ClearedThinking(5, "thinking", 0),
        ClearedThinking(7, "redacted_thinking", 0),
    ]
    assert result.messages[1] == claude("assistant", tool_use_block("toolu_0"))
    assert result.messages[1]["content"][0] is messages[1]["content"][1]
    assert messages == snapshot
    assert [m is o for m, o in zip(result.messages, messages)].count(False) == 4
    assert check_pairing(result.messages) == []
    assert result.tokens_after == total(result.messages) < result.tokens_before


def test_keep_turns() -> None:
    messages = claude_turns(3)
    assert thinking_at(clear_thinking(messages, keep_turns=2).messages) == [5, 7, 9, 11]
    assert thinking_at(clear_thinking(messages, keep_turns=0).messages) == []
    # A new question has no thinking yet: the turn before it still counts as the last one.
    asked = [*messages, user("One more?")]
    assert thinking_at(clear_thinking(asked).messages) == [9, 11]


def test_a_tool_loop_in_progress_keeps_its_thinking_whatever_keep_turns_says() -> None:
    for messages in (claude_turns(2, open_loop=True), claude_turns(2, open_loop=True)[:-1]):
        result = clear_thinking(messages, keep_turns=0)
        assert thinking_at(result.messages) == [5]
        assert [c.index for c in result.cleared] == [1, 3]


def test_a_message_of_thinking_alone_is_left_whole() -> None:
    messages = [user("Hm?"), claude("assistant", thinking_block()), user("Well?")]
    assert clear_thinking(messages, keep_turns=0).cleared == []
    # It still counts as a turn with thinking: keep_turns=1 keeps it, not an older one.
    older = [*claude_turns(1), *messages]
    assert [c.index for c in clear_thinking(older).cleared] == [1, 3]


def test_max_tokens_clears_only_as_much_as_needed() -> None:
    messages = claude_turns(3)
    before = total(messages)
    assert clear_thinking(messages, max_tokens=before).cleared == []
    result = clear_thinking(messages, max_tokens=before - 5)
    assert [c.index for c in result.cleared] == [1]
    assert result.fits
    over = clear_thinking(messages, max_tokens=10)
    assert len(over.cleared) == 4
    assert not over.fits


def test_responses_reasoning_items() -> None:
    without_ids = {"type": "function_call", "call_id": "c1", "name": "read", "arguments": "{}"}
    messages = [
        {"role": "user", "content": "First?"},
        reasoning_item("rs_1"),
        without_ids,
        output_item("function_call", "c1"),
        reasoning_item("rs_2"),
        message_item("Answer.", "msg_1"),  # carries its id: its reasoning must stay
        {"role": "user", "content": "Second?"},
        reasoning_item("rs_3"),
        call_item("function_call", "c2"),
        output_item("function_call", "c2"),
    ]
    result = clear_thinking(messages, keep_turns=0)
    assert result.cleared == [ClearedThinking(1, "reasoning", None)]
    assert result.messages == [m for i, m in enumerate(messages) if i != 1]
    assert all(m is o for m, o in zip(result.messages, messages[:1] + messages[2:]))
    assert check_pairing(result.messages) == []
    # Once the second turn's loop is over, its reasoning may go when nothing links to it.
    finished = [
        *messages[:8],
        {**messages[8], "id": None},
        messages[9],
        {"type": "message", "role": "assistant", "content": "Done."},
    ]
    assert [c.index for c in clear_thinking(finished, keep_turns=0).cleared] == [1, 7]


def test_chat_messages_have_no_thinking_to_clear() -> None:
    messages = [system(), user(), assistant("ok")]
    result = clear_thinking(messages, keep_turns=0)
    assert result.cleared == []
    assert all(a is b for a, b in zip(result.messages, messages))


def test_results_are_frozen() -> None:
    result = clear_tool_results(chat_history(1), max_tokens=100)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.fits = False  # type: ignore[misc]
    entry: Optional[ClearedThinking] = ClearedThinking(0, "reasoning", None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        entry.index = 1  # type: ignore[misc, union-attr]


def test_engine_apply_reuses_counts() -> None:
    messages = anthropic_history(4)
    views = message_views(messages)
    counts = count_all(views, None)
    options = ToolResultClearing.checked(keep=1)
    result, new_counts = options.apply(messages, views, counts, max_tokens=1, count_tokens=None)
    assert new_counts == count_all(message_views(result.messages), None)
    assert counts == count_all(views, None)  # the caller's counts are not changed
    assert result == clear_tool_results(messages, max_tokens=1, keep=1)


def test_the_results_of_a_pinned_group_are_never_cleared() -> None:
    messages = chat_history(6)
    budget = total(messages) // 2
    plain = clear_tool_results(messages, max_tokens=budget, keep=0)
    assert plain.cleared[0].index == 3
    pinned = clear_tool_results(
        messages, max_tokens=budget, keep=0, pin=lambda m: m.get("tool_call_id") == "call_0"
    )
    assert 3 not in [c.index for c in pinned.cleared]
    assert pinned.messages[3] is messages[3]
    assert pinned.messages[2] is messages[2]
    with pytest.raises(TypeError, match="'pin' must be"):
        clear_tool_results(messages, max_tokens=budget, pin="call_0")  # type: ignore[arg-type]


def answers(call_id: str) -> Any:
    """A pin accepting the message that holds the result of ``call_id``, in any format."""

    def pin(message: Any) -> bool:
        if message.get("call_id") == call_id and message.get("type") != "function_call":
            return True
        content = message.get("content")
        return isinstance(content, list) and any(
            b.get("tool_use_id") == call_id for b in content if isinstance(b, dict)
        )

    return pin


def test_the_thinking_of_a_pinned_group_is_never_cleared() -> None:
    messages = claude_turns(3)
    assert [c.index for c in clear_thinking(messages).cleared] == [1, 3, 5, 7]
    # The first tool exchange (the thinking call and its result) is one group: pinning the
    # result keeps the call's thinking, and the rest is cleared as before.
    pinned = clear_thinking(messages, pin=answers("toolu_0"))
    assert [c.index for c in pinned.cleared] == [3, 5, 7]
    assert pinned.messages[1] is messages[1]
    assert pinned.messages[2] is messages[2]
    assert pinned.tokens_after == total(pinned.messages)
    # With a budget, the pinned thinking is passed over, not what stops the clearing.
    budgeted = clear_thinking(messages, max_tokens=10, pin=answers("toolu_0"))
    assert [c.index for c in budgeted.cleared] == [3, 5, 7]
    assert not budgeted.fits
    with pytest.raises(TypeError, match="'pin' must be"):
        clear_thinking(messages, pin="toolu_0")  # type: ignore[arg-type]


def test_a_pinned_groups_reasoning_item_stays_in_the_list() -> None:
    without_ids = {"type": "function_call", "call_id": "c1", "name": "read", "arguments": "{}"}
    messages = [
        {"role": "user", "content": "First?"},
        reasoning_item("rs_1"),
        without_ids,
        output_item("function_call", "c1"),
        {"role": "user", "content": "Second?"},
        {"role": "assistant", "content": "Done."},
    ]
    assert [c.index for c in clear_thinking(messages, keep_turns=0).cleared] == [1]
    pinned = clear_thinking(messages, keep_turns=0, pin=answers("c1"))
    assert pinned.cleared == []
    assert all(m is o for m, o in zip(pinned.messages, messages))
    assert len(pinned.messages) == len(messages)


@settings(max_examples=examples(100), deadline=None)
@given(
    st.one_of(anthropic_conversations(), responses_conversations()),
    st.integers(0, 2),
    st.sets(st.integers(0, 20), max_size=3),
)
def test_pinned_groups_keep_their_thinking_and_the_rest_is_cleared_as_before(
    messages: List[Message], keep_turns: int, chosen: Any
) -> None:
    pinned = [m for i, m in enumerate(messages) if i in chosen]
    result = clear_thinking(messages, keep_turns=keep_turns, pin=lambda m: m in pinned)
    bounds = group_bounds(message_views(messages))
    held = {
        i
        for start, stop in zip(bounds, bounds[1:])
        if any(m in pinned for m in messages[start:stop])
        for i in range(start, stop)
    }
    assert all(c.index not in held for c in result.cleared)
    assert all(any(m is o for o in result.messages) for i, m in enumerate(messages) if i in held)
    # Without a budget, the others' thinking is cleared exactly as with no pins.
    unpinned = clear_thinking(messages, keep_turns=keep_turns)
    assert result.cleared == [c for c in unpinned.cleared if c.index not in held]
