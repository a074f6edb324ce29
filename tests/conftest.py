"""Fixtures, the hypothesis profiles and the slow-test marker for the whole suite.

Factories and strategies live in ``helpers.py``.

Hypothesis runs its default profile; ``HYPOTHESIS_PROFILE=quick`` runs each
property on fewer examples for a fast local loop. Tests that start subprocesses,
engines, frameworks or servers in bulk are marked ``slow``, so ``-m "not slow"``
selects the quick subset: ``HYPOTHESIS_PROFILE=quick python -m pytest -n auto -m "not slow"``.
CI always runs everything with the default profile, on every core (``-n auto``).

The tests of an optional extra (frameworks, SDKs, engines) skip where it is not
installed, and CI runs them again in that extra's venv with
``CTX_COMPACT_NO_SKIP=1``: there a skipped test fails, so a missing package or a
test that skips for any other reason cannot pass testing nothing.
"""

from __future__ import annotations

import importlib.util
import os
import signal
from typing import Any, Iterator, List

import pytest
from helpers import Message, weather_messages
from hypothesis import settings

from ctx_compact.testing import FakeProvider

# A shell that starts jobs in the background hands them SIGINT ignored; the ctrl-c tests of the
# command line need Python's own handler, whoever started the suite.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# No deadline: the tests assert no wall-clock time, and on a loaded machine (the suite runs
# on every core) an example slower than hypothesis's 200 ms would fail its test.
settings.register_profile("default", deadline=None)
settings.register_profile("quick", max_examples=10, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

# Modules whose tests spawn interpreters, worker pools, engines or frameworks.
SLOW_MODULES = (
    "test_cli_jobs",
    "test_docs",
    "test_engines",
    "test_examples",
    "sdks.test_examples",
    "test_import_isolation",
    "test_pin_long",
    "test_fw_",
    "test_frameworks",
)


NO_SKIP = os.environ.get("CTX_COMPACT_NO_SKIP") == "1"

# The test files of each optional extra, with the modules they import: where one of
# them is missing, the files are not collected (the header says so), except under
# CTX_COMPACT_NO_SKIP=1, where their import error fails the run.
EXTRAS = {
    "providers": (
        ("google.genai", "boto3"),
        (
            "sdks/test_kit_gemini_sdk.py",
            "sdks/test_kit_bedrock_sdk.py",
            "sdks/test_kit_bedrock_cache.py",
            "sdks/test_gemini_*.py",
            "sdks/test_bedrock_*.py",
        ),
    ),
    "frameworks": (
        (
            "langchain",
            "langgraph",
            "langchain_openai",
            "langchain_anthropic",
            "langchain_google_genai",
            "langchain_aws",
            "langchain_ollama",
            "pydantic_ai",
            "agents",
        ),
        ("frameworks/test_integration_*.py",),
    ),
    "agents": (
        (
            "google.adk",
            "strands",
            "llama_index.core",
            "autogen_agentchat",
            "autogen_core",
            "smolagents",
            "mistralai",
            "cohere",
        ),
        ("agent_frameworks/*.py",),
    ),
}


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:  # the parent package is missing
        return False


MISSING_EXTRAS = [
    extra for extra, (modules, _) in EXTRAS.items() if not all(map(_installed, modules))
]
collect_ignore_glob = (
    [] if NO_SKIP else [glob for extra in MISSING_EXTRAS for glob in EXTRAS[extra][1]]
)


def pytest_report_header() -> str:
    if not MISSING_EXTRAS or NO_SKIP:
        return "optional extras: all test files collected"
    return (
        f"not collected here, for want of the {', '.join(MISSING_EXTRAS)} extra(s) "
        "(CI runs them in their venvs under CTX_COMPACT_NO_SKIP=1): "
        + ", ".join(glob for extra in MISSING_EXTRAS for glob in EXTRAS[extra][1])
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    outcome = yield
    if NO_SKIP:
        _fail_a_skip(outcome.get_result())  # type: ignore[attr-defined]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    if NO_SKIP:
        report = outcome.get_result()  # type: ignore[attr-defined]
        if not hasattr(report, "wasxfail"):
            _fail_a_skip(report)


def _fail_a_skip(report: Any) -> None:
    if report.skipped:
        report.outcome = "failed"
        report.longrepr = f"skipped under CTX_COMPACT_NO_SKIP=1: {report.longrepr}"


def pytest_collection_modifyitems(items: List[pytest.Item]) -> None:
    for item in items:
        if item.module is not None and item.module.__name__.startswith(SLOW_MODULES):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Every ``@pytest.mark.anyio`` test runs once on asyncio and once on trio."""
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def provider(fake_provider: FakeProvider) -> FakeProvider:
    """The testing kit's own ``fake_provider`` (its pytest plugin), under the suite's name.

    A test sets ``provider.context_limit`` or ``provider.tool_calls`` as it needs; a folder
    whose tests all need other settings overrides this fixture on top of it (tests/frameworks).
    """
    return fake_provider


@pytest.fixture
def weather() -> List[Message]:
    """The specification's example conversation; a new list of new dicts each time."""
    return weather_messages()
