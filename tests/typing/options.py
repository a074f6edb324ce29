"""Checked by mypy (strict, in CI), never run: a misspelt or mistyped option is a type error.

Each ``# type: ignore[...]`` below must be needed: with ``warn_unused_ignores``
(part of strict), mypy fails on an ignore that silences nothing, so an option
that stopped being checked statically fails the build. The lines without an
ignore must type-check as they are.
"""

from __future__ import annotations

from typing import Any, Dict, List

from middleware import CompactingSession, budgeted


def send(messages: List[Dict[str, Any]]) -> int:
    return len(messages)


# What users write, exactly typed.
checked = budgeted(max_tokens=1000, keep_tail=2, on_overflow="retry", validate="report")(send)
count: int = checked([{"role": "user", "content": "hi"}])
session = CompactingSession(max_tokens=800, clear_tool_results={"keep": 2}, target_tokens=500)
wrapped = session.wrap(send, keep_head=0)
count = wrapped([])

# Misspelt options.
budgeted(max_tokens=100, keep_tial=2)  # type: ignore[call-arg]
CompactingSession(max_tokns=100)  # type: ignore[call-arg]
session.wrap(send, keep_heda=1)  # type: ignore[call-arg]

# Wrong types and values.
budgeted(max_tokens="100")  # type: ignore[arg-type]
budgeted(max_tokens=100, keep_tail="2")  # type: ignore[arg-type]
budgeted(max_tokens=100, on_overflow="retyr")  # type: ignore[arg-type]
CompactingSession(max_tokens=100, validate="rasie")  # type: ignore[arg-type]
budgeted(keep_tail=2)  # type: ignore[call-arg]
