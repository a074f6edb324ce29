"""repair_pairing: every repair in every format, the caller's objects kept, and the testing kit's
validators accepting what it returns (property tests over generated broken histories)."""

from __future__ import annotations

import copy
from typing import Any, Callable, Dict, List, Tuple

import pytest
from helpers import (
    Message,
    assistant,
    calling,
    claude,
    examples,
    exchange,
    reasoning_item,
    text_block,
    thinking_block,
    tool,
    tool_call,
    tool_result_block,
    tool_use_block,
    user,
    weather_messages,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctx_compact import (
    InvalidMessageError,
    RepairChange,
    RepairResult,
    check_pairing,
    repair_pairing,
)
from ctx_compact.testing._api import RequestRejected
from ctx_compact.testing.anthropic import validate_messages as anthropic_validator
from ctx_compact.testing.bedrock import validate_messages as bedrock_validator
from ctx_compact.testing.gemini import validate_contents as gemini_validator
from ctx_compact.testing.ollama import validate_messages as ollama_validator
from ctx_compact.testing.openai_chat import validate_chat_completions
from ctx_compact.testing.responses import validate_responses

PROPERTY = settings(
    max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
PLACEHOLDER = "[tool result missing]"


def actions(result: RepairResult) -> List[Tuple[int, str, Tuple[str, ...]]]:
    return [(c.index, c.action, c.ids) for c in result.changes]


# --- the kit's validators, as one "does the provider take it" per format --------------


def _raises(check: Callable[[Any], Any], body: Any) -> bool:
    try:
        check(body)
    except RequestRejected:
        return True
    return False


def chat_rejects(messages: List[Any]) -> bool:
    return _raises(validate_chat_completions, {"model": "gpt-4o", "messages": messages})


def anthropic_rejects(messages: List[Any]) -> bool:
    body = {"model": "claude", "max_tokens": 100, "messages": messages}
    return _raises(anthropic_validator, body)


def responses_rejects(items: List[Any]) -> bool:
    return _raises(validate_responses, {"model": "gpt-5", "input": items})


def gemini_rejects(contents: List[Any]) -> bool:
    return bool(gemini_validator(contents))


def bedrock_rejects(messages: List[Any]) -> bool:
    return bool(bedrock_validator(messages))


def ollama_rejects(messages: List[Any]) -> bool:
    return bool(ollama_validator(messages))


# --- the API ---------------------------------------------------------------------------


def test_a_valid_history_comes_back_as_it_is() -> None:
    history = weather_messages()
    result = repair_pairing(history)
    assert result.messages == history
    assert result.messages is not history
    assert all(a is b for a, b in zip(result.messages, history))
    assert result.changes == []
    assert result.problems == []
    assert not result.changed


def test_options_are_checked() -> None:
    with pytest.raises(TypeError, match="'answer_unanswered' must be True or False"):
        repair_pairing([], answer_unanswered="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'placeholder' must be a non-empty string"):
        repair_pairing([], placeholder="")
    with pytest.raises(TypeError, match="'messages' must be"):
        repair_pairing("hi")  # type: ignore[arg-type]
    with pytest.raises(InvalidMessageError, match="message 1"):
        repair_pairing([user(), {"role": "user", "tool_calls": [tool_call("a")]}])


def test_changes_are_frozen_dataclasses() -> None:
    result = repair_pairing([user(), tool("orphan")])
    change = result.changes[0]
    assert change == RepairChange(1, "dropped_result", ("orphan",), "openai", "orphan_tool_result")
    with pytest.raises(AttributeError):
        change.index = 3  # type: ignore[misc]
    assert result.problems == check_pairing([user(), tool("orphan")])


# --- Chat Completions ------------------------------------------------------------------


def test_chat_orphans_go_and_misplaced_results_move_to_their_call() -> None:
    history = [
        user("hi"),
        calling("a", "b"),
        tool("a"),
        user("and?"),
        tool("nobody"),
        tool("b"),
        calling("c"),
    ]
    before = copy.deepcopy(history)
    result = repair_pairing(history)
    assert history == before  # never mutated
    assert result.messages == [history[0], history[1], history[2], history[5], history[3]]
    assert result.messages[3] is history[5]  # moved as it is
    assert actions(result) == [
        (4, "dropped_result", ("nobody",)),
        (5, "moved_result", ("b",)),
        (6, "dropped_call", ("c",)),
        (6, "dropped_empty", ("c",)),
    ]
    assert result.changes[1].into == 2  # it now follows the run of its call
    assert check_pairing(result.messages) == []


def test_chat_unanswered_calls_answered_with_the_placeholder() -> None:
    history = [user(), calling("a", "b"), tool("a"), user("next")]
    result = repair_pairing(history, answer_unanswered=True, placeholder="lost")
    assert result.messages == [
        history[0],
        history[1],
        history[2],
        {"role": "tool", "tool_call_id": "b", "content": "lost"},
        history[3],
    ]
    assert result.messages[1] is history[1]
    assert actions(result) == [(1, "answered_call", ("b",))]


def test_chat_a_call_dropped_from_a_message_that_says_something_keeps_the_message() -> None:
    history = [user(), assistant("Let me check.", [tool_call("a"), tool_call("b")]), tool("a")]
    result = repair_pairing(history)
    kept = result.messages[1]
    assert kept is not history[1]
    assert kept["tool_calls"] == [history[1]["tool_calls"][0]]
    assert kept["tool_calls"][0] is history[1]["tool_calls"][0]  # the caller's call object
    alone = repair_pairing([user(), assistant("Checking.", [tool_call("z")])])
    assert alone.messages == [user(), {"role": "assistant", "content": "Checking."}]


def test_chat_legacy_function_messages_move_after_their_call_or_go() -> None:
    call = {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": "{}"}}
    answer = {"role": "function", "name": "f", "content": "42"}
    history = [
        user(),
        call,
        user("well?"),
        answer,
        {"role": "function", "name": "g", "content": ""},
    ]
    result = repair_pairing(history)
    assert result.messages == [history[0], call, answer, history[2]]
    assert actions(result) == [(3, "moved_result", ("f",)), (4, "dropped_result", ("g",))]


def test_sdk_messages_are_kept_unless_changed() -> None:
    from openai.types.chat import ChatCompletionMessage

    sdk = ChatCompletionMessage.model_validate(
        {"role": "assistant", "content": None, "tool_calls": [tool_call("a"), tool_call("b")]}
    )
    done = ChatCompletionMessage.model_validate({"role": "assistant", "content": "Done."})
    history = [user(), sdk, tool("a"), done]
    result = repair_pairing(history)
    assert result.messages[3] is done  # unchanged: the caller's object
    changed = result.messages[1]
    assert isinstance(changed, dict)
    assert [c["id"] for c in changed["tool_calls"]] == ["a"]
    assert check_pairing(result.messages) == []


# --- Anthropic Messages ------------------------------------------------------------------


def test_anthropic_results_move_to_the_start_and_text_before_the_calls() -> None:
    history = [
        user("q"),
        claude("assistant", thinking_block(), tool_use_block("x"), text_block("done?")),
        claude("user", text_block("here"), tool_result_block("x"), tool_result_block("stray")),
    ]
    result = repair_pairing(history)
    first, second = result.messages[1], result.messages[2]
    assert [b["type"] for b in first["content"]] == ["thinking", "text", "tool_use"]
    assert all(b is history[1]["content"][k] for b, k in zip(first["content"], (0, 2, 1)))
    assert second["content"] == [history[2]["content"][1], history[2]["content"][0]]
    assert actions(result) == [
        (1, "moved_text", ("x",)),
        (2, "moved_result", ("x",)),
        (2, "dropped_result", ("stray",)),
    ]
    assert not anthropic_rejects(result.messages)


def test_anthropic_unanswered_uses_dropped_or_answered() -> None:
    history = [
        user("q"),
        claude("assistant", tool_use_block("x"), tool_use_block("y")),
        claude("user", tool_result_block("x")),
        claude("assistant", tool_use_block("z")),
        user("and then"),
    ]
    dropped = repair_pairing(history)
    assert dropped.messages[1]["content"] == [history[1]["content"][0]]
    assert dropped.messages[2] is history[2]
    assert len(dropped.messages) == 4  # the message of z alone went
    answered = repair_pairing(history, answer_unanswered=True)
    assert answered.messages[2]["content"][1] == {
        "type": "tool_result",
        "tool_use_id": "y",
        "content": PLACEHOLDER,
        "is_error": True,
    }
    assert answered.messages[4]["content"] == [
        {"type": "tool_result", "tool_use_id": "z", "content": PLACEHOLDER, "is_error": True},
        {"type": "text", "text": "and then"},
    ]
    for result in (dropped, answered):
        assert check_pairing(result.messages) == []
        assert not anthropic_rejects(result.messages)


def test_anthropic_a_text_message_after_a_dropped_call_stays_the_callers() -> None:
    history = [user("q"), claude("assistant", text_block("Hm."), tool_use_block("x")), user("?")]
    result = repair_pairing(history)
    assert result.messages[2] is history[2]
    assert result.messages[1]["content"] == [history[1]["content"][0]]


def test_anthropic_sdk_blocks_beside_a_dropped_one_stay_the_callers() -> None:
    from anthropic.types import TextBlock, ToolUseBlock

    text = TextBlock(type="text", text="Looking.")
    kept = ToolUseBlock(type="tool_use", id="x", name="f", input={})
    lost = ToolUseBlock(type="tool_use", id="y", name="f", input={})
    history = [user(), {"role": "assistant", "content": [text, kept, lost]}]
    history.append(claude("user", tool_result_block("x")))
    result = repair_pairing(history)
    content = result.messages[1]["content"]
    assert content[0] is text
    assert content[1] is kept
    assert len(content) == 2


# --- OpenAI Responses ----------------------------------------------------------------


def fc(call_id: str) -> Message:
    return {"type": "function_call", "call_id": call_id, "name": "f", "arguments": "{}"}


def out(call_id: str, text: str = "ok") -> Message:
    return {"type": "function_call_output", "call_id": call_id, "output": text}


def test_responses_an_output_before_its_call_moves_after_it() -> None:
    history = [
        user(),
        out("a"),
        reasoning_item(),
        fc("a"),
        fc("b"),
        user("?"),
        reasoning_item("r2"),
    ]
    result = repair_pairing(history)
    assert result.messages == [history[0], history[2], history[3], history[1], history[5]]
    assert actions(result) == [
        (1, "moved_result", ("a",)),
        (4, "dropped_call", ("b",)),
        (6, "dropped_reasoning", ("r2",)),
    ]
    assert result.changes[0].into == 4  # after the run of calls its call is in
    answered = repair_pairing(history, answer_unanswered=True)
    assert answered.messages[3:6] == [history[4], history[1], out("b", PLACEHOLDER)]
    assert not responses_rejects(answered.messages)


def test_responses_builtin_calls_answered_in_their_shape_or_dropped() -> None:
    shell = {"type": "shell_call", "call_id": "s", "action": {"commands": ["ls"]}}
    computer = {"type": "computer_call", "call_id": "c", "action": {"type": "click"}}
    patch = {"type": "apply_patch_call", "call_id": "p", "operation": {"type": "delete_file"}}
    result = repair_pairing([user(), shell, computer, patch], answer_unanswered=True)
    assert result.messages[1:] == [
        shell,
        patch,
        {
            "type": "shell_call_output",
            "call_id": "s",
            "output": [
                {"stdout": PLACEHOLDER, "stderr": "", "outcome": {"type": "exit", "exit_code": 1}}
            ],
        },
        {
            "type": "apply_patch_call_output",
            "call_id": "p",
            "status": "failed",
            "output": PLACEHOLDER,
        },
    ]
    assert ("c",) in [c.ids for c in result.changes if c.action == "dropped_call"]


def test_a_dropped_call_takes_its_reasoning_item_in_a_second_pass() -> None:
    history = [user(), reasoning_item(), fc("a"), user("next")]
    result = repair_pairing(history)
    assert result.messages == [history[0], history[3]]
    assert [c.action for c in result.changes] == ["dropped_call", "dropped_reasoning"]
    assert result.changes[1].index == 1


# --- Gemini and Bedrock -----------------------------------------------------------------


def g_call(name: str, call_id: Any = None) -> Message:
    call: Dict[str, Any] = {"name": name, "args": {}}
    if call_id is not None:
        call["id"] = call_id
    return {"functionCall": call}


def g_response(name: str, call_id: Any = None) -> Message:
    response: Dict[str, Any] = {"name": name, "response": {"output": "ok"}}
    if call_id is not None:
        response["id"] = call_id
    return {"functionResponse": response}


def test_gemini_responses_answer_their_calls_one_for_one() -> None:
    history = [
        {"role": "user", "parts": [{"text": "q"}]},
        {"role": "model", "parts": [g_call("a"), g_call("b")]},
        {"role": "user", "parts": [g_response("b")]},
    ]
    dropped = repair_pairing(history)
    assert dropped.messages[1]["parts"] == [history[1]["parts"][1]]
    assert dropped.messages[2] is history[2]
    answered = repair_pairing(history, answer_unanswered=True)
    assert answered.messages[2]["parts"] == [
        {"functionResponse": {"name": "a", "response": {"output": PLACEHOLDER}}},
        history[2]["parts"][0],
    ]
    extra = [*history[:2], {"role": "user", "parts": [g_response("a"), g_response("b")] * 2}]
    trimmed = repair_pairing(extra)
    assert trimmed.messages[2]["parts"] == extra[2]["parts"][:2]
    for result in (dropped, answered, trimmed):
        assert check_pairing(result.messages) == []
        assert not gemini_rejects(result.messages)


def test_gemini_a_call_turn_after_a_model_turn_joins_it() -> None:
    history = [
        {"role": "user", "parts": [{"text": "q"}]},
        {"role": "model", "parts": [{"text": "Let me look."}]},
        {"role": "model", "parts": [g_call("a")]},
        {"role": "user", "parts": [g_response("a")]},
    ]
    result = repair_pairing(history)
    assert result.messages[1] == {"role": "model", "parts": [{"text": "Let me look."}, g_call("a")]}
    assert result.messages[1]["parts"][1] is history[2]["parts"][0]
    assert result.messages[2] is history[3]
    assert actions(result) == [(2, "merged_message", ("a",))]
    assert result.changes[0].into == 1
    opening = repair_pairing(history[2:])
    assert opening.messages == []  # nothing before the call: it goes, and its answer with it
    assert not gemini_rejects(result.messages)


def b_use(use_id: str) -> Message:
    return {"toolUse": {"toolUseId": use_id, "name": "f", "input": {}}}


def b_result(use_id: str) -> Message:
    return {"toolResult": {"toolUseId": use_id, "content": [{"text": "ok"}]}}


def test_bedrock_order_then_pairing() -> None:
    history = [
        {"role": "assistant", "content": [{"text": "Hello."}]},
        {"role": "user", "content": [{"text": "q"}]},
        {"role": "user", "content": [{"text": "more"}]},
        {"role": "assistant", "content": [b_use("a"), b_use("b")]},
        {"role": "user", "content": [b_result("a"), b_result("zzz")]},
    ]
    result = repair_pairing(history, answer_unanswered=True)
    assert result.messages[0]["content"] == [{"text": "q"}, {"text": "more"}]
    assert result.messages[2]["content"][:2] == [
        {"toolResult": {"toolUseId": "b", "content": [{"text": PLACEHOLDER}], "status": "error"}},
        history[4]["content"][0],
    ]
    assert [c.action for c in result.changes][:2] == ["dropped_message", "merged_message"]
    assert result.changes[1].into == 1
    assert result.changes[2].into == 4  # the answer went into the results' message
    assert check_pairing(result.messages) == []
    assert not bedrock_rejects(result.messages)


# --- property tests: generated broken histories, before and after -------------------------

ids = st.sampled_from(["a", "b", "c", "d", "e"])


@st.composite
def chat_histories(draw: st.DrawFn) -> List[Message]:
    """Chat histories with unanswered calls, orphans, answers out of place, legacy pairs."""
    messages: List[Message] = [user("start")]
    used: List[str] = []
    for _ in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(["user", "text", "exchange", "stray", "function"]))
        if kind == "user":
            messages.append(user(draw(st.sampled_from(["go on", "why?"]))))
        elif kind == "text":
            messages.append(assistant("Sure."))
        elif kind == "exchange":
            calls = [f"call_{len(used) + k}" for k in range(draw(st.integers(1, 3)))]
            used += calls
            content = draw(st.sampled_from([None, "Let me look."]))
            messages.append(assistant(content, [tool_call(c) for c in calls]))
            answered = draw(st.permutations(calls))[: draw(st.integers(0, len(calls)))]
            if draw(st.booleans()):
                messages.append(user("wait"))
            messages.extend(tool(c, "{}") for c in answered)
        elif kind == "stray":
            messages.append(tool(draw(st.sampled_from([*used, "orphan"])), "{}"))
        else:
            call = {"name": "f", "arguments": "{}"}
            messages.append({"role": "assistant", "content": None, "function_call": call})
            if draw(st.booleans()):
                messages.append(user("hm"))
            messages.append({"role": "function", "name": "f", "content": "1"})
    return messages


@st.composite
def anthropic_histories(draw: st.DrawFn) -> List[Message]:
    messages: List[Message] = [user("start")]
    used: List[str] = []
    for _ in range(draw(st.integers(0, 7))):
        kind = draw(st.sampled_from(["user", "text", "exchange", "stray"]))
        if kind == "user":
            messages.append(user("go on"))
        elif kind == "text":
            messages.append(claude("assistant", text_block("Sure.")))
        elif kind == "exchange":
            calls = [f"toolu_{len(used) + k}" for k in range(draw(st.integers(1, 3)))]
            used += calls
            blocks: List[Message] = []
            if draw(st.booleans()):
                blocks.append(thinking_block())
            if draw(st.booleans()):
                blocks.append(text_block("Checking."))
            blocks += [tool_use_block(c) for c in calls]
            if draw(st.booleans()):
                blocks.append(text_block("after the calls"))
            messages.append(claude("assistant", *blocks))
            answered = draw(st.permutations(calls))[: draw(st.integers(0, len(calls)))]
            results: List[Message] = [tool_result_block(c) for c in answered]
            if draw(st.booleans()):
                results.insert(draw(st.integers(0, len(results))), text_block("note"))
            if draw(st.booleans()):
                results.append(tool_result_block(draw(st.sampled_from([*used, "ghost"]))))
            if results:
                messages.append(claude("user", *results))
        else:
            messages.append(claude("user", tool_result_block(draw(st.sampled_from([*used, "x"])))))
    return messages


@st.composite
def responses_histories(draw: st.DrawFn) -> List[Message]:
    items: List[Message] = [user("start")]
    used: List[str] = []
    for _ in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(["user", "reasoning", "calls", "stray"]))
        if kind == "user":
            items.append(user("go on"))
        elif kind == "reasoning":
            items.append(reasoning_item(f"rs_{len(items)}"))
        elif kind == "calls":
            calls = [f"fc_{len(used) + k}" for k in range(draw(st.integers(1, 3)))]
            used += calls
            outputs = [out(c) for c in draw(st.permutations(calls))]
            outputs = outputs[: draw(st.integers(0, len(outputs)))]
            where = draw(st.sampled_from(["after", "before", "later"]))
            if where == "before":
                items += outputs + [fc(c) for c in calls]
            elif where == "after":
                items += [fc(c) for c in calls] + outputs
            else:
                items += [fc(c) for c in calls] + [user("meanwhile")] + outputs
        else:
            items.append(out(draw(st.sampled_from([*used, "nobody"]))))
    return items


@st.composite
def gemini_histories(draw: st.DrawFn) -> List[Message]:
    contents: List[Message] = [{"role": "user", "parts": [{"text": "start"}]}]
    for n in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["user", "model", "exchange", "stray"]))
        if kind == "user":
            contents.append({"role": "user", "parts": [{"text": "go on"}]})
        elif kind == "model":
            contents.append({"role": "model", "parts": [{"text": "Sure."}]})
        elif kind == "exchange":
            names = [f"tool{n}_{k}" for k in range(draw(st.integers(1, 3)))]
            with_ids = draw(st.booleans())
            contents.append(
                {"role": "model", "parts": [g_call(m, m if with_ids else None) for m in names]}
            )
            answered = draw(st.permutations(names))[: draw(st.integers(0, len(names)))]
            if answered or draw(st.booleans()):
                parts = [g_response(m, m if with_ids else None) for m in answered]
                if not parts or draw(st.booleans()):
                    parts.append(g_response("ghost"))
                contents.append({"role": "user", "parts": parts})
        else:
            contents.append({"role": "user", "parts": [g_response("nobody")]})
    return contents


@st.composite
def bedrock_histories(draw: st.DrawFn) -> List[Message]:
    messages: List[Message] = []
    if draw(st.booleans()):
        messages.append({"role": "assistant", "content": [{"text": "Hello."}]})
    messages.append({"role": "user", "content": [{"text": "start"}]})
    used: List[str] = []
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["user", "text", "exchange", "stray"]))
        if kind == "user":
            messages.append({"role": "user", "content": [{"text": "go on"}]})
        elif kind == "text":
            messages.append({"role": "assistant", "content": [{"text": "Sure."}]})
        elif kind == "exchange":
            calls = [f"tu_{len(used) + k}" for k in range(draw(st.integers(1, 3)))]
            used += calls
            messages.append({"role": "assistant", "content": [b_use(c) for c in calls]})
            answered = draw(st.permutations(calls))[: draw(st.integers(0, len(calls)))]
            content = [b_result(c) for c in answered]
            if draw(st.booleans()):
                content.append(b_result(draw(st.sampled_from([*used, "ghost"]))))
            messages.append({"role": "user", "content": content or [{"text": "no results"}]})
        else:
            messages.append({"role": "user", "content": [b_result("nobody")]})
    messages.append({"role": "user", "content": [{"text": "end"}]})
    return messages


def idless_call(name: str) -> Message:
    return {"function": {"name": name, "arguments": {}}}


def idless_result(name: Any) -> Message:
    message: Message = {"role": "tool", "content": "ok"}
    if name is not None:
        message["tool_name"] = name
    return message


@st.composite
def ollama_histories(draw: st.DrawFn) -> List[Message]:
    """Ollama's id-less calls, answered in order by tool messages naming the tool or not."""
    messages: List[Message] = [user("start")]
    tools = st.sampled_from(["weather", "search", "clock"])
    for _ in range(draw(st.integers(0, 7))):
        kind = draw(st.sampled_from(["user", "text", "exchange", "stray"]))
        if kind == "user":
            messages.append(user("go on"))
        elif kind == "text":
            messages.append(assistant("Sure."))
        elif kind == "exchange":
            calls = draw(st.lists(tools, min_size=1, max_size=3))
            messages.append(assistant("", [idless_call(name) for name in calls]))
            answered = draw(st.permutations(calls))[: draw(st.integers(0, len(calls) + 1))]
            named = draw(st.booleans())
            messages.extend(idless_result(name if named else None) for name in answered)
        else:
            messages.append(idless_result(draw(st.sampled_from(["weather", "other", None]))))
    return messages


FORMATS = {
    "chat": (chat_histories(), chat_rejects),
    "anthropic": (anthropic_histories(), anthropic_rejects),
    "responses": (responses_histories(), responses_rejects),
    "gemini": (gemini_histories(), gemini_rejects),
    "bedrock": (bedrock_histories(), bedrock_rejects),
    "ollama": (ollama_histories(), ollama_rejects),
}


@pytest.mark.parametrize("answer", [False, True], ids=["drop", "answer"])
@pytest.mark.parametrize("name", list(FORMATS))
def test_the_kit_accepts_every_repaired_history(name: str, answer: bool) -> None:
    histories, rejects = FORMATS[name]

    @PROPERTY
    @given(histories)
    def check(history: List[Message]) -> None:
        before = copy.deepcopy(history)
        result = repair_pairing(history, answer_unanswered=answer)
        assert history == before  # the caller's data is never mutated
        assert check_pairing(result.messages) == []
        assert not rejects(result.messages), result.messages
        if not result.problems:
            assert result.changes == []
            assert all(a is b for a, b in zip(result.messages, history))
        else:
            assert result.changes
        # Every message not sent as the caller's own object is one a change names: where
        # it was (dropped, moved, rebuilt) or what it went into (an answer, a merge).
        named = {c.index for c in result.changes}
        named |= {c.into for c in result.changes if c.into is not None}
        kept = {id(m) for m in result.messages}
        assert {i for i, m in enumerate(history) if id(m) not in kept} <= named
        # Repairing again changes nothing.
        again = repair_pairing(result.messages, answer_unanswered=answer)
        assert again.changes == []
        assert again.messages == result.messages

    check()


def test_mixed_formats_in_one_list() -> None:
    history = [*exchange("a"), calling("b"), claude("assistant", tool_use_block("x")), fc("r")]
    history.insert(0, user())
    result = repair_pairing(history)
    assert check_pairing(result.messages) == []
    assert {c.provider for c in result.changes} == {"openai", "anthropic", "openai-responses"}


@st.composite
def messy_chat(draw: st.DrawFn) -> List[Message]:
    """Ids reused across exchanges and answers repeated: every answer may belong anywhere."""
    pool = st.sampled_from(["a", "b", "c"])
    messages: List[Message] = [user("start")]
    for _ in range(draw(st.integers(0, 10))):
        kind = draw(st.sampled_from(["user", "calls", "tool", "tool"]))
        if kind == "user":
            messages.append(user("go on"))
        elif kind == "calls":
            ids = draw(st.lists(pool, min_size=1, max_size=3))
            messages.append(calling(*ids))
        else:
            messages.append(tool(draw(pool), "{}"))
    return messages


@st.composite
def mixed_histories(draw: st.DrawFn) -> List[Message]:
    """Segments of every format in one list, as a proxy may hold them."""
    parts = [strategy for strategy, _ in FORMATS.values()]
    history: List[Message] = []
    for _ in range(draw(st.integers(1, 3))):
        history += draw(draw(st.sampled_from(parts)))
    return history


@PROPERTY
@given(messy_chat(), st.booleans())
def test_reused_ids_are_repaired_for_the_provider(history: List[Message], answer: bool) -> None:
    result = repair_pairing(history, answer_unanswered=answer)
    assert check_pairing(result.messages) == []
    assert not chat_rejects(result.messages)


@PROPERTY
@given(mixed_histories(), st.booleans())
def test_mixed_histories_are_repaired_to_no_problem(history: List[Message], answer: bool) -> None:
    before = copy.deepcopy(history)
    result = repair_pairing(history, answer_unanswered=answer)
    assert history == before
    assert check_pairing(result.messages) == []
    assert repair_pairing(result.messages, answer_unanswered=answer).changes == []


@pytest.mark.parametrize("answer", [True, False], ids=["answer", "drop"])
def test_a_claude_call_answered_by_a_bedrock_block_is_repaired_not_mixed(answer: bool) -> None:
    # The user message after the call holds another format's tool block: the placeholder
    # answer goes into a message of its own, never beside that block (no format reads both).
    history = [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {}}],
        },
        {
            "role": "user",
            "content": [{"toolResult": {"toolUseId": "a", "content": [{"text": "ok"}]}}],
        },
        {"role": "assistant", "content": [{"text": "x"}]},
    ]
    result = repair_pairing(history, answer_unanswered=answer)
    assert check_pairing(result.messages) == []
    if answer:
        assert result.messages[1]["content"][0]["type"] == "tool_result"
