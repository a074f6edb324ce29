"""google-genai ``types.Content`` objects are grouped, checked and cleared as the JSON they send.

Runs in the ``providers`` extra's venv (google-genai installed); the last test
sends a compacted chat history to the testing kit through the SDK.
"""

from __future__ import annotations

import copy
from typing import Any, List

from google.genai import types

from ctx_compact import (
    ClearedThinking,
    check_pairing,
    clear_thinking,
    clear_tool_results,
    compact,
    compact_with_summary,
)
from ctx_compact._grouping import group_bounds
from ctx_compact._views import message_views
from ctx_compact.testing import FakeProvider
from ctx_compact.testing import gemini as kit

MODEL = "gemini-2.5-flash"


def _loop(turns: int, size: int = 300) -> List[Any]:
    contents: List[Any] = [types.UserContent(parts=[types.Part.from_text(text="start")])]
    for n in range(turns):
        call = types.Part.from_function_call(name=f"lookup_{n}", args={"n": n})
        contents.append(types.ModelContent(parts=[call]))
        answer = types.Part.from_function_response(
            name=f"lookup_{n}", response={"output": "x" * size}
        )
        contents.append(types.UserContent(parts=[answer]))
    return contents


def _wire(contents: List[Any]) -> List[Any]:
    return [
        c if isinstance(c, dict) else c.model_dump(mode="json", exclude_none=True) for c in contents
    ]


def test_user_and_model_content_objects_group_as_their_calls_and_responses() -> None:
    contents = _loop(3)
    assert group_bounds(message_views(contents)) == [0, 1, 3, 5, 7]
    assert check_pairing(contents) == []


def test_plain_content_objects_with_roles_group_the_same() -> None:
    contents = [
        types.Content(role="user", parts=[types.Part.from_text(text="hi")]),
        types.Content(
            role="model",
            parts=[types.Part(function_call=types.FunctionCall(id="c1", name="f", args={}))],
        ),
        types.Content(
            role="user",
            parts=[
                types.Part(
                    function_response=types.FunctionResponse(id="c1", name="f", response={"a": 1})
                )
            ],
        ),
    ]
    assert group_bounds(message_views(contents)) == [0, 1, 3]


def test_part_objects_inside_a_dict_content_are_read() -> None:
    reply = types.ModelContent(parts=[types.Part.from_function_call(name="f", args={})])
    contents = [
        {"role": "user", "parts": [{"text": "hi"}]},
        {"role": "model", "parts": reply.parts},
        {"role": "user", "parts": [types.Part.from_function_response(name="f", response={})]},
    ]
    assert group_bounds(message_views(contents)) == [0, 1, 3]


def test_compaction_returns_the_callers_objects_and_the_provider_takes_it() -> None:
    contents = _loop(10)
    result = compact(contents, max_tokens=500)
    assert result.dropped
    assert all(any(m is c for c in contents) for m in result.messages)
    assert kit.validate_contents(_wire(result.messages)) == []


def test_the_summary_joins_the_user_head_as_a_plain_content() -> None:
    contents = _loop(10)
    result = compact_with_summary(contents, max_tokens=600, summarize=lambda d: "earlier")
    head = result.messages[0]
    assert head["role"] == "user"
    assert head["parts"][-1] == {"text": "earlier"}
    assert kit.validate_contents(_wire(result.messages)) == []


def test_clearing_an_object_gives_its_edited_json_and_leaves_the_object_alone() -> None:
    contents = _loop(3)
    before = copy.deepcopy([c.model_dump() for c in contents])
    result = clear_tool_results(contents, max_tokens=50, keep=1)
    assert [c.index for c in result.cleared] == [2, 4]
    assert result.messages[2]["parts"][0]["function_response"]["response"] == {
        "output": "[cleared]"
    }
    assert [c.model_dump() for c in contents] == before
    assert result.messages[6] is contents[6]
    assert kit.validate_contents(_wire(result.messages)) == []


def test_thought_parts_go_from_an_objects_json_and_signed_parts_stay() -> None:
    signed = types.Part(
        function_call=types.FunctionCall(name="f", args={}), thought_signature=b"signature"
    )
    called = types.ModelContent(parts=[types.Part(text="I should call f.", thought=True), signed])
    answer = types.Part.from_text(text="Answer 0.")
    contents: List[Any] = [
        types.UserContent(parts=[types.Part.from_text(text="Question 0?")]),
        called,
        types.UserContent(parts=[types.Part.from_function_response(name="f", response={})]),
        {"role": "model", "parts": [types.Part(text="Done.", thought=True), answer]},
        types.UserContent(parts=[types.Part.from_text(text="Question 1?")]),
        types.ModelContent(parts=[types.Part(text="Easy.", thought=True), answer]),
    ]
    before = [c if isinstance(c, dict) else c.model_dump() for c in contents]
    before = copy.deepcopy(before)
    result = clear_thinking(contents)
    assert result.cleared == [ClearedThinking(1, "thought", 0), ClearedThinking(3, "thought", 0)]
    # The object is sent as its JSON without the thought; the signed call part is kept whole.
    assert result.messages[1] == {
        "role": "model",
        "parts": [signed.model_dump(mode="json", exclude_unset=True)],
    }
    assert result.messages[3]["parts"] == [answer]  # a dict's other parts: the caller's objects
    assert result.messages[3]["parts"][0] is answer
    assert result.messages[5] is contents[5]  # the last turn keeps its thoughts
    assert [c if isinstance(c, dict) else c.model_dump() for c in contents] == before
    # What the SDK sends for the list: each dict read as a Content, as it reads it.
    sent = [types.Content.model_validate(m) if isinstance(m, dict) else m for m in result.messages]
    assert kit.validate_contents(_wire(sent)) == []


def test_a_content_object_without_a_role_is_a_user_turn() -> None:
    contents = [
        types.Content(parts=[types.Part.from_text(text="hi")]),
        types.ModelContent(parts=[types.Part.from_function_call(name="f", args={})]),
        types.Content(parts=[types.Part.from_function_response(name="f", response={})]),
    ]
    assert group_bounds(message_views(contents)) == [0, 1, 3]
    assert check_pairing(contents) == []


def get_weather(city: str, days: int) -> str:
    """The weather in a city over the next days."""
    return f"Sunny in {city} for {days} days, " + "with a light breeze " * 20


def test_a_chats_own_history_compacted_is_taken_by_the_kit(
    fake_gemini: Any, fake_provider: FakeProvider
) -> None:
    """The SDK's own objects: a chat's history after automatic function calling."""
    fake_provider.tool_calls = 2
    chat = fake_gemini.chats.create(
        model=MODEL, config=types.GenerateContentConfig(tools=[get_weather])
    )
    for city in ("Paris", "Rome", "Oslo", "Lima"):
        chat.send_message(f"Weather in {city}?")
    history = chat.get_history()
    assert any(p.function_call for c in history for p in c.parts or [])
    for budget in (200, 400, 800):
        result = compact_with_summary(history, max_tokens=budget, summarize=lambda d: "earlier")
        assert result.dropped
        assert check_pairing(result.messages) == []
        response = fake_gemini.models.generate_content(model=MODEL, contents=result.messages)
        assert response.text.startswith("Fake reply")
