"""The testing kit's Bedrock Converse API: its validator, and its routes over plain HTTP.

The real boto3 client against these routes is tests/sdks/test_kit_bedrock_sdk.py.
"""

from __future__ import annotations

from typing import Any, Dict, List

import pytest

from ctx_compact.testing import Problem
from ctx_compact.testing.bedrock import ALTERNATE, START_WITH_USER, validate_messages

Message = Dict[str, Any]


def user(text: str = "Weather in Paris and Rome?") -> Message:
    return {"role": "user", "content": [{"text": text}]}


def assistant(text: str = "Sunny in both.") -> Message:
    return {"role": "assistant", "content": [{"text": text}]}


def uses(*ids: str, text: str = "") -> Message:
    content: List[Message] = [{"text": text}] if text else []
    for tool_id in ids:
        content.append({"toolUse": {"toolUseId": tool_id, "name": "get_weather", "input": {}}})
    return {"role": "assistant", "content": content}


def results(*ids: str, text: str = "") -> Message:
    content: List[Message] = []
    for tool_id in ids:
        answer = [{"json": {"sky": "sunny"}}]
        content.append(
            {"toolResult": {"toolUseId": tool_id, "content": answer, "status": "success"}}
        )
    if text:
        content.append({"text": text})
    return {"role": "user", "content": content}


def tool_conversation() -> List[Message]:
    """Two parallel calls answered out of order, one more with a follow-up, then the answer."""
    return [
        user(),
        uses("tooluse_1", "tooluse_2", text="Checking both."),
        results("tooluse_2", "tooluse_1"),
        uses("tooluse_3"),
        results("tooluse_3", text="And Oslo?"),
        assistant(),
    ]


def excess(index: int) -> Problem:
    return Problem(
        index,
        f"The number of toolResult blocks at messages.{index}.content exceeds the number of "
        "toolUse blocks of previous turn.",
    )


def expected(index: int, ids: str) -> Problem:
    return Problem(
        index,
        f"Expected toolResult blocks at messages.{index}.content for the following Ids: {ids}",
    )


# --- the validator -----------------------------------------------------------------


def test_a_paired_conversation_has_no_problems() -> None:
    assert validate_messages(tool_conversation()) == []


def test_a_result_without_its_call() -> None:
    contents = [user(), assistant("Let me think."), results("tooluse_1")]

    assert validate_messages(contents) == [excess(2)]


def test_more_results_than_calls() -> None:
    contents = [user(), uses("tooluse_1"), results("tooluse_1", "tooluse_2")]

    assert validate_messages(contents) == [excess(2)]


def test_calls_the_next_message_does_not_answer() -> None:
    contents = [user(), uses("tooluse_1", "tooluse_2"), results("tooluse_2"), assistant()]

    assert validate_messages(contents) == [expected(2, "tooluse_1")]


def test_calls_followed_by_text_name_every_id() -> None:
    contents = [user(), uses("tooluse_1", "tooluse_2"), user("never mind"), assistant()]

    assert validate_messages(contents) == [expected(2, "tooluse_1, tooluse_2")]


def test_a_call_at_the_end_names_the_message_that_should_follow() -> None:
    assert validate_messages([user(), uses("tooluse_1")]) == [expected(2, "tooluse_1")]


def test_the_first_message_must_be_the_users() -> None:
    problems = validate_messages(tool_conversation()[1:])

    assert problems[0] == Problem(0, START_WITH_USER)


def test_roles_must_alternate() -> None:
    contents = [user(), user("again"), assistant(), assistant("more")]

    assert validate_messages(contents) == [Problem(1, ALTERNATE), Problem(3, ALTERNATE)]


@pytest.mark.parametrize("messages", [[], None, "hi"])
def test_no_messages(messages: Any) -> None:
    assert validate_messages(messages) == [Problem(None, START_WITH_USER)]


def test_empty_content_and_unknown_roles_are_checked_first() -> None:
    contents = [user(), {"role": "assistant", "content": []}, {"role": "system", "content": []}]

    assert validate_messages(contents) == [
        Problem(
            1,
            "The content field in the Message object at messages.1 is empty. Add a ContentBlock "
            "object to the content field and try again.",
        ),
        Problem(
            2,
            "1 validation error detected: Value 'system' at 'messages.2.member.role' failed to "
            "satisfy constraint: Member must satisfy enum value set: [user, assistant]",
        ),
    ]


def test_the_callers_messages_are_not_changed() -> None:
    messages = tool_conversation()[1:]
    before = repr(messages)

    validate_messages(messages)

    assert repr(messages) == before
