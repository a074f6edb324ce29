"""What summarizing cost: the tokens a summarizer's model calls reported, summed per call.

A summarizer reports the usage of each model call it makes (``report_usage``)
into the sink of the intercepted call it works for, which a context variable
holds while the summary steps run (``_state.SummarizerCall``); the call's event
carries the sum (``CompactionEvent.summary_usage``) and sessions add it up.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class SummaryUsage:
    """Tokens the summarizer's model calls reported for one intercepted call.

    Attributes:
        input_tokens: Prompt tokens, the cached ones included.
        cached_input_tokens: Prompt tokens read from the provider's prompt cache.
        output_tokens: Tokens the model wrote.
        requests: Model calls that reported usage.
    """

    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    requests: int = 0

    def plus(self, other: SummaryUsage) -> SummaryUsage:
        """Both usages summed."""
        return SummaryUsage(
            self.input_tokens + other.input_tokens,
            self.cached_input_tokens + other.cached_input_tokens,
            self.output_tokens + other.output_tokens,
            self.requests + other.requests,
        )


class UsageSink:
    """The usage reported while one call's summary steps ran; thread-safe, as a sync
    summarizer may run on a worker thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._total: Optional[SummaryUsage] = None

    def add(self, usage: SummaryUsage) -> None:
        """Count ``usage`` in."""
        with self._lock:
            self._total = usage if self._total is None else self._total.plus(usage)

    @property
    def total(self) -> Optional[SummaryUsage]:
        """The sum so far, or ``None`` when nothing reported usage."""
        with self._lock:
            return self._total
