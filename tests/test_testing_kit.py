"""The testing kit as a user's own test suite meets it: the pytest plugin's fixtures."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, List

import pytest

from ctx_compact.testing import FakeProvider
from middleware import CompactingSession, budgeted

pytest_plugins = ["pytester"]

# A user's suite on a machine without the SDKs: the inner conftest hides them.
WITHOUT_SDKS = """
import sys

import pytest

sys.modules["openai"] = None
sys.modules["anthropic"] = None


@pytest.fixture
def anyio_backend():
    return "asyncio"
"""


def test_the_fixtures_give_a_running_provider_and_clients(
    fake_provider: FakeProvider, fake_openai: Any, fake_anthropic: Any
) -> None:
    fake_openai.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
    )
    fake_anthropic.messages.create(
        model="claude-test", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
    )
    assert [r.path for r in fake_provider.requests] == ["/v1/chat/completions", "/v1/messages"]


def test_a_context_limit_is_enforced_and_budgeted_stays_under_it(
    fake_provider: FakeProvider, fake_openai: Any
) -> None:
    fake_provider.context_limit = 300
    history: List[Any] = [{"role": "system", "content": "Be brief."}]
    history += [{"role": "user", "content": f"question {i} " * 10} for i in range(40)]
    with pytest.raises(Exception, match="maximum context length"):
        fake_openai.chat.completions.create(model="gpt-4o", messages=history)

    @budgeted(max_tokens=300, keep_tail=1)
    def ask(messages: List[Any]) -> Any:
        return fake_openai.chat.completions.create(model="gpt-4o", messages=messages)

    with CompactingSession() as session:
        reply = ask(history)
    assert reply.usage.prompt_tokens <= 300
    assert session.events[0].provider_tokens == reply.usage.prompt_tokens


@pytest.mark.anyio
async def test_the_async_fixtures(
    fake_async_openai: Any, fake_async_anthropic: Any, fake_provider: FakeProvider
) -> None:
    await fake_async_openai.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
    )
    await fake_async_anthropic.messages.create(
        model="claude-test", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
    )
    assert len(fake_provider.requests) == 2


def test_tool_choice_none_is_answered_with_text(
    fake_provider: FakeProvider, fake_openai: Any, fake_anthropic: Any
) -> None:
    # The scripted model would call the tool; a request that turns tool use off gets text.
    fake_provider.tool_calls = 1
    ask = [{"role": "user", "content": "weather?"}]
    chat_tool = {"type": "function", "function": {"name": "weather", "parameters": {}}}
    tool = {"type": "function", "name": "weather", "parameters": {}}
    claude_tool = {"name": "weather", "input_schema": {"type": "object"}}

    def chat(**choice: Any) -> Any:
        reply = fake_openai.chat.completions.create(
            model="gpt-4o", messages=ask, tools=[chat_tool], **choice
        )
        return reply.choices[0].message.tool_calls

    def responses(**choice: Any) -> Any:
        reply = fake_openai.responses.create(model="gpt-4o", input=ask, tools=[tool], **choice)
        return [item.type for item in reply.output]

    def claude(**choice: Any) -> Any:
        reply = fake_anthropic.messages.create(
            model="claude-test", max_tokens=64, messages=ask, tools=[claude_tool], **choice
        )
        return [block.type for block in reply.content]

    assert chat()
    assert not chat(tool_choice="none")
    assert responses() == ["function_call"]
    assert responses(tool_choice="none") == ["message"]
    assert claude() == ["tool_use"]
    assert claude(tool_choice={"type": "none"}) == ["text"]


def test_the_plugin_serves_a_users_suite_outside_this_repository(tmp_path: Path) -> None:
    # A user's project: no conftest, only the installed package's pytest11 plugin.
    (tmp_path / "test_agent.py").write_text(
        textwrap.dedent(
            """
            def test_agent(fake_provider, fake_openai):
                fake_provider.tool_calls = 1
                reply = fake_openai.chat.completions.create(
                    model="gpt-4o",
                    messages=[{"role": "user", "content": "weather?"}],
                    tools=[{"type": "function", "function": {"name": "weather",
                            "parameters": {"type": "object", "properties": {}}}}],
                )
                assert reply.choices[0].message.tool_calls
            """
        )
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


def test_a_client_fixture_without_its_sdk_fails_naming_the_install_command(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(WITHOUT_SDKS)
    pytester.makepyfile(
        test_agent="""
        import pytest

        def test_openai(fake_openai):
            pass

        def test_anthropic(fake_anthropic):
            pass

        @pytest.mark.anyio
        async def test_async_openai(fake_async_openai):
            pass

        @pytest.mark.anyio
        async def test_async_anthropic(fake_async_anthropic):
            pass
        """
    )

    result = pytester.runpytest("-p", "no:cacheprovider")

    # Not skipped: a suite that skips every test goes green having tested nothing.
    result.assert_outcomes(errors=4)
    output = result.stdout.str()
    for fixture, sdk in [
        ("fake_openai", "openai"),
        ("fake_anthropic", "anthropic"),
        ("fake_async_openai", "openai"),
        ("fake_async_anthropic", "anthropic"),
    ]:
        assert f"{fixture} needs the {sdk} SDK" in output
    assert "Install it with: pip install openai" in output
    assert "Install it with: pip install anthropic" in output
    assert "@pytest.mark.skip_without_sdk" in output


def test_a_test_marked_skip_without_sdk_is_skipped_instead(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(WITHOUT_SDKS)
    pytester.makepyfile(
        test_marked="""
        import pytest

        @pytest.mark.skip_without_sdk
        def test_openai(fake_openai):
            pass
        """,
        test_module_marked="""
        import pytest

        pytestmark = pytest.mark.skip_without_sdk

        def test_anthropic(fake_anthropic):
            pass
        """,
        test_importorskip="""
        import pytest

        openai = pytest.importorskip("openai")

        def test_openai(fake_openai):
            pass
        """,
    )

    # --strict-markers: the plugin registers its marker.
    result = pytester.runpytest("-p", "no:cacheprovider", "--strict-markers", "-rs")

    result.assert_outcomes(skipped=3)
    result.stdout.fnmatch_lines(
        [
            "*fake_openai needs the openai SDK*Install it with: pip install openai*",
            "*fake_anthropic needs the anthropic SDK*Install it with: pip install anthropic*",
        ],
        consecutive=False,
    )


def test_with_the_sdks_installed_the_marker_changes_nothing(pytester: pytest.Pytester) -> None:
    pytest.importorskip("openai")
    pytester.makepyfile(
        test_agent="""
        import pytest

        @pytest.mark.skip_without_sdk
        def test_openai(fake_openai):
            assert fake_openai.models is not None
        """
    )

    pytester.runpytest("-p", "no:cacheprovider", "--strict-markers").assert_outcomes(passed=1)
