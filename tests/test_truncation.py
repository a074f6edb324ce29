"""truncate_tool_results: an oversized tool result cut to a head and a tail, in every format."""

from __future__ import annotations

import base64
import copy
import json
import re
import zlib
from typing import Any, Dict, List, Tuple

import pytest
from helpers import (
    assistant,
    call_item,
    claude,
    output_item,
    system,
    text_block,
    tool,
    tool_call,
    tool_result_block,
    tool_use_block,
    user,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from ctx_compact import (
    InvalidMessageError,
    check_pairing,
    estimate_tokens,
    media_aware_counter,
    truncate_tool_results,
)
from ctx_compact._contract import ToolResultTruncation, count_all, message_views
from ctx_compact.testing import anthropic as kit_anthropic
from ctx_compact.testing import bedrock as kit_bedrock
from ctx_compact.testing import gemini as kit_gemini
from ctx_compact.testing import ollama as kit_ollama
from ctx_compact.testing import openai_chat as kit_chat
from ctx_compact.testing import responses as kit_responses

Message = Dict[str, Any]
LOG = "".join(f"line {n} of the build log: compiling module_{n}.py\n" for n in range(4000))
MARKER = re.compile(r"\n\[\.\.\. (\d+) characters \(about (\d+) tokens\) cut(.*?) \.\.\.\]\n")


def png(width: int, height: int) -> str:
    """A base64 PNG header declaring ``width`` x ``height`` pixels (enough for the counter)."""
    ihdr = width.to_bytes(4, "big") + height.to_bytes(4, "big") + b"\x08\x02\x00\x00\x00"
    chunk = b"IHDR" + ihdr
    crc = zlib.crc32(chunk).to_bytes(4, "big")
    raw = b"\x89PNG\r\n\x1a\n" + len(ihdr).to_bytes(4, "big") + chunk + crc + b"\x00" * 4000
    return base64.b64encode(raw).decode()


def picture(width: int, height: int) -> Message:
    source = {"type": "base64", "media_type": "image/png", "data": png(width, height)}
    return {"type": "image", "source": source}


def chat(result: Any = LOG, name: str = "read_log") -> List[Message]:
    return [
        system(),
        user("Why did the build fail?"),
        assistant(None, [tool_call("call_1", name, '{"path":"build.log"}')]),
        tool("call_1", result),
        assistant("Module 3999 failed."),
    ]


def anthropic(content: Any) -> List[Message]:
    return [
        user("Why did the build fail?"),
        claude("assistant", tool_use_block("toolu_1", "read_log")),
        claude("user", tool_result_block("toolu_1", content)),
    ]


def gemini(response: Any) -> List[Message]:
    return [
        {"role": "user", "parts": [{"text": "Why did the build fail?"}]},
        {"role": "model", "parts": [{"function_call": {"name": "read_log", "args": {}}}]},
        {
            "role": "user",
            "parts": [{"function_response": {"name": "read_log", "response": response}}],
        },
    ]


def bedrock(content: List[Any]) -> List[Message]:
    use = {"toolUse": {"toolUseId": "tu_1", "name": "read_log", "input": {}}}
    result = {"toolResult": {"toolUseId": "tu_1", "content": content}}
    return [
        {"role": "user", "content": [{"text": "Why did the build fail?"}]},
        {"role": "assistant", "content": [use]},
        {"role": "user", "content": [result]},
    ]


def responses(output: Any = LOG) -> List[Message]:
    call = call_item("function_call", "fc_1")
    call["name"] = "read_log"
    return [
        {"role": "user", "content": "Why did the build fail?"},
        call,
        output_item("function_call", "fc_1", output),
    ]


def ollama() -> List[Message]:
    return [
        user("Why did the build fail?"),
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "read_log", "arguments": {"path": "build.log"}}}],
        },
        {"role": "tool", "tool_name": "read_log", "content": LOG},
    ]


# --- text results ----------------------------------------------------------------


def test_a_text_result_keeps_its_head_and_tail_around_one_marker() -> None:
    messages = chat()
    original = copy.deepcopy(messages)
    result = truncate_tool_results(messages, max_result_tokens=500)
    assert messages == original  # the caller's list and messages are untouched
    [cut] = result.cleared
    assert (cut.index, cut.call_id, cut.tool, cut.call_index) == (3, "call_1", "read_log", 2)
    assert cut.tokens_before > 20 * 500
    assert cut.tokens_after <= 500
    content = result.messages[3]["content"]
    [(chars, tokens, where)] = MARKER.findall(content)
    head, tail = MARKER.split(content)[0], MARKER.split(content)[-1]
    assert LOG.startswith(head)
    assert LOG.endswith(tail)
    assert int(chars) == cut.chars_cut == len(LOG) - len(head) - len(tail)
    assert abs(int(tokens) - (cut.tokens_before - cut.tokens_after)) < 0.02 * cut.tokens_before
    assert where == ""
    assert cut.offloaded is None
    assert abs(len(head) - len(tail)) <= 1  # keep_ratio=0.5
    # Only the result changed: every other message is the caller's own object.
    assert [m is o for m, o in zip(result.messages, messages)] == [True, True, True, False, True]
    assert {k: v for k, v in result.messages[3].items() if k != "content"} == {
        "role": "tool",
        "tool_call_id": "call_1",
    }
    assert result.tokens_after == sum(estimate_tokens(m) for m in result.messages)
    assert result.fits
    check_pairing(result.messages)
    kit_chat.validate_chat_completions({"model": "m", "messages": result.messages})


def test_the_cut_is_as_small_as_the_cap_allows() -> None:
    result = truncate_tool_results(chat(), max_result_tokens=2000)
    [cut] = result.cleared
    # The estimator is about 4 characters a token: what is kept fills the cap.
    assert 1980 <= cut.tokens_after <= 2000


@pytest.mark.parametrize(("ratio", "head_share"), [(0.0, 0.0), (0.25, 0.25), (1.0, 1.0)])
def test_keep_ratio_says_how_much_of_what_is_kept_is_the_head(
    ratio: float, head_share: float
) -> None:
    content = truncate_tool_results(chat(), max_result_tokens=400, keep_ratio=ratio).messages[3][
        "content"
    ]
    head, tail = MARKER.split(content)[0], MARKER.split(content)[-1]
    assert abs(len(head) / (len(head) + len(tail)) - head_share) < 0.01


def test_a_json_text_result_is_cut_as_text() -> None:
    rows = json.dumps([{"id": n, "name": f"row {n}"} for n in range(3000)])
    result = truncate_tool_results(chat(rows), max_result_tokens=300)
    content = result.messages[3]["content"]
    assert isinstance(content, str)
    assert content.startswith('[{"id": 0')
    assert content.endswith("}]")
    assert len(MARKER.findall(content)) == 1


def test_results_within_their_cap_and_the_rest_of_the_list_are_left_alone() -> None:
    messages = chat("Module 3999 failed to compile.")
    result = truncate_tool_results(messages, max_result_tokens=500)
    assert result.cleared == []
    assert result.fits
    assert all(m is o for m, o in zip(result.messages, messages))
    assert result.messages is not messages
    assert result.tokens_before == result.tokens_after


def test_a_cut_result_is_not_cut_again() -> None:
    once = truncate_tool_results(chat(), max_result_tokens=500)
    twice = truncate_tool_results(once.messages, max_result_tokens=500)
    assert twice.cleared == []
    assert twice.messages == once.messages


def test_the_same_input_is_always_cut_the_same_way() -> None:
    first = truncate_tool_results(chat(), max_result_tokens=700)
    second = truncate_tool_results(copy.deepcopy(chat()), max_result_tokens=700)
    assert json.dumps(first.messages) == json.dumps(second.messages)


# --- caps per tool, exclusions, offload ----------------------------------------------


def two_tools() -> List[Message]:
    return [
        user("Compare."),
        assistant(None, [tool_call("a", "read_log"), tool_call("b", "fetch_page")]),
        tool("a", LOG),
        tool("b", LOG),
    ]


def test_caps_per_tool_with_a_star_for_the_rest() -> None:
    result = truncate_tool_results(two_tools(), max_result_tokens={"read_log": 300, "*": 900})
    assert [(c.tool, c.tokens_after <= cap) for c, cap in zip(result.cleared, (300, 900))] == [
        ("read_log", True),
        ("fetch_page", True),
    ]
    assert result.cleared[1].tokens_after > 800


def test_without_a_star_the_tools_not_named_are_not_cut() -> None:
    result = truncate_tool_results(two_tools(), max_result_tokens={"read_log": 300})
    assert [c.tool for c in result.cleared] == ["read_log"]
    assert result.messages[3] is two_tools()[3] or result.messages[3]["content"] == LOG


def test_excluded_tools_are_never_cut() -> None:
    result = truncate_tool_results(two_tools(), max_result_tokens=300, exclude_tools=["fetch_page"])
    assert [c.tool for c in result.cleared] == ["read_log"]
    assert result.messages[3]["content"] == LOG


def test_offload_gets_the_whole_text_once_and_names_it_in_the_marker() -> None:
    seen: List[Tuple[str, Any, Any]] = []

    def offload(text: str, name: Any, call_id: Any) -> str:
        seen.append((text, name, call_id))
        return f"/tmp/outputs/{call_id}.txt"

    result = truncate_tool_results(chat(), max_result_tokens=500, offload=offload)
    assert seen == [(LOG, "read_log", "call_1")]
    [cut] = result.cleared
    assert cut.offloaded == "/tmp/outputs/call_1.txt"
    assert cut.tokens_after <= 500
    [(_, _, where)] = MARKER.findall(result.messages[3]["content"])
    assert where == "; the whole output: /tmp/outputs/call_1.txt"


def test_a_structured_result_is_offloaded_as_its_json() -> None:
    seen: List[str] = []
    truncate_tool_results(
        gemini({"output": LOG}),
        max_result_tokens=300,
        offload=lambda t, n, i: seen.append(t) or "k",
    )
    assert [json.loads(text) for text in seen] == [{"output": LOG}]


def test_a_custom_marker() -> None:
    result = truncate_tool_results(
        chat(),
        max_result_tokens=300,
        marker=" <{chars} chars cut{where}> ",
        offload=lambda *a: "k1",
    )
    assert re.search(r" <\d+ chars cut; the whole output: k1> ", result.messages[3]["content"])


# --- structured results: the shape each provider requires stays ----------------------


def test_anthropic_text_blocks_are_cut_and_an_image_only_counted() -> None:
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": png(800, 600)},
    }
    messages = anthropic([text_block(LOG), image, text_block("exit status 2")])
    counter = media_aware_counter()
    result = truncate_tool_results(messages, max_result_tokens=1500, count_tokens=counter)
    [cut] = result.cleared
    assert cut.tokens_after <= 1500
    blocks = result.messages[2]["content"][0]["content"]
    assert blocks[1] == image  # the image is never cut
    assert blocks[2] == text_block("exit status 2")  # short strings stay whole
    assert len(MARKER.findall(blocks[0]["text"])) == 1
    assert result.messages[2]["content"][0]["tool_use_id"] == "toolu_1"
    kit_anthropic.validate_messages({"model": "m", "max_tokens": 10, "messages": result.messages})


def test_a_result_of_media_alone_over_its_cap_is_left_as_it_is() -> None:
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": png(1600, 1200)},
    }
    messages = anthropic([image])
    result = truncate_tool_results(
        messages, max_result_tokens=50, count_tokens=media_aware_counter()
    )
    assert result.cleared == []
    assert not result.fits
    assert result.messages[2] is messages[2]


def test_an_anthropic_string_result() -> None:
    result = truncate_tool_results(anthropic(LOG), max_result_tokens=400)
    content = result.messages[2]["content"][0]["content"]
    assert isinstance(content, str)
    assert len(MARKER.findall(content)) == 1
    kit_anthropic.validate_messages({"model": "m", "max_tokens": 10, "messages": result.messages})


def test_a_gemini_response_object_keeps_its_keys_and_its_longest_strings_are_cut() -> None:
    response = {
        "output": LOG,
        "exit_code": 2,
        "path": "/srv/build.log",
        "notes": [LOG[:20000], "ok"],
    }
    result = truncate_tool_results(gemini(response), max_result_tokens=800)
    [cut] = result.cleared
    assert cut.tokens_after <= 800
    new = result.messages[2]["parts"][0]["function_response"]["response"]
    assert set(new) == set(response)
    assert new["exit_code"] == 2
    assert new["path"] == "/srv/build.log"
    assert new["notes"][1] == "ok"
    assert len(MARKER.findall(new["output"])) == 1
    assert len(MARKER.findall(new["notes"][0])) == 1
    kit_gemini.validate_request({"contents": result.messages})


def test_bedrock_text_and_json_blocks_keep_their_shape() -> None:
    content = [{"text": LOG}, {"json": {"rows": [LOG[:30000], LOG[:100]], "count": 2}}]
    result = truncate_tool_results(bedrock(content), max_result_tokens=600)
    [cut] = result.cleared
    assert cut.tokens_after <= 600
    assert cut.call_id == "tu_1"
    new = result.messages[2]["content"][0]["toolResult"]["content"]
    assert list(new[0]) == ["text"]
    assert list(new[1]) == ["json"]
    assert new[1]["json"]["count"] == 2
    assert new[1]["json"]["rows"][1] == LOG[:100]
    spec = {"name": "read_log", "inputSchema": {"json": {"type": "object"}}}
    kit_bedrock.validate_request(
        {"messages": result.messages, "toolConfig": {"tools": [{"toolSpec": spec}]}}
    )


def test_responses_function_call_output() -> None:
    result = truncate_tool_results(responses(), max_result_tokens=500)
    [cut] = result.cleared
    assert (cut.index, cut.call_id, cut.tool, cut.call_index) == (2, "fc_1", "read_log", 1)
    assert len(MARKER.findall(result.messages[2]["output"])) == 1
    kit_responses.validate_responses({"model": "m", "input": result.messages})


def test_ollama_tool_message() -> None:
    result = truncate_tool_results(ollama(), max_result_tokens=500)
    [cut] = result.cleared
    assert cut.tokens_after <= 500
    assert result.messages[2]["tool_name"] == "read_log"
    kit_ollama.validate_request({"model": "m", "messages": result.messages})


def test_an_sdk_object_that_is_cut_becomes_its_json() -> None:
    pydantic = pytest.importorskip("pydantic")

    class ToolMessage(pydantic.BaseModel):  # type: ignore[misc,name-defined]
        role: str
        tool_call_id: str
        content: str

    messages: List[Any] = chat()
    messages[3] = ToolMessage(role="tool", tool_call_id="call_1", content=LOG)
    result = truncate_tool_results(messages, max_result_tokens=300)
    assert isinstance(result.messages[3], dict)
    assert result.messages[3]["tool_call_id"] == "call_1"
    assert messages[3].content == LOG


# --- bad input -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "error", "words"),
    [
        ({"max_result_tokens": "500"}, TypeError, "'max_result_tokens' must be a positive int"),
        ({"max_result_tokens": 0}, ValueError, "'max_result_tokens' must be a positive int"),
        ({"max_result_tokens": True}, TypeError, "max_result_tokens"),
        ({"max_result_tokens": {"*": 1.5}}, TypeError, "'max_result_tokens[*]' must be"),
        ({"max_result_tokens": {3: 10}}, TypeError, "'max_result_tokens' must be a mapping"),
        ({"max_result_tokens": 10, "keep_ratio": 2}, ValueError, "'keep_ratio' must be a number"),
        ({"max_result_tokens": 10, "keep_ratio": "a"}, TypeError, "'keep_ratio' must be a number"),
        ({"max_result_tokens": 10, "marker": 3}, TypeError, "'marker' must be a string"),
        ({"max_result_tokens": 10, "marker": "{size}"}, ValueError, "'marker' must be a template"),
        ({"max_result_tokens": 10, "marker": "  "}, ValueError, "writes some text"),
        ({"max_result_tokens": 10, "offload": "s3"}, TypeError, "offload"),
        ({"max_result_tokens": 10, "exclude_tools": "read_log"}, TypeError, "exclude_tools"),
        ({"max_result_tokens": 10, "count_tokens": 4}, TypeError, "count_tokens"),
    ],
)
def test_wrong_options_are_refused_by_name(
    options: Dict[str, Any], error: type, words: str
) -> None:
    with pytest.raises(error, match=re.escape(words)):
        truncate_tool_results(chat(), **options)


def test_offload_must_return_a_string() -> None:
    with pytest.raises(TypeError, match="'offload' must be a callable returning a string"):
        truncate_tool_results(chat(), max_result_tokens=10, offload=lambda *a: None)


def test_a_malformed_message_is_named_by_its_index() -> None:
    messages = chat()
    messages[3] = {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": LOG,
        "tool_use_id": "x",
        "tool_calls": 3,
    }
    with pytest.raises(InvalidMessageError, match="message 3"):
        truncate_tool_results(messages, max_result_tokens=10)


# --- what holds for any result -----------------------------------------------------


@settings(deadline=None)
@given(
    text=st.text(min_size=0, max_size=6000),
    cap=st.integers(min_value=40, max_value=2000),
    ratio=st.floats(min_value=0, max_value=1),
)
def test_any_text_result_ends_within_its_cap_with_its_ends_kept(
    text: str, cap: int, ratio: float
) -> None:
    messages = chat(text)
    result = truncate_tool_results(messages, max_result_tokens=cap, keep_ratio=ratio)
    assert result.tokens_after == sum(estimate_tokens(m) for m in result.messages)
    assert result.fits
    for cut in result.cleared:
        assert cut.tokens_after <= cap < cut.tokens_before
        content = result.messages[3]["content"]
        pieces = MARKER.split(content)
        assert text.startswith(pieces[0])
        assert text.endswith(pieces[-1])
    check_pairing(result.messages)


def test_counting_work_is_bounded_on_a_huge_result() -> None:
    calls: List[int] = []

    def counter(message: Any) -> int:
        calls.append(1)
        return estimate_tokens(message)

    truncate_tool_results(chat(LOG * 50), max_result_tokens=1000, count_tokens=counter)
    # Each message once, the result's message without its content once, and a round or two.
    assert len(calls) <= len(chat()) + 1 + 3


# --- the last resort: the largest results cut just enough to fit ----------------------


def fitted(messages: List[Message], budget: float, **options: Any) -> Any:
    truncation = ToolResultTruncation.checked(max_result_tokens=1, **options.pop("checked", {}))
    counts = count_all(message_views(messages), None)
    result, counts = truncation.fit(messages, counts, budget, None, **options)
    assert counts == [estimate_tokens(m) for m in result.messages]
    return result


def test_the_largest_results_are_cut_to_one_size_just_enough_to_fit() -> None:
    messages = two_tools()
    messages[3] = tool("b", LOG[:20000])
    total = sum(estimate_tokens(m) for m in messages)
    result = fitted(messages, 6000)
    assert result.tokens_before == total
    assert result.tokens_after <= 6000
    assert result.tokens_after > 6000 - 60  # just enough: a few tokens of slack
    assert result.fits
    sizes = [cut.tokens_after for cut in result.cleared]
    assert max(sizes) - min(sizes) <= 2  # one common size
    assert check_pairing(result.messages) == []
    assert messages[2]["content"] == LOG  # the caller's messages are untouched


def test_a_smaller_result_under_the_common_size_is_left_whole() -> None:
    messages = two_tools()
    messages[3] = tool("b", "a short answer " * 20)
    result = fitted(messages, 3000)
    assert [cut.tool for cut in result.cleared] == ["read_log"]
    assert result.messages[3] is messages[3]
    assert result.fits


def test_protected_messages_and_excluded_tools_are_not_cut() -> None:
    messages = two_tools()
    result = fitted(messages, 3000, protected=[2])
    assert [cut.tool for cut in result.cleared] == ["fetch_page"]
    assert result.messages[2] is messages[2]
    assert not result.fits
    excluded = fitted(messages, 3000, checked={"exclude_tools": ["read_log"]})
    assert [cut.tool for cut in excluded.cleared] == ["fetch_page"]


def test_what_fits_already_is_left_alone() -> None:
    messages = two_tools()
    result = fitted(messages, 10**6)
    assert result.cleared == []
    assert all(a is b for a, b in zip(result.messages, messages))


def test_a_budget_no_cut_can_reach_cuts_everything_it_can_and_says_so() -> None:
    result = fitted(two_tools(), 50)
    assert not result.fits
    assert [cut.tool for cut in result.cleared] == ["read_log", "fetch_page"]
    assert all(cut.tokens_after < 40 for cut in result.cleared)


def test_offload_is_called_once_per_result_however_many_rounds() -> None:
    seen: List[Any] = []
    messages = two_tools()
    fitted(messages, 900, checked={"offload": lambda text, name, i: seen.append(i) or f"k-{i}"})
    assert sorted(seen) == ["a", "b"]


def test_the_results_of_a_pinned_group_are_never_cut() -> None:
    messages = two_tools()
    result = truncate_tool_results(
        messages, max_result_tokens=300, pin=lambda m: m.get("tool_call_id") == "a"
    )
    # The pinned result's group is the call and both its results: nothing in it is cut.
    assert result.cleared == []
    assert all(a is b for a, b in zip(result.messages, messages))
    unpinned = truncate_tool_results(chat(), max_result_tokens=300, pin=lambda m: False)
    assert [c.index for c in unpinned.cleared] == [3]
    with pytest.raises(TypeError, match="'pin' must be"):
        truncate_tool_results(chat(), max_result_tokens=300, pin=3)  # type: ignore[arg-type]
