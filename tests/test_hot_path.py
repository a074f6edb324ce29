"""The hot path gives what the general rules give, on every shape it may meet.

``pairing_problems`` equals every format's problems at the messages it reads, and
``call_ids`` takes a list of dicts with string ids without the general checks; these
tests hold each to its rule on messages mixing every format's keys, well and badly formed.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, List, Mapping, Tuple

from helpers import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from ctx_compact import InvalidMessageError
from ctx_compact._grouping import group_bounds
from ctx_compact._pairing import pairing_problems
from ctx_compact._views import message_views
from ctx_compact.formats import FORMATS, recognise
from ctx_compact.formats.chat import call_ids

ABSENT = object()
ROLES = st.sampled_from(
    ["user", "assistant", "system", "developer", "tool", "function", "model", None, ABSENT, 3]
)
CONTENTS = st.sampled_from(
    [
        ABSENT,
        None,
        "",
        "some text",
        [{"type": "text", "text": "x"}],
        [{"type": "tool_use", "id": "a", "name": "f", "input": {}}],
        [{"type": "tool_result", "tool_use_id": "a", "content": "done"}],
        [{"toolUse": {"toolUseId": "a", "name": "f", "input": {}}}],
        ("a tuple",),
        MappingProxyType({"text": "a mapping"}),
    ]
)
CALLS_A = [{"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
CALLS = st.sampled_from(
    [
        ABSENT,
        None,
        [],
        [{"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        [{"id": "a", "function": {"name": "f"}}, {"id": "b", "function": {"name": "g"}}],
        [{"function": {"name": "f", "arguments": {}}}],  # Ollama's, id-less
        [{"id": "a", "function": MappingProxyType({"name": "f"})}],
        [{"id": ["unhashable"]}],
        "not a list",
        ({"id": "a"},),
    ]
)
FUNCTION_CALLS = st.sampled_from(
    [ABSENT, None, {"name": "f", "arguments": "{}"}, "", MappingProxyType({"name": "f"})]
)
PARTS = st.sampled_from(
    [
        ABSENT,
        None,
        [],
        [{"text": "x"}],
        [{"function_call": {"name": "f", "args": {}}}],
        [{"functionResponse": {"name": "f", "response": {}}}],
    ]
)
CALL_IDS = st.sampled_from([ABSENT, None, "a", "b", ["unhashable"]])
TYPES = st.sampled_from([ABSENT, "message", "function_call", "function_call_output"])


@st.composite
def messages(draw: Any) -> dict:
    message = {}
    for key, values in (
        ("role", ROLES),
        ("content", CONTENTS),
        ("tool_calls", CALLS),
        ("function_call", FUNCTION_CALLS),
        ("parts", PARTS),
        ("tool_call_id", CALL_IDS),
        ("type", TYPES),
    ):
        value = draw(values)
        if value is not ABSENT:
            message[key] = value
    if message.get("type") in ("function_call", "function_call_output"):
        message["call_id"] = "a"
    return message


# Well-formed messages of every format, which lists of put together pair or fail to pair.
SHAPES = [
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": "hello"},
    {"role": "system", "content": "be brief"},
    {"role": "assistant", "content": None, "tool_calls": CALLS_A},
    {"role": "tool", "tool_call_id": "a", "content": "done"},
    {"role": "tool", "tool_call_id": "b", "content": "done"},
    {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": {}}}]},
    {"role": "tool", "content": "done"},
    {"role": "tool", "content": "done", "tool_name": "f"},
    {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": "{}"}},
    {"role": "function", "name": "f", "content": "done"},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "ok"}]},
    {"role": "model", "parts": [{"function_call": {"name": "f", "args": {}}}]},
    {"role": "user", "parts": [{"function_response": {"name": "f", "response": {}}}]},
    {"role": "user", "parts": [{"text": "hi"}]},
    {"role": "assistant", "content": [{"toolUse": {"toolUseId": "a", "name": "f", "input": {}}}]},
    {"role": "user", "content": [{"toolResult": {"toolUseId": "a", "content": [{"text": "ok"}]}}]},
    {"role": "user", "content": [{"text": "hi"}]},
    {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "a", "output": "ok"},
    {"type": "reasoning", "id": "rs_1", "summary": []},
]
ANY_MESSAGE = st.one_of(messages(), st.sampled_from(SHAPES))


def outcome(run: Any) -> Tuple[str, Any]:
    try:
        return "ok", run()
    except InvalidMessageError as exc:
        return "error", (exc.index, str(exc))


@settings(max_examples=examples(400), deadline=None)
@given(st.lists(ANY_MESSAGE, max_size=8))
def test_pairing_problems_equal_every_format_asked(conversation: List[dict]) -> None:
    views = message_views(conversation)
    try:
        group_bounds(views)
    except InvalidMessageError:
        return
    every = [
        p
        for fmt in FORMATS
        for p in fmt.problems(views)
        if not (0 <= p.index < len(views)) or recognise(views[p.index], p.index) in (None, fmt)
    ]
    every.sort(key=lambda p: p.index)
    assert pairing_problems(views) == every


def general_call_ids(tool_calls: List[Any]) -> Tuple[str, Any]:
    """``call_ids`` of a non-empty list as its general rule states it."""
    if not all(isinstance(call, Mapping) for call in tool_calls):
        return "error", None
    ids = [call.get("id") for call in tool_calls if call.get("id") is not None]
    try:
        return "ok", frozenset(ids)
    except TypeError:
        return "error", None


CALL_ID_VALUES = st.sampled_from([ABSENT, None, "a", "b", 3, ("t",), ["unhashable"]])


@st.composite
def tool_call(draw: Any) -> Any:
    if draw(st.integers(0, 9)) == 0:
        return draw(st.sampled_from(["a string", 3, MappingProxyType({"id": "a"})]))
    call_id = draw(CALL_ID_VALUES)
    return {"function": {"name": "f"}} if call_id is ABSENT else {"id": call_id}


@settings(max_examples=examples(400), deadline=None)
@given(st.lists(tool_call(), min_size=1, max_size=4))
def test_call_ids_equal_the_general_rule(tool_calls: List[Any]) -> None:
    found = outcome(lambda: call_ids({"role": "assistant", "tool_calls": tool_calls}, 0))
    expected = general_call_ids(tool_calls)
    assert found[0] == expected[0]
    if found[0] == "ok":
        assert found[1] == expected[1]
