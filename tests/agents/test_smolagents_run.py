"""smolagents' ToolCallingAgent on its OpenAI model, kept in budget by intercepting the SDK.

The agent keeps its memory across runs (``reset=False``) and its system prompt
is long (about 1,000 tokens of instructions), so the requests pass the kit's
limit within a few runs. Each run is two tool-calling steps (the kit's model
calls ``get_report`` again instead of ``final_answer``) and the final-answer
request ``max_steps`` leads to. See ``_scenario.py``.
"""

from __future__ import annotations

from importlib.metadata import version

from smolagents import OpenAIServerModel, ToolCallingAgent, tool

from ctx_compact.testing import FakeProvider
from middleware import CompactingSession

from ._scenario import LIMIT, check, get_report, prompts

VERSION = version("smolagents")
RUNS = 8


def test_a_long_tool_run_stays_within_the_limit(provider: FakeProvider) -> None:
    model = OpenAIServerModel(
        model_id="gpt-4o",
        api_base=provider.openai_url,
        api_key="test",
        client_kwargs={"max_retries": 0},
    )
    agent = ToolCallingAgent(tools=[tool(get_report)], model=model, max_steps=2, verbosity_level=-1)

    with CompactingSession(max_tokens=LIMIT, intercept="openai") as session:
        for prompt in prompts(RUNS):
            agent.run(prompt, reset=False)

    check(
        "smolagents ToolCallingAgent (intercept)",
        VERSION,
        "chat",
        provider,
        session.events,
        expected_requests=3 * RUNS,
    )
    assert len(agent.memory.steps) > 3 * RUNS  # the memory kept everything
