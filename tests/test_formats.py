"""Tool structure no wire format recognises is refused, never grouped as plain text."""

from __future__ import annotations

from typing import Any, Dict, List

import pytest

from ctx_compact import InvalidMessageError, check_pairing, clear_tool_results, compact

CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
USE = {"type": "tool_use", "id": "u1", "name": "f", "input": {}}
RESULT = {"type": "tool_result", "tool_use_id": "u1", "content": "ok"}

REFUSED = [
    pytest.param(
        {"role": "assistant", "content": [USE], "tool_calls": [CALL]},
        ["'tool_calls'", "'tool_use' blocks"],
        id="chat-and-anthropic-calls",
    ),
    pytest.param(
        {"role": "user", "content": "hi", "tool_calls": [CALL]},
        ["'tool_calls'", "'user' message"],
        id="tool_calls-on-user",
    ),
    pytest.param(
        {"type": "function_call_output", "call_id": "c1", "output": "x", "tool_calls": [CALL]},
        ["'tool_calls'", "type 'function_call_output'"],
        id="tool_calls-on-item",
    ),
    pytest.param(
        {"role": "system", "content": "x", "function_call": {"name": "f", "arguments": "{}"}},
        ["'function_call'", "'system' message"],
        id="function_call-on-system",
    ),
    pytest.param(
        {"role": "tool", "tool_call_id": "u1", "content": [RESULT]},
        ["role 'tool'", "'tool_result' blocks"],
        id="tool-message-with-tool_result-blocks",
    ),
    pytest.param(
        {"role": "user", "content": [USE]},
        ["'tool_use' blocks", "'user' message"],
        id="tool_use-in-user-message",
    ),
    pytest.param(
        {"type": "hologram_call", "call_id": "c1"},
        ["type 'hologram_call'", "without a role"],
        id="unknown-call-item",
    ),
    pytest.param(
        {"type": "hologram_call_output", "call_id": "c1", "output": "x"},
        ["type 'hologram_call_output'"],
        id="unknown-call-output-item",
    ),
]


def _history(message: Dict[str, Any]) -> List[Any]:
    return [{"role": "user", "content": "start"}, message, {"role": "user", "content": "end"}]


@pytest.mark.parametrize(("message", "named"), REFUSED)
def test_unrecognised_tool_structure_is_refused_naming_index_and_keys(
    message: Dict[str, Any], named: List[str]
) -> None:
    for call in (
        lambda m: compact(m, max_tokens=1),
        check_pairing,
        lambda m: clear_tool_results(m, max_tokens=1),
    ):
        with pytest.raises(InvalidMessageError) as caught:
            call(_history(message))
        assert caught.value.index == 1
        for name in named:
            assert name in caught.value.reason


@pytest.mark.parametrize(
    "message",
    [
        {"type": "web_search_call", "id": "ws1", "status": "completed"},
        {"type": "mcp_call", "id": "m1", "name": "f", "arguments": "{}", "server_label": "s"},
        {"type": "message", "role": "assistant", "content": "hi"},
        {"role": "assistant", "content": "hi", "tool_calls": None, "function_call": None},
        {"role": "assistant", "content": "hi", "tool_calls": []},
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "assistant", "content": [{"type": "server_tool_use", "id": "s1", "name": "w"}]},
    ],
)
def test_structure_read_as_plain_or_self_contained_is_accepted(message: Dict[str, Any]) -> None:
    history = _history(message)
    assert check_pairing(history) == []
    assert compact(history, max_tokens=10_000).messages == history
