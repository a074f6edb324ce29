"""pytest fixtures for the local provider, registered as the ``ctx_compact`` plugin.

Installing ctx-compact makes them available in every test suite:

- ``fake_provider``: a running ``FakeProvider`` on 127.0.0.1, new for each test;
- ``fake_openai`` / ``fake_async_openai``: ``openai.OpenAI`` / ``AsyncOpenAI``
  clients pointed at it (no retries, a dummy key);
- ``fake_anthropic`` / ``fake_async_anthropic``: the same for ``anthropic``;
- ``fake_gemini`` / ``fake_async_gemini``: a ``google.genai.Client`` pointed at
  it, and its async side (``client.aio``);
- ``fake_bedrock``: a boto3 ``bedrock-runtime`` client pointed at it, with dummy
  credentials (boto3 has no async client).

A client fixture whose SDK is not installed fails the test, naming the install
command (``pip install openai``): a suite that skipped instead could go green
while testing nothing. A test that may run without the SDK says so with the
``skip_without_sdk`` marker (``@pytest.mark.skip_without_sdk``, or
``pytestmark = pytest.mark.skip_without_sdk`` for a module), and is then skipped
with the same message; ``pytest.importorskip("openai")`` at the top of a module
works as usual. Configure the provider in a test by setting
``fake_provider.context_limit`` or ``fake_provider.tool_calls``.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any, AsyncIterator, Iterator, Optional

import pytest

from ._server import FakeProvider

SKIP_WITHOUT_SDK = "skip_without_sdk"

# The command that installs each SDK a client fixture needs, by its package name
# (written out, so that tests/test_install_commands.py reads every one).
_INSTALL = {
    "openai": "pip install openai",
    "anthropic": "pip install anthropic",
    "google-genai": "pip install google-genai",
    "boto3": "pip install boto3",
}


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker, so that ``--strict-markers`` suites accept it."""
    config.addinivalue_line(
        "markers",
        f"{SKIP_WITHOUT_SDK}: skip, rather than fail, a test whose fake_openai, fake_anthropic, "
        "fake_gemini, fake_bedrock (or async) fixture needs an SDK that is not installed",
    )


def _sdk(request: pytest.FixtureRequest, name: str, package: Optional[str] = None) -> ModuleType:
    """Import the SDK ``name`` for a client fixture, or fail (or skip) the test saying how.

    ``package`` is what ``pip`` installs, when it is not ``name`` (``google-genai``).
    """
    package = package or name
    try:
        return importlib.import_module(name)
    except ImportError as error:
        reason = str(error)
    # Outside the except block, so that the report is the message, not a chain.
    message = (
        f"{request.fixturename} needs the {package} SDK, which cannot be imported ({reason}). "
        f"Install it with: {_INSTALL[package]}"
    )
    if request.node.get_closest_marker(SKIP_WITHOUT_SDK) is not None:
        pytest.skip(message)
    pytest.fail(
        f"{message}; or mark the test @pytest.mark.{SKIP_WITHOUT_SDK} to skip it instead.",
        pytrace=False,
    )


@pytest.fixture
def fake_provider() -> Iterator[FakeProvider]:
    """A running local provider; closed after the test."""
    with FakeProvider() as provider:
        yield provider


@pytest.fixture
def fake_openai(request: pytest.FixtureRequest, fake_provider: FakeProvider) -> Iterator[Any]:
    """An ``openai.OpenAI`` client pointed at ``fake_provider``."""
    openai = _sdk(request, "openai")
    client = openai.OpenAI(base_url=fake_provider.openai_url, api_key="test", max_retries=0)
    with client:
        yield client


@pytest.fixture
async def fake_async_openai(
    request: pytest.FixtureRequest, fake_provider: FakeProvider
) -> AsyncIterator[Any]:
    """An ``openai.AsyncOpenAI`` client pointed at ``fake_provider`` (an anyio test's)."""
    openai = _sdk(request, "openai")
    client = openai.AsyncOpenAI(base_url=fake_provider.openai_url, api_key="test", max_retries=0)
    async with client:
        yield client


@pytest.fixture
def fake_anthropic(request: pytest.FixtureRequest, fake_provider: FakeProvider) -> Iterator[Any]:
    """An ``anthropic.Anthropic`` client pointed at ``fake_provider``."""
    anthropic = _sdk(request, "anthropic")
    client = anthropic.Anthropic(
        base_url=fake_provider.anthropic_url, api_key="test", max_retries=0
    )
    with client:
        yield client


@pytest.fixture
async def fake_async_anthropic(
    request: pytest.FixtureRequest, fake_provider: FakeProvider
) -> AsyncIterator[Any]:
    """An ``anthropic.AsyncAnthropic`` client pointed at ``fake_provider`` (an anyio test's)."""
    anthropic = _sdk(request, "anthropic")
    client = anthropic.AsyncAnthropic(
        base_url=fake_provider.anthropic_url, api_key="test", max_retries=0
    )
    async with client:
        yield client


def _gemini_client(request: pytest.FixtureRequest, provider: FakeProvider) -> Any:
    genai = _sdk(request, "google.genai", "google-genai")
    types = importlib.import_module("google.genai.types")
    options = types.HttpOptions(
        base_url=provider.gemini_url, retry_options=types.HttpRetryOptions(attempts=1)
    )
    return genai.Client(api_key="test", http_options=options)


@pytest.fixture
def fake_gemini(request: pytest.FixtureRequest, fake_provider: FakeProvider) -> Iterator[Any]:
    """A ``google.genai.Client`` pointed at ``fake_provider`` (a dummy key, no retries)."""
    client = _gemini_client(request, fake_provider)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
async def fake_async_gemini(
    request: pytest.FixtureRequest, fake_provider: FakeProvider
) -> AsyncIterator[Any]:
    """The async side (``client.aio``) of a client pointed at ``fake_provider`` (anyio tests)."""
    client = _gemini_client(request, fake_provider)
    try:
        yield client.aio
    finally:
        await client.aio.aclose()
        client.close()


@pytest.fixture
def fake_bedrock(request: pytest.FixtureRequest, fake_provider: FakeProvider) -> Iterator[Any]:
    """A boto3 ``bedrock-runtime`` client pointed at ``fake_provider`` (dummy keys, no retries).

    A session of its own, given the region and the keys, so that no credentials
    are looked up on the machine (environment, profiles, instance metadata).
    """
    boto3 = _sdk(request, "boto3")
    config = importlib.import_module("botocore.config")
    client = boto3.session.Session().client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=fake_provider.bedrock_url,
        aws_access_key_id="test",
        aws_secret_access_key="test",
        config=config.Config(retries={"max_attempts": 1, "mode": "standard"}),
    )
    try:
        yield client
    finally:
        client.close()
