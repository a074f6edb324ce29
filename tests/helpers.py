"""Shared message factories, the specification's example and hypothesis strategies.

Test modules import them with ``from helpers import ...`` (the test directory is
on the import path); ``conftest.py`` holds only fixtures and the run's settings.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest
from hypothesis import settings
from hypothesis import strategies as st

from ctx_compact.cli import main

Message = Dict[str, Any]


def examples(n: int) -> int:
    """``n`` examples in the default profile (100 a test), scaled with the profile in use:
    the quick profile's 10 run a tenth of them."""
    return max(1, n * settings.default.max_examples // 100)


# --- message factories --------------------------------------------------------


def system(content: str = "You are a helpful assistant.") -> Message:
    return {"role": "system", "content": content}


def user(content: str = "hi") -> Message:
    return {"role": "user", "content": content}


def assistant(content: Optional[str] = "ok", tool_calls: Optional[List[Any]] = None) -> Message:
    """An assistant message; ``tool_calls`` is only present when given (even ``[]``)."""
    message: Message = {"role": "assistant", "content": content}
    if tool_calls is not None:
        message["tool_calls"] = tool_calls
    return message


def tool_call(call_id: str, name: str = "get_weather", arguments: str = "{}") -> Message:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def tool(call_id: Any, content: str = "{}") -> Message:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def calling(*call_ids: str) -> Message:
    """An assistant message (``content: None``) calling one tool per id."""
    return assistant(None, [tool_call(call_id) for call_id in call_ids])


def exchange(*call_ids: str) -> List[Message]:
    """A whole tool exchange: the calling assistant message, then one result per id."""
    return [calling(*call_ids)] + [tool(call_id, f'{{"for":"{call_id}"}}') for call_id in call_ids]


def weather_messages() -> List[Message]:
    """The specification's ten-message example, freshly built."""
    return [
        system("You are a helpful assistant."),
        user("What is the weather in Denver?"),
        assistant(None, [tool_call("call_1", arguments='{"city":"Denver"}')]),
        tool("call_1", '{"tempF":72}'),
        assistant("It is 72F in Denver."),
        user("What about Austin?"),
        assistant(None, [tool_call("call_2", arguments='{"city":"Austin"}')]),
        tool("call_2", '{"tempF":88}'),
        assistant("It is 88F in Austin."),
        user("And tomorrow in Denver?"),
    ]


def ten_each(message: Any) -> int:
    """A ``count_tokens`` that makes every message cost 10, for easy arithmetic."""
    return 10


# --- hypothesis strategies ----------------------------------------------------

# Text that exercises the estimator: ASCII, accented Latin, CJK, astral-plane
# emoji (two UTF-16 units each) and characters JSON must escape.
SAMPLE_TEXTS = (
    "",
    "hello",
    "café crème",
    "日本語のテキスト",
    "🎉",
    "party 🎉🎊 time",
    "𠮷野家で𠮷",
    'quote " and backslash \\ and newline \n',
    "x" * 60,
)

texts = st.one_of(st.sampled_from(SAMPLE_TEXTS), st.text(max_size=30))
contents = st.one_of(st.none(), texts)


def _plain_message(draw: st.DrawFn) -> Message:
    kind = draw(st.sampled_from(["system", "user", "assistant", "assistant_empty_calls"]))
    if kind == "system":
        return system(draw(texts))
    if kind == "user":
        return user(draw(texts))
    if kind == "assistant":
        return assistant(draw(texts))
    return assistant(draw(contents), [])


@st.composite
def conversations(draw: st.DrawFn, max_segments: int = 12) -> List[Message]:
    """Conversations mixing plain messages with tool exchanges.

    Exchanges may make parallel calls whose results come back in any order,
    with some results missing or repeated. Stray ``tool`` messages are mixed in:
    true orphans, and ones answering an earlier (not the adjacent) assistant,
    which must not join that assistant's group. Every message is a fresh dict.
    """
    messages: List[Message] = []
    call_ids: List[str] = []
    for _ in range(draw(st.integers(0, max_segments))):
        kind = draw(st.sampled_from(["plain", "plain", "exchange", "stray_tool"]))
        if kind == "plain":
            messages.append(_plain_message(draw))
        elif kind == "exchange":
            ids = [f"call_{len(call_ids) + k}" for k in range(draw(st.integers(1, 3)))]
            call_ids.extend(ids)
            messages.append(calling(*ids))
            answered = draw(st.lists(st.sampled_from(ids), max_size=len(ids) + 1))
            messages.extend(tool(call_id, draw(texts)) for call_id in answered)
        else:
            stray_id = draw(st.sampled_from([*call_ids, "orphan", None]))
            messages.append(tool(stray_id, draw(texts)))
    return messages


def budgets(max_value: int = 400) -> st.SearchStrategy[float]:
    """Budgets: positive ints (often tight ones) and non-integral floats."""
    return st.one_of(
        st.integers(1, 40),
        st.integers(1, max_value),
        st.floats(0.5, max_value, allow_nan=False, allow_infinity=False),
    )


keeps = st.integers(0, 6)


# --- Anthropic Messages and OpenAI Responses factories -------------------------


def text_block(text: str = "ok") -> Message:
    return {"type": "text", "text": text}


def thinking_block(thinking: str = "Let me look that up.", signature: str = "sig") -> Message:
    return {"type": "thinking", "thinking": thinking, "signature": signature}


def redacted_thinking_block(data: str = "opaque") -> Message:
    return {"type": "redacted_thinking", "data": data}


def tool_use_block(use_id: str, name: str = "get_weather") -> Message:
    return {"type": "tool_use", "id": use_id, "name": name, "input": {"city": "Denver"}}


def tool_result_block(use_id: Any, content: str = '{"tempF":72}') -> Message:
    return {"type": "tool_result", "tool_use_id": use_id, "content": content}


def claude(role: str, *content_blocks: Message) -> Message:
    """An Anthropic message whose content is the given blocks."""
    return {"role": role, "content": list(content_blocks)}


def reasoning_item(item_id: str = "rs_1") -> Message:
    return {"type": "reasoning", "id": item_id, "summary": []}


def message_item(text: str = "Done.", item_id: str = "msg_1") -> Message:
    """A Responses output message passed back as input (it has a type and an id)."""
    return {
        "type": "message",
        "id": item_id,
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


# Each Responses call type with the type of the item that answers it.
RESPONSES_CALLS = {
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
    "computer_call": "computer_call_output",
    "local_shell_call": "local_shell_call_output",
    "shell_call": "shell_call_output",
    "apply_patch_call": "apply_patch_call_output",
    "tool_search_call": "tool_search_output",
    "program": "program_output",
}


def call_item(kind: str, call_id: str) -> Message:
    """A Responses ``*_call`` item; its own ``id`` differs from the ``call_id``."""
    item: Message = {"type": kind, "id": f"item_{call_id}", "call_id": call_id}
    if kind == "function_call":
        item.update(name="get_weather", arguments='{"city":"Denver"}')
    elif kind == "custom_tool_call":
        item.update(name="run_sql", input="select 1")
    elif kind in ("computer_call", "local_shell_call", "shell_call"):
        item.update(action={"type": "exec", "command": ["ls"]}, status="completed")
    elif kind == "apply_patch_call":
        item.update(operation={"type": "delete_file", "path": "a.txt"}, status="completed")
    return item


def output_item(kind: str, call_id: str, output: str = '{"tempF":72}') -> Message:
    """The item answering a ``kind`` call; ``local_shell_call_output`` pairs by its ``id``."""
    if kind == "local_shell_call":
        return {"type": "local_shell_call_output", "id": call_id, "output": output}
    if kind == "program":  # the API names a program's output its result
        return {"type": "program_output", "call_id": call_id, "result": output}
    return {"type": RESPONSES_CALLS[kind], "call_id": call_id, "output": output}


# A tool output over any test's budget: a service's whole log (agents reading it must go on).
LOG_LINES = "".join(f"worker-{n % 7} request {n} served in {n % 97} ms\n" for n in range(8000))


def read_log(name: str) -> str:
    """Read a service's whole log."""
    return LOG_LINES


def run_cli(
    args: List[str], data: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> Tuple[int, Any, str]:
    """``ctx-compact ARGS -o out.json in.json`` on ``data``: the status, the output, stderr."""
    source = tmp_path / "in.json"
    source.write_text(json.dumps(data))
    out = tmp_path / "out.json"
    status = main([*args, "-o", str(out), str(source)])
    return status, json.loads(out.read_text()), capsys.readouterr().err


def closed_early(*args: str) -> Tuple[int, bytes]:
    """``python -m ctx_compact ARGS`` whose standard output is closed after 10 bytes: its
    exit status and what it wrote on standard error."""
    process = subprocess.Popen(
        [sys.executable, "-m", "ctx_compact", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert process.stdout is not None
    assert process.stderr is not None
    process.stdout.read(10)
    process.stdout.close()
    err = process.stderr.read()
    process.stderr.close()
    return process.wait(timeout=60), err
