"""Grouping across wire formats: Anthropic Messages, OpenAI Responses items, Chat, SDK objects.

Groups are observed through ``compact`` alone (see ``spans``): with every
message costing 10 and nothing kept, a budget ``k`` messages short drops the
fewest whole leading groups that hold ``k`` messages, so the dropped lengths
are exactly the group boundaries.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
from typing import Any, List, Tuple

import pytest
from helpers import (
    RESPONSES_CALLS,
    Message,
    assistant,
    budgets,
    call_item,
    calling,
    claude,
    examples,
    exchange,
    keeps,
    message_item,
    output_item,
    reasoning_item,
    redacted_thinking_block,
    system,
    ten_each,
    text_block,
    texts,
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
    check_pairing,
    compact,
    compact_with_summary,
    estimate_tokens,
)

Span = Tuple[int, int]


def spans(messages: List[Any]) -> List[Span]:
    """The ``[start, end)`` groups ``compact`` keeps or drops whole."""
    n = len(messages)
    cuts = {0, n}
    for k in range(1, n + 1):
        budget = 10 * (n - k) or 0.5
        result = compact(
            messages, max_tokens=budget, count_tokens=ten_each, keep_head=0, keep_tail=0
        )
        cuts.add(len(result.dropped))
    ordered = sorted(cuts)
    return list(zip(ordered, ordered[1:]))


def assert_same_objects(actual: List[Any], expected: List[Any]) -> None:
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a is e


def compact_tens(messages: List[Any], dropping: int, **options: Any) -> Any:
    """``compact`` with every message costing 10 and a budget ``dropping`` messages short."""
    budget = 10 * (len(messages) - dropping)
    return compact(messages, max_tokens=budget, count_tokens=ten_each, **options)


def developer(content: str = "Answer briefly.") -> Message:
    return {"role": "developer", "content": content}


# --- Anthropic Messages ---------------------------------------------------------


def anthropic_conversation() -> List[Message]:
    return [
        user("What is the weather in Denver and Austin?"),
        claude(
            "assistant",
            thinking_block(),
            text_block("Checking both."),
            tool_use_block("toolu_1"),
        ),
        claude("user", tool_result_block("toolu_1")),
        claude("assistant", text_block("It is 72F in Denver.")),
        user("And Austin?"),
        claude("assistant", redacted_thinking_block(), tool_use_block("toolu_2")),
        claude("user", tool_result_block("toolu_2", '{"tempF":88}')),
        claude("assistant", text_block("It is 88F in Austin.")),
    ]


def test_anthropic_tool_use_is_grouped_with_its_results():
    assert spans(anthropic_conversation()) == [
        (0, 1),
        (1, 3),
        (3, 4),
        (4, 5),
        (5, 7),
        (7, 8),
    ]


def test_anthropic_exchange_is_dropped_whole():
    messages = anthropic_conversation()

    result = compact_tens(messages, 2, keep_head=1, keep_tail=1)

    assert_same_objects(result.dropped, messages[1:3])
    assert_same_objects(result.messages, [messages[0], *messages[3:]])
    assert check_pairing(result.messages) == []


def test_anthropic_exchange_is_kept_whole_when_less_must_go():
    messages = [user("q"), user("old"), *anthropic_conversation()[1:4]]

    result = compact_tens(messages, 1, keep_head=1, keep_tail=0)

    assert_same_objects(result.dropped, [messages[1]])
    assert_same_objects(result.messages, [messages[0], *messages[2:]])


def test_anthropic_parallel_tool_use_with_thinking_and_redacted_thinking():
    messages = [
        user("Weather in Denver and Austin?"),
        claude(
            "assistant",
            thinking_block(),
            redacted_thinking_block(),
            tool_use_block("toolu_a"),
            tool_use_block("toolu_b"),
        ),
        # Results may come in any order, and text may follow them.
        claude(
            "user",
            tool_result_block("toolu_b"),
            tool_result_block("toolu_a"),
            text_block("Be brief."),
        ),
        claude("assistant", text_block("Both are warm.")),
    ]

    assert spans(messages) == [(0, 1), (1, 3), (3, 4)]
    assert check_pairing(messages) == []


def test_keep_tail_on_the_results_keeps_the_tool_use_too():
    messages = [system(), user("Weather?"), *anthropic_conversation()[1:3]]

    result = compact(messages, max_tokens=1, keep_head=1, keep_tail=1)

    assert_same_objects(result.dropped, [messages[1]])
    assert_same_objects(result.messages, [messages[0], messages[2], messages[3]])
    assert result.fits is False


def test_a_user_message_starting_with_text_is_not_grouped():
    messages = [
        user("q"),
        claude("assistant", tool_use_block("toolu_1")),
        claude("user", text_block("Here you go:"), tool_result_block("toolu_1")),
    ]

    assert spans(messages) == [(0, 1), (1, 2), (2, 3)]


def test_results_for_other_ids_are_not_grouped():
    messages = [
        user("q"),
        claude("assistant", tool_use_block("toolu_1")),
        claude("user", tool_result_block("toolu_other")),
    ]

    assert spans(messages) == [(0, 1), (1, 2), (2, 3)]


def test_a_string_content_assistant_message_stands_alone():
    messages = [
        user("q"),
        {"role": "assistant", "content": "Let me check."},
        claude("user", tool_result_block("toolu_1")),
        {"role": "assistant", "content": "Done."},
        user("thanks"),
    ]

    assert spans(messages) == [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)]


def test_a_text_only_assistant_message_followed_by_results_stands_alone():
    messages = [
        claude("assistant", thinking_block(), text_block("No tools needed.")),
        claude("user", tool_result_block("toolu_1")),
    ]

    assert spans(messages) == [(0, 1), (1, 2)]


# --- OpenAI Responses input items ----------------------------------------------


def test_reasoning_parallel_calls_and_outputs_are_one_group():
    messages = [
        user("Weather in Denver and Austin?"),
        reasoning_item("rs_1"),
        call_item("function_call", "call_1"),
        call_item("function_call", "call_2"),
        output_item("function_call", "call_1"),
        output_item("function_call", "call_2"),
        message_item("Both are warm."),
    ]

    assert spans(messages) == [(0, 1), (1, 6), (6, 7)]
    assert check_pairing(messages) == []


def test_outputs_in_another_order_stay_in_the_group():
    messages = [
        reasoning_item(),
        call_item("function_call", "call_1"),
        call_item("function_call", "call_2"),
        output_item("function_call", "call_2"),
        output_item("function_call", "call_1"),
    ]

    assert spans(messages) == [(0, 5)]


def test_reasoning_is_grouped_with_a_message():
    messages = [user("hi"), reasoning_item(), message_item("Hello."), user("bye")]

    assert spans(messages) == [(0, 1), (1, 3), (3, 4)]


def test_a_call_and_its_output_without_reasoning():
    messages = [
        user("q"),
        call_item("function_call", "call_1"),
        output_item("function_call", "call_1"),
        user("next"),
    ]

    assert spans(messages) == [(0, 1), (1, 3), (3, 4)]


def test_sequential_exchanges_are_separate_groups():
    messages = [
        user("q"),
        reasoning_item("rs_1"),
        call_item("function_call", "call_1"),
        output_item("function_call", "call_1"),
        reasoning_item("rs_2"),
        call_item("function_call", "call_2"),
        output_item("function_call", "call_2"),
        call_item("function_call", "call_3"),
        output_item("function_call", "call_3"),
        message_item(),
    ]

    assert spans(messages) == [(0, 1), (1, 4), (4, 7), (7, 9), (9, 10)]

    result = compact_tens(messages, 3, keep_head=1, keep_tail=0)

    assert_same_objects(result.dropped, messages[1:4])
    assert check_pairing(result.messages) == []


@pytest.mark.parametrize("kind", sorted(RESPONSES_CALLS))
def test_every_call_kind_is_grouped_with_its_output(kind):
    messages = [
        user("q"),
        call_item(kind, "call_1"),
        output_item(kind, "call_1"),
        reasoning_item(),
        call_item(kind, "call_2"),
        output_item(kind, "call_2"),
        user("next"),
    ]

    assert spans(messages) == [(0, 1), (1, 3), (3, 6), (6, 7)]
    assert check_pairing(messages) == []


def test_local_shell_call_output_pairs_through_its_id():
    call = call_item("local_shell_call", "call_7")
    answer = {"type": "local_shell_call_output", "id": "call_7", "output": "a.txt"}
    messages = [user("ls"), call, answer, user("thanks")]

    assert "call_id" not in answer
    assert spans(messages) == [(0, 1), (1, 3), (3, 4)]
    assert check_pairing(messages) == []


def test_local_shell_output_for_another_call_is_not_grouped():
    messages = [
        call_item("local_shell_call", "call_7"),
        {"type": "local_shell_call_output", "id": "call_8", "output": "a.txt"},
    ]

    assert spans(messages) == [(0, 1), (1, 2)]


def test_mcp_approval_request_and_response_are_one_group():
    request = {
        "type": "mcp_approval_request",
        "id": "mcpr_1",
        "server_label": "deepwiki",
        "name": "ask_question",
        "arguments": "{}",
    }
    response = {"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": True}
    other = {"type": "mcp_approval_response", "approval_request_id": "mcpr_9", "approve": False}

    assert spans([user("q"), request, response, user("next")]) == [(0, 1), (1, 3), (3, 4)]
    assert spans([request, other]) == [(0, 1), (1, 2)]


@pytest.mark.parametrize(
    "item",
    [
        {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {}},
        {
            "type": "mcp_call",
            "id": "mcp_1",
            "server_label": "deepwiki",
            "name": "ask_question",
            "arguments": "{}",
            "output": "answer",
        },
    ],
    ids=["web_search_call", "mcp_call"],
)
def test_self_contained_items_stand_alone_or_with_their_reasoning(item):
    assert spans([user("q"), item, user("next")]) == [(0, 1), (1, 2), (2, 3)]
    assert spans([user("q"), reasoning_item(), item, message_item()]) == [(0, 1), (1, 3), (3, 4)]


def test_an_orphan_output_stands_alone():
    messages = [user("q"), output_item("function_call", "call_1"), user("next")]

    assert spans(messages) == [(0, 1), (1, 2), (2, 3)]


def test_an_output_after_an_unrelated_call_is_not_grouped():
    messages = [call_item("function_call", "call_1"), output_item("function_call", "call_2")]

    assert spans(messages) == [(0, 1), (1, 2)]


def test_responses_items_mix_with_easy_form_messages():
    messages = [
        {"role": "developer", "content": "Use the tools."},
        {"role": "user", "content": "Weather in Denver?"},
        reasoning_item("rs_1"),
        call_item("function_call", "call_1"),
        output_item("function_call", "call_1"),
        {"role": "assistant", "content": "It is 72F."},
        {"role": "user", "content": [{"type": "input_text", "text": "And Austin?"}]},
        reasoning_item("rs_2"),
        call_item("function_call", "call_2"),
        output_item("function_call", "call_2"),
        message_item("It is 88F."),
        {"role": "user", "content": "Thanks."},
    ]

    assert spans(messages) == [
        (0, 1),
        (1, 2),
        (2, 5),
        (5, 6),
        (6, 7),
        (7, 10),
        (10, 11),
        (11, 12),
    ]

    result = compact_tens(messages, 4, keep_head=1, keep_tail=2)

    assert_same_objects(result.dropped, messages[1:5])
    assert check_pairing(result.messages) == []


# --- OpenAI Chat Completions stays as specified -------------------------------


def test_spec_example_still_gives_195_124_and_three_dropped():
    messages = weather_messages()

    result = compact(messages, max_tokens=150, keep_head=1, keep_tail=2)

    assert (result.tokens_before, result.tokens_after, result.fits) == (195, 124, True)
    assert_same_objects(result.dropped, messages[1:4])
    assert_same_objects(result.messages, [messages[0], *messages[4:]])


def test_spec_example_with_summary_still_gives_145():
    messages = weather_messages()

    result = compact_with_summary(
        messages,
        max_tokens=150,
        keep_head=1,
        keep_tail=2,
        summarize=lambda dropped: (
            f"Earlier in this conversation: {len(dropped)} messages were removed."
        ),
    )

    assert (result.tokens_before, result.tokens_after, result.fits) == (195, 145, True)
    assert_same_objects(result.dropped, messages[1:4])


def test_spec_example_groups():
    assert spans(weather_messages()) == [
        (0, 1),
        (1, 2),
        (2, 4),
        (4, 5),
        (5, 6),
        (6, 8),
        (8, 9),
        (9, 10),
    ]


def test_developer_messages_are_plain_messages():
    messages = [
        developer("Answer briefly."),
        user("Weather in Denver and Austin?"),
        calling("call_1", "call_2"),
        tool("call_2"),
        tool("call_1"),
        assistant("Both are warm."),
        developer("Now answer in French."),
        user("Et demain ?"),
    ]

    assert spans(messages) == [(0, 1), (1, 2), (2, 5), (5, 6), (6, 7), (7, 8)]

    result = compact_tens(messages, 4, keep_head=1, keep_tail=1)

    assert_same_objects(result.dropped, messages[1:5])
    assert result.messages[0] is messages[0]
    assert check_pairing(result.messages) == []


def test_a_developer_message_between_calls_and_results_ends_the_group():
    messages = [user("q"), calling("call_1"), developer(), tool("call_1")]

    assert spans(messages) == [(0, 1), (1, 2), (2, 3), (3, 4)]


# --- SDK objects ------------------------------------------------------------------


def sdk_dump(message: Any) -> Any:
    return message.model_dump(mode="json", exclude_unset=True)


def chat_completion_message(**fields: Any) -> Any:
    """The OpenAI SDK's response message, as ``response.choices[0].message`` holds it."""
    chat = pytest.importorskip("openai.types.chat")
    return chat.ChatCompletionMessage.model_validate({"role": "assistant", **fields})


def sdk_history() -> List[Any]:
    calls = chat_completion_message(
        content=None,
        refusal=None,
        tool_calls=[
            tool_call("call_1", arguments='{"city":"Denver"}'),
            tool_call("call_2", arguments='{"city":"Austin"}'),
        ],
    )
    answer = chat_completion_message(content="Denver 72F, Austin 88F.", refusal=None)
    return [
        system(),
        user("Weather in Denver and Austin?"),
        calls,
        tool("call_2", '{"tempF":88}'),
        tool("call_1", '{"tempF":72}'),
        answer,
        user("And tomorrow?"),
    ]


def test_sdk_message_is_grouped_with_the_following_tool_dicts():
    messages = sdk_history()

    assert spans(messages) == [(0, 1), (1, 2), (2, 5), (5, 6), (6, 7)]
    assert check_pairing(messages) == []


def test_sdk_messages_are_counted_as_the_json_the_sdk_sends():
    messages = sdk_history()
    views = [m if isinstance(m, dict) else sdk_dump(m) for m in messages]
    expected = [
        math.ceil(len(json.dumps(v, separators=(",", ":"), ensure_ascii=False)) / 4) for v in views
    ]

    result = compact(messages, max_tokens=10_000)

    assert result.tokens_before == sum(expected)
    assert [estimate_tokens(m) for m in messages] == expected
    # Unset fields (audio, function_call, annotations...) are not counted as nulls.
    assert estimate_tokens(messages[5]) < estimate_tokens(messages[5].model_dump(mode="json"))


def test_sdk_objects_come_back_as_the_same_objects():
    messages = sdk_history()
    before = [sdk_dump(m) if not isinstance(m, dict) else copy.deepcopy(m) for m in messages]
    counts = [estimate_tokens(m) for m in messages]
    budget = sum(counts) - counts[1] - 1  # more than the user message must go

    result = compact(messages, max_tokens=budget, keep_head=1, keep_tail=1)

    assert_same_objects(result.dropped, messages[1:5])
    assert_same_objects(result.messages, [messages[0], messages[5], messages[6]])
    assert result.tokens_after == sum(counts) - sum(counts[1:5])
    assert [sdk_dump(m) if not isinstance(m, dict) else m for m in messages] == before


def test_estimate_tokens_of_an_sdk_object():
    message = chat_completion_message(
        content=None, tool_calls=[tool_call("call_1", arguments='{"city":"Denver"}')]
    )
    view = sdk_dump(message)

    assert view == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city":"Denver"}'},
            }
        ],
    }
    assert estimate_tokens(message) == estimate_tokens(view)
    assert estimate_tokens(message, count_tokens=lambda m: len(m["tool_calls"])) == 1


def test_an_anthropic_sdk_message_is_grouped_with_its_results():
    types = pytest.importorskip("anthropic.types")
    response = types.Message.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-6",
            "content": [
                {"type": "thinking", "thinking": "Look it up.", "signature": "sig"},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}},
            ],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }
    )
    messages = [user("Weather?"), response, claude("user", tool_result_block("toolu_1"))]

    assert spans(messages) == [(0, 1), (1, 3)]
    assert estimate_tokens(response) == estimate_tokens(sdk_dump(response))
    assert compact(messages, max_tokens=1, keep_head=1, keep_tail=0).dropped[0] is response


class UndumpableModel:
    """Looks like an SDK model, but its ``model_dump`` fails."""

    def model_dump(self, **kwargs: Any) -> Any:
        raise RuntimeError("cannot serialize")


def test_a_failing_model_dump_names_the_message():
    messages = [user("q"), UndumpableModel()]

    with pytest.raises(InvalidMessageError) as caught:
        compact(messages, max_tokens=100)

    assert caught.value.index == 1
    assert "UndumpableModel.model_dump() failed (cannot serialize)" in str(caught.value)
    with pytest.raises(InvalidMessageError) as caught:
        estimate_tokens(UndumpableModel())
    assert caught.value.index is None


# --- property: mixed shapes never come out broken ------------------------------


PROPERTY = settings(
    max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def _chat_exchange(draw: st.DrawFn, ids: List[str]) -> List[Message]:
    order = draw(st.permutations(ids))
    return [calling(*ids), *(tool(call_id, draw(texts)) for call_id in order)]


def _anthropic_exchange(draw: st.DrawFn, ids: List[str]) -> List[Message]:
    blocks: List[Message] = []
    if draw(st.booleans()):
        blocks.append(thinking_block(draw(texts)))
    if draw(st.booleans()):
        blocks.append(redacted_thinking_block())
    if draw(st.booleans()):
        blocks.append(text_block(draw(texts) or "ok"))
    blocks.extend(tool_use_block(use_id) for use_id in ids)
    results = [tool_result_block(use_id, draw(texts)) for use_id in draw(st.permutations(ids))]
    if draw(st.booleans()):
        results.append(text_block(draw(texts) or "more"))
    return [claude("assistant", *blocks), claude("user", *results)]


def _responses_exchange(draw: st.DrawFn, ids: List[str], new_id: Any) -> List[Message]:
    items: List[Message] = []
    variant = draw(st.sampled_from(["calls", "calls", "message", "approval", "server"]))
    if variant != "approval" and draw(st.booleans()):
        items.append(reasoning_item(new_id("rs")))
    if variant == "calls":
        kinds = [draw(st.sampled_from(sorted(RESPONSES_CALLS))) for _ in ids]
        items.extend(call_item(kind, call_id) for kind, call_id in zip(kinds, ids))
        answers = draw(st.permutations(list(zip(kinds, ids))))
        items.extend(output_item(kind, call_id, draw(texts)) for kind, call_id in answers)
    elif variant == "message":
        if not items:
            items.append(reasoning_item(new_id("rs")))
        items.append(message_item(draw(texts), new_id("msg")))
    elif variant == "approval":
        request_id = new_id("mcpr")
        items.append({"type": "mcp_approval_request", "id": request_id, "name": "ask"})
        items.append(
            {"type": "mcp_approval_response", "approval_request_id": request_id, "approve": True}
        )
    else:
        items.append({"type": "web_search_call", "id": new_id("ws"), "status": "completed"})
    return items


def _plain(draw: st.DrawFn) -> Message:
    role = draw(st.sampled_from(["system", "developer", "user", "assistant", "user_blocks"]))
    if role == "user_blocks":
        return claude("user", text_block(draw(texts) or "hi"))
    return {"role": role, "content": draw(texts)}


@st.composite
def mixed_conversations(draw: st.DrawFn, max_segments: int = 10) -> List[Message]:
    """Well-formed conversations mixing Chat, Anthropic and Responses exchanges."""
    counter = itertools.count()

    def new_id(prefix: str) -> str:
        return f"{prefix}_{next(counter)}"

    messages: List[Message] = []
    for _ in range(draw(st.integers(0, max_segments))):
        kind = draw(st.sampled_from(["plain", "chat", "anthropic", "responses"]))
        ids = [new_id("call") for _ in range(draw(st.integers(1, 3)))]
        if kind == "plain":
            messages.append(_plain(draw))
        elif kind == "chat":
            messages.extend(_chat_exchange(draw, ids))
        elif kind == "anthropic":
            messages.extend(_anthropic_exchange(draw, ids))
        else:
            messages.extend(_responses_exchange(draw, ids, new_id))
    return messages


def assert_partition(messages: List[Any], kept: List[Any], dropped: List[Any]) -> None:
    """``kept`` and ``dropped`` interleave back into ``messages``, each in order."""
    k = d = 0
    for message in messages:
        if k < len(kept) and kept[k] is message:
            k += 1
        else:
            assert d < len(dropped)
            assert dropped[d] is message
            d += 1
    assert (k, d) == (len(kept), len(dropped))


@PROPERTY
@given(mixed_conversations(), budgets(), keeps, keeps)
def test_compacting_a_well_formed_mix_never_breaks_pairing(
    messages, max_tokens, keep_head, keep_tail
):
    assert check_pairing(messages) == []

    result = compact(messages, max_tokens=max_tokens, keep_head=keep_head, keep_tail=keep_tail)

    assert check_pairing(result.messages) == []
    assert_partition(messages, result.messages, result.dropped)


@PROPERTY
@given(mixed_conversations(), budgets(), keeps, keeps)
def test_a_summary_never_breaks_pairing_either(messages, max_tokens, keep_head, keep_tail):
    result = compact_with_summary(
        messages,
        max_tokens=max_tokens,
        keep_head=keep_head,
        keep_tail=keep_tail,
        summarize=lambda dropped: f"{len(dropped)} messages were removed.",
    )

    assert check_pairing(result.messages) == []


# --- a naive trim does break pairing -------------------------------------------


def drop_oldest(messages: List[Any], n: int) -> List[Any]:
    """The naive trim: keep the first message, drop the ``n`` after it."""
    return messages[:1] + messages[1 + n :]


@pytest.mark.parametrize(
    ("messages", "n", "code"),
    [
        (weather_messages(), 2, "orphan_tool_result"),
        (
            [system(), user("q"), *exchange("call_1", "call_2"), user("next")],
            3,
            "orphan_tool_result",
        ),
        (anthropic_conversation(), 1, "unexpected_tool_result"),
        (
            [
                user("q"),
                reasoning_item(),
                call_item("function_call", "call_1"),
                output_item("function_call", "call_1"),
                message_item(),
                user("next"),
            ],
            2,
            "orphan_call_output",
        ),
    ],
    ids=["chat", "chat-parallel", "anthropic", "responses"],
)
def test_a_naive_trim_breaks_pairing_where_compact_does_not(messages, n, code):
    assert check_pairing(messages) == []

    naive = drop_oldest(messages, n)
    result = compact_tens(messages, n, keep_head=1, keep_tail=0)

    assert [p.code for p in check_pairing(naive)] == [code]
    assert len(result.dropped) > n
    assert check_pairing(result.messages) == []


def test_anthropic_sdk_blocks_inside_a_dict_are_grouped_and_counted_as_sent() -> None:
    # Users append a reply as {"role": "assistant", "content": response.content}: the
    # content holds the SDK's pydantic blocks, not dicts.
    anthropic = pytest.importorskip("anthropic")
    reply = anthropic.types.Message.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-6",
            "content": [
                {"type": "text", "text": "Let me check."},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"c": 1}},
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
    )
    assistant_turn = {"role": "assistant", "content": reply.content}
    as_sent = {
        "role": "assistant",
        "content": [b.model_dump(mode="json", exclude_unset=True) for b in reply.content],
    }
    history = [
        {"role": "user", "content": "Weather?"},
        assistant_turn,
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1"}]},
        {"role": "assistant", "content": "Sunny."},
        {"role": "user", "content": "Thanks."},
    ]
    assert estimate_tokens(assistant_turn) == estimate_tokens(as_sent)
    assert check_pairing(history) == []
    assert check_pairing(history[:2] + history[3:])[0].code == "missing_tool_result_blocks"
    result = compact(history, max_tokens=40, keep_head=1, keep_tail=1)
    assert result.dropped == history[1:3]  # the tool_use turn and its results, together
    assert result.dropped[0] is assistant_turn
