"""A Google ADK agent on the kit's Gemini route, and the turns it holds there."""

from __future__ import annotations

from typing import Any, List

import pytest
from google.adk.agents import LlmAgent
from google.adk.models import Gemini
from google.adk.runners import InMemoryRunner
from google.genai import types

from ctx_compact.testing import FakeProvider

from ._scenario import SYSTEM_PROMPT, get_report

MODEL = "gemini-2.5-flash"
# google-genai's async client subclasses aiohttp's session when aiohttp is installed
# (this venv has it, for LlamaIndex), which aiohttp warns about: theirs, not ours.
AIOHTTP_SUBCLASS = pytest.mark.filterwarnings(
    "ignore:Inheritance class AiohttpClientSession:DeprecationWarning"
)


def make_agent(provider: FakeProvider, **agent_options: Any) -> LlmAgent:
    model = Gemini(
        model=MODEL,
        base_url=provider.gemini_url,
        api_version="v1beta",
        client_kwargs={"api_key": "test"},
    )
    return LlmAgent(
        name="weather",
        model=model,
        instruction=SYSTEM_PROMPT,
        tools=[get_report],
        **agent_options,
    )


async def converse(agent: LlmAgent, turns: List[str]) -> List[Any]:
    """Hold ``turns`` in one session; return the session's events."""
    runner = InMemoryRunner(agent=agent, app_name="weather")
    session = await runner.session_service.create_session(app_name="weather", user_id="u")
    for prompt in turns:
        message = types.Content(role="user", parts=[types.Part(text=prompt)])
        async for _ in runner.run_async(user_id="u", session_id=session.id, new_message=message):
            pass
    done = await runner.session_service.get_session(
        app_name="weather", user_id="u", session_id=session.id
    )
    await runner.close()
    # ADK makes one google-genai client per event loop and leaves it open.
    model = agent.model
    assert isinstance(model, Gemini)
    await model.api_client.aio.aclose()
    assert done is not None
    return list(done.events)
