"""How a message object is seen: an SDK model's defaulted role, and the frameworks' view shapes.

The framework objects themselves (Mistral, Cohere, LlamaIndex, AutoGen, smolagents,
google-genai) are read in tests/agent_frameworks/test_message_objects.py, with the real packages;
here, the wire shapes their views take are grouped and checked as the core reads them.
"""

from __future__ import annotations

from typing import Any, List, Literal, Optional

import pydantic

from ctx_compact import check_pairing, compact
from ctx_compact._contract import group_bounds, message_views


class UserTurn(pydantic.BaseModel):
    """A message model whose role is a default, as many SDKs write them."""

    role: Literal["user"] = "user"
    content: str


class ToolTurn(pydantic.BaseModel):
    role: Optional[Literal["tool"]] = "tool"
    content: str
    tool_call_id: str


class Calling(pydantic.BaseModel):
    role: Literal["assistant"] = "assistant"
    content: Optional[str] = None
    tool_calls: List[Any]


def test_a_model_built_without_its_role_is_seen_with_the_default_it_sends():
    [view] = message_views([UserTurn(content="hi")])
    assert view == {"content": "hi", "role": "user"}


def test_a_role_left_null_by_the_dump_is_the_default():
    # Some SDKs' dumps write an unset role as null; the role sent is the default.
    class Nulled(UserTurn):
        @pydantic.model_serializer(mode="wrap")
        def _nulls(self, handler: Any, info: Any) -> Any:
            data = handler(self)
            if info.exclude_unset:
                data.setdefault("role", None)
            return data

    [view] = message_views([Nulled(content="hi")])
    assert view["role"] == "user"


def test_models_with_defaulted_roles_pair_as_chat_messages():
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    history = [
        UserTurn(content="weather?"),
        Calling(tool_calls=[call]),
        ToolTurn(content="72F", tool_call_id="c1"),
        UserTurn(content="thanks"),
    ]
    assert group_bounds(message_views(history)) == [0, 1, 3, 4]
    assert check_pairing(history) == []
    kept = compact(history, max_tokens=30, keep_head=0, keep_tail=1).messages
    assert kept == [history[3]]


def test_the_anthropic_form_of_a_results_message_answering_several_calls_is_one_group():
    # AutoGen's AssistantMessage of FunctionCalls and its FunctionExecutionResultMessage.
    uses = [
        {"type": "text", "text": "Checking both."},
        {"type": "tool_use", "id": "a", "name": "f", "input": {}},
        {"type": "tool_use", "id": "b", "name": "g", "input": {}},
    ]
    results = [
        {"type": "tool_result", "tool_use_id": "a", "content": "1"},
        {"type": "tool_result", "tool_use_id": "b", "content": "2", "is_error": True},
    ]
    history = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": uses},
        {"role": "user", "content": results},
        {"role": "assistant", "content": "done"},
    ]
    assert group_bounds(history) == [0, 1, 2, 4, 5]
    assert check_pairing(history) == []


def test_smolagents_form_is_plain_text_turns():
    # tool-call and tool-response messages go out as assistant and user text.
    history = [
        {"role": "user", "content": [{"type": "text", "text": "task"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Calling tools: [...]"}]},
        {"role": "user", "content": [{"type": "text", "text": "Observation: 72F"}]},
    ]
    assert group_bounds(history) == [0, 1, 2, 3]
    assert check_pairing(history) == []
