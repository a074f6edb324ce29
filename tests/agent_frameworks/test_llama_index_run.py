"""LlamaIndex's FunctionAgent on its OpenAI LLM, kept in budget by intercepting the SDK.

Fourteen runs share one memory that keeps everything (a ``ChatMemoryBuffer``
with a limit far above the kit's), so only ``CompactingSession(intercept="openai")``
keeps the requests under the kit's limit. See ``_scenario.py``.
"""

from __future__ import annotations

import json
from importlib.metadata import version
from typing import Any

import anyio
import httpx
import openai
import pytest
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.memory import ChatMemoryBuffer
from llama_index.llms.openai import OpenAI

from ctx_compact.testing import FakeProvider, large_tool_output
from middleware import CompactingSession
from middleware.integrations.llama_index import CompactingMemory

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


def read_log(name: str) -> str:
    """Read a service's whole log."""
    return large_tool_output(20_000, name="log")  # about 80 KB, far over the window


async def ask_about_the_log(provider: FakeProvider, memory: Any) -> Any:
    # The test's own HTTP client, closed when the run ends, refused or not.
    async with httpx.AsyncClient() as http:
        llm = OpenAI(
            model="gpt-4o",
            api_base=provider.openai_url,
            api_key="test",
            max_retries=0,
            async_http_client=http,
        )
        agent = FunctionAgent(tools=[read_log], llm=llm, system_prompt=SYSTEM_PROMPT)
        return await agent.run("TASK: which worker is slow?", memory=memory)


def test_a_tool_output_larger_than_the_window_is_cut_at_the_sdk(provider: FakeProvider) -> None:
    # The output sits in the agent's scratchpad, which no memory sees: the session cuts it
    # in the request, just enough to fit.
    memory = ChatMemoryBuffer.from_defaults(token_limit=10**6)
    with CompactingSession(max_tokens=LIMIT, intercept="openai") as session:
        anyio.run(ask_about_the_log, provider, memory)

    assert len(provider.requests) == 2  # the tool call, then the answer: none refused
    assert all(event.fits for event in session.events)
    (cut,) = session.events[-1].truncated_results
    assert cut.tool == "read_log"
    sent = json.dumps(provider.requests[-1].body)
    assert "log: first line of 20000 tokens" in sent
    assert "log: last line of 20000 tokens" in sent


def test_the_memory_alone_cannot_cut_the_scratchpad(provider: FakeProvider) -> None:
    # What docs/integrations/llama-index.md says: the memory cannot compact what it does
    # not hold, so the request carrying the output is refused for its length.
    memory = CompactingMemory.from_defaults(
        max_tokens=1200, system_prompt=SYSTEM_PROMPT, tools=[read_log]
    )
    with pytest.raises(openai.BadRequestError, match="context_length_exceeded"):
        anyio.run(ask_about_the_log, provider, memory)
