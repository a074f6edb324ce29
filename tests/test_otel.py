"""trace_compaction: each compaction as an event on the current OpenTelemetry span."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any, List

import anyio
import pytest
from helpers import weather_messages

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

from middleware import CompactingSession, budgeted, trace_compaction

WEATHER = {"max_tokens": 150, "keep_head": 1, "keep_tail": 2}


@pytest.fixture
def traced() -> Any:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer("test"), exporter


class Usage:
    def __init__(self) -> None:
        self.usage = {"prompt_tokens": 130}


def test_a_compaction_is_an_event_on_the_current_span(traced: Any) -> None:
    tracer, exporter = traced
    ask = budgeted(**WEATHER, on_compact=trace_compaction)(lambda messages: Usage())
    with tracer.start_as_current_span("llm call"):
        ask(weather_messages())
    (span,) = exporter.get_finished_spans()
    (event,) = span.events
    assert event.name == "ctx_compact.compaction"
    attributes = dict(event.attributes)
    assert attributes["ctx_compact.tokens_before"] == 195
    assert attributes["ctx_compact.tokens_after"] == 124
    assert attributes["ctx_compact.messages_dropped"] == 3
    assert attributes["ctx_compact.fits"] is True
    assert attributes["ctx_compact.summarized"] is False
    assert attributes["gen_ai.usage.input_tokens"] == 130


def test_no_message_content_is_recorded(traced: Any) -> None:
    tracer, exporter = traced
    ask = budgeted(**WEATHER, summarize=lambda d: "SECRET", on_compact=trace_compaction)(
        lambda messages: messages
    )
    with tracer.start_as_current_span("llm call"):
        ask(weather_messages())
    (span,) = exporter.get_finished_spans()
    recorded = json.dumps([dict(e.attributes) for e in span.events])
    assert "Denver" not in recorded
    assert "SECRET" not in recorded
    assert dict(span.events[0].attributes)["ctx_compact.summarized"] is True


def test_without_a_recording_span_nothing_happens() -> None:
    calls: List[Any] = []
    ask = budgeted(**WEATHER, on_compact=trace_compaction)(lambda messages: calls.append(messages))
    ask(weather_messages())
    assert len(calls) == 1


@pytest.mark.anyio
async def test_async_calls_record_on_their_own_span(traced: Any) -> None:
    tracer, exporter = traced

    @budgeted(**WEATHER)
    async def ask(messages: List[Any]) -> None:
        await anyio.sleep(0)

    async with CompactingSession(on_compact=trace_compaction):
        with tracer.start_as_current_span("async call"):
            await ask(weather_messages())
    (span,) = exporter.get_finished_spans()
    assert [e.name for e in span.events] == ["ctx_compact.compaction"]


def test_without_opentelemetry_the_hook_is_logged_and_the_call_goes_on() -> None:
    code = (
        "import sys; sys.modules['opentelemetry'] = None\n"
        "import logging; logging.basicConfig()\n"
        "from middleware import budgeted, trace_compaction\n"
        "ask = budgeted(max_tokens=100, on_compact=trace_compaction)(lambda messages: 'ok')\n"
        "print(ask([{'role': 'user', 'content': 'hi'}]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "ok"
    assert "trace_compaction needs opentelemetry-api: pip install opentelemetry-api" in done.stderr
