"""middleware.integrations.autogen against the real AutoGen and the kit.

The agent's model context is ``CompactingChatCompletionContext``: nothing
intercepts the SDK, so the context alone keeps the requests under the kit's
limit. See ``_scenario.py``.
"""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version
from typing import Any, List

import anyio
import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_core.models import FunctionExecutionResultMessage, UserMessage
from autogen_core.tools import FunctionTool
from autogen_ext.models.openai import OpenAIChatCompletionClient

from ctx_compact import estimate_tokens
from ctx_compact.testing import FakeProvider, count_tokens
from middleware import CompactingSession, CompactionEvent
from middleware.integrations.autogen import SUMMARY_SOURCE, CompactingChatCompletionContext

from ._scenario import LIMIT, SYSTEM_PROMPT, TURNS, check, get_report, prompts

VERSION = version("autogen-agentchat")
MODEL = "gpt-4o-2024-08-06"  # what the kit's replies name: AutoGen warns when they differ
TOOLS = [FunctionTool(get_report, description="Get the detailed weather report for a city.")]


def run_agent(provider: FakeProvider, context: CompactingChatCompletionContext, turns: int) -> None:
    async def main() -> None:
        client = OpenAIChatCompletionClient(
            model=MODEL, base_url=provider.openai_url, api_key="test", max_retries=0
        )
        agent = AssistantAgent(
            "weather",
            model_client=client,
            tools=TOOLS,
            system_message=SYSTEM_PROMPT,
            reflect_on_tool_use=True,
            model_context=context,
        )
        try:
            for prompt in prompts(turns):
                await agent.run(task=prompt)
        finally:
            await client.close()

    anyio.run(main)


def make_context(**options: Any) -> CompactingChatCompletionContext:
    return CompactingChatCompletionContext(
        LIMIT, system_message=SYSTEM_PROMPT, tool_schema=TOOLS, **options
    )


def test_a_long_tool_run_stays_within_the_limit(provider: FakeProvider) -> None:
    seen: List[CompactionEvent] = []
    context = make_context(on_compact=seen.append)

    with CompactingSession() as session:  # observes the context's events
        run_agent(provider, context, TURNS)

    check(
        "AutoGen CompactingChatCompletionContext",
        VERSION,
        "chat",
        provider,
        session.events,
        expected_requests=2 * TURNS,
        tools_counted=True,
    )
    assert seen == session.events
    assert {event.function for event in seen} == {"autogen get_messages"}
    # The system message and the tool's schema are counted beside the messages.
    tool = provider.requests[0].body["tools"][0]
    fixed = count_tokens({"role": "system", "content": SYSTEM_PROMPT}) + count_tokens(tool)
    for event in seen:
        assert event.tokens_after == sum(map(estimate_tokens, event.messages)) + fixed
    # Only what the model saw changed: the context kept every message.
    kept = anyio.run(context.get_messages)
    assert len(kept) < len(context._messages)
    assert sum(isinstance(m, FunctionExecutionResultMessage) for m in context._messages) == TURNS


def test_a_summary_is_a_user_message_of_its_own(provider: FakeProvider) -> None:
    async def summarize(dropped: List[Any]) -> str:
        return f"{len(dropped)} earlier messages about the weather."

    context = make_context(summarize=summarize)

    with CompactingSession() as session:
        run_agent(provider, context, 8)

    check("AutoGen (summarize)", VERSION, "chat", provider, session.events)
    kept = anyio.run(context.get_messages)
    summaries = [m for m in kept if isinstance(m, UserMessage) and m.source == SUMMARY_SOURCE]
    assert len(summaries) == 1
    assert "earlier messages about the weather" in str(summaries[0].content)


def test_cleared_results_are_function_execution_results(provider: FakeProvider) -> None:
    context = make_context(clear_tool_results={"keep": 1, "placeholder": "[cleared]"})

    with CompactingSession() as session:
        run_agent(provider, context, 8)

    check("AutoGen (clear_tool_results)", VERSION, "chat", provider, session.events, dropping=False)
    assert any(event.cleared_results for event in session.events)
    kept = anyio.run(context.get_messages)
    results = [m for m in kept if isinstance(m, FunctionExecutionResultMessage)]
    contents = [r.content[0].content for r in results]
    cleared = contents.count("[cleared]")
    assert 0 < cleared < len(contents)
    assert contents[:cleared] == ["[cleared]"] * cleared  # the oldest, as many as needed
    assert all(text.startswith("Report for") for text in contents[cleared:])
    assert not any(m in context._messages for m in results[:cleared])  # copies, not originals


def test_the_state_keeps_every_message(provider: FakeProvider) -> None:
    context = make_context()
    run_agent(provider, context, 8)

    state = anyio.run(context.save_state)
    restored = make_context()
    anyio.run(restored.load_state, state)

    assert restored._messages == context._messages
    assert anyio.run(restored.get_messages) == anyio.run(context.get_messages)
    assert len(anyio.run(restored.get_messages)) < len(restored._messages)


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"on_overflow": "retry"}, ValueError, "cannot retry"),
        ({"summary_role": "tool"}, ValueError, "summary_role"),
        ({"messages_arg": "messages"}, TypeError, "messages_arg"),
    ],
)
def test_bad_options_are_refused_naming_them(options: Any, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        make_context(**options)


def test_without_autogen_the_import_names_the_pip_line() -> None:
    code = (
        "import sys; sys.modules['autogen_core'] = None\nimport middleware.integrations.autogen\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 1
    assert "pip install 'autogen-core'" in done.stderr
