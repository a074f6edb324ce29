"""The SDK examples run as documented against the local server and print consistent figures.

Each example runs in its own interpreter, as ``python examples/NAME.py`` from
the repository root; an example whose SDK is not installed is skipped.
"""

from __future__ import annotations

import functools
import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from typing import Tuple

import pytest

ROOT = Path(__file__).resolve().parents[2]

BUDGET = re.compile(r"^budget ([\d,]+) tokens, keep_tail=\d+, (\d+) turns, the local test server$")
CALL = re.compile(
    r"^turn +(\d+)\+?: +(\d+) -> +(\d+) messages, +([\d,]+) -> +([\d,]+) tokens, "
    r"provider ([\d,]+)$"
)
HISTORY = re.compile(
    r"^history: (\d+) messages, [\d,]+ tokens; largest request: ([\d,]+) tokens estimated, "
    r"([\d,]+) counted by the provider$"
)
STATS = re.compile(
    r"^session: (\d+) calls, (\d+) compacted, ([\d,]+) messages dropped, "
    r"([\d,]+) -> ([\d,]+) tokens \(([\d,]+) saved\), calibration (\d+\.\d{3})$"
)

EXAMPLES = [
    pytest.param("openai_chat", "openai", id="openai"),
    pytest.param("anthropic_messages", "anthropic", id="anthropic"),
    pytest.param("litellm_completion", "litellm", id="litellm"),
]


def number(text: str) -> int:
    return int(text.replace(",", ""))


@functools.cache  # each example runs once per test session
def run(example: str) -> Tuple[str, ...]:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / f"{example}.py")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return tuple(done.stdout.splitlines())


@pytest.mark.parametrize(("example", "package"), EXAMPLES)
def test_the_example_keeps_every_request_inside_its_budget(example: str, package: str) -> None:
    if importlib.util.find_spec(package) is None:
        pytest.skip(f"{package} is not installed")

    lines = run(example)

    header = BUDGET.match(lines[0])
    assert header, lines[0]
    budget, turns = number(header[1]), int(header[2])
    calls = [CALL.match(line) for line in lines[1:-2]]
    assert all(calls), [line for line, m in zip(lines[1:-2], calls) if not m]
    assert [int(m[1]) for m in calls if m] == list(range(1, turns + 1))  # one call per turn
    compacted = 0
    for m in calls:
        assert m
        before, after = int(m[2]), int(m[3])
        tokens_before, tokens_after, provider = number(m[4]), number(m[5]), number(m[6])
        assert after <= before
        assert tokens_after <= tokens_before
        assert provider <= budget  # what the provider counted, never over the budget
        compacted += after < before
    assert compacted > turns / 2  # the history outgrew the budget early on

    history = HISTORY.match(lines[-2])
    assert history, lines[-2]
    assert number(history[3]) == max(number(m[6]) for m in calls if m)

    stats = STATS.match(lines[-1])
    assert stats, lines[-1]
    assert (int(stats[1]), int(stats[2])) == (turns, compacted)
    assert number(stats[4]) == sum(number(m[4]) for m in calls if m)
    assert number(stats[5]) == sum(number(m[5]) for m in calls if m)


def test_the_openai_example_reports_the_providers_figure_as_the_estimate() -> None:
    # The local server counts as the default estimator does, so the figures agree exactly.
    pytest.importorskip("openai")

    lines = run("openai_chat")

    calls = [m for m in map(CALL.match, lines) if m]
    assert calls
    assert all(m[5] == m[6] for m in calls)
    assert lines[-1].endswith("calibration 1.000")


def test_the_anthropic_example_counts_the_system_prompt_on_top() -> None:
    # input_tokens covers the top-level system prompt too: a constant on top of the estimate.
    pytest.importorskip("anthropic")

    lines = run("anthropic_messages")

    calls = [m for m in map(CALL.match, lines) if m]
    extra = {number(m[6]) - number(m[5]) for m in calls}
    assert len(extra) == 1
    assert extra.pop() > 0
