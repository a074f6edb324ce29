"""breakdown: where a request's tokens go, by category, tool and message, in every format."""

from __future__ import annotations

from typing import Any, Dict, List

import pytest
from helpers import (
    assistant,
    budgets,
    call_item,
    claude,
    contents,
    conversations,
    keeps,
    output_item,
    reasoning_item,
    system,
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
from hypothesis import given, settings
from hypothesis import strategies as st
from media_files import b64, data_url, pdf, png, wav

from ctx_compact import (
    CATEGORIES,
    breakdown,
    compact,
    media_aware_counter,
)
from ctx_compact._contract import count_value, default_count_tokens

Message = Dict[str, Any]
PHOTO = png(1024, 768)


def chat_with_media() -> List[Message]:
    return [
        system(),
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in this photo, and in the recording?"},
                {"type": "image_url", "image_url": {"url": data_url("image/png", PHOTO)}},
                {"type": "input_audio", "input_audio": {"data": b64(wav(3.0)), "format": "wav"}},
            ],
        },
        assistant("A chart, and a voice."),
    ]


def anthropic_history() -> List[Message]:
    document = {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": b64(pdf(3))},
    }
    return [
        user("Read the report and look up the figures."),
        claude(
            "assistant", thinking_block("I should look this up."), tool_use_block("tu_1", "lookup")
        ),
        claude("user", tool_result_block("tu_1", '{"revenue": 12}'), document),
        claude("assistant", text_block("Revenue was 12.")),
    ]


def responses_history() -> List[Message]:
    call = call_item("function_call", "fc_1")
    call["name"] = "lookup"
    return [
        {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAA" * 40},
        {"role": "user", "content": "And the costs?"},
        reasoning_item(),
        call,
        output_item("function_call", "fc_1", '{"costs": 7}'),
        {"role": "assistant", "content": "Costs were 7."},
    ]


def gemini_history() -> List[Message]:
    image = {"inline_data": {"mime_type": "image/png", "data": b64(PHOTO)}}
    return [
        {"role": "user", "parts": [{"text": "Describe it."}, image]},
        {"role": "model", "parts": [{"function_call": {"name": "zoom", "args": {"x": 1}}}]},
        {"role": "user", "parts": [{"function_response": {"name": "zoom", "response": {"ok": 1}}}]},
        {"role": "model", "parts": [{"text": "A chart."}]},
    ]


def bedrock_history() -> List[Message]:
    image = {"image": {"format": "png", "source": {"bytes": b64(PHOTO)}}}
    use = {"toolUse": {"toolUseId": "b1", "name": "zoom", "input": {}}}
    result = {"toolResult": {"toolUseId": "b1", "content": [{"text": "zoomed"}, image]}}
    return [
        {"role": "user", "content": [{"text": "Zoom in."}]},
        {"role": "assistant", "content": [use]},
        {"role": "user", "content": [result]},
        {"role": "assistant", "content": [{"text": "Done."}]},
    ]


HISTORIES = {
    "chat": weather_messages,
    "chat media": chat_with_media,
    "anthropic": anthropic_history,
    "responses": responses_history,
    "gemini": gemini_history,
    "bedrock": bedrock_history,
}
COUNTERS = {"default": None, "media-aware": media_aware_counter()}


@pytest.mark.parametrize("counter", sorted(COUNTERS))
@pytest.mark.parametrize("kind", sorted(HISTORIES))
def test_the_categories_sum_to_the_count_in_every_format(kind: str, counter: str) -> None:
    messages = HISTORIES[kind]()
    count = COUNTERS[counter]
    result = breakdown(messages, count_tokens=count)
    expected = compact(messages, max_tokens=10**9, count_tokens=count).tokens_before
    assert result.tokens == expected
    assert sum(result.categories.values()) == expected
    assert list(result.categories) == list(CATEGORIES)
    for row in result.rows:
        assert sum(row.parts.values()) == row.tokens
        assert row.category in row.parts
    probed = breakdown(
        messages, count_tokens=(lambda m: count(m)) if count else default_count_tokens
    )
    assert [row.parts for row in result.rows] == [row.parts for row in probed.rows]


def test_a_chat_history_by_category_and_tool() -> None:
    result = breakdown(weather_messages())
    assert result.categories["system"] == 15
    assert result.categories["tool_calls"] > 0
    assert result.categories["tool_results"] == 34  # the two tool messages, whole
    assert result.tools == {
        "get_weather": {"calls": result.categories["tool_calls"], "results": 34}
    }
    assert [row.category for row in result.rows[:4]] == [
        "system",
        "user",
        "tool_calls",
        "tool_results",
    ]
    assert [row.group for row in result.rows] == [0, 1, 2, 2, 4, 5, 6, 6, 8, 9]
    assert result.rows[3].tool == "get_weather"
    assert result.max_tokens is None
    assert result.fits is None
    assert result.rows[0].status is None


def test_media_is_its_own_category_as_billed() -> None:
    counter = media_aware_counter()
    result = breakdown(chat_with_media(), count_tokens=counter)
    assert result.categories["images"] == 765  # a 1024x768 PNG, as OpenAI bills it
    assert result.categories["audio"] > 0
    row = result.rows[1]
    assert row.category == "images"
    assert set(row.parts) == {"user", "images", "audio"}


def test_thinking_documents_and_results_in_an_anthropic_history() -> None:
    result = breakdown(anthropic_history(), count_tokens=media_aware_counter())
    assert result.categories["thinking"] > 0
    assert result.categories["documents"] >= 3 * 3100  # three PDF pages as Anthropic bills them
    assert result.rows[2].parts["tool_results"] > 0
    assert result.tools["lookup"]["results"] > 0


def test_a_compaction_item_and_reasoning_in_responses() -> None:
    result = breakdown(responses_history())
    assert result.rows[0].category == "compaction"
    assert result.rows[2].category == "thinking"
    assert result.rows[3].category == "tool_calls"
    assert result.rows[4].category == "tool_results"
    assert result.tools == {
        "lookup": {"calls": result.rows[3].tokens, "results": result.rows[4].tokens}
    }


def test_the_system_prompt_and_tools_sent_beside_the_messages() -> None:
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]
    plain = breakdown(weather_messages())
    result = breakdown(weather_messages(), system="Be brief.", tools=tools)
    assert result.categories["tools"] == count_value(tools, None)
    brief = count_value("Be brief.", None)
    assert result.categories["system"] == plain.categories["system"] + brief
    assert result.tokens == plain.tokens + count_value(tools, None) + brief


def test_with_a_budget_each_row_says_what_compaction_would_do() -> None:
    messages = weather_messages()
    result = breakdown(messages, max_tokens=150, keep_head=1, keep_tail=2)
    compacted = compact(messages, max_tokens=150, keep_head=1, keep_tail=2)
    dropped = [row.index for row in result.rows if row.status == "dropped"]
    assert [messages[i] for i in dropped] == compacted.dropped
    assert result.tokens_after == compacted.tokens_after
    assert result.fits is True
    assert result.rows[0].reason == "head"


def test_cleared_truncated_pinned_and_awaiting_rows() -> None:
    messages = [system(), user("TASK: fix the build.")]
    for n in range(6):
        messages.append(assistant(None, [tool_call(f"c{n}", "read")]))
        messages.append(tool(f"c{n}", "line of output\n" * (40 if n != 4 else 2000)))
    messages.append(assistant(None, [tool_call("c9", "read")]))  # awaiting its result
    options: Dict[str, Any] = {
        "keep_tail": 0,
        "clear_tool_results": True,
        "max_result_tokens": 500,
        "pin": lambda m: str(m.get("content")).startswith("TASK"),
    }

    roomy = breakdown(messages, max_tokens=1200, **options)
    assert [row.status for row in roomy.rows][3:12:2] == [
        "cleared",
        "cleared",
        "cleared",
        "kept",
        "truncated",
    ]
    tight = breakdown(messages, max_tokens=900, **options)
    statuses = [row.status for row in tight.rows]
    assert statuses[:3] == ["kept", "pinned", "dropped"]
    assert statuses[11] == "truncated"
    assert statuses[14] == "awaiting"
    assert tight.rows[14].reason == "tail (calls awaiting their results)"
    assert tight.fits is True
    assert tight.tokens_after is not None
    assert tight.tokens_after <= 900


def test_the_largest_messages() -> None:
    result = breakdown(weather_messages())
    largest = result.largest(3)
    assert [row.tokens for row in largest] == sorted((r.tokens for r in result.rows), reverse=True)[
        :3
    ]
    assert [row.index for row in largest][:2] == [2, 6]


def test_summary_rows() -> None:
    messages = weather_messages()
    result = breakdown(messages, summaries=[1])
    assert result.rows[1].category == "summary"
    assert result.categories["summary"] == result.rows[1].tokens


@settings(deadline=None)
@given(conversations(), budgets(), keeps, keeps, st.booleans())
def test_any_conversation_sums_exactly_and_drops_what_compact_drops(
    messages: List[Message], budget: float, head: int, tail: int, media: bool
) -> None:
    count = media_aware_counter() if media else None
    options: Dict[str, Any] = {"keep_head": head, "keep_tail": tail, "count_tokens": count}
    result = breakdown(messages, max_tokens=budget, **options)
    compacted = compact(messages, max_tokens=budget, **options)
    assert sum(result.categories.values()) == result.tokens == compacted.tokens_before
    assert result.tokens_after == compacted.tokens_after
    kept = [messages[r.index] for r in result.rows if r.status != "dropped"]
    assert kept == compacted.messages
    totals = breakdown(messages, max_tokens=budget, per_message=False, **options)
    assert totals.rows == ()
    assert (totals.tokens, totals.tokens_after, totals.fits, totals.categories, totals.tools) == (
        result.tokens,
        result.tokens_after,
        result.fits,
        result.categories,
        result.tools,
    )


SMALL_PHOTO = png(40, 30)
ANY_IMAGE = st.sampled_from(
    [
        ("chat", {"type": "image_url", "image_url": {"url": data_url("image/png", SMALL_PHOTO)}}),
        ("anthropic", {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                   "data": b64(SMALL_PHOTO)}}),
        ("gemini", {"inline_data": {"mime_type": "image/png", "data": b64(SMALL_PHOTO)}}),
        ("bedrock", {"image": {"format": "png", "source": {"bytes": b64(SMALL_PHOTO)}}}),
    ]
)  # fmt: skip


@st.composite
def histories_in_every_format(draw: st.DrawFn) -> List[Message]:
    """One format's history: text turns, tool rounds (parallel calls, results as blocks),
    thinking, and images beside the text or inside a tool's result."""
    kind = draw(st.sampled_from(["chat", "anthropic", "responses", "gemini", "bedrock"]))
    images = [part for owner, part in draw(st.lists(ANY_IMAGE, max_size=2)) if owner == kind]
    text = draw(texts)
    messages: List[Message] = []
    for n in range(draw(st.integers(1, 4))):
        ids = [f"c{n}_{k}" for k in range(draw(st.integers(0, 3)))]
        results = [draw(texts) for _ in ids]
        inner = images[:1] if ids and draw(st.booleans()) else []
        if kind == "chat":
            content = [{"type": "text", "text": text}, *images] if images else text
            messages.append({"role": "user", "content": content})
            if ids:
                messages.append(assistant(draw(contents), [tool_call(i, "read") for i in ids]))
                messages += [tool(i, r) for i, r in zip(ids, results)]
        elif kind == "anthropic":
            messages.append(claude("user", text_block(text), *images))
            if ids:
                thought = [thinking_block(draw(texts))] if draw(st.booleans()) else []
                messages.append(
                    claude("assistant", *thought, *(tool_use_block(i, "read") for i in ids))
                )
                blocks = [tool_result_block(i, r) for i, r in zip(ids, results)]
                if inner:
                    blocks[0]["content"] = [text_block(results[0]), *inner]
                messages.append(claude("user", *blocks))
        elif kind == "responses":
            messages.append({"role": "user", "content": text})
            if ids and draw(st.booleans()):
                messages.append(reasoning_item(f"rs_{n}"))
            for i, r in zip(ids, results):
                call = call_item("function_call", i)
                call["name"] = "read"
                messages += [call, output_item("function_call", i, r)]
        elif kind == "gemini":
            messages.append({"role": "user", "parts": [{"text": text}, *images]})
            if ids:
                calls = [{"function_call": {"name": "read", "args": {"n": i}}} for i in ids]
                messages.append({"role": "model", "parts": calls})
                answers = [
                    {"function_response": {"name": "read", "response": {"out": r}}} for r in results
                ]
                messages.append({"role": "user", "parts": answers})
        else:
            messages.append({"role": "user", "content": [{"text": text}, *images]})
            if ids:
                uses = [{"toolUse": {"toolUseId": i, "name": "read", "input": {}}} for i in ids]
                messages.append({"role": "assistant", "content": uses})
                answers = [
                    {"toolResult": {"toolUseId": i, "content": [{"text": r}]}}
                    for i, r in zip(ids, results)
                ]
                if inner:
                    answers[0]["toolResult"]["content"].append(inner[0])
                messages.append({"role": "user", "content": answers})
        reply = draw(texts)
        if kind == "gemini":
            messages.append({"role": "model", "parts": [{"text": reply}]})
        elif kind in ("anthropic", "bedrock"):
            messages.append({"role": "assistant", "content": [{"type": "text", "text": reply}]
                             if kind == "anthropic" else [{"text": reply}]})  # fmt: skip
        else:
            messages.append(assistant(reply))
    return messages


@settings(deadline=None)
@given(histories_in_every_format(), st.booleans())
def test_every_format_splits_its_count_as_a_counter_of_its_own_would(
    messages: List[Message], media: bool
) -> None:
    # The estimator's parts are measured once each; a counter the library does not know
    # (here the same arithmetic, as a plain function) has each part counted alone in a
    # message: the two splits agree, and every split sums to compact's count.
    known = media_aware_counter() if media else None
    own = (lambda m: known(m)) if known is not None else default_count_tokens
    result = breakdown(messages, count_tokens=known)
    probed = breakdown(messages, count_tokens=own)
    expected = compact(messages, max_tokens=10**9, count_tokens=known).tokens_before
    assert sum(result.categories.values()) == result.tokens == expected
    for row in result.rows:
        assert sum(row.parts.values()) == row.tokens
    assert [row.parts for row in result.rows] == [row.parts for row in probed.rows]
    assert result.categories == probed.categories


def test_a_messages_text_for_a_page_to_show() -> None:
    result = breakdown(weather_messages())
    assert result.preview(1) == "What is the weather in Denver?"
    assert result.preview(2) == 'get_weather {"city":"Denver"}'  # a call: its tool and arguments
    assert "tempF" in result.preview(3)
    assert "call_1" not in result.preview(3)  # ids are no text a reader wants
    assert "What is the weather in Denver?" in result.html()
