"""estimate_tokens and the default estimator.

The default is ``ceil(utf16_len(json.dumps(m, separators=(",", ":"),
ensure_ascii=False)) / 4)``. ``{"role":"user","content":""}`` is 28 characters,
so a user message whose content is ``k`` UTF-16 units long is ``28 + k`` units.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from types import MappingProxyType
from typing import Any

import pytest
from helpers import contents, exchange, texts, tool_call, user
from hypothesis import given
from hypothesis import strategies as st

from ctx_compact import InvalidMessageError, compact, compact_with_summary, estimate_tokens
from ctx_compact._tokens import compact_json, count_all
from ctx_compact._views import to_json_compatible


def utf16_units(text: str) -> int:
    # Independent of the library's way: astral-plane code points are surrogate pairs.
    return sum(2 if ord(ch) > 0xFFFF else 1 for ch in text)


def spec_estimate(message: Any) -> int:
    return math.ceil(
        utf16_units(json.dumps(message, separators=(",", ":"), ensure_ascii=False)) / 4
    )


def test_empty_user_message_is_28_characters():
    assert len('{"role":"user","content":""}') == 28
    assert estimate_tokens(user("")) == 7


@pytest.mark.parametrize(
    ("content", "tokens"),
    [
        ("abcd", 8),  # 32 units
        ("abcde", 9),  # 33 units: rounded up
        ("abcdefgh", 9),  # 36 units
    ],
)
def test_ascii(content, tokens):
    assert estimate_tokens(user(content)) == tokens


def test_compact_separators_without_spaces():
    # With json.dumps' default ", " and ": " this would be 35 characters, 9 tokens.
    assert estimate_tokens(user("abcd")) == 8


@pytest.mark.parametrize(
    ("content", "tokens"),
    [
        ("éééé", 8),  # 4 units; \u00e9 escapes would make it 52 characters, 13 tokens
        ("ééééé", 9),
        ("日本語に", 8),  # CJK: one unit each
        ("日本語にほ", 9),
    ],
)
def test_bmp_non_ascii_counts_one_unit_per_character(content, tokens):
    assert estimate_tokens(user(content)) == tokens


@pytest.mark.parametrize(
    ("content", "tokens"),
    [
        ("🎉🎉", 8),  # 4 units: 32
        ("🎉🎉🎉", 9),  # 6 units: 34 (3 code points would give 31, 8 tokens)
        ("a🎉a", 8),
        ("𠮷𠮷𠮷", 9),  # CJK Extension B: also outside the BMP
    ],
)
def test_astral_plane_characters_count_two_units(content, tokens):
    assert estimate_tokens(user(content)) == tokens


def test_lone_surrogate_counts_one_unit():
    assert estimate_tokens(user("\ud83cabc")) == 8
    assert estimate_tokens(user("\udfff" * 5)) == 9


def test_escaped_characters_count_as_their_escape():
    # '"' becomes \" (2 units) and a newline becomes \n (2 units).
    assert estimate_tokens(user('"\n')) == 8


def test_tool_calls_are_part_of_the_count():
    message = exchange("call_1")[0]
    text = json.dumps(message, separators=(",", ":"))

    assert estimate_tokens(message) == math.ceil(len(text) / 4)
    assert estimate_tokens(message) > estimate_tokens({"role": "assistant", "content": None})


def test_spec_example_per_message_counts(weather):
    assert [estimate_tokens(m) for m in weather] == [15, 15, 39, 17, 14, 12, 39, 17, 14, 13]


def test_mapping_proxy_counts_like_the_equivalent_dict():
    message = {"role": "user", "content": "café 🎉"}

    assert estimate_tokens(MappingProxyType(message)) == estimate_tokens(message)


def test_nested_mapping_proxies_count_like_dicts():
    plain = {"role": "assistant", "content": None, "tool_calls": [tool_call("c1")]}
    proxied = MappingProxyType(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [MappingProxyType(tool_call("c1"))],
        }
    )

    assert estimate_tokens(proxied) == estimate_tokens(plain) == spec_estimate(plain)


def test_dict_subclass_counts_like_dict():
    message = OrderedDict(role="user", content="hello")

    assert estimate_tokens(message) == estimate_tokens(dict(message)) == 9


def test_custom_count_tokens_is_used():
    seen = []

    def count(message: Any) -> int:
        seen.append(message)
        return 42

    message = user("hello")

    assert estimate_tokens(message, count_tokens=count) == 42
    assert seen == [message]
    assert seen[0] is message


def test_custom_count_tokens_may_return_zero():
    assert estimate_tokens(user(), count_tokens=lambda m: 0) == 0


def test_none_count_tokens_means_the_default():
    assert estimate_tokens(user("abcd"), None) == 8


def test_compact_uses_the_custom_count_tokens(weather):
    result = compact(weather, max_tokens=150, count_tokens=lambda m: 100)

    assert result.tokens_before == 1000
    assert result.fits is False


def test_compact_uses_the_default_estimator(weather):
    result = compact(weather, max_tokens=10_000)

    assert result.tokens_before == sum(estimate_tokens(m) for m in weather) == 195


def test_compact_counts_each_message_once(weather):
    calls = []

    def count(message: Any) -> int:
        calls.append(message)
        return 20

    compact(weather, max_tokens=100, count_tokens=count, keep_head=1, keep_tail=2)

    assert len(calls) == len(weather)


@given(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["system", "user", "assistant", "tool"]), "content": contents},
        optional={"name": texts, "tool_call_id": texts},
    )
)
def test_default_matches_the_specification_formula(message):
    assert estimate_tokens(message) == spec_estimate(message)


@given(st.text(alphabet=st.one_of(st.characters(), st.characters(categories=["Cs"])), max_size=40))
def test_default_matches_the_formula_for_any_text(text):
    # Any code point, astral-plane ones and lone surrogates included.
    message = user(text)

    assert estimate_tokens(message) == spec_estimate(message)


# --- sums that stop being finite ------------------------------------------------


def test_counts_whose_sum_overflows_are_an_error_naming_the_message():
    messages = [user(str(i)) for i in range(10)]

    with pytest.raises(InvalidMessageError, match="more than a float can hold") as caught:
        compact(messages, max_tokens=1e300, count_tokens=lambda m: 1e308)

    assert caught.value.index == 1  # 1e308 + 1e308 is the first sum past the largest float


def test_a_summary_that_makes_the_sum_overflow_is_an_error():
    messages = [user(str(i)) for i in range(10)]

    def count(message: Any) -> float:
        return 1.7e308 if message["content"] == "summary" else 1e307

    with pytest.raises(InvalidMessageError, match="the summary message"):
        compact_with_summary(
            messages, max_tokens=5e307, count_tokens=count, summarize=lambda d: "summary"
        )


@given(st.lists(st.floats(0, 1e308), min_size=1, max_size=12), st.floats(1, 1e308))
def test_huge_float_counts_never_give_nan_or_infinity(counts, max_tokens):
    messages = [user(str(i)) for i in range(len(counts))]
    by_message = {id(m): c for m, c in zip(messages, counts)}

    def run() -> Any:
        return compact(
            messages, max_tokens=max_tokens, count_tokens=lambda m: by_message[id(m)], keep_tail=0
        )

    overflow = next((k for k in range(len(counts)) if sum(counts[: k + 1]) == math.inf), None)
    if overflow is None:
        result = run()
        assert math.isfinite(result.tokens_before)
        assert math.isfinite(result.tokens_after)
    else:
        with pytest.raises(InvalidMessageError, match="more than a float can hold") as caught:
            run()
        assert caught.value.index == overflow


@pytest.mark.parametrize("count", [10**400, 2**1024])
def test_an_int_count_beyond_any_float_is_an_error(count):
    # It is a non-negative number: the error says what is wrong with it.
    with pytest.raises(InvalidMessageError, match="too large for a float") as caught:
        compact([user("a"), user("b")], max_tokens=10, count_tokens=lambda m: count)

    assert caught.value.index == 0


def test_int_counts_summing_beyond_any_float_are_an_error():
    big = int(1e308)

    with pytest.raises(InvalidMessageError, match="more than a float can hold") as caught:
        compact([user("a"), user("b"), user("c")], max_tokens=1e308, count_tokens=lambda m: big)

    assert caught.value.index == 1


def test_large_int_counts_within_a_float_are_summed_exactly():
    big = int(1e307)

    result = compact(
        [user("a"), user("b"), user("c")],
        max_tokens=1.5e307,
        count_tokens=lambda m: big,
        keep_tail=0,
    )

    assert result.tokens_before == 3 * big
    assert result.tokens_after == big
    assert result.fits


# --- the estimator's text -----------------------------------------------------
#
# The estimator serialises through one JSONEncoder built once: its text must be
# json.dumps' text, byte for byte, and an error in one message must not disturb
# the next count, nor a count made from inside a serialisation, nor another thread's.


def reference_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=to_json_compatible)


any_text = st.text(st.one_of(st.characters(), st.characters(categories=["Cs"])), max_size=12)
json_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(),  # nan and the infinities included: allow_nan, as in json.dumps
    any_text,
)
json_keys = st.one_of(any_text, st.integers(), st.floats(), st.booleans(), st.none())
json_values = st.recursive(
    json_leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=4).map(tuple),
        st.dictionaries(json_keys, inner, max_size=4),
        st.dictionaries(any_text, inner, max_size=3).map(MappingProxyType),
    ),
    max_leaves=20,
)


@given(json_values)
def test_the_encoder_writes_what_json_dumps_writes(value):
    assert compact_json(value) == reference_json(value)


class FloatSub(float):
    def __repr__(self) -> str:
        return "not used"


class IntSub(int):
    def __repr__(self) -> str:
        return "not used"


class StrSub(str):
    def __str__(self) -> str:
        return "not used"


class DictSub(dict):  # type: ignore[type-arg]
    pass


class ItemsSub(dict):  # type: ignore[type-arg]
    def items(self):  # type: ignore[no-untyped-def]
        return [("overridden", True)]


class ListSub(list):  # type: ignore[type-arg]
    pass


class Colour(enum.IntEnum):
    RED = 1


@dataclasses.dataclass
class Point:
    x: int
    y: ListSub


TRICKY = [
    math.nan,
    math.inf,
    -math.inf,
    -0.0,
    1e300,
    5e-324,
    0.1 + 0.2,
    2**70,
    -(2**64),
    True,
    None,
    "",
    "\ud83c lone \udfff",
    '"\\/\b\f\n\r\t\x00\x1f\x7f\u2028\u2029',
    "café 🎉 東京 👩\u200d💻",
    [],
    {},
    (),
    {"a": [{"b": ({"c": [None]},)}]},
    {1: "int", 1.5: "float", None: "null", -0.0: "zero"},
    {True: "bool", False: "bool"},
    {math.nan: 1, math.inf: 2},
    FloatSub(1.25),
    FloatSub(math.nan),
    IntSub(7),
    Colour.RED,
    {Colour.RED: Colour.RED},
    StrSub("sub"),
    {StrSub("key"): StrSub("value")},
    DictSub(role="user", content="hi"),
    ItemsSub(role="user"),
    ListSub([1, ListSub([2])]),
    OrderedDict([("z", 1), ("a", 2)]),
    MappingProxyType({"role": "user", "content": MappingProxyType({"x": 1})}),
    Point(1, ListSub([2.5])),
    {"role": "user", "content": [Point(0, [])]},
]


@pytest.mark.parametrize("value", TRICKY, ids=repr)
def test_the_encoder_writes_what_json_dumps_writes_for_tricky_values(value):
    assert compact_json(value) == reference_json(value)


def test_the_encoder_refuses_what_json_dumps_refuses():
    for value in ({"a": object()}, {("tuple", "key"): 1}, {b"bytes": 1}, b"bytes"):
        with pytest.raises(TypeError) as expected:
            reference_json(value)
        with pytest.raises(TypeError) as got:
            compact_json(value)
        assert str(got.value) == str(expected.value)


def test_a_cycle_still_raises_and_the_encoder_works_after_it():
    loop: list = []
    loop.append(loop)
    message = {"role": "user", "content": loop}

    with pytest.raises(ValueError, match="Circular reference"):
        compact_json(message)
    with pytest.raises(InvalidMessageError, match="Circular reference") as caught:
        compact([user("a"), message, user("b")], max_tokens=100)

    assert caught.value.index == 1
    loop[0] = "no longer a cycle"
    assert compact_json(message) == reference_json(message)
    assert compact([user("a"), message, user("b")], max_tokens=100).fits


def test_an_error_in_default_leaves_the_encoder_usable():
    # The encoder was inside the message, its content and the object when
    # default= refused it: had that state outlived the error, encoding the same
    # objects again would be taken for a cycle.
    content = ["text", object()]
    message = {"role": "user", "content": content}
    messages = [user("a"), message]

    with pytest.raises(InvalidMessageError, match="not JSON serializable") as caught:
        compact(messages, max_tokens=100)
    assert caught.value.index == 1
    with pytest.raises(InvalidMessageError, match="not JSON serializable"):
        estimate_tokens(message)

    content[1] = "now text too"
    assert estimate_tokens(message) == spec_estimate(message)
    assert compact(messages, max_tokens=100).tokens_before == sum(map(spec_estimate, messages))


class Broken:
    def model_dump(self, **options: Any) -> Any:
        raise RuntimeError("the SDK object is broken")


def test_a_failing_model_dump_leaves_the_encoder_usable():
    parts = [Broken()]
    message = {"role": "user", "content": [{"type": "text", "text": "x", "extra": parts}]}

    with pytest.raises(InvalidMessageError, match="the SDK object is broken"):
        estimate_tokens(message)

    parts[0] = "plain"  # type: ignore[call-overload]
    assert estimate_tokens(message) == spec_estimate(message)


class CountsWhileDumped:
    """An SDK object whose model_dump counts tokens itself: the estimator re-entered."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.counted: list = []

    def model_dump(self, **options: Any) -> Any:
        try:
            self.counted.append(estimate_tokens(self.inner))
        except InvalidMessageError as exc:
            self.counted.append(exc.reason)
        return {"dumped": True}


def test_the_estimator_re_entered_from_default_counts_both_messages():
    loop: list = []
    loop.append(loop)
    good = CountsWhileDumped(user("inner"))
    bad = CountsWhileDumped({"role": "user", "content": loop})  # fails inside the outer call
    outer = [{"role": "user", "content": [{"type": "text", "text": "x", "raw": [good, bad]}]}]

    result = compact([*outer, user("after")], max_tokens=1000)

    dumped_block = {"type": "text", "text": "x", "raw": [{"dumped": True}] * 2}
    plain = {"role": "user", "content": [dumped_block]}
    assert result.tokens_before == spec_estimate(plain) + spec_estimate(user("after"))
    assert good.counted == [spec_estimate(user("inner"))]
    assert "Circular reference" in bad.counted[0]


class Slow:
    """An SDK object that sleeps while it is dumped, so that threads encode it at once."""

    def model_dump(self, **options: Any) -> Any:
        time.sleep(0.002)  # lets the other threads run, inside their own encoding
        return {"dumped": "yes"}


def test_threads_encoding_the_same_objects_at_once_do_not_disturb_each_other():
    # State shared between threads' encodes would see the other thread's containers,
    # the very objects being encoded here, as cycles, and lose them after an error.
    workers = 4
    start = threading.Barrier(workers)
    shared_block = {"type": "text", "text": "é", "raw": [Slow()]}
    messages = [user("a"), {"role": "user", "content": [shared_block]}, user("🎉")]
    broken = [user("a"), {"role": "user", "content": [shared_block, object()]}]
    dumped_block = {"type": "text", "text": "é", "raw": [{"dumped": "yes"}]}
    expected = [
        spec_estimate(m)
        for m in (user("a"), {"role": "user", "content": [dumped_block]}, user("🎉"))
    ]

    def work(k: int) -> Any:
        outcomes = []
        start.wait(timeout=10)
        for _ in range(5):
            if k == 0:
                try:
                    compact(broken, max_tokens=100)
                except InvalidMessageError as exc:
                    outcomes.append(exc.index)
            else:
                outcomes.append(count_all(messages, None))
        return outcomes

    with ThreadPoolExecutor(workers) as pool:
        results = list(pool.map(work, range(workers)))

    assert results[0] == [1] * 5
    assert all(outcome == [expected] * 5 for outcome in results[1:])
