"""Google ADK on its Gemini model, kept in budget by intercepting google-genai.

ADK sends every event of the session to the model, so only
``CompactingSession(intercept="gemini")`` keeps the requests under the kit's
limit. See ``_scenario.py``.
"""

from __future__ import annotations

from importlib.metadata import version

import anyio
import pytest

from ctx_compact.testing import FakeProvider
from middleware import CompactingSession

from ._adk import AIOHTTP_SUBCLASS, converse, make_agent
from ._scenario import LIMIT, TURNS, check, prompts

VERSION = version("google-adk")
pytestmark = AIOHTTP_SUBCLASS


@pytest.mark.parametrize("retry", [False, True], ids=["limit", "lower-limit-retry"])
def test_a_long_tool_run_stays_within_the_limit(provider: FakeProvider, retry: bool) -> None:
    agent = make_agent(provider)
    retry_limit = LIMIT - 300 if retry else None
    if retry_limit is not None:
        provider.context_limit = retry_limit

    overflow = "retry" if retry else "call"
    with CompactingSession(max_tokens=LIMIT, intercept="gemini", on_overflow=overflow) as session:
        anyio.run(converse, agent, prompts())

    check(
        f"google-adk LlmAgent (intercept{', retry' if retry else ''})",
        VERSION,
        "gemini",
        provider,
        session.events,
        expected_requests=2 * TURNS,
        retry_limit=retry_limit,
    )
    assert all(event.provider_tokens is not None for event in session.events)
