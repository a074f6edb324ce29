"""pytest fixtures for the local provider, registered as the ``ctx_compact`` plugin.

Installing ctx-compact makes them available in every test suite:

- ``fake_provider``: a running ``FakeProvider`` on 127.0.0.1, new for each test;
- ``fake_openai`` / ``fake_async_openai``: ``openai.OpenAI`` / ``AsyncOpenAI``
  clients pointed at it (no retries, a dummy key);
- ``fake_anthropic`` / ``fake_async_anthropic``: the same for ``anthropic``.

A client fixture skips the test when its SDK is not installed. Configure the
provider in a test by setting ``fake_provider.context_limit`` or
``fake_provider.tool_calls``.
"""

from __future__ import annotations

from typing import Any, AsyncIterator, Iterator

import pytest

from ._provider import FakeProvider


@pytest.fixture
def fake_provider() -> Iterator[FakeProvider]:
    """A running local provider; closed after the test."""
    with FakeProvider() as provider:
        yield provider


@pytest.fixture
def fake_openai(fake_provider: FakeProvider) -> Iterator[Any]:
    """An ``openai.OpenAI`` client pointed at ``fake_provider``."""
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=fake_provider.openai_url, api_key="test", max_retries=0)
    with client:
        yield client


@pytest.fixture
async def fake_async_openai(fake_provider: FakeProvider) -> AsyncIterator[Any]:
    """An ``openai.AsyncOpenAI`` client pointed at ``fake_provider`` (an anyio test's)."""
    openai = pytest.importorskip("openai")
    client = openai.AsyncOpenAI(base_url=fake_provider.openai_url, api_key="test", max_retries=0)
    async with client:
        yield client


@pytest.fixture
def fake_anthropic(fake_provider: FakeProvider) -> Iterator[Any]:
    """An ``anthropic.Anthropic`` client pointed at ``fake_provider``."""
    anthropic = pytest.importorskip("anthropic")
    client = anthropic.Anthropic(
        base_url=fake_provider.anthropic_url, api_key="test", max_retries=0
    )
    with client:
        yield client


@pytest.fixture
async def fake_async_anthropic(fake_provider: FakeProvider) -> AsyncIterator[Any]:
    """An ``anthropic.AsyncAnthropic`` client pointed at ``fake_provider`` (an anyio test's)."""
    anthropic = pytest.importorskip("anthropic")
    client = anthropic.AsyncAnthropic(
        base_url=fake_provider.anthropic_url, api_key="test", max_retries=0
    )
    async with client:
        yield client
