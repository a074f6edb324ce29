"""Pairing properties, per wire format, against the testing kit's own validators.

For OpenAI Chat, Ollama (calls without ids), Anthropic, Responses, Gemini and
Bedrock Converse, histories are generated with parallel calls (with and without
ids where the format allows both), the format's thinking mixed in (Anthropic
thinking blocks, Responses reasoning items, Gemini thought parts and
``thoughtSignature``, Bedrock ``reasoningContent``, Ollama's ``thinking``), the
providers' compaction items, and calls left unfinished at the end (some of their
results already given, the rest awaited). Every compaction, clearing and repair
of them is checked by the kit's validator for that provider
(``ctx_compact.testing.*``, written independently of the core): a request still
waiting on calls is checked as the provider will see it once their results are
appended. On damaged histories, ``check_pairing`` flags every tool-pairing
problem the validator rejects.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

import pytest
from helpers import examples
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ctx_compact import (
    check_pairing,
    clear_thinking,
    clear_tool_results,
    compact,
    compact_with_summary,
    repair_pairing,
)
from ctx_compact.testing import anthropic, bedrock, gemini, ollama, openai_chat, responses
from ctx_compact.testing._api import RequestRejected
from middleware import budgeted

Message = Dict[str, Any]
History = Tuple[List[Message], List[Message], List[Message]]  # (history, pending, completion)
PROPERTY = settings(
    max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

sizes = st.integers(0, 120)


def pad(draw: st.DrawFn, letter: str) -> str:
    return letter * draw(sizes) + letter  # never empty: providers refuse empty text


# --- OpenAI Chat Completions ------------------------------------------------------------


def chat_call(call_id: str) -> Message:
    return {"id": call_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}


def chat_result(call_id: str, draw: st.DrawFn) -> Message:
    return {"role": "tool", "tool_call_id": call_id, "content": pad(draw, "r")}


@st.composite
def chat_histories(draw: st.DrawFn) -> History:
    messages: List[Message] = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "q"},
    ]
    for n in range(draw(st.integers(0, 8))):
        if draw(st.booleans()):
            messages.append({"role": "assistant", "content": pad(draw, "a")})
            messages.append({"role": "user", "content": pad(draw, "u")})
            continue
        ids = [f"call_{n}_{k}" for k in range(draw(st.integers(1, 3)))]
        content = draw(st.sampled_from([None, "Let me look."]))
        messages.append(
            {"role": "assistant", "content": content, "tool_calls": [chat_call(i) for i in ids]}
        )
        messages += [chat_result(i, draw) for i in draw(st.permutations(ids))]
    pending: List[Message] = []
    completion: List[Message] = []
    if draw(st.booleans()):
        ids = [f"wait_{k}" for k in range(draw(st.integers(1, 3)))]
        pending.append(
            {"role": "assistant", "content": None, "tool_calls": [chat_call(i) for i in ids]}
        )
        given_ = draw(st.integers(0, len(ids) - 1))
        pending += [chat_result(i, draw) for i in ids[:given_]]
        completion = [chat_result(i, draw) for i in ids[given_:]]
    return messages, pending, completion


def chat_rejection(messages: List[Any]) -> Optional[str]:
    return _raised(openai_chat.validate_chat_completions, {"model": "m", "messages": messages})


CHAT_PAIRING = ("Invalid parameter: messages with role 'tool'", "An assistant message with")
CHAT_PAIRING += ("Invalid parameter: 'tool_call_id'",)


# --- Ollama: calls without ids, answered in order ----------------------------------------


def ollama_call(name: str) -> Message:
    return {"function": {"name": name, "arguments": {"city": "Oslo"}}}


def ollama_result(name: Optional[str], draw: st.DrawFn) -> Message:
    message: Message = {"role": "tool", "content": pad(draw, "r")}
    if name is not None:
        message["tool_name"] = name
    return message


def _ollama_answers(draw: st.DrawFn, names: List[str]) -> List[Message]:
    """Answers named (in any order) or not (in the calls' order), as Ollama pairs them."""
    if draw(st.booleans()):
        return [ollama_result(name, draw) for name in draw(st.permutations(names))]
    return [ollama_result(None, draw) for _ in names]


@st.composite
def ollama_histories(draw: st.DrawFn) -> History:
    messages: List[Message] = [{"role": "user", "content": "q"}]
    tools = st.sampled_from(["get_weather", "get_time", "search"])
    for _ in range(draw(st.integers(0, 8))):
        if draw(st.booleans()):
            messages.append({"role": "assistant", "content": pad(draw, "a")})
            messages.append({"role": "user", "content": pad(draw, "u")})
            continue
        names = draw(st.lists(tools, min_size=1, max_size=3))
        calls = [ollama_call(n) for n in names]
        answers = _ollama_answers(draw, names)
        if draw(st.integers(0, 3)) == 0:  # a call with an id beside the id-less ones
            call_id = f"call_{len(messages)}"
            calls.append({"id": call_id, **ollama_call("search")})
            answer = {"role": "tool", "tool_call_id": call_id, "content": "x"}
            answers.insert(draw(st.integers(0, len(answers))), answer)
        call: Message = {"role": "assistant", "content": "", "tool_calls": calls}
        if draw(st.booleans()):
            call["thinking"] = pad(draw, "t")
        messages.append(call)
        messages += answers
    pending: List[Message] = []
    completion: List[Message] = []
    if draw(st.booleans()):
        names = draw(st.lists(tools, min_size=1, max_size=3))
        pending.append(
            {"role": "assistant", "content": "", "tool_calls": [ollama_call(n) for n in names]}
        )
        given_ = draw(st.integers(0, len(names) - 1))
        pending += [ollama_result(None, draw) for _ in names[:given_]]
        completion = [ollama_result(None, draw) for _ in names[given_:]]
    return messages, pending, completion


def ollama_rejection(messages: List[Any]) -> Optional[str]:
    problems = ollama.validate_messages(messages)
    return problems[0].message if problems else None


# --- Anthropic Messages ---------------------------------------------------------------


def thinking(draw: st.DrawFn) -> List[Message]:
    blocks: List[Message] = []
    if draw(st.booleans()):
        blocks.append({"type": "thinking", "thinking": pad(draw, "t"), "signature": "sig"})
    if draw(st.integers(0, 3)) == 0:
        blocks.append({"type": "redacted_thinking", "data": "opaque"})
    return blocks


def claude_results(ids: List[str], draw: st.DrawFn) -> List[Message]:
    return [
        {"type": "tool_result", "tool_use_id": i, "content": pad(draw, "r")}
        for i in draw(st.permutations(ids))
    ]


def claude_uses(ids: List[str]) -> List[Message]:
    return [{"type": "tool_use", "id": i, "name": "f", "input": {}} for i in ids]


@st.composite
def anthropic_histories(draw: st.DrawFn) -> History:
    messages: List[Message] = [{"role": "user", "content": "task"}]
    for n in range(draw(st.integers(0, 8))):
        compaction = (
            [{"type": "compaction", "content": f"summary {n} " * 4}]
            if draw(st.integers(0, 3)) == 0
            else []
        )
        if draw(st.booleans()):
            text = {"type": "text", "text": pad(draw, "a")}
            messages.append({"role": "assistant", "content": [*compaction, *thinking(draw), text]})
            messages.append({"role": "user", "content": pad(draw, "u")})
            continue
        ids = [f"toolu_{n}_{k}" for k in range(draw(st.integers(1, 3)))]
        preface = [{"type": "text", "text": "Checking."}] if draw(st.booleans()) else []
        blocks = [*compaction, *thinking(draw), *preface, *claude_uses(ids)]
        messages.append({"role": "assistant", "content": blocks})
        results = claude_results(ids, draw)
        if draw(st.booleans()):
            results.append({"type": "text", "text": "and more"})
        messages.append({"role": "user", "content": results})
    pending: List[Message] = []
    completion: List[Message] = []
    if draw(st.booleans()):
        ids = [f"wait_{k}" for k in range(draw(st.integers(1, 3)))]
        compaction = [{"type": "compaction", "content": "late"}] if draw(st.booleans()) else []
        blocks = [*compaction, *thinking(draw), *claude_uses(ids)]
        pending = [{"role": "assistant", "content": blocks}]
        completion = [{"role": "user", "content": claude_results(ids, draw)}]
    return messages, pending, completion


def anthropic_rejection(messages: List[Any]) -> Optional[str]:
    body = {"model": "m", "max_tokens": 10, "messages": messages}
    return _raised(anthropic.validate_messages, body)


def anthropic_pairing(error: str) -> bool:
    return "`tool_use`" in error or "`tool_use_id`" in error


def test_anthropic_pairs_calls_and_results_message_by_message() -> None:
    # Anthropic checks tool pairing per message, not per turn of consecutive messages:
    # the results of parallel calls sent as two user messages get its 400 (as clients
    # that sent them so have reported), and so do calls spread over two assistant
    # messages. The validator refuses both and check_pairing flags both.
    def use(call_id: str) -> Message:
        return {"type": "tool_use", "id": call_id, "name": "f", "input": {}}

    def result(call_id: str) -> Message:
        return {"type": "tool_result", "tool_use_id": call_id, "content": "r"}

    split_results = [
        {"role": "user", "content": "Go."},
        {"role": "assistant", "content": [use("a"), use("b")]},
        {"role": "user", "content": [result("a")]},
        {"role": "user", "content": [result("b")]},
    ]
    split_calls = [
        {"role": "user", "content": "Go."},
        {"role": "assistant", "content": [use("a")]},
        {"role": "assistant", "content": [use("b")]},
        {"role": "user", "content": [result("a"), result("b")]},
    ]
    for messages in (split_results, split_calls):
        error = anthropic_rejection(messages)
        assert error is not None
        assert anthropic_pairing(error)
        assert [p.index for p in check_pairing(messages)][:1] == [1]


# --- OpenAI Responses -------------------------------------------------------------------


def fc(call_id: str) -> Message:
    return {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": "f",
        "arguments": "{}",
    }


def fc_output(call_id: str, draw: st.DrawFn) -> Message:
    return {"type": "function_call_output", "call_id": call_id, "output": pad(draw, "r")}


@st.composite
def responses_histories(draw: st.DrawFn) -> History:
    items: List[Message] = [{"role": "user", "content": "task"}]
    for n in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(["text", "calls", "calls", "compaction"]))
        if kind == "compaction":
            items.append({"type": "compaction", "id": f"cmp_{n}", "encrypted_content": "gAAA" * 8})
        elif kind == "text":
            items.append({"role": "user", "content": pad(draw, "u")})
            message = {
                "type": "message",
                "id": f"msg_{n}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": pad(draw, "a"), "annotations": []}],
            }
            items.append(message)
        else:
            ids = [f"c{n}_{k}" for k in range(draw(st.integers(1, 3)))]
            if draw(st.booleans()):
                items.append({"type": "reasoning", "id": f"rs_{n}", "summary": []})
            items += [fc(i) for i in ids]
            outputs = [fc_output(i, draw) for i in draw(st.permutations(ids))]
            if draw(st.booleans()):  # an output may come later, after other items
                items += [*outputs[:1], {"role": "user", "content": "meanwhile"}, *outputs[1:]]
            else:
                items += outputs
    pending: List[Message] = []
    completion: List[Message] = []
    if draw(st.booleans()):
        ids = [f"wait_{k}" for k in range(draw(st.integers(1, 3)))]
        if draw(st.booleans()):
            pending.append({"type": "compaction", "id": "cmp_late", "encrypted_content": "gBBB"})
        if draw(st.booleans()):
            pending.append({"type": "reasoning", "id": "rs_wait", "summary": []})
        pending += [fc(i) for i in ids]
        given_ = draw(st.integers(0, len(ids) - 1))
        pending += [fc_output(i, draw) for i in ids[:given_]]
        completion = [fc_output(i, draw) for i in ids[given_:]]
    return items, pending, completion


def responses_rejection(items: List[Any]) -> Optional[str]:
    return _raised(responses.validate_responses, {"model": "m", "input": items})


# --- Gemini -----------------------------------------------------------------------------


def g_call(name: str, with_id: bool, signed: bool) -> Message:
    call: Message = {"name": name, "args": {"city": "Oslo"}}
    if with_id:
        call["id"] = f"id_{name}"
    part: Message = {"functionCall": call}
    if signed:
        part["thoughtSignature"] = "c2ln"
    return part


def g_responses(names: List[str], with_id: bool, draw: st.DrawFn) -> Message:
    order = draw(st.permutations(names)) if with_id else names
    parts = []
    for name in order:
        response: Message = {"name": name, "response": {"output": pad(draw, "r")}}
        if with_id:
            response["id"] = f"id_{name}"
        parts.append({"functionResponse": response})
    return {"role": draw(st.sampled_from(["user", "user", "function"])), "parts": parts}


def g_thought(draw: st.DrawFn) -> List[Message]:
    if not draw(st.booleans()):
        return []
    part: Message = {"text": pad(draw, "t"), "thought": True}
    if draw(st.booleans()):
        part["thoughtSignature"] = "dGhvdWdodA=="
    return [part]


def g_call_turn(draw: st.DrawFn, names: List[str], with_id: bool) -> Message:
    # Gemini signs the first call of a step; a text part before the calls may be signed instead.
    calls = [g_call(name, with_id, k == 0) for k, name in enumerate(names)]
    preface = [{"text": "Checking."}] if draw(st.booleans()) else []
    return {"role": "model", "parts": [*g_thought(draw), *preface, *calls]}


@st.composite
def gemini_histories(draw: st.DrawFn) -> History:
    contents: List[Message] = [{"role": "user", "parts": [{"text": "task"}]}]
    for n in range(draw(st.integers(0, 8))):
        if draw(st.booleans()):
            text = {"text": pad(draw, "m")}
            if draw(st.booleans()):
                text["thoughtSignature"] = "c2ln"
            contents.append({"role": "model", "parts": [*g_thought(draw), text]})
            contents.append({"role": "user", "parts": [{"text": pad(draw, "u")}]})
            continue
        names = [f"t{n}_{k}" for k in range(draw(st.integers(1, 3)))]
        with_id = draw(st.booleans())
        contents.append(g_call_turn(draw, names, with_id))
        contents.append(g_responses(names, with_id, draw))
        if draw(st.booleans()):
            contents.append({"role": "model", "parts": [{"text": pad(draw, "m")}]})
            contents.append({"role": "user", "parts": [{"text": "next"}]})
    pending: List[Message] = []
    completion: List[Message] = []
    if draw(st.booleans()):
        names = [f"wait_{k}" for k in range(draw(st.integers(1, 3)))]
        with_id = draw(st.booleans())
        pending = [g_call_turn(draw, names, with_id)]
        completion = [g_responses(names, with_id, draw)]
    if draw(st.booleans()):
        return snake(contents), snake(pending), snake(completion)
    return contents, pending, completion


SNAKE = {
    "functionCall": "function_call",
    "functionResponse": "function_response",
    "thoughtSignature": "thought_signature",
}


def snake(contents: List[Message]) -> List[Message]:
    """The contents in google-genai's snake_case spelling."""
    return [
        {**content, "parts": [{SNAKE.get(k, k): v for k, v in p.items()} for p in content["parts"]]}
        for content in contents
    ]


def gemini_rejection(contents: List[Any]) -> Optional[str]:
    problems = gemini.validate_contents(contents)
    return problems[0].message if problems else None


GEMINI_PAIRING = (gemini.RESPONSE_NOT_AFTER_CALL, gemini.CALL_NOT_AFTER_USER, gemini.RESPONSE_COUNT)


# --- Bedrock Converse -------------------------------------------------------------------


def reasoning(draw: st.DrawFn) -> List[Message]:
    kind = draw(st.sampled_from(["none", "none", "text", "redacted"]))
    if kind == "text":
        text = {"text": pad(draw, "t"), "signature": "sig"}
        return [{"reasoningContent": {"reasoningText": text}}]
    if kind == "redacted":
        return [{"reasoningContent": {"redactedContent": "b3BhcXVl"}}]
    return []


def b_uses(ids: List[str]) -> List[Message]:
    return [{"toolUse": {"toolUseId": i, "name": "f", "input": {}}} for i in ids]


def b_results(ids: List[str], draw: st.DrawFn) -> Message:
    status = draw(st.sampled_from(["success", "error"]))
    content = [
        {"toolResult": {"toolUseId": i, "content": [{"text": pad(draw, "r")}], "status": status}}
        for i in draw(st.permutations(ids))
    ]
    return {"role": "user", "content": content}


@st.composite
def bedrock_histories(draw: st.DrawFn) -> History:
    messages: List[Message] = [{"role": "user", "content": [{"text": "task"}]}]
    for n in range(draw(st.integers(0, 8))):
        if draw(st.booleans()):
            text = {"text": pad(draw, "a")}
            messages.append({"role": "assistant", "content": [*reasoning(draw), text]})
            messages.append({"role": "user", "content": [{"text": pad(draw, "u")}]})
            continue
        ids = [f"tu_{n}_{k}" for k in range(draw(st.integers(1, 3)))]
        preface = [{"text": "Checking."}] if draw(st.booleans()) else []
        messages.append(
            {"role": "assistant", "content": [*reasoning(draw), *preface, *b_uses(ids)]}
        )
        results = b_results(ids, draw)
        if draw(st.booleans()):
            results["content"].append({"text": "and more"})
        messages.append(results)
    pending: List[Message] = []
    completion: List[Message] = []
    if draw(st.booleans()):
        ids = [f"wait_{k}" for k in range(draw(st.integers(1, 3)))]
        pending = [{"role": "assistant", "content": [*reasoning(draw), *b_uses(ids)]}]
        completion = [b_results(ids, draw)]
    return messages, pending, completion


def bedrock_rejection(messages: List[Any]) -> Optional[str]:
    problems = bedrock.validate_messages(messages)
    return problems[0].message if problems else None


BEDROCK_PAIRING = ("A conversation must", "The number of toolResult", "Expected toolResult")


# --- the formats, as one table ---------------------------------------------------------


def _raised(check: Callable[[Any], Any], body: Any) -> Optional[str]:
    try:
        check(body)
    except RequestRejected as rejected:
        return str(rejected.body["error"]["message"])
    return None


@dataclass(frozen=True)
class Format:
    histories: st.SearchStrategy[History]
    rejection: Callable[[List[Any]], Optional[str]]  # the validator's first error, or None
    pairing: Callable[[str], bool]  # whether an error is about the tool pairing
    strays: Tuple[Message, ...]  # results answering nothing, for damaged histories


def _starts(*prefixes: str) -> Callable[[str], bool]:
    return lambda error: error.startswith(prefixes)


FORMATS = {
    "chat": Format(
        chat_histories(),
        chat_rejection,
        _starts(*CHAT_PAIRING),
        ({"role": "tool", "tool_call_id": "nobody", "content": "x"},),
    ),
    "ollama": Format(
        ollama_histories(),
        ollama_rejection,
        lambda error: True,  # the kit's Ollama reading names pairing only
        ({"role": "tool", "content": "x"}, {"role": "tool", "tool_name": "other", "content": "x"}),
    ),
    "anthropic": Format(
        anthropic_histories(),
        anthropic_rejection,
        anthropic_pairing,
        (
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "x", "content": "x"}],
            },
        ),
    ),
    "responses": Format(
        responses_histories(),
        responses_rejection,
        _starts("No tool call found", "No tool output found", "Item 'rs_"),
        ({"type": "function_call_output", "call_id": "nobody", "output": "x"},),
    ),
    "gemini": Format(
        gemini_histories(),
        gemini_rejection,
        lambda error: error in GEMINI_PAIRING,
        ({"role": "user", "parts": [{"functionResponse": {"name": "x", "response": {}}}]},),
    ),
    "bedrock": Format(
        bedrock_histories(),
        bedrock_rejection,
        _starts(*BEDROCK_PAIRING),
        (
            {
                "role": "user",
                "content": [{"toolResult": {"toolUseId": "x", "content": [{"text": "x"}]}}],
            },
        ),
    ),
}


def accepted(form: Format, sent: List[Any], completion: List[Message]) -> None:
    """``sent`` as the provider sees it once the awaited results are appended: accepted."""
    request = sent + completion
    if request:  # an empty request is no pairing question
        error = form.rejection(request)
        assert error is None, (error, request)


def signatures_kept(name: str, before: List[Any], sent: List[Any]) -> None:
    """Gemini 3 rejects a ``functionCall`` part sent back without its ``thoughtSignature``
    ("Function call is missing a thought_signature in functionCall parts"): each call
    part sent carries the one it was given (the generated call names are unique)."""
    if name != "gemini":
        return

    def signed(contents: List[Any]) -> Dict[str, Any]:
        found = {}
        for content in contents:
            for part in content.get("parts", ()):
                call = part.get("functionCall") or part.get("function_call")
                if call is not None:
                    found[call["name"]] = part.get(
                        "thoughtSignature", part.get("thought_signature")
                    )
        return found

    given_ = signed(before)
    assert all(given_[call] == signature for call, signature in signed(sent).items())


def ends_with(sent: List[Any], pending: List[Message]) -> bool:
    return len(sent) >= len(pending) and all(
        a is b for a, b in zip(sent[len(sent) - len(pending) :], pending)
    )


budgets = st.integers(1, 1200)
keeps = st.integers(0, 4)
names = list(FORMATS)


# --- compaction, clearing and repair of generated histories --------------------------------


@pytest.mark.parametrize("name", names)
def test_no_compaction_the_validator_rejects(name: str) -> None:
    form = FORMATS[name]

    @PROPERTY
    @given(form.histories, budgets, keeps, keeps, st.floats(0.2, 1.0))
    def check(drawn: History, budget: int, head: int, tail: int, share: float) -> None:
        history, pending, completion = drawn
        messages = history + pending
        before = copy.deepcopy(messages)
        options: Dict[str, Any] = {"max_tokens": budget, "keep_head": head, "keep_tail": tail}
        results = [
            compact(messages, **options),
            compact(messages, target_tokens=budget * share, **options),
            compact_with_summary(messages, summarize=lambda d: f"{len(d)} gone", **options),
        ]
        for result in results:
            accepted(form, result.messages, completion)
            signatures_kept(name, messages, result.messages)
            assert ends_with(result.messages, pending)  # the unfinished calls, whole
        assert messages == before

    check()


@pytest.mark.parametrize("name", names)
def test_no_clearing_the_validator_rejects(name: str) -> None:
    form = FORMATS[name]

    @PROPERTY
    @given(form.histories, budgets, st.integers(0, 3), st.booleans(), st.integers(0, 2))
    def check(drawn: History, budget: int, keep: int, inputs: bool, turns: int) -> None:
        history, pending, completion = drawn
        messages = history + pending
        before = copy.deepcopy(messages)
        cleared = clear_tool_results(messages, max_tokens=budget, keep=keep, clear_inputs=inputs)
        accepted(form, cleared.messages, completion)
        signatures_kept(name, messages, cleared.messages)
        assert len(cleared.messages) == len(messages)
        for result in (
            clear_thinking(messages, keep_turns=turns),
            clear_thinking(messages, keep_turns=turns, max_tokens=budget),
        ):
            accepted(form, result.messages, completion)
            signatures_kept(name, messages, result.messages)
            # The thinking of a loop in progress stays: its calls' message is the caller's.
            if pending:
                assert any(m is pending[0] for m in result.messages)
        assert messages == before

    check()


middleware_options = st.fixed_dictionaries(
    {},
    optional={
        "summarize": st.just(lambda dropped: f"{len(dropped)} earlier messages"),
        "clear_tool_results": st.sampled_from([True, {"keep": 1}]),
        "clear_thinking": st.just(True),
        "keep_tail": st.integers(0, 3),
    },
)


@pytest.mark.parametrize("name", names)
def test_no_request_of_the_middleware_the_validator_rejects(name: str) -> None:
    # budgeted: clearing (in steps towards target_tokens), then dropping, then the summary.
    form = FORMATS[name]

    @settings(PROPERTY, max_examples=examples(60))
    @given(form.histories, budgets, st.none() | st.floats(0.2, 1.0), middleware_options)
    def check(drawn: History, budget: int, share: Optional[float], options: Dict[str, Any]) -> None:
        history, pending, completion = drawn
        messages = history + pending
        before = copy.deepcopy(messages)
        target = None if share is None else budget * share
        sent: List[List[Any]] = []

        def send(messages: List[Any]) -> None:
            sent.append(messages)

        budgeted(max_tokens=budget, target_tokens=target, **options)(send)(messages)
        accepted(form, sent[0], completion)
        signatures_kept(name, messages, sent[0])
        assert messages == before

    check()


def damaged(form: Format) -> st.SearchStrategy[List[Message]]:
    """A generated history with messages deleted, moved and stray results inserted."""

    @st.composite
    def build(draw: st.DrawFn) -> List[Message]:
        history, pending, _ = draw(form.histories)
        messages = history + pending
        for _ in range(draw(st.integers(1, 3))):
            action = draw(st.sampled_from(["delete", "insert", "move"]))
            if action == "insert" or len(messages) < 2:
                stray = copy.deepcopy(draw(st.sampled_from(form.strays)))
                messages.insert(draw(st.integers(0, len(messages))), stray)
            elif action == "delete":
                del messages[draw(st.integers(0, len(messages) - 1))]
            else:
                moved = messages.pop(draw(st.integers(0, len(messages) - 1)))
                messages.insert(draw(st.integers(0, len(messages))), moved)
        return messages

    return build()


def _gemini_exchange(name: str, preface: bool = False) -> List[Message]:
    call = g_call(name, with_id=False, signed=True)
    parts = [{"text": "Checking."}, call] if preface else [call]
    response = {"functionResponse": {"name": name, "response": {"output": "r"}}}
    return [{"role": "model", "parts": parts}, {"role": "user", "parts": [response]}]


# Histories these properties found repair_pairing failing on (PairingError), kept as examples.
REPAIR_EXAMPLES: Dict[str, List[List[Message]]] = {
    # A toolUse awaiting its result at the end: the call was taken for the message after it.
    "bedrock": [
        [
            {"role": "user", "content": [{"text": "task"}]},
            {"role": "assistant", "content": b_uses(["wait_0"])},
        ]
    ],
    # Exchanges opening the contents, repaired one a pass: the last pass the bound allowed
    # repaired the last problem, and an empty PairingError was raised all the same.
    "gemini": [
        _gemini_exchange("a", preface=True)
        + _gemini_exchange("b")
        + _gemini_exchange("c")
        + _gemini_exchange("d")
    ],
}
# Five such exchanges (ten contents) need more passes than the bound of eleven allowed: each
# call turn is merged into the model turn left before it, then its calls go, then its responses.
REPAIR_EXAMPLES["gemini"].append(
    [m for n in "abcde" for m in _gemini_exchange(n, preface=n == "a")]
)


@pytest.mark.parametrize("name", names)
def test_no_repair_the_validator_rejects(name: str) -> None:
    form = FORMATS[name]

    @PROPERTY
    @given(st.one_of(form.histories.map(lambda h: h[0] + h[1]), damaged(form)), st.booleans())
    def check(messages: List[Message], answer: bool) -> None:
        before = copy.deepcopy(messages)
        result = repair_pairing(messages, answer_unanswered=answer)
        accepted(form, result.messages, [])
        assert check_pairing(result.messages) == []
        assert messages == before

    for messages in REPAIR_EXAMPLES.get(name, []):
        check = example(messages, True)(example(messages, False)(check))
    check()


@pytest.mark.parametrize("name", names)
def test_check_pairing_flags_what_the_validator_rejects(name: str) -> None:
    form = FORMATS[name]

    @PROPERTY
    @given(damaged(form))
    def check(messages: List[Message]) -> None:
        error = form.rejection(messages) if messages else None
        rejected = error is not None and form.pairing(error)
        # Every orphan the validator rejects is flagged, and nothing it accepts is.
        assert bool(check_pairing(messages)) == rejected, (error, check_pairing(messages))

    check()


@pytest.mark.parametrize("name", ["ollama", "gemini", "bedrock"])
def test_check_pairing_flags_each_message_the_validator_names(name: str) -> None:
    # These validators list every problem with its index: each is flagged at that message
    # (Bedrock names missing results at the message due to hold them, which check_pairing
    # names at the last message when none follows.)
    form = FORMATS[name]
    validate: Callable[[List[Any]], List[Any]] = {
        "ollama": ollama.validate_messages,
        "gemini": gemini.validate_contents,
        "bedrock": bedrock.validate_messages,
    }[name]

    @PROPERTY
    @given(damaged(form))
    def check(messages: List[Message]) -> None:
        if not messages:
            return
        n = len(messages)
        rejected: Set[int] = {
            min(p.index, n - 1)
            for p in validate(messages)
            if p.index is not None and form.pairing(p.message)
        }
        flagged = {p.index for p in check_pairing(messages)}
        assert rejected <= flagged, (rejected, flagged)

    check()


@pytest.mark.parametrize(
    "following",
    [
        [],
        [{"role": "user", "content": "next"}],
        [{"type": "function_call_output", "call_id": "c", "output": "again"}],
    ],
    ids=["at the end", "before a user message", "before an output"],
)
def test_the_responses_kit_rejects_reasoning_without_the_item_it_came_with(
    following: List[Message],
) -> None:
    # OpenAI's 400 when a reasoning item is passed back without the output item the model
    # produced right after it (reported in openai/openai-node#1567, continuedev/continue#8933).
    start: List[Message] = [{"role": "user", "content": "q"}, fc("c"), fc_output_text("c")]
    items = [*start, {"type": "reasoning", "id": "rs_1", "summary": []}, *following]
    error = "Item 'rs_1' of type 'reasoning' was provided without its required following item."
    assert responses_rejection(items) == error
    assert check_pairing(items)
    # With the call it came with next to it, the same reasoning item is taken.
    items = [
        *start,
        {"type": "reasoning", "id": "rs_1", "summary": []},
        fc("d"),
        fc_output_text("d"),
    ]
    assert responses_rejection(items) is None
    assert check_pairing(items) == []


def fc_output_text(call_id: str) -> Message:
    return {"type": "function_call_output", "call_id": call_id, "output": "x"}
