"""A ready ``on_compact`` hook that records each compaction on the current OpenTelemetry span.

``opentelemetry-api`` is an optional dependency (``pip install opentelemetry-api``, or the
``otel`` extra); it is imported the first time the hook runs, so importing the middleware never
needs it.
"""

from __future__ import annotations

from typing import Any, Dict, Union

from ._events import CompactionEvent, figures

EVENT_NAME = "ctx_compact.compaction"

Attribute = Union[str, bool, int, float]


def compaction_attributes(event: CompactionEvent) -> Dict[str, Attribute]:
    """The span-event attributes for ``event``: figures only, never message content.

    ``gen_ai.usage.input_tokens`` (the GenAI semantic conventions' name for the
    prompt's size as the provider counted it) is set when the response reported
    it; the library's own figures are under ``ctx_compact.``.
    """
    own = {
        **figures(event),
        "messages_dropped": len(event.dropped),
        "tool_results_cleared": len(event.cleared_results),
        "tool_results_truncated": len(event.truncated_results),
        "thinking_cleared": len(event.cleared_thinking),
        "cut_reused": event.cut_reused,
        "calibration": event.calibration,
    }
    attributes: Dict[str, Attribute] = {f"ctx_compact.{k}": v for k, v in own.items()}
    if event.provider_tokens is not None:
        attributes["gen_ai.usage.input_tokens"] = event.provider_tokens
    return attributes


def trace_compaction(event: CompactionEvent) -> None:
    """A ready ``on_compact`` hook: add a ``ctx_compact.compaction`` event to the current span.

    Records the figures of ``compaction_attributes`` (tokens before and after,
    messages dropped, whether it fit, whether a summary was added, the
    provider's input tokens as ``gen_ai.usage.input_tokens``), never the
    messages. Does nothing when no span is recording. It never blocks, so async
    calls run it inline rather than on a worker thread.

    Args:
        event: The event to record.

    Raises:
        ImportError: ``opentelemetry-api`` is not installed (a hook's error is
            logged and the call goes on, like any failing hook).
    """
    try:
        from opentelemetry import trace  # optional: loaded only when the hook is used
    except ImportError as exc:
        raise ImportError(
            "trace_compaction needs opentelemetry-api: pip install opentelemetry-api"
        ) from exc
    span: Any = trace.get_current_span()
    if span.is_recording():
        span.add_event(EVENT_NAME, attributes=compaction_attributes(event))


trace_compaction.never_blocks = True  # type: ignore[attr-defined]
