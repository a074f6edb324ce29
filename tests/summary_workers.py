"""Worker processes for the shared-store tests: each compacts the histories it is sent.

Imported by spawned interpreters, so it holds only what a worker needs.
"""

from __future__ import annotations

from multiprocessing.connection import Connection
from typing import Any, List, Optional

from middleware import CompactionEvent, SummaryStore, budgeted

MAX_TOKENS = 2000
TARGET_TOKENS = 1200


def chat(turns: int) -> List[Any]:
    """A chatbot's history after ``turns`` turns: a system prompt, then questions and answers."""
    history: List[Any] = [{"role": "system", "content": "You are a helpful assistant."}]
    for turn in range(turns):
        history.append({"role": "user", "content": f"question {turn}: " + "why " * 20})
        history.append({"role": "assistant", "content": f"answer {turn}: " + "because " * 25})
    return history


def echo(messages: List[Any]) -> List[Any]:
    return messages


def serve(connection: Connection, store: SummaryStore, name: str) -> None:
    """Answer each history with (summary, dropped, messages fed, summarizer calls); None ends."""
    fed: List[int] = []

    def summarize(dropped: List[Any], *, previous: Optional[str] = None) -> str:
        fed.append(len(dropped))
        return f"{name}'s summary #{len(fed)} of {len(dropped)} messages"

    events: List[CompactionEvent] = []
    send = budgeted(
        max_tokens=MAX_TOKENS,
        target_tokens=TARGET_TOKENS,
        summarize=summarize,
        store=store,
        on_compact=events.append,
    )(echo)
    while True:
        history = connection.recv()
        if history is None:
            return
        calls = len(fed)
        send(history)
        event = events.pop()
        connection.send((event.summary, len(event.dropped), sum(fed[calls:]), len(fed) - calls))
