"""SDK objects inside plain messages: read as the SDK will send them, returned as they are.

The most common OpenAI tool loop appends ``{"role": "assistant", "content": None,
"tool_calls": response.choices[0].message.tool_calls}``: a dict holding the
SDK's pydantic tool-call objects, which the SDK serialises when it sends them.
The same happens with Anthropic content blocks (``response.content``, a
``TextBlock`` inside a ``tool_result``), with dataclasses and with read-only
mappings. Each such history must group, count and check exactly as its
plain-dict form (the history rebuilt from its JSON) does, through ``compact``,
``check_pairing``, clearing, ``openai_chat_counter``, ``@budgeted`` and a
session, and what comes back must be the caller's own objects.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from types import MappingProxyType
from typing import Any, Dict, List

import pytest

openai = pytest.importorskip("openai")
anthropic_types = pytest.importorskip("anthropic.types")

from openai.types.chat import ChatCompletionMessageFunctionToolCall  # noqa: E402
from openai.types.chat.chat_completion_message_function_tool_call import Function  # noqa: E402

from ctx_compact import (  # noqa: E402
    InvalidMessageError,
    check_pairing,
    clear_tool_results,
    compact,
    estimate_tokens,
)
from ctx_compact.counters import openai_chat_counter  # noqa: E402
from ctx_compact.testing import FakeProvider  # noqa: E402
from middleware import CompactingSession, budgeted  # noqa: E402

Message = Dict[str, Any]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]


@dataclasses.dataclass
class DataclassCall:
    """A tool call as an application may keep it: a dataclass holding a dataclass."""

    id: str
    type: str
    function: Any


@dataclasses.dataclass
class DataclassFunction:
    name: str
    arguments: str


def sdk_call(call_id: str, city: str) -> Any:
    return ChatCompletionMessageFunctionToolCall(
        id=call_id,
        type="function",
        function=Function(name="get_weather", arguments=json.dumps({"city": city})),
    )


def as_plain(value: Any) -> Any:
    """What the SDK sends for ``value``: its JSON, rebuilt."""

    def default(obj: Any) -> Any:
        if dataclasses.is_dataclass(obj):
            return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
        if isinstance(obj, MappingProxyType):
            return dict(obj)
        return obj.model_dump(mode="json", exclude_unset=True)

    return json.loads(json.dumps(value, default=default))


def chat_history(turns: int = 6) -> List[Message]:
    """An OpenAI tool loop whose assistant turns hold SDK objects, dataclasses and proxies."""
    history: List[Message] = [{"role": "system", "content": "Be terse."}]
    for turn in range(turns):
        city = f"City{turn}"
        call_id = f"call_{turn}"
        history.append({"role": "user", "content": f"What is the weather in {city}? " * 3})
        kind = turn % 3
        if kind == 0:
            calls: Any = [sdk_call(call_id, city)]
        elif kind == 1:
            function = DataclassFunction("get_weather", json.dumps({"city": city}))
            calls = [DataclassCall(call_id, "function", function)]
        else:
            function_map = MappingProxyType(
                {"name": "get_weather", "arguments": json.dumps({"city": city})}
            )
            calls = [{"id": call_id, "type": "function", "function": function_map}]
        history.append({"role": "assistant", "content": None, "tool_calls": calls})
        history.append({"role": "tool", "tool_call_id": call_id, "content": "Sunny, 21C. " * 8})
        history.append({"role": "assistant", "content": f"It is sunny in {city}."})
    return history


def claude_history(turns: int = 5) -> List[Message]:
    """An Anthropic tool loop: replies as SDK blocks, results holding SDK text blocks."""
    history: List[Message] = []
    for turn in range(turns):
        use_id = f"toolu_{turn}"
        history.append({"role": "user", "content": f"Forecast for day {turn}, please. " * 3})
        history.append(
            {
                "role": "assistant",
                "content": [
                    anthropic_types.TextBlock(type="text", text="Checking."),
                    anthropic_types.ToolUseBlock(
                        type="tool_use", id=use_id, name="forecast", input={"day": turn}
                    ),
                ],
            }
        )
        history.append(
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": use_id,
                        "content": [anthropic_types.TextBlock(type="text", text="Rain. " * 20)],
                    }
                ],
            }
        )
        history.append(
            {"role": "assistant", "content": [anthropic_types.TextBlock(type="text", text="Ok.")]}
        )
    return history


HISTORIES = {"chat": chat_history, "anthropic": claude_history}


def positions(kept: Any, messages: List[Any]) -> List[int]:
    """Where each kept message is in ``messages``, by identity."""
    return [next(i for i, m in enumerate(messages) if m is k) for k in kept]


@pytest.mark.parametrize("name", list(HISTORIES))
@pytest.mark.parametrize("max_tokens", [150, 300, 450])
def test_compact_decides_as_for_the_plain_form_and_returns_the_callers_objects(
    name: str, max_tokens: int
) -> None:
    history = HISTORIES[name]()
    plain = as_plain(history)
    before = copy.deepcopy(plain)

    result = compact(history, max_tokens=max_tokens, keep_tail=2)
    expected = compact(plain, max_tokens=max_tokens, keep_tail=2)

    assert result.dropped, "the budget should force dropping"
    assert positions(result.messages, history) == positions(expected.messages, plain)
    assert (result.tokens_before, result.tokens_after) == (
        expected.tokens_before,
        expected.tokens_after,
    )
    assert all(any(m is own for own in history) for m in result.messages)
    assert all(any(m is own for own in history) for m in result.dropped)
    assert check_pairing(list(result.messages)) == []
    assert as_plain(history) == before  # nothing of the caller's was changed


@pytest.mark.parametrize("name", list(HISTORIES))
def test_counts_equal_the_plain_forms(name: str) -> None:
    history = HISTORIES[name]()
    plain = as_plain(history)
    assert [estimate_tokens(m) for m in history] == [estimate_tokens(m) for m in plain]
    counter = openai_chat_counter("o200k_base")
    assert [counter(m) for m in history] == [counter(m) for m in plain]


def test_check_pairing_sees_the_calls_inside_sdk_objects() -> None:
    history = chat_history()
    assert check_pairing(history) == []
    broken = [m for m in history if m.get("tool_calls") is None or m is not history[2]]
    problems = check_pairing(broken)
    assert [(p.index, p.code) for p in problems] == [(2, "orphan_tool_result")]


def test_a_call_that_is_no_mapping_nor_an_sdk_object_is_still_refused() -> None:
    history = chat_history()
    history[2] = {"role": "assistant", "content": None, "tool_calls": ["call_0"]}
    with pytest.raises(InvalidMessageError, match=r"tool_calls\[0\] must be a mapping") as info:
        compact(history, max_tokens=100)
    assert info.value.index == 2


def test_clearing_edits_sdk_calls_as_their_json_and_leaves_the_callers_untouched() -> None:
    history = chat_history()
    before = as_plain(history)

    result = clear_tool_results(history, max_tokens=1, keep=1, clear_inputs=True)

    assert as_plain(history) == before
    cleared = as_plain(list(result.messages))
    expected = clear_tool_results(before, max_tokens=1, keep=1, clear_inputs=True)
    assert result.cleared
    assert len(result.cleared) == len(expected.cleared)
    assert cleared == as_plain(list(expected.messages))
    assert check_pairing(list(result.messages)) == []


def test_budgeted_and_a_session_pass_on_the_callers_objects() -> None:
    history = chat_history()
    plain = as_plain(history)
    expected = compact(plain, max_tokens=300, keep_tail=2)
    sent: List[Any] = []

    def send(messages: List[Any]) -> None:
        sent.append(messages)

    budgeted(max_tokens=300, keep_tail=2)(send)(history)
    with CompactingSession(max_tokens=300, keep_tail=2) as session:
        session.wrap(send)(history)

    first, second = sent
    for kept in (first, second):
        assert positions(kept, history) == positions(expected.messages, plain)
        assert all(any(m is own for own in history) for m in kept)
    (event,) = session.events
    assert event.tokens_after == expected.tokens_after
    assert all(any(m is own for own in history) for m in event.dropped)


def test_the_real_tool_loop_through_a_session_is_accepted(provider: FakeProvider) -> None:
    # The loop as users write it: the reply's own tool-call objects appended in a dict.
    provider.tool_calls = 1
    client = openai.OpenAI(base_url=provider.openai_url, api_key="test", max_retries=0)
    history: List[Any] = [{"role": "system", "content": "Be terse."}]
    budget = 260
    with client, CompactingSession(max_tokens=budget, keep_tail=3, intercept="openai") as session:
        for turn in range(12):
            history.append({"role": "user", "content": f"Weather in City{turn}? " * 4})
            reply = (
                client.chat.completions.create(model="gpt-4o", messages=history, tools=TOOLS)
                .choices[0]
                .message
            )
            assert reply.tool_calls, "the scripted model calls the tool first"
            history.append({"role": "assistant", "content": None, "tool_calls": reply.tool_calls})
            for call in reply.tool_calls:
                history.append({"role": "tool", "tool_call_id": call.id, "content": "Sunny. " * 6})
            answer = client.chat.completions.create(model="gpt-4o", messages=history, tools=TOOLS)
            history.append({"role": "assistant", "content": answer.choices[0].message.content})
    assert len(session.events) == 24
    assert any(event.dropped for event in session.events)
    assert all(event.tokens_after <= budget for event in session.events)
    # The provider validates pairing as OpenAI does: a broken request would have raised.
    assert len(provider.requests) == 24
    assert all(check_pairing(r.body["messages"]) == [] for r in provider.requests)
