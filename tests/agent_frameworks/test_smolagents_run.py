"""smolagents' ToolCallingAgent on its OpenAI model, kept in budget by intercepting the SDK.

The agent keeps its memory across runs (``reset=False``) and its system prompt
is long (about 1,000 tokens of instructions), so the requests pass the kit's
limit within a few runs. Each run is two tool-calling steps (the kit's model
calls ``get_report`` again instead of ``final_answer``) and the final-answer
request ``max_steps`` leads to. See ``_scenario.py``.
"""

from __future__ import annotations

from importlib.metadata import version

import pytest
from smolagents import OpenAIServerModel, ToolCallingAgent, tool

from ctx_compact.testing import FakeProvider
from middleware import CompactingSession

from ._scenario import LIMIT, check, get_report, prompts

VERSION = version("smolagents")
RUNS = 8


@pytest.mark.parametrize("retry", [False, True], ids=["limit", "lower-limit-retry"])
def test_a_long_tool_run_stays_within_the_limit(provider: FakeProvider, retry: bool) -> None:
    # Its system prompt and last steps alone are about 1,340 tokens: the most a retry can cut.
    retry_limit = LIMIT - 100 if retry else None
    if retry_limit is not None:
        provider.context_limit = retry_limit
    model = OpenAIServerModel(
        model_id="gpt-4o",
        api_base=provider.openai_url,
        api_key="test",
        client_kwargs={"max_retries": 0},
    )
    agent = ToolCallingAgent(tools=[tool(get_report)], model=model, max_steps=2, verbosity_level=-1)

    overflow = "retry" if retry else "call"
    with CompactingSession(max_tokens=LIMIT, intercept="openai", on_overflow=overflow) as session:
        for prompt in prompts(RUNS):
            agent.run(prompt, reset=False)

    check(
        f"smolagents ToolCallingAgent (intercept{', retry' if retry else ''})",
        VERSION,
        "chat",
        provider,
        session.events,
        expected_requests=3 * RUNS,
        retry_limit=retry_limit,
    )
    assert len(agent.memory.steps) > 3 * RUNS  # the memory kept everything
