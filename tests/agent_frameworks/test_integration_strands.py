"""middleware.integrations.strands against the real strands-agents and the kit.

The agent's conversation manager is ``CompactingConversationManager``: nothing
intercepts the SDK, so the manager alone keeps the requests under the kit's
limit. The model is strands' OpenAI provider (the kit's Chat Completions
route) or its Bedrock one (boto3, the kit's Converse routes); the messages the
manager compacts are strands' own, in Bedrock Converse form either way. See
``_scenario.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any, List

import anyio
import pytest
from helpers import read_log
from strands import Agent, tool
from strands.session import FileSessionManager, SessionManager, SnapshotSessionManager
from strands.storage import LocalFileStorage
from strands.types.exceptions import ContextWindowOverflowException

from ctx_compact import check_pairing
from ctx_compact.testing import FakeProvider, count_tokens
from ctx_compact.testing.bedrock import validate_messages
from middleware import CompactingSession, CompactionEvent
from middleware.integrations.strands import CompactingConversationManager, sent_tokens

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
from ._strands import bedrock_model, openai_model

VERSION = version("strands-agents")


def make_agent(
    provider: FakeProvider, manager: CompactingConversationManager, bedrock: bool = False
) -> Agent:
    return Agent(
        model=bedrock_model(provider) if bedrock else openai_model(provider),
        tools=[tool(get_report)],
        system_prompt=SYSTEM_PROMPT,
        callback_handler=None,
        conversation_manager=manager,
    )


@pytest.mark.parametrize("bedrock", [False, True], ids=["openai", "bedrock"])
def test_a_long_tool_run_stays_within_the_limit(provider: FakeProvider, bedrock: bool) -> None:
    seen: List[CompactionEvent] = []
    manager = CompactingConversationManager(max_tokens=LIMIT, on_compact=seen.append)
    agent = make_agent(provider, manager, bedrock)

    with CompactingSession() as session:  # observes the manager's events
        for prompt in prompts():
            agent(prompt)

    check(
        f"strands-agents CompactingConversationManager ({'Bedrock' if bedrock else 'OpenAI'})",
        VERSION,
        "bedrock" if bedrock else "chat",
        provider,
        session.events,
        expected_requests=2 * TURNS,
        tools_counted=True,
    )
    assert seen == session.events
    assert {event.function for event in seen} == {"strands BeforeModelCallEvent"}
    # The messages and the system prompt are counted as the model sent them, and
    # the tool's spec beside them as it went out (Converse's toolSpec, Chat's function).
    assert_counted_as_sent(provider, seen, bedrock)
    # The history itself was compacted, in place, and is still one Bedrock accepts.
    assert manager.removed_message_count > 0
    assert validate_messages(json.loads(json.dumps(agent.messages))) == []
    assert check_pairing(agent.messages) == []
    assert len(agent.messages) < 4 * TURNS


def assert_counted_as_sent(
    provider: FakeProvider, events: List[CompactionEvent], bedrock: bool
) -> None:
    if bedrock:
        tool = provider.requests[-1].body["toolConfig"]["tools"][0]
    else:
        tool = provider.requests[-1].body["tools"][0]
    api = "bedrock" if bedrock else "chat"
    counted, sent = zip(*counted_and_sent(provider, events, count_tokens(tool), api))
    assert counted == sent


@pytest.mark.parametrize("bedrock", [False, True], ids=["openai", "bedrock"])
def test_a_mixed_run_is_counted_as_the_model_sends_it(
    provider: FakeProvider, bedrock: bool
) -> None:
    # Many short messages: the OpenAI model sends each text block with a type and
    # a call as tool_calls, more than their Converse form (which went to 1534).
    seen: List[CompactionEvent] = []
    manager = CompactingConversationManager(LIMIT, on_compact=seen.append)
    agent = make_agent(provider, manager, bedrock)

    for turn, prompt in enumerate(prompts(30)):
        provider.tool_calls = tool_calls_on(turn)
        agent(prompt)

    api = "bedrock" if bedrock else "chat"
    check(f"strands (mixed turns, {api})", VERSION, api, provider, seen, tools_counted=True)
    assert_counted_as_sent(provider, seen, bedrock)


def test_an_async_summarizer_is_awaited_and_the_summary_kept(provider: FakeProvider) -> None:
    summaries: List[int] = []

    async def summarize(dropped: List[Any]) -> str:
        summaries.append(len(dropped))
        return f"{len(dropped)} earlier messages about the weather."

    manager = CompactingConversationManager(max_tokens=LIMIT, summarize=summarize)
    agent = make_agent(provider, manager)

    async def main() -> None:
        for prompt in prompts(8):
            await agent.invoke_async(prompt)

    with CompactingSession() as session:
        anyio.run(main)

    assert summaries
    assert any(event.summary for event in session.events)
    texts = [b.get("text", "") for m in agent.messages for b in m["content"]]
    assert any("earlier messages about the weather" in text for text in texts)
    assert validate_messages(json.loads(json.dumps(agent.messages))) == []


def test_cleared_tool_results_replace_theirs_in_the_history(provider: FakeProvider) -> None:
    manager = CompactingConversationManager(
        max_tokens=LIMIT, clear_tool_results={"placeholder": "[cleared]"}
    )
    agent = make_agent(provider, manager, bedrock=True)

    with CompactingSession() as session:
        for prompt in prompts(8):
            agent(prompt)

    check(
        "strands (clear_tool_results)", VERSION, "bedrock", provider, session.events, dropping=False
    )
    assert any(event.cleared_results for event in session.events)
    results = [b["toolResult"] for m in agent.messages for b in m["content"] if "toolResult" in b]
    assert len(results) == 8  # nothing dropped: clearing was enough
    assert "[cleared]" in json.dumps(results[0])
    assert "Report for" in json.dumps(results[-1])
    # Nothing dropped: a session restores the cleared copies from the manager's
    # state, and the session's own record from where they end.
    state = manager.get_state()
    assert manager.removed_message_count == len(state["prepend_messages"]) > 0
    assert "[cleared]" in json.dumps(state["prepend_messages"])
    assert validate_messages(json.loads(json.dumps(agent.messages))) == []


def stored(directory: Path, kind: str) -> SessionManager:
    if kind == "file":
        return FileSessionManager("weather", storage_dir=str(directory))
    return SnapshotSessionManager("weather", storage=LocalFileStorage(str(directory)))


def summarize(dropped: List[Any]) -> str:
    return f"{len(dropped)} earlier messages about the weather."


@pytest.mark.parametrize("kind", ["file", "snapshot"])
@pytest.mark.parametrize(
    "options",
    [{}, {"summarize": summarize}, {"clear_tool_results": {"keep": 2}}],
    ids=["dropping", "summarize", "clear_tool_results"],
)
def test_a_restored_agent_holds_the_live_conversation(
    provider: FakeProvider, tmp_path: Path, kind: str, options: Any
) -> None:
    # The manager drops from the middle (the first message stays): a session
    # restoring from removed_message_count alone started at turn 10 of 16, on
    # an orphaned toolResult, and its history with an assistant message.
    def agent() -> Agent:
        return Agent(
            model=openai_model(provider),
            tools=[tool(get_report)],
            system_prompt=SYSTEM_PROMPT,
            callback_handler=None,
            conversation_manager=CompactingConversationManager(LIMIT, **options),
            session_manager=stored(tmp_path, kind),
            agent_id="weather",
        )

    def held(agent: Agent) -> Any:
        return json.loads(json.dumps(agent.messages))

    live = agent()
    for prompt in prompts(16):
        live(prompt)
    restored = agent()
    assert held(restored) == held(live)
    assert live.conversation_manager.removed_message_count > 0

    for prompt in prompts(8):  # compacted again after a restore
        restored(prompt)
    again = agent()
    assert held(again) == held(restored)
    assert validate_messages(held(again)) == []
    assert held(again)[0]["content"][0]["text"] == prompts()[0]


def test_the_provider_refusing_a_compacted_history_is_raised(provider: FakeProvider) -> None:
    provider.context_limit = 400  # below the budget: compaction alone cannot meet it
    agent = make_agent(provider, CompactingConversationManager(max_tokens=LIMIT))

    def converse() -> None:
        for prompt in prompts(6):
            agent(prompt)

    with pytest.raises(ContextWindowOverflowException):
        converse()


def test_a_message_is_counted_as_sent() -> None:
    message = {
        "role": "assistant",
        "content": [{"text": "Sunny."}],
        "metadata": {"usage": {"inputTokens": 30, "outputTokens": 6, "totalTokens": 36}},
        "tracking_id": "8cb8090c-3bf9-4373-9fe4-b4354b924a18",
    }
    sent = {"role": "assistant", "content": [{"text": "Sunny."}]}

    assert sent_tokens(message) == count_tokens(sent) < count_tokens(message)


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"on_overflow": "retry"}, ValueError, "cannot retry"),
        ({"summary_role": "system"}, ValueError, "summary_role"),
        ({"keep_tail": -1}, ValueError, "keep_tail"),
        ({"messages_arg": "messages"}, TypeError, "messages_arg"),
        ({"on_compact": 3}, TypeError, "on_compact"),
    ],
)
def test_bad_options_are_refused_naming_them(options: Any, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        CompactingConversationManager(max_tokens=LIMIT, **options)


def test_without_strands_the_import_names_the_pip_line() -> None:
    code = "import sys; sys.modules['strands'] = None\nimport middleware.integrations.strands\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 1
    assert "pip install 'strands-agents'" in done.stderr


@pytest.mark.parametrize("bedrock", [False, True], ids=["openai", "bedrock"])
def test_a_tool_output_larger_than_the_budget_is_cut_and_the_agent_goes_on(
    provider: FakeProvider, bedrock: bool
) -> None:
    seen: List[CompactionEvent] = []
    manager = CompactingConversationManager(
        max_tokens=LIMIT, on_compact=seen.append, pin=lambda m: "TASK" in str(m)
    )
    agent = Agent(
        model=bedrock_model(provider) if bedrock else openai_model(provider),
        tools=[tool(read_log)],
        system_prompt=SYSTEM_PROMPT,
        callback_handler=None,
        conversation_manager=manager,
    )
    provider.tool_calls = 1
    agent("TASK: which worker is slow?")
    assert any(event.truncated_results for event in seen)
    assert all(event.fits for event in seen)
    assert "TASK: which worker is slow?" in json.dumps(agent.messages)
    assert check_pairing(agent.messages) == []
