"""Compaction around any LLM call: the ``budgeted`` decorator and ``CompactingSession``.

Built on ``ctx_compact`` (the core), ``wrapt`` and ``anyio``; works on asyncio
and trio alike.

Note: this is ctx-compact's ``middleware`` package. An old, unrelated project
on PyPI is also called ``middleware``; it is not this one.
"""

from __future__ import annotations

from ._call_request import CallRequest
from ._decorator import budgeted
from ._events import BudgetExceededError, CompactionEvent, UnpairedMessagesError, log_compaction
from ._options import CompactionOptions
from ._otel import trace_compaction
from ._session import CompactingSession
from ._state import SessionStats
from ._store import RedisStore, SQLiteStore, SummaryStore
from ._summarizer import llm_summarizer
from ._summary_usage import SummaryUsage
from ._usage import provider_prompt_tokens

__all__ = [
    "BudgetExceededError",
    "CallRequest",
    "CompactingSession",
    "CompactionEvent",
    "CompactionOptions",
    "RedisStore",
    "SQLiteStore",
    "SessionStats",
    "SummaryStore",
    "SummaryUsage",
    "UnpairedMessagesError",
    "budgeted",
    "llm_summarizer",
    "log_compaction",
    "provider_prompt_tokens",
    "trace_compaction",
]
