"""SDK and framework message objects, read as what they send (defaults included).

With the real packages: Mistral SDK messages built without an explicit role, Cohere v2
messages, LlamaIndex ``ChatMessage`` (tool ids in ``additional_kwargs`` or in
``ToolCallBlock`` blocks), AutoGen ``LLMMessage`` (``FunctionCall`` content and
``FunctionExecutionResultMessage``), smolagents ``ChatMessage`` and google-genai's
``UserContent``/``ModelContent``. Each history is grouped, checked and compacted at
several budgets; what the framework then sends, serialised by the framework itself, is
checked by the testing kit's own validator for the wire format it goes out in.
"""

from __future__ import annotations

import json
from typing import Any, List, Sequence

import cohere
from autogen_core import FunctionCall
from autogen_core.models import (
    AssistantMessage,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
)
from autogen_core.models import SystemMessage as AutogenSystem
from autogen_core.models import UserMessage as AutogenUser
from autogen_ext.models.openai._openai_client import to_oai_type
from google.genai import types as genai
from llama_index.core.base.llms.types import ChatMessage as LlamaMessage
from llama_index.core.base.llms.types import MessageRole, TextBlock, ToolCallBlock
from llama_index.llms.openai.utils import to_openai_message_dicts
from mistralai.client import models as mistral
from smolagents.models import ChatMessage as SmolMessage
from smolagents.models import MessageRole as SmolRole
from smolagents.models import get_clean_message_list, tool_role_conversions

from ctx_compact import check_pairing, compact
from ctx_compact._contract import group_bounds, message_views
from ctx_compact.testing.openai_chat import validate_chat_completions

BUDGETS = [40, 120, 300, 800, 5000]


def chat_is_valid(messages: Sequence[Any]) -> None:
    """The kit's Chat Completions validator accepts ``messages`` (it raises otherwise)."""
    validate_chat_completions({"model": "m", "messages": list(messages)})


def compactions(history: List[Any]) -> List[List[Any]]:
    """The kept lists of every prefix of ``history`` at several budgets and tails."""
    kept = []
    for length in range(1, len(history) + 1):
        for budget in BUDGETS:
            for tail in (1, 2, 4):
                result = compact(history[:length], max_tokens=budget, keep_head=1, keep_tail=tail)
                kept.append(result.messages)
    return kept


def ends_with_calls_awaiting(messages: Sequence[Any]) -> bool:
    """Whether the last message(s) are calls whose results have not come yet (a loop's state)."""
    problems = check_pairing(messages)
    return bool(problems) and all(p.code.startswith("missing") for p in problems)


# --- Mistral ------------------------------------------------------------------------


def mistral_history(turns: int) -> List[Any]:
    history: List[Any] = [mistral.SystemMessage(content="You use tools.")]
    for turn in range(turns):
        call = mistral.ToolCall(
            id=f"call{turn}", function=mistral.FunctionCall(name="weather", arguments={"n": turn})
        )
        history += [
            mistral.UserMessage(content=f"Weather {turn}? " * 5),
            mistral.AssistantMessage(content=None, tool_calls=[call]),
            mistral.ToolMessage(
                content=f"{turn}F " * 10, tool_call_id=f"call{turn}", name="weather"
            ),
            mistral.AssistantMessage(content=f"It is {turn}F."),
        ]
    return history


def test_mistral_messages_built_without_a_role_are_seen_with_the_role_they_send():
    views = message_views([mistral.UserMessage(content="hi"), mistral.ToolMessage(content="r")])
    assert [v["role"] for v in views] == ["user", "tool"]
    assert views[0] == mistral.UserMessage(content="hi").model_dump(
        mode="json", by_alias=True, exclude_none=True
    )


def test_a_mistral_tool_loop_pairs_and_compacts_whole():
    history = mistral_history(6)
    assert check_pairing(history) == []
    assert group_bounds(message_views(history))[:4] == [0, 1, 2, 4]
    for kept in compactions(history):
        sent = [m.model_dump(mode="json", by_alias=True, exclude_none=True) for m in kept]
        if not ends_with_calls_awaiting(kept):
            chat_is_valid(sent)


# --- Cohere v2 ----------------------------------------------------------------------


def test_cohere_v2_messages_pair_by_their_tool_call_ids():
    call = cohere.ToolCallV2(
        id="c1", type="function", function=cohere.ToolCallV2Function(name="f", arguments="{}")
    )
    history = [
        cohere.SystemChatMessageV2(content="s"),
        cohere.UserChatMessageV2(content="weather?"),
        cohere.AssistantChatMessageV2(tool_calls=[call], tool_plan="Look it up."),
        cohere.ToolChatMessageV2(tool_call_id="c1", content="72F"),
        cohere.AssistantChatMessageV2(content="72F."),
    ]
    views = message_views(history)
    assert [v["role"] for v in views] == ["system", "user", "assistant", "tool", "assistant"]
    assert group_bounds(views) == [0, 1, 2, 4, 5]
    assert check_pairing(history) == []
    for budget in BUDGETS:
        kept = compact(history, max_tokens=budget, keep_head=1, keep_tail=1).messages
        assert (history[2] in kept) == (history[3] in kept)


# --- LlamaIndex ---------------------------------------------------------------------


def llama_history(turns: int) -> List[Any]:
    history: List[Any] = [LlamaMessage(role=MessageRole.SYSTEM, content="You use tools.")]
    for turn in range(turns):
        history.append(LlamaMessage(role=MessageRole.USER, content=f"Weather {turn}? " * 5))
        if turn % 2:
            calls = [
                {"id": f"c{turn}", "type": "function", "function": {"name": "w", "arguments": "{}"}}
            ]
            history.append(
                LlamaMessage(
                    role=MessageRole.ASSISTANT,
                    content=None,
                    additional_kwargs={"tool_calls": calls},
                )
            )
        else:
            block = ToolCallBlock(tool_call_id=f"c{turn}", tool_name="w", tool_kwargs={"n": turn})
            history.append(
                LlamaMessage(role=MessageRole.ASSISTANT, blocks=[TextBlock(text="Looking."), block])
            )
        history.append(
            LlamaMessage(
                role=MessageRole.TOOL,
                content=f"{turn}F " * 10,
                additional_kwargs={"tool_call_id": f"c{turn}"},
            )
        )
        history.append(LlamaMessage(role=MessageRole.ASSISTANT, content=f"It is {turn}F."))
    return history


def test_llama_index_messages_are_seen_as_llama_index_sends_them():
    history = llama_history(4)
    assert list(message_views(history)) == to_openai_message_dicts(history)


def test_a_llama_index_tool_loop_never_sends_a_tool_message_first():
    history = llama_history(6)
    assert check_pairing(history) == []
    assert group_bounds(message_views(history))[:4] == [0, 1, 2, 4]
    for kept in compactions(history):
        if not ends_with_calls_awaiting(kept):
            chat_is_valid(to_openai_message_dicts(kept))


# --- AutoGen ------------------------------------------------------------------------


def autogen_history(turns: int) -> List[Any]:
    history: List[Any] = [AutogenSystem(content="You use tools.")]
    for turn in range(turns):
        calls = [
            FunctionCall(id=f"a{turn}", arguments=json.dumps({"n": turn}), name="weather"),
            FunctionCall(id=f"b{turn}", arguments="{}", name="time"),
        ]
        results = [
            FunctionExecutionResult(content=f"{turn}F " * 8, call_id=f"b{turn}", name="time"),
            FunctionExecutionResult(content="noon", call_id=f"a{turn}", name="weather"),
        ]
        history += [
            AutogenUser(content=f"Weather {turn}? " * 5, source="user"),
            AssistantMessage(content=calls, source="agent", thought="Both tools."),
            FunctionExecutionResultMessage(content=results),
            AssistantMessage(content=f"It is {turn}F at noon.", source="agent"),
        ]
    return history


def test_an_autogen_result_message_stays_with_the_calls_it_answers():
    history = autogen_history(6)
    assert check_pairing(history) == []
    assert group_bounds(message_views(history))[:4] == [0, 1, 2, 4]
    for kept in compactions(history):
        sent = [wire for message in kept for wire in to_oai_type(message)]
        if not ends_with_calls_awaiting(kept):
            chat_is_valid(sent)


# --- smolagents ---------------------------------------------------------------------


def smolagents_history(turns: int) -> List[Any]:
    def text(value: str) -> List[Any]:
        return [{"type": "text", "text": value}]

    history: List[Any] = [SmolMessage(role=SmolRole.SYSTEM, content=text("You use tools."))]
    for turn in range(turns):
        history += [
            SmolMessage(role=SmolRole.USER, content=text(f"Weather {turn}? " * 5)),
            SmolMessage(role=SmolRole.TOOL_CALL, content=text(f"Calling tools: weather({turn})")),
            SmolMessage(role=SmolRole.TOOL_RESPONSE, content=text(f"Observation: {turn}F " * 6)),
            SmolMessage(role=SmolRole.ASSISTANT, content=text(f"It is {turn}F.")),
        ]
    return history


def test_smolagents_messages_are_seen_with_the_roles_smolagents_sends():
    history = smolagents_history(2)
    roles = [v["role"] for v in message_views(history)]
    sent = get_clean_message_list(history[:3], role_conversions=tool_role_conversions)
    assert roles[:3] == [m["role"] for m in sent] == ["system", "user", "assistant"]
    assert roles[3] == "user"


def test_a_smolagents_history_compacts_into_what_smolagents_sends_cleanly():
    history = smolagents_history(6)
    assert check_pairing(history) == []
    for kept in compactions(history):
        sent = get_clean_message_list(kept, role_conversions=tool_role_conversions)
        chat_is_valid(sent)


# --- google-genai -------------------------------------------------------------------


def test_google_genai_user_and_model_contents_are_seen_with_their_roles():
    history = [
        genai.UserContent(parts=[genai.Part(text="weather?")]),
        genai.ModelContent(
            parts=[genai.Part(function_call=genai.FunctionCall(name="w", args={"city": "Oslo"}))]
        ),
        genai.UserContent(
            parts=[genai.Part(function_response=genai.FunctionResponse(name="w", response={}))]
        ),
        genai.ModelContent(parts=[genai.Part(text="Cold.")]),
    ]
    assert [v["role"] for v in message_views(history)] == ["user", "model", "user", "model"]
    assert group_bounds(message_views(history)) == [0, 1, 3, 4]
    assert check_pairing(history) == []
