"""strands-agents on its OpenAI model provider, kept in budget by intercepting the SDK.

The agent keeps every message (``NullConversationManager``), so only
``CompactingSession(intercept="openai")`` keeps the requests under the kit's
limit, on the OpenAI model (``intercept="openai"``) and on the Bedrock model
through boto3 (``intercept="bedrock"``, converse-stream and converse). See
``_scenario.py``.
"""

from __future__ import annotations

from importlib.metadata import version
from typing import Any, Optional

import pytest
from strands import Agent, tool
from strands.agent.conversation_manager import NullConversationManager
from strands.models import Model

from ctx_compact.testing import FakeProvider
from middleware import CompactingSession

from ._scenario import LIMIT, SYSTEM_PROMPT, TURNS, check, get_report, prompts
from ._strands import bedrock_model, openai_model

VERSION = version("strands-agents")


def test_a_long_tool_run_stays_within_the_limit(provider: FakeProvider) -> None:
    run(provider, openai_model(provider), "openai", "chat", "strands-agents OpenAIModel")


@pytest.mark.parametrize("streaming", [True, False], ids=["converse-stream", "converse"])
def test_a_long_tool_run_on_bedrock_stays_within_the_limit(
    provider: FakeProvider, streaming: bool
) -> None:
    model = bedrock_model(provider, streaming)
    name = f"strands-agents BedrockModel ({'stream' if streaming else 'converse'})"

    events = run(provider, model, "bedrock", "bedrock", name)

    assert all(event.provider_tokens is not None for event in events)


@pytest.mark.parametrize("sdk", ["openai", "bedrock"])
def test_a_lower_provider_limit_is_met_by_retrying(provider: FakeProvider, sdk: str) -> None:
    provider.context_limit = LIMIT - 300
    model = bedrock_model(provider) if sdk == "bedrock" else openai_model(provider)
    api = "bedrock" if sdk == "bedrock" else "chat"

    run(provider, model, sdk, api, f"strands-agents ({sdk}, retry)", retry_limit=LIMIT - 300)


def run(
    provider: FakeProvider,
    model: Model,
    sdk: str,
    api: str,
    name: str,
    retry_limit: Optional[int] = None,
) -> Any:
    agent = Agent(
        model=model,
        tools=[tool(get_report)],
        system_prompt=SYSTEM_PROMPT,
        callback_handler=None,
        conversation_manager=NullConversationManager(),
    )

    overflow = "call" if retry_limit is None else "retry"
    with CompactingSession(max_tokens=LIMIT, intercept=sdk, on_overflow=overflow) as session:
        for prompt in prompts():
            agent(prompt)

    check(
        f"{name} (intercept)",
        VERSION,
        api,
        provider,
        session.events,
        expected_requests=2 * TURNS,
        retry_limit=retry_limit,
    )
    assert sum(1 for m in agent.messages for b in m["content"] if "toolUse" in b) == TURNS
    return session.events
