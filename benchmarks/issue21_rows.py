"""Issue 21's table: the Ollama, LlamaIndex, AutoGen/smolagents/Mistral and compaction rows.

Each row is an agent loop of 81 model calls: before each call the history so far is
compacted with the defaults (``keep_head=1``, ``keep_tail=4``) to ``--max-tokens``, and
what would be sent is checked the way its provider reads it. The figures printed are
counts of requests, never timings. Run it against any checkout to compare::

    python benchmarks/issue21_rows.py                       # this checkout
    python benchmarks/issue21_rows.py --tree /path/to/other # another one's ctx_compact

The framework rows need the ``agents`` extra (LlamaIndex, AutoGen, smolagents, Mistral);
a row whose package is missing says so instead of a figure.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

CALLS = 81


def _ollama_history(turn: int) -> List[Dict[str, Any]]:
    """An Ollama agent's history before its model call number ``turn``: id-less calls."""
    history: List[Dict[str, Any]] = [{"role": "system", "content": "You answer with tools."}]
    for k in range(turn):
        if k % 3 == 0:
            history.append({"role": "user", "content": f"Question {k}: weather and time? " * 3})
        names = ["get_weather", "get_time"] if k % 2 else ["search"]
        calls = [{"function": {"name": n, "arguments": {"q": k}}} for n in names]
        history.append({"role": "assistant", "content": "", "tool_calls": calls})
        for name in names:
            history.append(
                {"role": "tool", "content": f"{name} result {k} " * 6, "tool_name": name}
            )
    return history


def _orphaned_by_position(messages: List[Dict[str, Any]]) -> bool:
    """Whether a tool message answers no call: Ollama pairs results with calls in order."""
    owed = 0
    for message in messages:
        if message.get("role") == "tool":
            if owed == 0:
                return True
            owed -= 1
        else:
            owed = len(message.get("tool_calls") or ()) if message.get("role") == "assistant" else 0
    return False


def ollama_row(cc: Any, budget: int) -> str:
    final = _ollama_history(CALLS)
    false = [p for p in cc.check_pairing(final) if p.code == "orphan_tool_result"]
    orphaned = 0
    for turn in range(1, CALLS):
        sent = cc.compact(_ollama_history(turn), max_tokens=budget).messages
        orphaned += _orphaned_by_position(sent)
    return (
        f"{len(false)} false orphan_tool_result problems on the valid history; "
        f"{orphaned} of {CALLS - 1} requests send a tool result without its call"
    )


def _framework_row(
    cc: Any, budget: int, history: Callable[[int], List[Any]], send: Callable[[List[Any]], Any]
) -> str:
    """Requests refused (InvalidMessageError) or rejected by the kit's Chat validator."""
    from ctx_compact.testing._api import RequestRejected
    from ctx_compact.testing.openai_chat import validate_chat_completions

    refused = rejected = 0
    for turn in range(1, CALLS):
        try:
            kept = cc.compact(history(turn), max_tokens=budget).messages
        except cc.InvalidMessageError:
            refused += 1
            continue
        try:
            validate_chat_completions({"model": "m", "messages": send(kept)})
        except RequestRejected:
            rejected += 1
    return (
        f"{refused} of {CALLS - 1} requests refused (InvalidMessageError), "
        f"{rejected} sent and rejected with the provider's 400"
    )


def llama_index_row(cc: Any, budget: int) -> str:
    from llama_index.core.base.llms.types import ChatMessage, MessageRole
    from llama_index.llms.openai.utils import to_openai_message_dicts

    def history(turn: int) -> List[Any]:
        messages = [ChatMessage(role=MessageRole.SYSTEM, content="You use tools.")]
        for k in range(turn):
            if k % 3 == 0:
                messages.append(ChatMessage(role=MessageRole.USER, content=f"Question {k}? " * 5))
            call = {"id": f"c{k}", "type": "function", "function": {"name": "w", "arguments": "{}"}}
            messages.append(
                ChatMessage(
                    role=MessageRole.ASSISTANT,
                    content=None,
                    additional_kwargs={"tool_calls": [call]},
                )
            )
            messages.append(
                ChatMessage(
                    role=MessageRole.TOOL,
                    content=f"result {k} " * 10,
                    additional_kwargs={"tool_call_id": f"c{k}"},
                )
            )
        return messages

    return _framework_row(cc, budget, history, to_openai_message_dicts)


def autogen_row(cc: Any, budget: int) -> str:
    from autogen_core import FunctionCall
    from autogen_core.models import (
        AssistantMessage,
        FunctionExecutionResult,
        FunctionExecutionResultMessage,
        SystemMessage,
        UserMessage,
    )
    from autogen_ext.models.openai._openai_client import to_oai_type

    def history(turn: int) -> List[Any]:
        messages: List[Any] = [SystemMessage(content="You use tools.")]
        for k in range(turn):
            if k % 3 == 0:
                messages.append(UserMessage(content=f"Question {k}? " * 5, source="user"))
            messages.append(
                AssistantMessage(
                    content=[FunctionCall(id=f"c{k}", arguments="{}", name="w")], source="agent"
                )
            )
            result = FunctionExecutionResult(content=f"result {k} " * 10, call_id=f"c{k}", name="w")
            messages.append(FunctionExecutionResultMessage(content=[result]))
        return messages

    return _framework_row(
        cc, budget, history, lambda kept: [w for m in kept for w in to_oai_type(m)]
    )


def smolagents_row(cc: Any, budget: int) -> str:
    from smolagents.models import (
        ChatMessage,
        MessageRole,
        get_clean_message_list,
        tool_role_conversions,
    )

    def history(turn: int) -> List[Any]:
        def text(value: str) -> List[Any]:
            return [{"type": "text", "text": value}]

        messages = [ChatMessage(role=MessageRole.SYSTEM, content=text("You use tools."))]
        for k in range(turn):
            messages.append(
                ChatMessage(role=MessageRole.TOOL_CALL, content=text(f"Calling w({k})"))
            )
            messages.append(
                ChatMessage(role=MessageRole.TOOL_RESPONSE, content=text(f"Observation {k} " * 10))
            )
        return messages

    def send(kept: List[Any]) -> Any:
        return get_clean_message_list(kept, role_conversions=tool_role_conversions)

    return _framework_row(cc, budget, history, send)


def mistral_row(cc: Any, budget: int) -> str:
    from mistralai.client import models

    def history(turn: int) -> List[Any]:
        messages: List[Any] = [models.SystemMessage(content="You use tools.")]
        for k in range(turn):
            if k % 3 == 0:
                messages.append(models.UserMessage(content=f"Question {k}? " * 5))
            call = models.ToolCall(
                id=f"c{k}", function=models.FunctionCall(name="w", arguments="{}")
            )
            messages.append(models.AssistantMessage(content=None, tool_calls=[call]))
            messages.append(models.ToolMessage(content=f"result {k} " * 10, tool_call_id=f"c{k}"))
        return messages

    def send(kept: List[Any]) -> Any:
        return [m.model_dump(mode="json", by_alias=True, exclude_none=True) for m in kept]

    return _framework_row(cc, budget, history, send)


def compaction_item_row(cc: Any, budget: int) -> str:
    """A Responses loop whose server compacted the history at call 40: how often is the
    item dropped while items it stands for stay?"""

    def history(turn: int) -> List[Dict[str, Any]]:
        items: List[Dict[str, Any]] = [{"role": "developer", "content": "You use tools."}]
        for k in range(turn):
            if k == 40:
                items.append({"type": "compaction", "id": "cmp", "encrypted_content": "gAAA" * 60})
            items.append(
                {"type": "function_call", "call_id": f"c{k}", "name": "w", "arguments": "{}"}
            )
            items.append({"type": "function_call_output", "call_id": f"c{k}", "output": "r" * 40})
        return items

    lost = stale = 0
    for turn in range(41, CALLS):
        full = history(turn)
        at = next(i for i, item in enumerate(full) if item.get("type") == "compaction")
        kept = cc.compact(full, max_tokens=budget).messages
        lost += full[at] not in kept
        # Items the provider ignores, sent while items after the compaction are dropped.
        newer_dropped = any(item not in kept for item in full[at + 1 :])
        stale += newer_dropped and any(item in kept for item in full[:at])
    return (
        f"{lost} of {CALLS - 41} requests after the compaction drop the item; {stale} send "
        "items from before it (which the provider ignores) while dropping newer ones"
    )


ROWS: Dict[str, Callable[[Any, int], str]] = {
    "Ollama /api/chat (id-less calls)": ollama_row,
    "LlamaIndex ChatMessage": llama_index_row,
    "AutoGen LLMMessage": autogen_row,
    "smolagents ChatMessage": smolagents_row,
    "Mistral SDK messages (no explicit role)": mistral_row,
    "Responses compaction item": compaction_item_row,
}


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, help="the checkout whose ctx_compact to use")
    parser.add_argument("--max-tokens", type=int, default=600)
    args = parser.parse_args(argv)
    root = args.tree or Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(root))
    for name in [m for m in sys.modules if m == "ctx_compact" or m.startswith("ctx_compact.")]:
        del sys.modules[name]
    cc = importlib.import_module("ctx_compact")
    print(f"ctx_compact from {Path(cc.__file__).parent}, max_tokens {args.max_tokens}")
    for label, row in ROWS.items():
        try:
            figure = row(cc, args.max_tokens)
        except ImportError as exc:
            figure = f"not run: {exc}"
        print(f"| {label} | {figure} |")
    print(json.dumps({"calls": CALLS, "max_tokens": args.max_tokens}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
