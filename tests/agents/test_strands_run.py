"""strands-agents on its OpenAI model provider, kept in budget by intercepting the SDK.

The agent keeps every message (``NullConversationManager``), so only
``CompactingSession(intercept="openai")`` keeps the requests under the kit's
limit. See ``_scenario.py``; the Bedrock model is ``test_strands_bedrock_run.py``.
"""

from __future__ import annotations

from importlib.metadata import version

from strands import Agent, tool
from strands.agent.conversation_manager import NullConversationManager
from strands.models.openai import OpenAIModel

from ctx_compact.testing import FakeProvider
from middleware import CompactingSession

from ._scenario import LIMIT, SYSTEM_PROMPT, TURNS, check, get_report, prompts

VERSION = version("strands-agents")


def openai_model(provider: FakeProvider) -> OpenAIModel:
    return OpenAIModel(
        client_args={"base_url": provider.openai_url, "api_key": "test", "max_retries": 0},
        model_id="gpt-4o",
    )


def test_a_long_tool_run_stays_within_the_limit(provider: FakeProvider) -> None:
    agent = Agent(
        model=openai_model(provider),
        tools=[tool(get_report)],
        system_prompt=SYSTEM_PROMPT,
        callback_handler=None,
        conversation_manager=NullConversationManager(),
    )

    with CompactingSession(max_tokens=LIMIT, intercept="openai") as session:
        for prompt in prompts():
            agent(prompt)

    check(
        "strands-agents OpenAIModel (intercept)",
        VERSION,
        "chat",
        provider,
        session.events,
        expected_requests=2 * TURNS,
    )
    assert sum(1 for m in agent.messages for b in m["content"] if "toolUse" in b) == TURNS
