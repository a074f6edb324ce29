"""middleware.integrations without any framework: the shared options, events and imports.

The integrations themselves run against their real frameworks in
tests/frameworks/test_integration_*.py; these tests need none.
"""

from __future__ import annotations

import importlib
import inspect
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, List

import anyio
import pytest

from ctx_compact.testing import count_tokens
from middleware import BudgetExceededError, CompactingSession, CompactionEvent, budgeted
from middleware._callables import Beside
from middleware.integrations._common import Compactor, HookOptions


def conversation(turns: int) -> List[Any]:
    messages: List[Any] = [{"role": "system", "content": "Be terse."}]
    for turn in range(turns):
        call = {"id": f"c{turn}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        messages += [
            {"role": "user", "content": f"Turn {turn}?"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{turn}", "content": "r" * 300},
            {"role": "assistant", "content": "Done."},
        ]
    return messages


def test_hook_options_are_budgeteds_options_but_messages_arg() -> None:
    budgeted_options = set(inspect.signature(budgeted).parameters) - {"max_tokens"}

    assert set(HookOptions.__annotations__) == budgeted_options - {"messages_arg"}


def test_the_fixed_tokens_count_against_the_budget() -> None:
    seen: List[CompactionEvent] = []
    compactor = Compactor("T", "test hook", 600, {"on_compact": seen.append}, wraps_call=False)
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    beside = compactor.beside(tools=[tool] * 4)
    fixed = beside.total
    messages = conversation(8)

    kept = compactor.compacted(messages, beside)

    (event,) = seen
    assert fixed == 4 * count_tokens(tool)
    assert event.tokens_after == sum(map(count_tokens, kept)) + fixed <= 600
    assert event.tokens_before == sum(map(count_tokens, messages)) + fixed
    assert event.function == "test hook"
    assert all(any(m is own for own in messages) for m in kept)


def test_an_active_session_records_the_event_sync_and_async() -> None:
    compactor = Compactor("T", "test hook", 600, {}, wraps_call=True)
    messages = conversation(8)
    sent: List[List[Any]] = []

    async def asend(kept: List[Any]) -> str:
        sent.append(kept)
        return "reply"

    with CompactingSession() as session:
        assert (
            compactor.run(messages, Beside(), lambda kept: sent.append(kept) or "reply") == "reply"
        )
        assert anyio.run(compactor.arun, messages, Beside(), asend) == "reply"

    assert [len(e.messages) for e in session.events] == [len(kept) for kept in sent]
    assert all(event.dropped for event in session.events)


def test_a_sync_call_refuses_an_async_summarizer() -> None:
    async def summarize(dropped: List[Any]) -> str:
        return "summary"

    compactor = Compactor("T", "test hook", 600, {"summarize": summarize}, wraps_call=True)

    with pytest.raises(TypeError, match="a sync model call cannot await"):
        compactor.compacted(conversation(8), Beside())


def test_an_unmet_budget_is_reported_then_raised_with_on_overflow_raise() -> None:
    seen: List[CompactionEvent] = []
    options = {"on_overflow": "raise", "on_compact": seen.append}
    compactor = Compactor("T", "test hook", 600, options, wraps_call=True)
    sent: List[Any] = []

    with pytest.raises(BudgetExceededError):
        compactor.run(
            conversation(8), Beside(tools=590), sent.append
        )  # the tools alone nearly fill it

    assert sent == []
    (event,) = seen
    assert not event.fits


def test_a_failing_hook_never_breaks_the_call(caplog: pytest.LogCaptureFixture) -> None:
    def hook(event: CompactionEvent) -> None:
        raise RuntimeError("the hook failed")

    compactor = Compactor("T", "test hook", 600, {"on_compact": hook}, wraps_call=False)

    kept = compactor.compacted(conversation(8), Beside())

    assert kept
    assert "on_compact hook" in caplog.text


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"messages_arg": "x"}, TypeError, "messages_arg"),
        ({"nope": 1}, TypeError, "'nope'"),
        ({"on_overflow": "retry"}, ValueError, "cannot retry"),
        ({"keep_head": -1}, ValueError, "keep_head"),
        ({"on_compact": 3}, TypeError, "on_compact"),
    ],
)
def test_bad_options_are_refused_naming_them(options: Any, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        Compactor("T", "test hook", 600, options, wraps_call=False)


# Each integration module, the framework module it imports first, and the pip line it names.
INTEGRATIONS = {
    "langchain": ("langchain", "langchain>=1"),
    "langgraph": ("langgraph", "langgraph"),
    "pydantic_ai": ("pydantic_ai", "pydantic-ai-slim"),
    "openai_agents": ("agents", "openai-agents"),
}


@pytest.fixture
def no_frameworks(monkeypatch: pytest.MonkeyPatch) -> None:
    # A None entry in sys.modules makes importing it raise ImportError, as when it is
    # not installed; the integration modules are imported afresh.
    # Their submodules too, which an earlier test in this process may have imported.
    for framework, _ in INTEGRATIONS.values():
        for name in [n for n in sys.modules if n.startswith(f"{framework}.")]:
            monkeypatch.setitem(sys.modules, name, None)
        monkeypatch.setitem(sys.modules, framework, None)
    for name in INTEGRATIONS:
        monkeypatch.delitem(sys.modules, f"middleware.integrations.{name}", raising=False)


@pytest.mark.usefixtures("no_frameworks")
@pytest.mark.parametrize("name", list(INTEGRATIONS))
def test_an_integration_without_its_framework_names_the_pip_line(name: str) -> None:
    _, pip = INTEGRATIONS[name]

    with pytest.raises(ImportError, match=rf"install it with: pip install '{pip}'"):
        importlib.import_module(f"middleware.integrations.{name}")


@pytest.mark.slow
def test_the_package_imports_no_framework() -> None:
    frameworks = sorted({framework for framework, _ in INTEGRATIONS.values()})
    code = (
        "import sys, middleware, middleware.integrations, middleware.integrations._common; "
        f"print([m for m in {frameworks!r} if m in sys.modules])"
    )

    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert found.stdout.strip() == "[]"


ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("page", "module"),
    [
        ("langchain.md", "langchain"),
        ("langgraph.md", "langgraph"),
        ("pydantic-ai.md", "pydantic_ai"),
        ("openai-agents.md", "openai_agents"),
    ],
)
def test_each_page_opens_with_its_pip_line_and_an_offline_agent(page: str, module: str) -> None:
    # The examples themselves run in tests/test_docs.py, where the framework is installed.
    text = (ROOT / "docs" / "integrations" / page).read_text("utf-8")
    (first, pip), (second, agent) = re.findall(r"```(\w+)\n(.*?)```", text, re.S)[:2]

    assert first == "sh"
    # This project from the checkout, with the extra named as the page is (the package index's
    # ctx-compact is another project); tests/test_install_commands.py checks the rest of the line.
    assert pip.startswith(f'python -m pip install ".[{Path(page).stem}]"')
    assert second == "python"
    assert f"from middleware.integrations.{module} import " in agent
    assert "FakeProvider(" in agent
    assert f"integrations/{page}" in (ROOT / "mkdocs.yml").read_text("utf-8")
    assert f"(docs/integrations/{page})" in (ROOT / "README.md").read_text("utf-8")
