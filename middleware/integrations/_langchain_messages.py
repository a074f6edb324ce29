"""LangChain messages back from a compacted list, for the LangChain and LangGraph integrations.

The core adds a summary and edited copies of ``ToolMessage`` and ``AIMessage`` objects in
Chat Completions form; ``native`` makes LangChain messages of them, an edited copy keeping its
original's ``id`` and fields, so a state rewritten with them replaces the originals.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Dict, List, Sequence

from langchain_core.messages import AIMessage, BaseMessage, RemoveMessage, convert_to_messages
from langgraph.graph.message import REMOVE_ALL_MESSAGES


def _by_call_id(messages: Sequence[Any]) -> Dict[Any, BaseMessage]:
    # Every tool call id of the caller's messages, to the message that holds it.
    found: Dict[Any, BaseMessage] = {}
    for message in messages:
        call_id = getattr(message, "tool_call_id", None)
        if call_id is not None:
            found[("result", call_id)] = message
        for call in getattr(message, "tool_calls", None) or ():
            found[("call", call.get("id"))] = message
    return found


def native(kept: Sequence[Any], given: Sequence[Any]) -> List[BaseMessage]:
    """``kept`` as LangChain messages: the caller's own objects, and new ones for the rest."""
    originals = _by_call_id(given)
    return [_restored(m, originals) if isinstance(m, Mapping) else m for m in kept]


def _restored(message: Mapping[str, Any], originals: Dict[Any, BaseMessage]) -> BaseMessage:
    # A summary, or an edited copy as its original with the copy's content (and calls).
    (made,) = convert_to_messages([dict(message)])
    if message.get("role") == "tool":
        original = originals.get(("result", message.get("tool_call_id")))
        return made if original is None else original.model_copy(update={"content": made.content})
    if not (isinstance(made, AIMessage) and made.tool_calls):
        return made
    original = originals.get(("call", made.tool_calls[0].get("id")))
    update = {"content": made.content, "tool_calls": made.tool_calls}
    return made if original is None else original.model_copy(update=update)


def replacing(messages: Sequence[BaseMessage]) -> List[BaseMessage]:
    """A ``messages`` state update that replaces the whole list with ``messages``."""
    return [RemoveMessage(id=REMOVE_ALL_MESSAGES), *messages]
