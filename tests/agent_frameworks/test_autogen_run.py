"""AutoGen's AssistantAgent on its OpenAI client, kept in budget by intercepting the SDK.

The agent's default model context keeps every message, so only
``CompactingSession(intercept="openai")`` keeps the requests under the kit's
limit; each turn is a tool call and a reflection on its result. See ``_scenario.py``.
"""

from __future__ import annotations

from importlib.metadata import version

import anyio
import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_ext.models.openai import OpenAIChatCompletionClient

from ctx_compact.testing import FakeProvider
from middleware import CompactingSession

from ._scenario import LIMIT, SYSTEM_PROMPT, TURNS, check, get_report, prompts

VERSION = version("autogen-agentchat")
# The model the kit reports in its replies: AutoGen warns when it differs from the client's.
MODEL = "gpt-4o-2024-08-06"


def client_for(provider: FakeProvider) -> OpenAIChatCompletionClient:
    return OpenAIChatCompletionClient(
        model=MODEL, base_url=provider.openai_url, api_key="test", max_retries=0
    )


@pytest.mark.parametrize("retry", [False, True], ids=["limit", "lower-limit-retry"])
def test_a_long_tool_run_stays_within_the_limit(provider: FakeProvider, retry: bool) -> None:
    retry_limit = LIMIT - 300 if retry else None
    if retry_limit is not None:
        provider.context_limit = retry_limit

    async def main() -> None:
        client = client_for(provider)
        agent = AssistantAgent(
            "weather",
            model_client=client,
            tools=[get_report],
            system_message=SYSTEM_PROMPT,
            reflect_on_tool_use=True,
        )
        try:
            for prompt in prompts():
                await agent.run(task=prompt)
        finally:
            await client.close()

    overflow = "retry" if retry else "call"
    with CompactingSession(max_tokens=LIMIT, intercept="openai", on_overflow=overflow) as session:
        anyio.run(main)

    check(
        f"AutoGen AssistantAgent (intercept{', retry' if retry else ''})",
        VERSION,
        "chat",
        provider,
        session.events,
        expected_requests=2 * TURNS,
        retry_limit=retry_limit,
    )
