"""The hot path's shortcuts give what the general rules give, on every shape they may meet.

``group_bounds`` settles most messages without calling ``recognise``, and
``message_views`` most without calling ``holds_objects``; these tests hold each
shortcut to its rule on messages mixing every format's keys, well and badly formed.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, List, Mapping, Optional, Sequence, Tuple

from hypothesis import given, settings
from hypothesis import strategies as st

from ctx_compact import InvalidMessageError
from ctx_compact._grouping import group_bounds
from ctx_compact._views import holds_objects, message_view, message_views
from ctx_compact.formats import FOLLOWED, Links, recognise


def general_bounds(views: Sequence[Mapping[str, Any]], restarts: List[int]) -> List[int]:
    """``group_bounds`` as the generic rule states it: every message read by ``recognise``."""
    bounds: List[int] = []
    links = Links()
    links.restarts = restarts
    for i, view in enumerate(views):
        followed = links.left is FOLLOWED
        fmt = recognise(view, i)
        if fmt is None:
            links.left = None
            linked = -1
        else:
            linked = fmt.link(view, i, links)
        if linked < 0 and followed:
            linked = i - 1
        if linked < 0:
            bounds.append(i)
        else:
            while bounds[-1] > linked:
                bounds.pop()
    bounds.append(len(views))
    return bounds


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


def outcome(run: Any) -> Tuple[str, Any]:
    try:
        return "ok", run()
    except InvalidMessageError as exc:
        return "error", (exc.index, str(exc))


@settings(max_examples=400, deadline=None)
@given(st.lists(messages(), max_size=8))
def test_group_bounds_equals_the_general_rule(conversation: List[dict]) -> None:
    views = message_views(conversation)
    restarts: List[int] = []
    expected_restarts: List[int] = []
    assert outcome(lambda: group_bounds(views, 0, restarts)) == outcome(
        lambda: general_bounds(views, expected_restarts)
    )
    assert restarts == expected_restarts


def general_views(conversation: Sequence[Any]) -> List[Optional[Mapping[str, Any]]]:
    return [message_view(m, i) for i, m in enumerate(conversation)]


@settings(max_examples=400, deadline=None)
@given(st.lists(messages(), max_size=8))
def test_message_views_equal_the_general_rule(conversation: List[dict]) -> None:
    found = outcome(lambda: list(message_views(conversation)))
    assert found == outcome(lambda: general_views(conversation))
    if found[0] == "ok":
        for message, view in zip(conversation, found[1]):
            # A message is its own view exactly when holds_objects says it holds no objects.
            assert (view is message) == (not holds_objects(message))
