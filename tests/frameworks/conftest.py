"""Print the framework x route table the scenario tests filled (see ``_scenario.py``)."""

from __future__ import annotations

import gc
import os
from typing import Any, Iterator

import pytest

from ctx_compact.testing import FakeProvider

from ._integrations import GAPS
from ._scenario import LIMIT, ROWS, markdown_table

# LiteLLM fetches its model cost map from the network at import unless told not to.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if ROWS:
        terminalreporter.section("framework x route (limit and budget: 1500 tokens)")
        terminalreporter.write_line(markdown_table(ROWS))
    if GAPS:
        terminalreporter.section("counted - sent per request of a run (tools included)")
        for label, least, most, sent in GAPS:
            terminalreporter.write_line(
                f"{label}: {least:+d} to {most:+d} tokens (the largest request sent {sent})"
            )


@pytest.fixture
def provider(fake_provider: FakeProvider) -> FakeProvider:
    """The kit's provider at the scenario's limit, answering each turn with one tool call.

    A module whose framework needs another reply (instructor) defines its own: the reply is
    set when a ``FakeProvider`` is made.
    """
    fake_provider.tool_calls = 1
    fake_provider.context_limit = LIMIT
    return fake_provider


@pytest.fixture(autouse=True)
def _no_tracing_or_telemetry(monkeypatch: pytest.MonkeyPatch) -> None:
    # openai-agents would export traces to OpenAI; nothing may leave 127.0.0.1.
    monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")


@pytest.fixture(autouse=True)
def _collect_after_each_test() -> Iterator[None]:
    # Frameworks cache clients and loops; collecting here pins an unclosed one on the
    # test that left it, not on whichever test the garbage collector ran in.
    yield
    gc.collect()
