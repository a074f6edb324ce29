"""middleware.integrations.google_adk against the real google-adk and the kit's Gemini route.

The agent's ``before_model_callback`` is the integration's: nothing intercepts
the SDK, so the callback alone keeps the requests under the kit's limit. See
``_scenario.py``.
"""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version
from typing import Any, List

import anyio
import pytest
from helpers import read_log

from ctx_compact.testing import FakeProvider, count_tokens
from middleware import CompactingSession, CompactionEvent
from middleware.integrations.google_adk import before_model_callback

from ._adk import AIOHTTP_SUBCLASS, converse, make_agent
from ._scenario import LIMIT, TURNS, check, prompts

VERSION = version("google-adk")
pytestmark = AIOHTTP_SUBCLASS


def test_a_long_tool_run_stays_within_the_limit(provider: FakeProvider) -> None:
    seen: List[CompactionEvent] = []
    agent = make_agent(
        provider, before_model_callback=before_model_callback(LIMIT, on_compact=seen.append)
    )

    with CompactingSession() as session:  # observes the callback's events
        events = anyio.run(converse, agent, prompts())

    check(
        "google-adk before_model_callback",
        VERSION,
        "gemini",
        provider,
        session.events,
        expected_requests=2 * TURNS,
        tools_counted=True,
    )
    assert seen == session.events
    assert {event.function for event in seen} == {"google-adk before_model_callback"}
    # The system instruction and the tool's declaration count: the wire's own figures.
    body = provider.requests[-1].body
    fixed = count_tokens(body["systemInstruction"]) + sum(map(count_tokens, body["tools"]))
    assert seen[-1].tokens_after - fixed == pytest.approx(
        sum(map(count_tokens, body["contents"])), rel=0.05
    )
    # Only what the model saw changed: the session kept every event.
    calls = [e for e in events if e.get_function_calls()]
    assert len(calls) == TURNS


def test_an_async_summarizer_is_awaited_and_sent(provider: FakeProvider) -> None:
    async def summarize(dropped: List[Any]) -> str:
        return f"{len(dropped)} earlier turns about the weather."

    callback = before_model_callback(LIMIT, summarize=summarize)
    agent = make_agent(provider, before_model_callback=callback)

    with CompactingSession() as session:
        anyio.run(converse, agent, prompts(10))

    assert any(event.summary for event in session.events)
    sent = [
        part.get("text", "")
        for request in provider.requests
        for content in request.body["contents"]
        for part in content["parts"]
    ]
    assert any("earlier turns about the weather" in text for text in sent)
    check("google-adk (summarize)", VERSION, "gemini", provider, session.events)


def test_cleared_function_responses_are_contents(provider: FakeProvider) -> None:
    callback = before_model_callback(LIMIT, clear_tool_results={"placeholder": "[cleared]"})
    agent = make_agent(provider, before_model_callback=callback)

    with CompactingSession() as session:
        anyio.run(converse, agent, prompts(8))

    check(
        "google-adk (clear_tool_results)",
        VERSION,
        "gemini",
        provider,
        session.events,
        dropping=False,
    )
    assert any(event.cleared_results for event in session.events)
    responses = [
        part["functionResponse"]["response"]
        for content in provider.requests[-1].body["contents"]
        for part in content["parts"]
        if "functionResponse" in part
    ]
    assert "[cleared]" in str(responses[0])
    assert "Report for" in str(responses[-1])


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"on_overflow": "retry"}, ValueError, "cannot retry"),
        ({"summary_role": "assistant"}, ValueError, "summary_role"),
        ({"keep_head": "1"}, TypeError, "keep_head"),
        ({"messages_arg": "contents"}, TypeError, "messages_arg"),
        ({"nope": True}, TypeError, "'nope'"),
    ],
)
def test_bad_options_are_refused_naming_them(options: Any, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        before_model_callback(LIMIT, **options)


def test_without_google_adk_the_import_names_the_pip_line() -> None:
    code = (
        "import sys; sys.modules['google.adk'] = None\nimport middleware.integrations.google_adk\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 1
    assert "pip install 'google-adk'" in done.stderr


def test_a_tool_output_larger_than_the_budget_is_cut_and_the_agent_goes_on(
    provider: FakeProvider,
) -> None:
    provider.tool_calls = 1
    seen: List[CompactionEvent] = []
    callback = before_model_callback(LIMIT, on_compact=seen.append, pin=lambda m: "TASK" in str(m))
    agent = make_agent(provider, before_model_callback=callback)
    agent.tools = [read_log]

    anyio.run(converse, agent, ["TASK: which worker is slow?"])

    assert any(event.truncated_results for event in seen)
    assert all(event.fits for event in seen)
    assert "TASK: which worker is slow?" in str(provider.requests[-1].body)
