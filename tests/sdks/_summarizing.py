"""What the tests of ``llm_summarizer``'s clients share: the provider's scripted model.

The provider (ctx_compact.testing) plays a model that answers a summarization
request (one asking to keep the summary under a bound, plain or cache-aligned)
with ``SUMMARY-N`` and anything else with an answer, whatever the SDK's format;
the tests read what it received.
"""

from __future__ import annotations

import json
import threading
from typing import Any, List

from ctx_compact.testing import RecordedRequest

HEADINGS = (
    "## Goal and standing instructions",
    "## Decisions",
    "## Identifiers, paths, URLs, numbers and names",
    "## Tool results",
    "## Errors and resolutions",
    "## Open tasks and the latest request",
)


# What every summarization request asks, plain or cache-aligned.
ASKED = "Keep the summary under"


def is_summarization(request: RecordedRequest) -> bool:
    """Whether the provider received ``request`` from a summarizer."""
    return ASKED in json.dumps(request.body, ensure_ascii=False)


class Script:
    """The provider's model: ``SUMMARY-N`` for a summarization request, after ``delay`` s."""

    def __init__(self) -> None:
        self.summaries = 0
        self.delay = 0.0
        self.released = threading.Event()
        self._lock = threading.Lock()

    def __call__(self, messages: List[Any]) -> str:
        if ASKED not in json.dumps(messages, ensure_ascii=False):
            return "The answer."
        if self.delay:
            self.released.wait(self.delay)
        with self._lock:
            self.summaries += 1
            return f"SUMMARY-{self.summaries}"
