"""repair_pairing on histories broken every way a format allows: its output passes check_pairing,
in every format, and an error names an index of the input list.

The generators of tests/test_repair.py build histories from whole exchanges broken in known ways;
these draw each message on its own, from every shape a format's messages take (calls and results
of any id, in any role, empty or text content, thinking, reasoning), so roles, orders and ids meet
as no exchange would have them. Some messages are malformed (a result on an assistant message, an
id that is a list): check_pairing refuses them, and repair_pairing must refuse them the same way,
naming the same message.
"""

from __future__ import annotations

import copy
from typing import Any, Callable, Dict, List, Optional

import pytest
from helpers import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctx_compact import InvalidMessageError, check_pairing, repair_pairing
from ctx_compact.formats._edits import Edits
from ctx_compact.formats.chat import CHAT

Message = Dict[str, Any]
PROPERTY = settings(
    max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

ids = st.sampled_from(["a", "b", "c"])
texts = st.sampled_from(["", "ok", "Let me look."])
# A value no id may be: check_pairing refuses it, naming the message.
BAD_ID: Any = ["not", "hashable"]


def _bad(draw: st.DrawFn) -> bool:
    """Whether this message is malformed (one in about forty)."""
    return draw(st.integers(0, 39)) == 0


def _history(draw: st.DrawFn, message: Callable[[st.DrawFn], Message]) -> List[Message]:
    return [message(draw) for _ in range(draw(st.integers(0, 9)))]


# --- Chat Completions, legacy function calls and Ollama's id-less calls ---------------------


def _chat_call(draw: st.DrawFn) -> Message:
    call_id: Any = BAD_ID if _bad(draw) else draw(st.one_of(ids, st.none()))
    call: Message = {"type": "function", "function": {"name": draw(ids), "arguments": "{}"}}
    if call_id is not None:
        call["id"] = call_id
    return call


@st.composite
def chat_message(draw: st.DrawFn) -> Message:
    kind = draw(st.sampled_from(["user", "system", "text", "calls", "tool", "function"]))
    if kind in ("user", "system", "text"):
        role = {"text": "assistant"}.get(kind, kind)
        return {"role": role, "content": draw(texts)}
    if kind == "calls":
        role = "user" if _bad(draw) else "assistant"
        message: Message = {"role": role, "content": draw(st.sampled_from([None, "", "Hm."]))}
        if draw(st.booleans()):
            message["tool_calls"] = [_chat_call(draw) for _ in range(draw(st.integers(0, 3)))]
        else:
            message["function_call"] = {"name": draw(ids), "arguments": "{}"}
        return message
    if kind == "tool":
        message = {"role": "tool", "content": draw(texts)}
        call_id: Any = BAD_ID if _bad(draw) else draw(st.one_of(ids, st.none()))
        if call_id is not None:
            message["tool_call_id"] = call_id
        if draw(st.booleans()):
            message["tool_name"] = draw(ids)
        return message
    return {"role": "function", "name": draw(ids), "content": draw(texts)}


@st.composite
def chat_histories(draw: st.DrawFn) -> List[Message]:
    return _history(draw, lambda d: d(chat_message()))


# --- OpenAI Responses ---------------------------------------------------------------------

CALL_TYPES = {
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
    "local_shell_call": "local_shell_call_output",
    "computer_call": "computer_call_output",
}


@st.composite
def responses_item(draw: st.DrawFn) -> Message:
    kind = draw(st.sampled_from(["user", "assistant", "message", "reasoning", "call", "output"]))
    if kind in ("user", "assistant"):
        return {"role": kind, "content": draw(texts)}
    if kind == "message":
        text = {"type": "output_text", "text": "Done.", "annotations": []}
        return {"type": "message", "id": "msg_1", "role": "assistant", "content": [text]}
    if kind == "reasoning":
        return {"type": "reasoning", "id": f"rs_{draw(ids)}", "summary": []}
    call = draw(st.sampled_from(sorted(CALL_TYPES)))
    call_id: Any = BAD_ID if _bad(draw) else draw(ids)
    if kind == "call":
        item: Message = {"type": call, "id": f"fc_{draw(ids)}", "call_id": call_id}
        item.update(name="f", arguments="{}", input="x", action={"type": "exec"})
        return item
    if call == "local_shell_call":
        return {"type": "local_shell_call_output", "id": call_id, "output": "ok"}
    return {"type": CALL_TYPES[call], "call_id": call_id, "output": "ok"}


@st.composite
def responses_histories(draw: st.DrawFn) -> List[Message]:
    return _history(draw, lambda d: d(responses_item()))


# --- Anthropic Messages -------------------------------------------------------------------


@st.composite
def anthropic_block(draw: st.DrawFn) -> Message:
    kind = draw(st.sampled_from(["text", "tool_use", "tool_result", "thinking"]))
    if kind == "text":
        return {"type": "text", "text": draw(texts) or "x"}
    if kind == "thinking":
        return {"type": "thinking", "thinking": "Hm.", "signature": "sig"}
    use_id: Any = BAD_ID if _bad(draw) else draw(ids)
    if kind == "tool_use":
        return {"type": "tool_use", "id": use_id, "name": "f", "input": {}}
    return {"type": "tool_result", "tool_use_id": use_id, "content": "ok"}


@st.composite
def anthropic_message(draw: st.DrawFn) -> Message:
    role = draw(st.sampled_from(["user", "assistant"]))
    if draw(st.integers(0, 4)) == 0:
        return {"role": role, "content": draw(texts)}
    found = draw(st.lists(anthropic_block(), max_size=4))
    if role == "user" and not _bad(draw):  # a tool_use block belongs to an assistant
        found = [b for b in found if b["type"] != "tool_use"]
    return {"role": role, "content": found}


@st.composite
def anthropic_histories(draw: st.DrawFn) -> List[Message]:
    return _history(draw, lambda d: d(anthropic_message()))


# --- Gemini -------------------------------------------------------------------------------


@st.composite
def gemini_part(draw: st.DrawFn, kind: str) -> Message:
    if kind == "text":
        return {"text": draw(texts) or "x"}
    spelling = draw(st.sampled_from([0, 1]))
    found: Message = {"name": draw(ids)}
    call_id: Any = BAD_ID if _bad(draw) else draw(st.one_of(ids, st.none()))
    if call_id is not None:
        found["id"] = call_id
    if kind == "call":
        found["args"] = {}
        return {("function_call", "functionCall")[spelling]: found}
    found["response"] = {"output": "ok"}
    return {("function_response", "functionResponse")[spelling]: found}


@st.composite
def gemini_content(draw: st.DrawFn) -> Message:
    role = draw(st.sampled_from(["user", "model", "function", None]))
    own = "call" if role == "model" else "response"
    if _bad(draw):
        own = "response" if own == "call" else "call"
    kinds = draw(st.lists(st.sampled_from(["text", own]), max_size=4))
    content: Message = {"parts": [draw(gemini_part(kind)) for kind in kinds]}
    if role is not None:
        content["role"] = role
    return content


@st.composite
def gemini_histories(draw: st.DrawFn) -> List[Message]:
    return _history(draw, lambda d: d(gemini_content()))


# --- Bedrock Converse ---------------------------------------------------------------------


@st.composite
def bedrock_block(draw: st.DrawFn, kind: str) -> Message:
    if kind == "text":
        return {"text": draw(texts) or "x"}
    if kind == "reasoning":
        return {"reasoningContent": {"reasoningText": {"text": "Hm.", "signature": "sig"}}}
    use_id: Any = BAD_ID if _bad(draw) else draw(ids)
    if kind == "toolUse":
        return {"toolUse": {"toolUseId": use_id, "name": "f", "input": {}}}
    return {"toolResult": {"toolUseId": use_id, "content": [{"text": "ok"}]}}


@st.composite
def bedrock_message(draw: st.DrawFn) -> Message:
    role = draw(st.sampled_from(["user", "assistant"]))
    if draw(st.integers(0, 5)) == 0:
        return {"role": role, "content": draw(st.sampled_from(["", "hi", []]))}
    own = "toolUse" if role == "assistant" else "toolResult"
    if _bad(draw):
        own = "toolResult" if own == "toolUse" else "toolUse"
    choices = ["text", own, "reasoning"] if role == "assistant" else ["text", own]
    kinds = draw(st.lists(st.sampled_from(choices), min_size=1, max_size=4))
    return {"role": role, "content": [draw(bedrock_block(kind)) for kind in kinds]}


@st.composite
def bedrock_histories(draw: st.DrawFn) -> List[Message]:
    return _history(draw, lambda d: d(bedrock_message()))


# --- Ollama (id-less calls answered in order) ---------------------------------------------


@st.composite
def ollama_message(draw: st.DrawFn) -> Message:
    kind = draw(st.sampled_from(["user", "text", "calls", "tool"]))
    if kind == "user":
        return {"role": "user", "content": draw(texts)}
    if kind == "text":
        return {"role": "assistant", "content": draw(texts)}
    if kind == "calls":
        names = draw(st.lists(ids, min_size=1, max_size=3))
        calls = [{"function": {"name": name, "arguments": {}}} for name in names]
        return {"role": "assistant", "content": "", "tool_calls": calls}
    message: Message = {"role": "tool", "content": "ok"}
    name: Optional[str] = draw(st.one_of(ids, st.none()))
    if name is not None:
        message["tool_name"] = name
    return message


@st.composite
def ollama_histories(draw: st.DrawFn) -> List[Message]:
    return _history(draw, lambda d: d(ollama_message()))


FORMATS = {
    "chat": chat_histories(),
    "responses": responses_histories(),
    "anthropic": anthropic_histories(),
    "gemini": gemini_histories(),
    "bedrock": bedrock_histories(),
    "ollama": ollama_histories(),
}


@st.composite
def mixed_histories(draw: st.DrawFn) -> List[Message]:
    """Runs of every format in one list, as a proxy may hold them."""
    history: List[Message] = []
    for _ in range(draw(st.integers(1, 3))):
        history += draw(draw(st.sampled_from(list(FORMATS.values()))))
    return history


def _refusal(history: List[Message]) -> Optional[InvalidMessageError]:
    try:
        check_pairing(history)
    except InvalidMessageError as refused:
        return refused
    return None


def repaired_or_refused(history: List[Message], answer: bool) -> None:
    """repair_pairing's output passes check_pairing, or it refuses what check_pairing does."""
    before = copy.deepcopy(history)
    refused = _refusal(history)
    if refused is not None:
        assert refused.index is not None
        assert 0 <= refused.index < len(history)
        with pytest.raises(InvalidMessageError) as raised:
            repair_pairing(history, answer_unanswered=answer)
        assert raised.value.index == refused.index, (raised.value, refused)
        assert history == before
        return
    result = repair_pairing(history, answer_unanswered=answer)
    assert history == before  # the caller's data is never mutated
    assert check_pairing(result.messages) == [], result.messages
    for change in result.changes:  # positions in the input
        assert 0 <= change.index < len(history)
        assert change.into is None or 0 <= change.into < len(history)


@pytest.mark.parametrize("answer", [False, True], ids=["drop", "answer"])
@pytest.mark.parametrize("name", [*FORMATS, "mixed"])
def test_every_repaired_history_passes_the_check(name: str, answer: bool) -> None:
    histories = mixed_histories() if name == "mixed" else FORMATS[name]

    @PROPERTY
    @given(histories)
    def check(history: List[Message]) -> None:
        repaired_or_refused(history, answer)

    check()


BEDROCK_ANSWER_IN_AN_ASSISTANT_MESSAGE: List[Message] = [
    {"role": "user", "content": [{"text": "hi"}]},
    {"role": "user", "content": [{"toolResult": {"toolUseId": "b1", "content": [{"text": "r"}]}}]},
    {"role": "assistant", "content": [{"toolUse": {"toolUseId": "b1", "name": "f", "input": {}}}]},
    {"role": "assistant", "content": []},
]


@pytest.mark.parametrize("answer", [False, True], ids=["drop", "answer"])
def test_bedrock_a_call_followed_by_no_user_message_is_answered_in_a_new_one(answer: bool) -> None:
    history = BEDROCK_ANSWER_IN_AN_ASSISTANT_MESSAGE
    repaired_or_refused(history, answer)
    result = repair_pairing(history, answer_unanswered=True)
    placeholder = {"text": "[tool result missing]"}
    assert result.messages == [
        {"role": "user", "content": [{"text": "hi"}]},
        history[2],
        {
            "role": "user",
            "content": [
                {"toolResult": {"toolUseId": "b1", "content": [placeholder], "status": "error"}}
            ],
        },
        history[3],
    ]
    answered = result.changes[-1]
    assert (answered.index, answered.action, answered.into) == (2, "answered_call", None)


def test_a_message_a_repair_breaks_is_named_by_its_index_in_the_input(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A format's repair that makes a message no format reads (a bug, as the Bedrock answer
    # written into an assistant message above was): the error names the input's message.
    def breaking(views: Any, problems: Any, edits: Edits, answer: Any) -> None:
        edits.drop(0)
        edits.rebuild(2, "tool_calls", [{"id": "x", "type": "function", "function": {}}])

    monkeypatch.setattr(CHAT, "repair", breaking)
    history = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    history.append({"role": "tool", "tool_call_id": "lost", "content": "{}"})
    with pytest.raises(InvalidMessageError) as raised:
        repair_pairing(history)
    assert raised.value.index == 2
    assert str(raised.value).startswith("message 2: after repair: ")
