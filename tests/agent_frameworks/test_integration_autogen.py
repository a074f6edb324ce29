"""middleware.integrations.autogen against the real AutoGen and the kit.

The agent's model context is ``CompactingChatCompletionContext``: nothing
intercepts the SDK, so the context alone keeps the requests under the kit's
limit. See ``_scenario.py``.
"""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version
from typing import Any, List, Optional

import anyio
import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_core import FunctionCall
from autogen_core.models import (
    AssistantMessage,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    LLMMessage,
    SystemMessage,
    UserMessage,
)
from autogen_core.tools import FunctionTool
from autogen_ext.models.openai import OpenAIChatCompletionClient
from autogen_ext.models.openai._openai_client import to_oai_type
from helpers import read_log

from ctx_compact._contract import message_views
from ctx_compact.testing import FakeProvider, count_tokens
from middleware import CompactingSession, CompactionEvent
from middleware.integrations.autogen import (
    SUMMARY_SOURCE,
    CompactingChatCompletionContext,
    sent_messages,
)

from ._scenario import (
    LIMIT,
    SYSTEM_PROMPT,
    TURNS,
    check,
    counted_and_sent,
    get_report,
    prompts,
    tool_calls_on,
)

VERSION = version("autogen-agentchat")
MODEL = "gpt-4o-2024-08-06"  # what the kit's replies name: AutoGen warns when they differ
TOOLS = [FunctionTool(get_report, description="Get the detailed weather report for a city.")]


def run_agent(
    provider: FakeProvider,
    context: CompactingChatCompletionContext,
    turns: int,
    tools: Any = TOOLS,
    tasks: Optional[List[str]] = None,
) -> None:
    """The agent given ``tasks`` one after the other (the scenario's ``turns`` prompts)."""

    async def main() -> None:
        client = OpenAIChatCompletionClient(
            model=MODEL, base_url=provider.openai_url, api_key="test", max_retries=0
        )
        agent = AssistantAgent(
            "weather",
            model_client=client,
            tools=tools,
            system_message=SYSTEM_PROMPT,
            reflect_on_tool_use=True,
            model_context=context,
        )
        try:
            for prompt in prompts(turns) if tasks is None else tasks:
                await agent.run(task=prompt)
        finally:
            await client.close()

    anyio.run(main)


def make_context(tools: Any = TOOLS, **options: Any) -> CompactingChatCompletionContext:
    return CompactingChatCompletionContext(
        LIMIT, system_message=SYSTEM_PROMPT, tool_schema=tools, **options
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
    # The messages, the system message among them, are counted as the client sent
    # them, and the tool's schema beside them.
    tool = count_tokens(provider.requests[0].body["tools"][0])
    counted, sent = zip(*counted_and_sent(provider, seen, tool))
    assert counted == sent
    # Only what the model saw changed: the context kept every message.
    kept = anyio.run(context.get_messages)
    assert len(kept) < len(context._messages)
    assert sum(isinstance(m, FunctionExecutionResultMessage) for m in context._messages) == TURNS


def run_mixed(provider: FakeProvider, context: CompactingChatCompletionContext, turns: int) -> None:
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
            for turn, prompt in enumerate(prompts(turns)):
                provider.tool_calls = tool_calls_on(turn)
                await agent.run(task=prompt)
        finally:
            await client.close()

    anyio.run(main)


def test_a_mixed_run_is_counted_as_the_client_sends_it(provider: FakeProvider) -> None:
    # Many short messages: each sent with more than its Anthropic form holds (a
    # user message's name, a call's tool_calls), which went over the limit (1561).
    context = make_context()

    with CompactingSession() as session:
        run_mixed(provider, context, 30)

    check("AutoGen (mixed turns)", VERSION, "chat", provider, session.events, tools_counted=True)
    tool = count_tokens(provider.requests[0].body["tools"][0])
    counted, sent = zip(*counted_and_sent(provider, session.events, tool))
    assert counted == sent


def test_each_message_is_counted_as_the_openai_client_sends_it() -> None:
    calls = [
        FunctionCall(id="a", arguments='{\n  "city": "Paris"\n}', name="get_report"),
        FunctionCall(id="b", arguments='{"city":"Rome"}', name="get_report"),
    ]
    results = [
        FunctionExecutionResult(content="Sunny.", call_id="a", name="get_report"),
        FunctionExecutionResult(content="No such city.", call_id="b", name="x", is_error=True),
    ]
    history: List[LLMMessage] = [
        SystemMessage(content=SYSTEM_PROMPT),
        UserMessage(content="Paris and Rome?", source="user"),
        AssistantMessage(content=calls, source="weather", thought="Both at once."),
        FunctionExecutionResultMessage(content=results),
        AssistantMessage(content=calls[:1], source="weather"),
        FunctionExecutionResultMessage(content=results[:1]),
        AssistantMessage(content="Sunny in Paris.", source="weather"),
    ]

    for message, view in zip(history, message_views(history)):
        assert sent_messages(view) == [dict(m) for m in to_oai_type(message)]
    # A summary is sent as a UserMessage of SUMMARY_SOURCE.
    summary = UserMessage(content="Earlier: Oslo.", source=SUMMARY_SOURCE)
    assert sent_messages({"role": "user", "content": "Earlier: Oslo."}) == to_oai_type(summary)


def test_a_summary_is_a_user_message_of_its_own(provider: FakeProvider) -> None:
    async def summarize(dropped: List[Any]) -> str:
        return f"{len(dropped)} earlier messages about the weather."

    context = make_context(summarize=summarize)

    with CompactingSession() as session:
        run_agent(provider, context, 8)

    check("AutoGen (summarize)", VERSION, "chat", provider, session.events)
    tool = count_tokens(provider.requests[0].body["tools"][0])
    counted, sent = zip(*counted_and_sent(provider, session.events, tool))
    assert counted == sent  # the summary too, sent with its source as name
    kept = anyio.run(context.get_messages)
    summaries = [m for m in kept if isinstance(m, UserMessage) and m.source == SUMMARY_SOURCE]
    assert len(summaries) == 1
    assert "earlier messages about the weather" in str(summaries[0].content)


def test_cleared_results_are_function_execution_results(provider: FakeProvider) -> None:
    context = make_context(clear_tool_results={"keep": 1, "placeholder": "[cleared]"})

    with CompactingSession() as session:
        run_agent(provider, context, 8)

    check("AutoGen (clear_tool_results)", VERSION, "chat", provider, session.events, dropping=False)
    tool = count_tokens(provider.requests[0].body["tools"][0])
    counted, sent = zip(*counted_and_sent(provider, session.events, tool))
    assert counted == sent
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


def test_a_tool_output_larger_than_the_budget_is_cut_and_the_agent_goes_on(
    provider: FakeProvider,
) -> None:
    provider.tool_calls = 1
    seen: List[CompactionEvent] = []
    tools = [FunctionTool(read_log, description="Read a service's whole log.")]
    context = make_context(tools, on_compact=seen.append, pin=lambda m: "TASK" in str(m))

    run_agent(provider, context, 1, tools, ["TASK: which worker is slow?"])

    assert any(event.truncated_results for event in seen)
    assert all(event.fits for event in seen)
    assert "TASK: which worker is slow?" in str(provider.requests[-1].body)
