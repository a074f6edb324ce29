"""check_pairing: every problem kind, in the providers' own words, cross-checked on the fake server.

The expected texts are written out literally, as the providers' APIs return them (OpenAI's
own spelling "preceeding" included), and as ctx_compact.testing reproduces them.
"""

from __future__ import annotations

import copy
import json
import urllib.error
import urllib.request
from typing import Any, List, Tuple

import pytest
from helpers import (
    Message,
    assistant,
    call_item,
    calling,
    claude,
    exchange,
    message_item,
    output_item,
    reasoning_item,
    redacted_thinking_block,
    system,
    text_block,
    thinking_block,
    tool,
    tool_result_block,
    tool_use_block,
    user,
    weather_messages,
)

from ctx_compact import InvalidMessageError, PairingError, PairingProblem, check_pairing, compact
from ctx_compact.testing import FakeProvider

ORPHAN = (
    "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
    "message with 'tool_calls'."
)


def unknown_id(call_id: str) -> str:
    return (
        f"Invalid parameter: 'tool_call_id' of '{call_id}' not found in 'tool_calls' of "
        "previous message."
    )


def missing_results(ids: str) -> str:
    return (
        "An assistant message with 'tool_calls' must be followed by tool messages responding "
        "to each 'tool_call_id'. The following tool_call_ids did not have response messages: " + ids
    )


def missing_blocks(index: int, ids: str) -> str:
    return (
        f"messages.{index}: `tool_use` ids were found without `tool_result` blocks immediately "
        f"after: {ids}. Each `tool_use` block must have a corresponding `tool_result` block in "
        "the next message."
    )


def unexpected(index: int, block: int, use_id: str) -> str:
    return (
        f"messages.{index}.content.{block}: unexpected `tool_use_id` found in `tool_result` "
        f"blocks: {use_id}. Each `tool_result` block must have a corresponding `tool_use` "
        "block in the previous message."
    )


def openai_problem(index: int, code: str, ids: Tuple[str, ...], message: str) -> PairingProblem:
    return PairingProblem(index, code, ids, "openai", message)


def anthropic_problem(index: int, code: str, ids: Tuple[str, ...], message: str) -> PairingProblem:
    return PairingProblem(index, code, ids, "anthropic", message)


def responses_problem(index: int, code: str, ids: Tuple[str, ...], message: str) -> PairingProblem:
    return PairingProblem(index, code, ids, "openai-responses", message)


# --- OpenAI Chat Completions ----------------------------------------------------


def test_orphan_tool_message():
    messages = [system(), user("q"), tool("call_1")]

    assert check_pairing(messages) == [
        openai_problem(2, "orphan_tool_result", ("call_1",), ORPHAN),
    ]


def test_tool_message_after_a_non_tool_message_following_the_calls():
    messages = [user("q"), *exchange("call_1"), assistant("It is 72F."), tool("call_1")]

    assert check_pairing(messages) == [
        openai_problem(4, "orphan_tool_result", ("call_1",), ORPHAN),
    ]


def test_tool_message_after_the_calls_were_interrupted():
    messages = [user("q"), calling("call_1"), user("hurry"), tool("call_1")]

    assert check_pairing(messages) == [
        openai_problem(1, "missing_tool_results", ("call_1",), missing_results("call_1")),
        openai_problem(3, "orphan_tool_result", ("call_1",), ORPHAN),
    ]


def test_unknown_tool_call_id_in_a_tool_run():
    messages = [user("q"), *exchange("call_1"), tool("call_9")]

    assert check_pairing(messages) == [
        openai_problem(3, "unknown_tool_call_id", ("call_9",), unknown_id("call_9")),
    ]


def test_one_missing_tool_result():
    messages = [user("q"), calling("call_1"), user("next")]

    assert check_pairing(messages) == [
        openai_problem(1, "missing_tool_results", ("call_1",), missing_results("call_1")),
    ]


def test_several_missing_tool_results_in_call_order():
    messages = [user("q"), calling("call_a", "call_b", "call_c", "call_d"), tool("call_c")]

    assert check_pairing(messages) == [
        openai_problem(
            1,
            "missing_tool_results",
            ("call_a", "call_b", "call_d"),
            missing_results("call_a, call_b, call_d"),
        ),
    ]


def test_a_repeated_tool_result_is_accepted():
    messages = [user("q"), *exchange("call_1"), tool("call_1", "again")]

    assert check_pairing(messages) == []


def test_an_assistant_without_tool_calls_or_with_empty_tool_calls_needs_nothing():
    messages = [user("q"), assistant("a"), assistant(None, []), user("next")]

    assert check_pairing(messages) == []


# --- Anthropic Messages ---------------------------------------------------------


def test_tool_use_without_results():
    messages = [
        user("q"),
        claude("assistant", tool_use_block("toolu_a"), tool_use_block("toolu_b")),
        user("never mind"),
    ]

    assert check_pairing(messages) == [
        anthropic_problem(
            1,
            "missing_tool_result_blocks",
            ("toolu_a", "toolu_b"),
            missing_blocks(1, "toolu_a, toolu_b"),
        ),
    ]


def test_tool_use_at_the_end_of_the_list():
    messages = [user("q"), claude("assistant", thinking_block(), tool_use_block("toolu_a"))]

    assert check_pairing(messages) == [
        anthropic_problem(
            1, "missing_tool_result_blocks", ("toolu_a",), missing_blocks(1, "toolu_a")
        ),
    ]


def test_some_results_missing():
    messages = [
        user("q"),
        claude("assistant", tool_use_block("toolu_a"), tool_use_block("toolu_b")),
        claude("user", tool_result_block("toolu_a")),
    ]

    assert check_pairing(messages) == [
        anthropic_problem(
            1, "missing_tool_result_blocks", ("toolu_b",), missing_blocks(1, "toolu_b")
        ),
    ]


def test_results_not_at_the_start_of_the_next_message():
    messages = [
        user("q"),
        claude("assistant", tool_use_block("toolu_a")),
        claude("user", text_block("Here:"), tool_result_block("toolu_a")),
    ]

    # Anthropic names the tool_use message; the problem points at the misplaced results.
    assert check_pairing(messages) == [
        anthropic_problem(
            2, "tool_result_not_at_start", ("toolu_a",), missing_blocks(1, "toolu_a")
        ),
    ]


def test_unexpected_tool_use_id():
    messages = [
        user("q"),
        claude("assistant", tool_use_block("toolu_a")),
        claude("user", tool_result_block("toolu_a"), tool_result_block("toolu_x")),
    ]

    assert check_pairing(messages) == [
        anthropic_problem(2, "unexpected_tool_result", ("toolu_x",), unexpected(2, 1, "toolu_x")),
    ]


def test_a_result_with_no_tool_use_before_it():
    messages = [claude("user", tool_result_block("toolu_x"))]

    assert check_pairing(messages) == [
        anthropic_problem(0, "unexpected_tool_result", ("toolu_x",), unexpected(0, 0, "toolu_x")),
    ]


def test_text_after_the_last_tool_use():
    messages = [
        user("q"),
        claude("assistant", tool_use_block("toolu_a"), text_block("Working on it.")),
        claude("user", tool_result_block("toolu_a")),
    ]

    assert check_pairing(messages) == [
        anthropic_problem(
            1, "missing_tool_result_blocks", ("toolu_a",), missing_blocks(1, "toolu_a")
        ),
    ]


# --- OpenAI Responses -----------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "wording"),
    [
        ("function_call", "No tool output found for function call call_1."),
        ("custom_tool_call", "No tool output found for custom tool call call_1."),
        ("apply_patch_call", "No tool output found for apply patch call call_1."),
    ],
)
def test_call_without_output(kind, wording):
    messages = [user("q"), call_item(kind, "call_1"), user("next")]

    assert check_pairing(messages) == [
        responses_problem(1, "missing_call_output", ("call_1",), wording),
    ]


@pytest.mark.parametrize(
    ("kind", "wording"),
    [
        ("function_call", "No tool call found for function call output with call_id call_9."),
        (
            "custom_tool_call",
            "No tool call found for custom tool call output with call_id call_9.",
        ),
    ],
)
def test_output_without_call(kind, wording):
    messages = [user("q"), call_item(kind, "call_1"), output_item(kind, "call_1")]
    messages.append(output_item(kind, "call_9"))

    assert check_pairing(messages) == [
        responses_problem(3, "orphan_call_output", ("call_9",), wording),
    ]


def test_output_before_its_call():
    messages = [output_item("function_call", "call_1"), call_item("function_call", "call_1")]

    assert [(p.index, p.code) for p in check_pairing(messages)] == [
        (0, "orphan_call_output"),
        (1, "missing_call_output"),
    ]


def test_a_local_shell_call_is_answered_through_the_outputs_id():
    call = call_item("local_shell_call", "call_3")

    assert check_pairing([call, output_item("local_shell_call", "call_3")]) == []
    assert check_pairing([call]) == [
        responses_problem(
            0,
            "missing_call_output",
            ("call_3",),
            "No tool output found for local shell call call_3.",
        ),
    ]


def reasoning_problem(index: int, item_id: str) -> PairingProblem:
    return responses_problem(
        index,
        "reasoning_without_following_item",
        (item_id,),
        f"Item '{item_id}' of type 'reasoning' was provided without its required following item.",
    )


@pytest.mark.parametrize(
    "following",
    [user("next"), {"role": "developer", "content": "Be brief."}, system()],
    ids=["user", "developer", "system"],
)
def test_reasoning_followed_by_a_message_that_is_not_its_item(following):
    messages = [user("q"), reasoning_item("rs_2"), following]

    assert check_pairing(messages) == [reasoning_problem(1, "rs_2")]


def test_reasoning_at_the_end():
    messages = [user("q"), reasoning_item("rs_1")]

    assert check_pairing(messages) == [reasoning_problem(1, "rs_1")]


def test_reasoning_followed_by_an_output():
    messages = [
        call_item("function_call", "call_1"),
        reasoning_item("rs_2"),
        output_item("function_call", "call_1"),
    ]

    assert check_pairing(messages) == [reasoning_problem(1, "rs_2")]


# --- valid lists ------------------------------------------------------------------


def valid_chat() -> List[Message]:
    return [
        system(),
        {"role": "developer", "content": "Use the tools."},
        user("Weather in Denver and Austin?"),
        *exchange("call_1", "call_2"),
        assistant("Both are warm."),
        user("Tomorrow?"),
        calling("call_3"),
        tool("call_3"),
    ]


def valid_anthropic() -> List[Message]:
    return [
        user("Weather in Denver and Austin?"),
        claude(
            "assistant",
            thinking_block(),
            redacted_thinking_block(),
            text_block("Checking."),
            tool_use_block("toolu_a"),
            tool_use_block("toolu_b"),
        ),
        claude(
            "user",
            tool_result_block("toolu_b"),
            tool_result_block("toolu_a"),
            text_block("Thanks."),
        ),
        claude("assistant", text_block("Both are warm.")),
    ]


def valid_responses() -> List[Message]:
    return [
        {"role": "user", "content": "Weather in Denver and Austin?"},
        reasoning_item("rs_1"),
        call_item("function_call", "call_1"),
        call_item("function_call", "call_2"),
        output_item("function_call", "call_2"),
        output_item("function_call", "call_1"),
        reasoning_item("rs_2"),
        message_item("Both are warm."),
        {"role": "user", "content": "Run ls."},
        call_item("local_shell_call", "call_3"),
        output_item("local_shell_call", "call_3"),
        call_item("custom_tool_call", "call_4"),
        output_item("custom_tool_call", "call_4"),
        {"type": "web_search_call", "id": "ws_1", "status": "completed"},
    ]


@pytest.mark.parametrize(
    "messages",
    [valid_chat(), valid_anthropic(), valid_responses(), weather_messages(), []],
    ids=["chat", "anthropic", "responses", "spec-weather", "empty"],
)
def test_valid_lists_have_no_problems(messages):
    assert check_pairing(messages) == []


def test_a_valid_mix_of_shapes_has_no_problems():
    messages = [*valid_chat(), *valid_anthropic(), *valid_responses()]

    assert check_pairing(messages) == []
    assert check_pairing(tuple(messages)) == []


def test_sdk_messages_are_checked_as_the_json_they_send():
    chat = pytest.importorskip("openai.types.chat")
    calls = chat.ChatCompletionMessage.model_validate(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        }
    )

    assert check_pairing([user("q"), calls, tool("call_1")]) == []
    assert check_pairing([user("q"), calls, user("next")]) == [
        openai_problem(1, "missing_tool_results", ("call_1",), missing_results("call_1")),
    ]


# --- several problems, the error type, the input ------------------------------------


def test_mixed_problems_are_sorted_by_index():
    messages = [
        output_item("function_call", "call_9"),  # 0: Responses orphan output
        user("q"),
        claude("assistant", tool_use_block("toolu_a")),  # 2: no results
        user("never mind"),
        tool("call_x"),  # 4: Chat orphan
        calling("call_1", "call_2"),  # 5: call_2 unanswered
        tool("call_1"),
        reasoning_item("rs_1"),  # 7: reasoning at the end
    ]

    problems = check_pairing(messages)

    assert [(p.index, p.code, p.provider, p.ids) for p in problems] == [
        (0, "orphan_call_output", "openai-responses", ("call_9",)),
        (2, "missing_tool_result_blocks", "anthropic", ("toolu_a",)),
        (4, "orphan_tool_result", "openai", ("call_x",)),
        (5, "missing_tool_results", "openai", ("call_2",)),
        (7, "reasoning_without_following_item", "openai-responses", ("rs_1",)),
    ]


def test_pairing_error_carries_the_problems_and_is_a_value_error():
    problems = check_pairing([user("q"), tool("call_1"), calling("call_2")])

    error = PairingError(problems)

    assert isinstance(error, ValueError)
    assert error.problems == tuple(problems)
    assert len(error.problems) == 2
    assert str(error) == (
        f"2 tool pairing problem(s): message 1: {ORPHAN}; message 2: {missing_results('call_2')}"
    )
    assert str(problems[0]) == f"message 1: {ORPHAN}"
    with pytest.raises(ValueError, match="tool pairing problem"):
        raise error


def test_problems_are_frozen():
    (problem,) = check_pairing([tool("call_1")])

    with pytest.raises(AttributeError):
        problem.index = 3  # type: ignore[misc]


def test_check_pairing_never_mutates_its_input():
    messages = [
        *valid_chat(),
        tool("call_x"),
        *valid_anthropic(),
        claude("user", text_block("x"), tool_result_block("toolu_q")),
        *valid_responses(),
        reasoning_item("rs_9"),
    ]
    before = copy.deepcopy(messages)
    identities = [id(m) for m in messages]

    check_pairing(messages)

    assert messages == before
    assert [id(m) for m in messages] == identities


@pytest.mark.parametrize("messages", ["hello", b"bytes", {"role": "user"}, None, 42])
def test_not_a_sequence_is_a_type_error(messages):
    with pytest.raises(TypeError, match="'messages' must be a list"):
        check_pairing(messages)


@pytest.mark.parametrize("bad", ["hello", 42, None, ["role", "user"]])
def test_a_non_mapping_message_names_its_index(bad):
    with pytest.raises(InvalidMessageError) as caught:
        check_pairing([user("q"), assistant("a"), bad])

    assert caught.value.index == 2


def test_malformed_tool_calls_name_the_index():
    with pytest.raises(InvalidMessageError) as caught:
        check_pairing([user("q"), {"role": "assistant", "tool_calls": "call_1"}])

    assert caught.value.index == 1


def test_an_unhashable_id_is_an_invalid_message_naming_the_index():
    with pytest.raises(InvalidMessageError, match="call_id must be a string, not list") as caught:
        check_pairing([user("q"), {"type": "function_call", "call_id": ["call_1"], "name": "f"}])

    assert caught.value.index == 1


# --- the fake provider agrees -----------------------------------------------------


def post(provider: FakeProvider, path: str, body: Any) -> Tuple[int, Any]:
    request = urllib.request.Request(
        provider.base_url + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        with error:
            return error.code, json.loads(error.read())


def send_chat(provider: FakeProvider, messages: List[Message]) -> Tuple[int, Any]:
    return post(provider, "/v1/chat/completions", {"model": "gpt-4o", "messages": messages})


def send_claude(provider: FakeProvider, messages: List[Message]) -> Tuple[int, Any]:
    body = {"model": "claude-sonnet-4-6", "max_tokens": 16, "messages": messages}
    return post(provider, "/v1/messages", body)


BROKEN_CHAT = {
    "orphan": [user("q"), tool("call_1")],
    "after-assistant": [user("q"), *exchange("call_1"), assistant("done"), tool("call_1")],
    "unknown-id": [user("q"), *exchange("call_1"), tool("call_9")],
    "missing-one": [user("q"), calling("call_1"), user("next")],
    "missing-several-at-end": [user("q"), calling("call_a", "call_b", "call_c"), tool("call_b")],
}

BROKEN_ANTHROPIC = {
    "no-results": [
        user("q"),
        claude("assistant", tool_use_block("toolu_a"), tool_use_block("toolu_b")),
        user("never mind"),
    ],
    "some-results": [
        user("q"),
        claude("assistant", thinking_block(), tool_use_block("toolu_a"), tool_use_block("toolu_b")),
        claude("user", tool_result_block("toolu_b")),
    ],
    "text-first": [
        user("q"),
        claude("assistant", tool_use_block("toolu_a")),
        claude("user", text_block("Here:"), tool_result_block("toolu_a")),
    ],
    "unexpected-id": [
        user("q"),
        claude("assistant", tool_use_block("toolu_a")),
        claude("user", tool_result_block("toolu_a"), tool_result_block("toolu_x")),
    ],
    "no-tool-use": [user("q"), claude("user", text_block("x"), tool_result_block("toolu_x"))],
    "text-after-tool-use": [
        user("q"),
        claude("assistant", tool_use_block("toolu_a"), text_block("Working.")),
        claude("user", tool_result_block("toolu_a")),
    ],
}


@pytest.mark.parametrize("name", sorted(BROKEN_CHAT))
def test_the_fake_openai_server_rejects_with_the_same_words(provider, name):
    messages = BROKEN_CHAT[name]
    problems = check_pairing(messages)

    status, body = send_chat(provider, messages)

    assert status == 400
    assert len(problems) == 1
    assert body["error"]["message"] == problems[0].message


@pytest.mark.parametrize("name", sorted(BROKEN_ANTHROPIC))
def test_the_fake_anthropic_server_rejects_with_the_same_words(provider, name):
    messages = BROKEN_ANTHROPIC[name]
    problems = check_pairing(messages)

    status, body = send_claude(provider, messages)

    assert status == 400
    assert len(problems) == 1
    assert body["error"]["message"] == problems[0].message


def test_the_fake_servers_accept_what_check_pairing_accepts(provider):
    chat_lists = [
        valid_chat(),
        weather_messages(),
        [user("q"), *exchange("call_1"), tool("call_1", "again")],
    ]
    claude_lists = [
        valid_anthropic(),
        [user("q"), claude("assistant", text_block("Hello.")), user("plain")],
    ]
    for messages in chat_lists:
        assert check_pairing(messages) == []
        assert send_chat(provider, messages)[0] == 200
    for messages in claude_lists:
        assert check_pairing(messages) == []
        assert send_claude(provider, messages)[0] == 200


# --- what grouping by adjacency got wrong ---------------------------------------


def test_a_responses_output_after_other_calls_stays_with_its_call():
    messages = [
        reasoning_item("rs_1"),
        call_item("function_call", "call_a"),
        reasoning_item("rs_2"),
        call_item("function_call", "call_b"),
        output_item("function_call", "call_a"),
        output_item("function_call", "call_b"),
    ]
    assert check_pairing(messages) == []

    result = compact(messages, max_tokens=1, keep_head=0, keep_tail=2)

    assert result.messages == messages  # one group: nothing can be dropped alone
    assert check_pairing(result.messages) == []


def test_a_responses_output_after_a_message_stays_with_its_call():
    messages = [
        user("q"),
        call_item("function_call", "call_a"),
        message_item("Working on it."),
        output_item("function_call", "call_a"),
        user("next"),
    ]
    assert check_pairing(messages) == []

    result = compact(messages, max_tokens=1, keep_tail=2)

    assert result.messages == messages  # the tail snaps out to the call's whole group
    assert check_pairing(result.messages) == []
    result = compact(messages, max_tokens=1, keep_tail=1)
    assert result.dropped == messages[1:4]
    assert check_pairing(result.messages) == []


@pytest.mark.parametrize(
    "turn",
    [
        [calling("call_1"), tool("call_1")],
        [
            claude("assistant", tool_use_block("toolu_1")),
            claude("user", tool_result_block("toolu_1")),
        ],
    ],
    ids=["chat", "anthropic"],
)
def test_a_reasoning_item_stays_with_the_tool_call_message_it_leads(turn):
    messages = [user("q"), reasoning_item(), *turn, user("next")]
    assert check_pairing(messages) == []

    result = compact(messages, max_tokens=1, keep_tail=2)

    assert result.messages == messages  # the tail snaps out to the reasoning item
    result = compact(messages, max_tokens=1, keep_tail=1)
    assert result.messages == [messages[0], messages[4]]
    assert check_pairing(result.messages) == []


def legacy_call(name: str = "get_weather") -> Any:
    return {
        "role": "assistant",
        "content": None,
        "function_call": {"name": name, "arguments": "{}"},
    }


def legacy_answer(name: str = "get_weather") -> Any:
    return {"role": "function", "name": name, "content": '{"tempF":72}'}


def test_the_legacy_function_call_pair_is_one_group():
    messages = [user("q"), legacy_call(), legacy_answer(), user("next")]
    assert check_pairing(messages) == []

    result = compact(messages, max_tokens=1, keep_tail=2)

    assert result.messages == messages  # the tail snaps out to the function_call
    result = compact(messages, max_tokens=1, keep_tail=1)
    assert result.dropped == messages[1:3]
    assert check_pairing(result.messages) == []


def test_a_function_message_without_its_function_call_is_reported():
    messages = [user("q"), legacy_call(), user("hm"), legacy_answer("search")]

    problems = check_pairing(messages)

    assert [(p.index, p.code, p.ids, p.provider) for p in problems] == [
        (3, "orphan_function_result", ("search",), "openai")
    ]


def test_unanswered_calls_and_outputs_without_calls_stay_droppable_alone():
    # Broken input: each broken item is a group of its own, so it does not pin
    # everything after it.
    messages = [
        user("q"),
        call_item("function_call", "never_answered"),
        user("a"),
        output_item("function_call", "no_such_call"),
        user("b"),
        calling("chat_never_answered"),
        user("c"),
        tool("no_such_chat_call"),
        user("d"),
    ]
    codes = [p.code for p in check_pairing(messages)]
    assert sorted(codes) == [
        "missing_call_output",
        "missing_tool_results",
        "orphan_call_output",
        "orphan_tool_result",
    ]

    for k in range(1, 8):
        dropped = compact_tens(messages, k)
        assert len(dropped) == k  # every message is a group of its own


def compact_tens(messages: List[Any], k: int) -> List[Any]:
    n = len(messages)
    return compact(
        messages, max_tokens=10 * (n - k), count_tokens=lambda m: 10, keep_head=0, keep_tail=0
    ).dropped


def test_an_output_answers_the_latest_unanswered_call_with_its_id():
    first, second = call_item("function_call", "dup"), call_item("function_call", "dup")
    messages = [first, user("a"), second, output_item("function_call", "dup")]

    problems = check_pairing(messages)

    assert [(p.index, p.code) for p in problems] == [(0, "missing_call_output")]
    assert compact_tens(messages, 1) == [first]
    assert compact_tens(messages, 2) == [first, messages[1]]
