"""LlamaIndex's FunctionAgent on its OpenAI LLM, kept in budget by intercepting the SDK.

Fourteen runs share one memory that keeps everything (a ``ChatMemoryBuffer``
with a limit far above the kit's), so only ``CompactingSession(intercept="openai")``
keeps the requests under the kit's limit. See ``_scenario.py``.
"""

from __future__ import annotations

from importlib.metadata import version

import anyio
import pytest
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.memory import ChatMemoryBuffer
from llama_index.llms.openai import OpenAI

from ctx_compact.testing import FakeProvider
from middleware import CompactingSession

from ._scenario import LIMIT, SYSTEM_PROMPT, TURNS, check, get_report, prompts

VERSION = version("llama-index-core")
# The workflow engine reads the agent's members with inspect, which touches pydantic's
# deprecated ``__fields__``, ``__fields_set__`` and the like (LlamaIndex's warnings, not ours).
pytestmark = pytest.mark.filterwarnings("ignore::pydantic.PydanticDeprecationWarning")


@pytest.mark.parametrize("retry", [False, True], ids=["limit", "lower-limit-retry"])
def test_a_long_tool_run_stays_within_the_limit(provider: FakeProvider, retry: bool) -> None:
    llm = OpenAI(model="gpt-4o", api_base=provider.openai_url, api_key="test", max_retries=0)
    agent = FunctionAgent(tools=[get_report], llm=llm, system_prompt=SYSTEM_PROMPT)
    memory = ChatMemoryBuffer.from_defaults(token_limit=10**6)
    retry_limit = LIMIT - 300 if retry else None
    if retry_limit is not None:
        provider.context_limit = retry_limit

    async def main() -> None:
        for prompt in prompts():
            await agent.run(prompt, memory=memory)

    overflow = "retry" if retry else "call"
    with CompactingSession(max_tokens=LIMIT, intercept="openai", on_overflow=overflow) as session:
        anyio.run(main)

    check(
        f"LlamaIndex FunctionAgent (intercept{', retry' if retry else ''})",
        VERSION,
        "chat",
        provider,
        session.events,
        expected_requests=2 * TURNS,
        retry_limit=retry_limit,
    )
    calls = [m for m in memory.get_all() if m.additional_kwargs.get("tool_calls")]
    assert len(calls) == TURNS  # the memory kept everything: only the requests were compacted
