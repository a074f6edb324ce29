"""The testing kit's Gemini API: its validator, and its routes spoken to over plain HTTP.

The real google-genai SDK against these routes is tests/sdks/test_kit_gemini_sdk.py.
"""

from __future__ import annotations

from typing import Any, Dict, List

import pytest

from ctx_compact.testing import Problem
from ctx_compact.testing.gemini import (
    CALL_NOT_AFTER_USER,
    CONTENTS_NOT_SPECIFIED,
    INVALID_ROLE,
    MIXED_TURN,
    RESPONSE_COUNT,
    RESPONSE_NOT_AFTER_CALL,
    validate_contents,
)

Content = Dict[str, Any]


def user(text: str = "Weather in Paris and Rome?") -> Content:
    return {"role": "user", "parts": [{"text": text}]}


def model_text(text: str = "Sunny in both.") -> Content:
    return {"role": "model", "parts": [{"text": text}]}


def calls(*cities: str, snake: bool = False) -> Content:
    key = "function_call" if snake else "functionCall"
    found = [{key: {"name": "get_weather", "args": {"city": c}}} for c in cities]
    return {"role": "model", "parts": found}


def responses(*cities: str, snake: bool = False, role: str = "user") -> Content:
    key = "function_response" if snake else "functionResponse"
    found = [
        {key: {"name": "get_weather", "response": {"city": c, "sky": "sunny"}}} for c in cities
    ]
    return {"role": role, "parts": found}


def tool_conversation() -> List[Content]:
    """Two parallel calls answered together, one more call, then the model's answer."""
    return [
        user(),
        calls("Paris", "Rome"),
        responses("Paris", "Rome"),
        calls("Oslo"),
        responses("Oslo", role="tool"),
        model_text(),
        user("Thanks"),
    ]


# --- the validator -----------------------------------------------------------------


def test_a_paired_conversation_has_no_problems() -> None:
    assert validate_contents(tool_conversation()) == []


def test_snake_case_parts_are_read_as_camel_case_ones() -> None:
    contents = [user(), calls("Paris", snake=True), responses("Paris", snake=True), model_text()]

    assert validate_contents(contents) == []


def test_a_response_turn_without_its_call_turn() -> None:
    contents = tool_conversation()
    del contents[3]  # the call for Oslo: its response now follows a response turn

    assert validate_contents(contents) == [Problem(3, RESPONSE_NOT_AFTER_CALL)]


def test_a_conversation_that_starts_with_a_response_turn() -> None:
    assert validate_contents(tool_conversation()[2:]) == [Problem(0, RESPONSE_NOT_AFTER_CALL)]


def test_a_call_turn_at_the_start_or_after_a_model_turn() -> None:
    assert validate_contents(tool_conversation()[1:]) == [Problem(0, CALL_NOT_AFTER_USER)]
    after_model = [user(), model_text(), calls("Paris"), responses("Paris")]
    assert validate_contents(after_model) == [Problem(2, CALL_NOT_AFTER_USER)]


def test_fewer_or_more_responses_than_calls() -> None:
    fewer = [user(), calls("Paris", "Rome"), responses("Paris")]
    more = [user(), calls("Paris"), responses("Paris", "Rome")]

    assert validate_contents(fewer) == [Problem(2, RESPONSE_COUNT)]
    assert validate_contents(more) == [Problem(2, RESPONSE_COUNT)]


def test_responses_split_over_two_contents_are_refused() -> None:
    split = [user(), calls("Paris", "Rome"), responses("Paris"), responses("Rome")]

    assert validate_contents(split) == [
        Problem(2, RESPONSE_COUNT),
        Problem(3, RESPONSE_NOT_AFTER_CALL),
    ]


def test_a_call_awaiting_its_response_at_the_end_is_accepted() -> None:
    assert validate_contents([user(), calls("Paris")]) == []


def test_calls_and_responses_mixed_in_one_content() -> None:
    mixed = {"role": "user", "parts": [*calls("Paris")["parts"], *responses("Paris")["parts"]]}

    assert validate_contents([user(), mixed]) == [Problem(1, MIXED_TURN)]


@pytest.mark.parametrize("contents", [[], None, "hi", {"role": "user"}])
def test_no_contents(contents: Any) -> None:
    assert validate_contents(contents) == [Problem(None, CONTENTS_NOT_SPECIFIED)]


def test_empty_parts_empty_parts_lists_and_unknown_roles() -> None:
    contents = [
        user(),
        {"role": "model", "parts": []},
        {"role": "system", "parts": [{"text": "x"}]},
    ]
    contents.append({"parts": [{"text": "ok"}, {"thoughtSignature": "c2ln"}]})

    assert validate_contents(contents) == [
        Problem(
            1, "* GenerateContentRequest.contents[1].parts: contents.parts must not be empty.\n"
        ),
        Problem(2, INVALID_ROLE),
        Problem(
            3,
            "* GenerateContentRequest.contents[3].parts[1].data: required oneof field 'data' must "
            "have one initialized field\n",
        ),
    ]


def test_the_callers_contents_are_not_changed() -> None:
    contents = tool_conversation()[1:]
    before = repr(contents)

    validate_contents(contents)

    assert repr(contents) == before
