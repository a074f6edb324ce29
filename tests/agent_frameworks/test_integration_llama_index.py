"""middleware.integrations.llama_index against the real LlamaIndex and the kit.

The agent's memory is ``CompactingMemory``: nothing intercepts the SDK, so the
memory alone keeps the requests under the kit's limit. Its budget leaves room
for one run's tool call and result, which ``FunctionAgent`` sends after the
memory's history without putting them in the memory until the run ends. See
``_scenario.py``.
"""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version
from typing import Any, List

import anyio
import pytest
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.llms import ChatMessage
from llama_index.llms.openai import OpenAI

from ctx_compact import estimate_tokens
from ctx_compact.testing import FakeProvider, count_tokens
from middleware import CompactingSession, CompactionEvent
from middleware.integrations.llama_index import CompactingMemory

from ._scenario import LIMIT, SYSTEM_PROMPT, TURNS, check, get_report, prompts

VERSION = version("llama-index-core")
# Room for one run's tool call and its result (about 210 tokens), kept outside the memory.
BUDGET = LIMIT - 300
# The workflow engine reads the agent's members with inspect, which touches pydantic's
# deprecated ``__fields__``, ``__fields_set__`` and the like (LlamaIndex's warnings, not ours).
pytestmark = pytest.mark.filterwarnings("ignore::pydantic.PydanticDeprecationWarning")


def run_agent(provider: FakeProvider, memory: CompactingMemory, turns: int) -> None:
    llm = OpenAI(model="gpt-4o", api_base=provider.openai_url, api_key="test", max_retries=0)
    agent = FunctionAgent(tools=[get_report], llm=llm, system_prompt=SYSTEM_PROMPT)

    async def main() -> None:
        for prompt in prompts(turns):
            await agent.run(prompt, memory=memory)

    anyio.run(main)


def make_memory(**options: Any) -> CompactingMemory:
    return CompactingMemory.from_defaults(
        max_tokens=BUDGET, system_prompt=SYSTEM_PROMPT, tools=[get_report], **options
    )


def test_a_long_tool_run_stays_within_the_limit(provider: FakeProvider) -> None:
    seen: List[CompactionEvent] = []
    memory = make_memory(on_compact=seen.append)

    with CompactingSession() as session:  # observes the memory's events
        run_agent(provider, memory, TURNS)

    # One read before each model call, and one as each run ends.
    events = [e for i, e in enumerate(session.events) if i % 3 != 2]
    check(
        "LlamaIndex CompactingMemory",
        VERSION,
        "chat",
        provider,
        events,
        expected_requests=2 * TURNS,
        tools_counted=True,
    )
    assert len(session.events) == 3 * TURNS
    assert seen == session.events
    assert {event.function for event in seen} == {"llama_index memory.get"}
    assert all(event.tokens_after <= BUDGET for event in seen)
    # The system prompt and the tool's schema are counted beside the history.
    tool = provider.requests[0].body["tools"][0]
    fixed = count_tokens({"role": "system", "content": SYSTEM_PROMPT}) + count_tokens(tool)
    for event in seen:
        assert event.tokens_after == sum(map(estimate_tokens, event.messages)) + fixed
    # Only what the agent read changed: the store kept every message.
    assert len(memory.get()) < len(memory.get_all())
    calls = [m for m in memory.get_all() if m.additional_kwargs.get("tool_calls")]
    assert len(calls) == TURNS


def test_summaries_and_cleared_results_are_chat_messages(provider: FakeProvider) -> None:
    async def summarize(dropped: List[Any]) -> str:
        return f"{len(dropped)} earlier messages about the weather."

    memory = make_memory(summarize=summarize, clear_tool_results={"placeholder": "[cleared]"})

    with CompactingSession() as session:
        run_agent(provider, memory, TURNS)

    assert any(event.cleared_results for event in session.events)
    assert any(event.summary for event in session.events)
    kept = anyio.run(memory.aget)
    assert all(isinstance(message, ChatMessage) for message in kept)
    assert "earlier messages about the weather" in str(kept[1].content)
    results = [m for m in kept if m.role == "tool"]
    assert results[0].content == "[cleared]"
    assert results[0].additional_kwargs["tool_call_id"]
    sent = [m for r in provider.requests for m in r.body["messages"] if m["role"] == "tool"]
    assert any(m["content"] == "[cleared]" for m in sent)


def test_a_sync_read_refuses_an_async_summarizer() -> None:
    async def summarize(dropped: List[Any]) -> str:
        return "summary"

    history = [ChatMessage(role="user", content=f"question {i} " * 50) for i in range(20)]
    memory = CompactingMemory.from_defaults(history, max_tokens=400, summarize=summarize)

    with pytest.raises(TypeError, match="cannot await"):
        memory.get()
    assert len(anyio.run(memory.aget)) < 20


def test_without_a_budget_the_llms_window_is_the_budget() -> None:
    llm = OpenAI(model="gpt-4o", api_key="test")

    memory = CompactingMemory.from_defaults(llm=llm)

    assert memory._compactor.options.max_tokens == llm.metadata.context_window == 128000
    with pytest.raises(TypeError, match="needs max_tokens or an llm"):
        CompactingMemory.from_defaults()


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"on_overflow": "retry"}, ValueError, "cannot retry"),
        ({"summary_role": "robot"}, ValueError, "summary_role"),
        ({"keep_tail": 1.5}, TypeError, "keep_tail"),
        ({"messages_arg": "messages"}, TypeError, "messages_arg"),
    ],
)
def test_bad_options_are_refused_naming_them(options: Any, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        make_memory(**options)


def test_without_llama_index_the_import_names_the_pip_line() -> None:
    code = (
        "import sys; sys.modules['llama_index'] = None\n"
        "import middleware.integrations.llama_index\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 1
    assert "pip install 'llama-index-core'" in done.stderr
