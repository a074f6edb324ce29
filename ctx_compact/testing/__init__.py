"""A testing kit: test your own agent's compaction offline, against a local provider.

``FakeProvider`` is a small HTTP server on 127.0.0.1 that speaks the OpenAI Chat
Completions and Responses APIs, the Anthropic Messages API (beta path
included), the Gemini API (``gemini``), Bedrock's Converse API (``bedrock``)
and Ollama's chat (``ollama``), plain and streamed, with usage figures. It
validates tool pairing as each provider does and answers a broken conversation
with the provider's own 400 error, enforces an optional context limit with the provider's
context-length error, and can play a scripted model that calls tools, so an
agent framework runs real tool loops against it. Point the real SDK clients at
``provider.base_url``::

    from ctx_compact.testing import FakeProvider
    import openai

    with FakeProvider(context_limit=2000) as provider:
        client = openai.OpenAI(base_url=provider.openai_url, api_key="test")
        client.chat.completions.create(model="gpt-4o", messages=[...])
        provider.requests[-1].body  # what was sent

With pytest, the plugin this package registers offers the same as fixtures:
``fake_provider``, ``fake_openai`` / ``fake_async_openai``,
``fake_anthropic`` / ``fake_async_anthropic``, ``fake_gemini`` /
``fake_async_gemini`` and ``fake_bedrock`` (clients already pointed at it).
``gemini.validate_contents`` and ``bedrock.validate_messages`` give the
``Problem``s those providers would reject, for property tests.
``large_tool_output(tokens)`` is what a test's tool returns to play an output larger than
the context (a log, a page), with recognisable first and last lines.
The provider caches prompts as OpenAI, Anthropic and Bedrock do and reports the cached
tokens in each reply's usage; ``provider.billing`` holds what each request was
billed (``Billing``).
``python -m ctx_compact.testing`` serves it in the foreground for scripts.
``retention_check`` measures what a summarizer keeps of the facts an agent needs;
``literal_summary`` scripts a model that follows a summarizing prompt literally.

Standard library only; the SDK clients are the caller's own.
"""

from __future__ import annotations

from ._api import Billing, Problem, count_tokens
from ._outputs import large_tool_output
from ._retention import (
    Fact,
    FactCheck,
    RetentionReport,
    literal_summary,
    planted_history,
    retention_check,
)
from ._server import FakeProvider, RecordedRequest, main

__all__ = [
    "Billing",
    "Fact",
    "FactCheck",
    "FakeProvider",
    "Problem",
    "RecordedRequest",
    "RetentionReport",
    "count_tokens",
    "large_tool_output",
    "literal_summary",
    "main",
    "planted_history",
    "retention_check",
]
