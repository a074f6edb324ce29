"""Errors at the boundary: the right exception type, the index and the reason.

Nothing here may surface as an ``AttributeError`` or ``KeyError`` from deep
inside the library; ``pytest.raises`` with a specific type makes sure of that.
"""

from __future__ import annotations

import gc
import math
import re
import warnings
from typing import Any, Callable, Dict, List

import pytest
from helpers import calling, examples, system, tool, user
from hypothesis import given, settings
from hypothesis import strategies as st

from ctx_compact import (
    InvalidMessageError,
    acompact_with_summary,
    check_pairing,
    compact,
    compact_with_summary,
    estimate_tokens,
)


def three() -> List[Dict[str, Any]]:
    return [system(), user("a"), user("b")]


SYNC_COMPACTORS = [
    pytest.param(compact, id="compact"),
    pytest.param(compact_with_summary, id="compact_with_summary"),
]


def test_invalid_message_error_is_a_type_and_value_error():
    assert issubclass(InvalidMessageError, TypeError)
    assert issubclass(InvalidMessageError, ValueError)


def test_invalid_message_error_fields():
    error = InvalidMessageError("it is broken", 3)

    assert error.index == 3
    assert error.reason == "it is broken"
    assert str(error) == "message 3: it is broken"
    assert InvalidMessageError("it is broken").index is None


# --- max_tokens -------------------------------------------------------------------


@pytest.mark.parametrize("func", SYNC_COMPACTORS)
def test_max_tokens_missing(func):
    with pytest.raises(TypeError, match="max_tokens"):
        func(three())


@pytest.mark.parametrize("func", SYNC_COMPACTORS)
def test_max_tokens_positional_is_refused(func):
    with pytest.raises(TypeError):
        func(three(), 100)


@pytest.mark.parametrize("func", SYNC_COMPACTORS)
@pytest.mark.parametrize(
    "max_tokens",
    [
        None,
        True,
        False,
        "100",
        b"100",
        [100],
        math.nan,
        math.inf,
        -math.inf,
        0,
        0.0,
        -1,
        -0.5,
        10**400,
    ],
    ids=lambda value: repr(value)[:20],
)
def test_max_tokens_not_a_finite_positive_number(func, max_tokens):
    with pytest.raises(TypeError, match="max_tokens"):
        func(three(), max_tokens=max_tokens)


@pytest.mark.anyio
@pytest.mark.parametrize("max_tokens", [None, math.nan, 0, -3], ids=repr)
async def test_async_max_tokens_not_a_finite_positive_number(max_tokens):
    with pytest.raises(TypeError, match="max_tokens"):
        await acompact_with_summary(three(), max_tokens=max_tokens)


# --- keep_head / keep_tail --------------------------------------------------------


@pytest.mark.parametrize("func", SYNC_COMPACTORS)
@pytest.mark.parametrize("name", ["keep_head", "keep_tail"])
@pytest.mark.parametrize("value", [1.0, "1", None, True, False, [1]], ids=repr)
def test_keep_not_an_int(func, name, value):
    with pytest.raises(TypeError, match=name):
        func(three(), max_tokens=10, **{name: value})


@pytest.mark.parametrize("func", SYNC_COMPACTORS)
@pytest.mark.parametrize("name", ["keep_head", "keep_tail"])
def test_keep_negative(func, name):
    with pytest.raises(ValueError, match=name) as excinfo:
        func(three(), max_tokens=10, **{name: -1})

    assert not isinstance(excinfo.value, TypeError)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("name", "value", "error"), [("keep_head", -1, ValueError), ("keep_tail", 2.0, TypeError)]
)
async def test_async_keep_checked(name, value, error):
    with pytest.raises(error, match=name):
        await acompact_with_summary(three(), max_tokens=10, **{name: value})


# --- messages ---------------------------------------------------------------------


@pytest.mark.parametrize("func", SYNC_COMPACTORS)
@pytest.mark.parametrize(
    "messages",
    [
        {"role": "user", "content": "a dict, not a list"},
        "a string",
        b"bytes",
        5,
        None,
        (m for m in [user()]),
        {user()["content"]},
    ],
    ids=["dict", "str", "bytes", "int", "None", "generator", "set"],
)
def test_messages_not_a_sequence(func, messages):
    with pytest.raises(TypeError, match="'messages' must be"):
        func(messages, max_tokens=10)


@pytest.mark.parametrize("func", SYNC_COMPACTORS)
@pytest.mark.parametrize("bad", ["hello", None, 5, ["role", "user"], ("role", "user")], ids=repr)
def test_message_not_a_mapping_names_its_index(func, bad):
    messages = [system(), user(), bad, user()]

    with pytest.raises(InvalidMessageError, match="message 2") as excinfo:
        func(messages, max_tokens=1000)

    assert excinfo.value.index == 2
    assert "mapping" in excinfo.value.reason


def test_message_not_a_mapping_is_caught_even_with_a_custom_count_tokens():
    with pytest.raises(InvalidMessageError, match="message 1") as excinfo:
        compact([user(), "oops"], max_tokens=1000, count_tokens=lambda m: 1)

    assert excinfo.value.index == 1


def test_message_not_a_mapping_inside_a_tool_exchange():
    with pytest.raises(InvalidMessageError) as excinfo:
        compact([calling("c1"), None], max_tokens=1000)

    assert excinfo.value.index == 1


@pytest.mark.parametrize(
    "tool_calls",
    ["call_1", {"id": "call_1"}, 7],
    ids=["str", "dict", "int"],
)
def test_tool_calls_not_a_list(tool_calls):
    messages = [system(), {"role": "assistant", "content": None, "tool_calls": tool_calls}]

    with pytest.raises(InvalidMessageError, match="message 1: tool_calls") as excinfo:
        compact(messages, max_tokens=1000)

    assert excinfo.value.index == 1


@pytest.mark.parametrize("call", ["call_1", None, 3, ["id", "call_1"]], ids=repr)
def test_tool_calls_holding_a_non_mapping(call):
    messages = [
        system(),
        user(),
        {"role": "assistant", "content": None, "tool_calls": [{"id": "ok"}, call]},
    ]

    with pytest.raises(InvalidMessageError, match=r"message 2: tool_calls\[1\]") as excinfo:
        compact(messages, max_tokens=1000)

    assert excinfo.value.index == 2


def test_unhashable_tool_call_id_names_the_tool_message():
    messages = [calling("c1"), tool(["c1"])]

    with pytest.raises(InvalidMessageError, match="tool_call_id") as excinfo:
        compact(messages, max_tokens=1000)

    assert excinfo.value.index == 1


def test_unhashable_call_id_names_the_assistant_message():
    messages = [user(), {"role": "assistant", "content": None, "tool_calls": [{"id": ["x"]}]}]

    with pytest.raises(InvalidMessageError, match="id") as excinfo:
        compact(messages, max_tokens=1000)

    assert excinfo.value.index == 1


# --- what the default estimator cannot serialise ------------------------------------


def circular() -> Dict[str, Any]:
    message: Dict[str, Any] = {"role": "user", "content": "loop"}
    message["self"] = message
    return message


UNSERIALISABLE = [
    pytest.param(lambda: {"role": "user", "content": {1, 2}}, id="set"),
    pytest.param(lambda: {"role": "user", "content": object()}, id="object"),
    pytest.param(lambda: {"role": "user", "content": b"bytes"}, id="bytes"),
    pytest.param(lambda: {"role": "user", ("a", "b"): 1}, id="tuple-key"),
    pytest.param(circular, id="circular"),
]


@pytest.mark.parametrize("func", SYNC_COMPACTORS)
@pytest.mark.parametrize("make", UNSERIALISABLE)
def test_unserialisable_message_names_its_index_and_suggests_count_tokens(func, make):
    messages = [system(), user(), make(), user()]

    with pytest.raises(InvalidMessageError, match="message 2") as excinfo:
        func(messages, max_tokens=1000)

    assert excinfo.value.index == 2
    assert "count_tokens" in str(excinfo.value)


@pytest.mark.parametrize("make", UNSERIALISABLE)
def test_unserialisable_message_is_fine_with_a_custom_count_tokens(make):
    messages = [system(), make(), user()]

    result = compact(messages, max_tokens=1, count_tokens=lambda m: 1, keep_head=0, keep_tail=0)

    assert result.dropped[1] is messages[1]


@pytest.mark.parametrize("make", UNSERIALISABLE)
def test_estimate_tokens_on_an_unserialisable_message(make):
    with pytest.raises(InvalidMessageError, match="count_tokens") as excinfo:
        estimate_tokens(make())

    assert excinfo.value.index is None


def test_deeply_nested_message_is_an_invalid_message():
    content: Any = "deep"
    for _ in range(100_000):
        content = [content]

    with pytest.raises(InvalidMessageError) as excinfo:
        compact([user(), {"role": "user", "content": content}], max_tokens=10)

    assert excinfo.value.index == 1


# --- count_tokens -----------------------------------------------------------------


@pytest.mark.parametrize("func", SYNC_COMPACTORS)
@pytest.mark.parametrize("count_tokens", [5, "len", [len]], ids=repr)
def test_count_tokens_not_callable(func, count_tokens):
    with pytest.raises(TypeError, match="count_tokens"):
        func(three(), max_tokens=10, count_tokens=count_tokens)


def test_estimate_tokens_count_tokens_not_callable():
    with pytest.raises(TypeError, match="count_tokens"):
        estimate_tokens(user(), count_tokens=5)  # type: ignore[arg-type]


BAD_COUNTS = [-1, -0.5, "3", None, math.nan, math.inf, True, False, [3], 10**400, 10**5000]


def count_id(value: object) -> str:
    """A test id; Python 3.11+ cannot repr an int of over 4,300 digits."""
    if type(value) is int and value.bit_length() > 64:
        return f"{'-' if value < 0 else ''}int of {value.bit_length()} bits"
    return repr(value)


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        (10**400, "an int of about 400 digits, which is too large for a float"),
        (10**5000, "an int of about 5000 digits, which is too large for a float"),
        (math.inf, "inf; it must return a finite number of tokens"),
        (-(10**400), "an int of about 400 digits; it must return a non-negative number of tokens"),
        (-1, "-1; it must return a non-negative number of tokens"),
    ],
    ids=count_id,
)
def test_a_bad_count_is_said_for_what_it_is(bad, says):
    with pytest.raises(InvalidMessageError, match=f"count_tokens returned {re.escape(says)}"):
        compact(three(), max_tokens=10, count_tokens=lambda m: bad)


@pytest.mark.parametrize("func", SYNC_COMPACTORS)
@pytest.mark.parametrize("bad", BAD_COUNTS, ids=count_id)
def test_count_tokens_returning_a_bad_count_names_the_message(func, bad):
    messages = three()
    target = messages[1]

    with pytest.raises(InvalidMessageError, match="message 1: count_tokens returned") as excinfo:
        func(messages, max_tokens=10, count_tokens=lambda m: bad if m is target else 1)

    assert excinfo.value.index == 1


@pytest.mark.parametrize("bad", BAD_COUNTS, ids=count_id)
def test_estimate_tokens_with_a_bad_count(bad):
    with pytest.raises(InvalidMessageError, match="count_tokens returned") as excinfo:
        estimate_tokens(user(), count_tokens=lambda m: bad)

    assert excinfo.value.index is None


def test_count_tokens_rejecting_the_summary_message():
    def count(message: Any) -> Any:
        return -1 if message["content"] == "gist" else 10

    with pytest.raises(InvalidMessageError, match="the summary message") as excinfo:
        compact_with_summary(
            three(), max_tokens=15, count_tokens=count, keep_tail=1, summarize=lambda d: "gist"
        )

    assert excinfo.value.index is None


def test_count_tokens_own_exception_propagates():
    def count(message: Any) -> int:
        raise RuntimeError("tokenizer down")

    with pytest.raises(RuntimeError, match="tokenizer down"):
        compact(three(), max_tokens=10, count_tokens=count)


# --- summarize --------------------------------------------------------------------


@pytest.mark.parametrize("summarize", [5, "summary", [print]], ids=repr)
def test_summarize_not_callable(summarize):
    with pytest.raises(TypeError, match="summarize"):
        compact_with_summary(three(), max_tokens=10, summarize=summarize)


@pytest.mark.anyio
async def test_async_summarize_not_callable():
    with pytest.raises(TypeError, match="summarize"):
        await acompact_with_summary(three(), max_tokens=10, summarize="summary")  # type: ignore[arg-type]


def test_summarize_not_callable_is_refused_even_when_nothing_is_dropped():
    with pytest.raises(TypeError, match="summarize"):
        compact_with_summary(three(), max_tokens=10_000, summarize=5)  # type: ignore[arg-type]


@pytest.mark.parametrize("returned", [None, 5, b"bytes", ["a"]], ids=repr)
def test_summarize_returning_a_non_string(returned):
    with pytest.raises(InvalidMessageError, match="summarize must return a string"):
        compact_with_summary(
            three(),
            max_tokens=15,
            count_tokens=lambda m: 10,
            keep_tail=1,
            summarize=lambda d: returned,
        )


@pytest.mark.anyio
@pytest.mark.parametrize("returned", [None, 5], ids=repr)
async def test_async_summarize_returning_a_non_string(returned):
    async def summarize(dropped: List[Any]) -> Any:
        return returned

    with pytest.raises(InvalidMessageError, match="summarize must return a string"):
        await acompact_with_summary(
            three(), max_tokens=15, count_tokens=lambda m: 10, keep_tail=1, summarize=summarize
        )


def test_async_summarize_given_to_the_sync_function():
    async def summarize(dropped: List[Any]) -> str:
        return "never run"

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(InvalidMessageError, match="acompact_with_summary") as excinfo:
            compact_with_summary(
                three(), max_tokens=15, count_tokens=lambda m: 10, keep_tail=1, summarize=summarize
            )
        # The traceback holds the coroutine; let it go while warnings are still recorded.
        del excinfo
        gc.collect()

    assert [str(w.message) for w in caught] == []


def test_summary_role_not_a_string():
    with pytest.raises(TypeError, match="summary_role"):
        compact_with_summary(three(), max_tokens=10, summary_role=None)  # type: ignore[arg-type]


# --- errors are raised before any work with side effects --------------------------


def test_summarize_is_not_called_when_a_message_is_invalid():
    calls: List[Any] = []
    summarize: Callable[[List[Any]], str] = lambda d: calls.append(d) or "x"  # noqa: E731

    with pytest.raises(InvalidMessageError):
        compact_with_summary([system(), user(), 3], max_tokens=1, summarize=summarize)

    assert calls == []


# --- anything malformed is an InvalidMessageError, never a deep AttributeError ------

junk = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner, inner)
        | st.dictionaries(st.sampled_from(["id", "role"]) | st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)
call_id = st.sampled_from(["a", "b"]) | junk
message_like = st.fixed_dictionaries(
    {"role": st.sampled_from(["assistant", "assistant", "tool", "user"]) | junk},
    optional={
        "content": junk,
        "tool_calls": st.lists(st.fixed_dictionaries({}, optional={"id": call_id}) | junk) | junk,
        "tool_call_id": call_id,
    },
)


def _with_stray(parts: Any) -> List[Any]:
    messages, stray, at = parts
    return messages if stray is None else [*messages[:at], stray, *messages[at:]]


# Message-like mappings, sometimes with one non-mapping among them: mostly
# mappings, so that malformed parts deep inside them are reached too.
maybe_messages = st.tuples(
    st.lists(message_like, max_size=6), st.none() | junk, st.integers(0, 6)
).map(_with_stray)


@settings(max_examples=examples(300), deadline=None)
@given(maybe_messages, st.integers(0, 3), st.integers(0, 3))
def test_malformed_input_raises_only_invalid_message_error(messages, keep_head, keep_tail):
    # Anything but InvalidMessageError escapes and fails the test.
    try:
        result = compact(messages, max_tokens=20, keep_head=keep_head, keep_tail=keep_tail)
    except InvalidMessageError as exc:
        error = exc
    else:
        assert len(result.messages) + len(result.dropped) == len(messages)
        return
    assert error.index is not None
    assert 0 <= error.index < len(messages)
    assert str(error).startswith(f"message {error.index}: ")


# --- unhashable types and ids, failing SDK blocks: named like any malformed message ---


UNHASHABLE = [
    {"type": ["x"]},
    {"type": {"function_call": 1}, "call_id": "c"},
    {"type": "function_call", "call_id": ["c"], "name": "f"},
    {"type": "local_shell_call", "call_id": "c", "id": {"a": 1}},
    {"type": "function_call_output", "call_id": ["c"], "output": ""},
    {"type": "mcp_approval_request", "id": ["r"]},
    {"type": "mcp_approval_response", "approval_request_id": ["r"], "approve": True},
    {"role": "tool", "tool_call_id": ["c"], "content": ""},
    {"role": "assistant", "content": [{"type": "tool_use", "id": ["u"], "name": "f"}]},
]


@pytest.mark.parametrize("bad", UNHASHABLE)
def test_an_unhashable_type_or_id_is_an_invalid_message_naming_its_index(bad):
    messages = [system(), calling("c"), tool("c"), bad, user("next")]

    for run in (
        lambda: compact(messages, max_tokens=1),
        lambda: check_pairing(messages),
    ):
        with pytest.raises(InvalidMessageError, match="must be a string, not") as caught:
            run()
        assert caught.value.index == 3


def test_an_unhashable_tool_result_id_is_an_invalid_message_naming_its_index():
    answer = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": ["u"]}]}
    messages = [
        user("q"),
        {"role": "assistant", "content": [{"type": "tool_use", "id": "u", "name": "f"}]},
        answer,
    ]

    for run in (lambda: compact(messages, max_tokens=1), lambda: check_pairing(messages)):
        with pytest.raises(InvalidMessageError, match="tool_use_id must be a string") as caught:
            run()
        assert caught.value.index == 2


class FailingBlock:
    """An SDK content block whose ``model_dump`` fails."""

    def model_dump(self, **kwargs: Any) -> Any:
        raise RuntimeError("broken block")


@pytest.mark.parametrize("role", ["user", "assistant"])
def test_an_sdk_block_whose_dump_fails_is_an_invalid_message_naming_its_index(role):
    messages = [user("q"), {"role": role, "content": [FailingBlock()]}, user("next")]

    for run in (
        lambda: compact(messages, max_tokens=1),
        lambda: compact(messages, max_tokens=10_000),
        lambda: check_pairing(messages),
    ):
        with pytest.raises(
            InvalidMessageError, match=r"FailingBlock.model_dump\(\) failed"
        ) as caught:
            run()
        assert caught.value.index == 1


def test_a_model_with_neither_role_nor_type_is_refused_not_guessed() -> None:
    import pydantic

    class Note(pydantic.BaseModel):
        text: str

    with pytest.raises(InvalidMessageError, match="neither 'role' nor 'type'") as raised:
        compact([{"role": "user", "content": "hi"}, Note(text="x")], max_tokens=100)
    assert raised.value.index == 1
    with pytest.raises(InvalidMessageError, match="neither 'role' nor 'type'"):
        check_pairing([Note(text="x")])


# --- a budget of the right type with a wrong value -----------------------------------


@pytest.mark.parametrize("bad", [0, -5, -0.5, math.inf, math.nan, 10**400], ids=count_id)
def test_a_wrong_budget_value_is_a_value_error_and_the_specifications_type_error(bad):
    # The specification: TypeError for max_tokens "not a positive number"; the rule
    # everywhere else: ValueError for a right type with a wrong value. Both catch it.
    for catch in (TypeError, ValueError):
        with pytest.raises(catch, match="'max_tokens' must be a finite positive number"):
            compact(three(), max_tokens=bad)
    with pytest.raises(ValueError, match="'target_tokens' must be a finite positive number"):
        compact(three(), max_tokens=100, target_tokens=bad)


@pytest.mark.parametrize("bad", ["100", None, True, [100]], ids=repr)
def test_a_budget_of_the_wrong_type_is_a_type_error_only(bad):
    with pytest.raises(TypeError, match="'max_tokens' must be a finite positive number") as info:
        compact(three(), max_tokens=bad)
    assert not isinstance(info.value, ValueError)


def test_the_middleware_names_target_tokens_in_its_own_words():
    from middleware import budgeted

    with pytest.raises(ValueError, match=r"^'target_tokens' must be a finite positive number"):
        budgeted(max_tokens=100, target_tokens=-1)
    with pytest.raises(ValueError, match=r"^'max_tokens' must be a finite positive number"):
        budgeted(max_tokens=-1)
