"""Google ADK on its Gemini model, kept in budget by intercepting google-genai.

ADK sends every event of the session to the model, so only
``CompactingSession(intercept="gemini")`` keeps the requests under the kit's
limit. See ``_scenario.py``.
"""

from __future__ import annotations

from importlib.metadata import version

import anyio

from ctx_compact.testing import FakeProvider
from middleware import CompactingSession

from ._adk import AIOHTTP_SUBCLASS, converse, make_agent
from ._scenario import LIMIT, TURNS, check, prompts

VERSION = version("google-adk")
pytestmark = AIOHTTP_SUBCLASS


def test_a_long_tool_run_stays_within_the_limit(provider: FakeProvider) -> None:
    agent = make_agent(provider)

    with CompactingSession(max_tokens=LIMIT, intercept="gemini") as session:
        anyio.run(converse, agent, prompts())

    check(
        "google-adk LlmAgent (intercept)",
        VERSION,
        "gemini",
        provider,
        session.events,
        expected_requests=2 * TURNS,
    )
    assert all(event.provider_tokens is not None for event in session.events)
