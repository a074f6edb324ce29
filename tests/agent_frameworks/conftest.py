"""The agent frameworks' runs: the kit at the scenario's limit, and the table at the end.

These tests need the ``agents`` extra (``pip install -e ".[test,agents]"``); they run
in its own venv, where a missing framework fails them.
"""

from __future__ import annotations

import gc
from typing import Any, Iterator

import pytest

from ctx_compact.testing import FakeProvider

from ._scenario import LIMIT, ROWS, markdown_table


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if ROWS:
        terminalreporter.section(f"agent frameworks (limit and budget: {LIMIT} tokens)")
        terminalreporter.write_line(markdown_table(ROWS))


@pytest.fixture
def provider(fake_provider: FakeProvider) -> FakeProvider:
    """The kit's provider at the scenario's limit, answering each prompt with one tool call."""
    fake_provider.tool_calls = 1
    fake_provider.context_limit = LIMIT
    return fake_provider


@pytest.fixture(autouse=True)
def _collect_after_each_test() -> Iterator[None]:
    # Frameworks cache clients and loops; collecting here pins an unclosed one on the
    # test that left it, not on whichever test the garbage collector ran in.
    yield
    gc.collect()
