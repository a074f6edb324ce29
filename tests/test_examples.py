"""The runnable examples run as documented and print consistent figures."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CALL = re.compile(
    r"^turn +(\d+), call +(\d+): +(\d+) -> +(\d+) messages, +([\d,]+) -> +([\d,]+) tokens"
    r"(?:, (\d+) dropped)?$"
)
BUDGET = re.compile(r"^budget ([\d,]+) tokens, keep_tail=\d+, (\d+) user turns$")
HISTORY = re.compile(
    r"^history: (\d+) messages, [\d,]+ tokens; "
    r"largest prompt the model received: ([\d,]+) tokens$"
)
STATS = re.compile(
    r"^session: (\d+) calls, (\d+) compacted, ([\d,]+) messages dropped, "
    r"([\d,]+) -> ([\d,]+) tokens \(([\d,]+) saved\)$"
)


def number(text: str) -> int:
    return int(text.replace(",", ""))


def run_chatbot() -> str:
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "chatbot.py")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    return result.stdout


def test_chatbot_keeps_the_conversation_inside_its_budget() -> None:
    output = run_chatbot()
    lines = output.splitlines()

    budget_line = BUDGET.match(lines[0])
    assert budget_line, lines[0]
    budget, user_turns = number(budget_line[1]), int(budget_line[2])

    calls = [CALL.match(line) for line in lines[1:-2]]
    assert all(calls), [line for line, m in zip(lines[1:-2], calls) if not m]
    assert [int(m[2]) for m in calls if m] == list(range(1, len(calls) + 1))
    assert {int(m[1]) for m in calls if m} == set(range(1, user_turns + 1))

    before = after = dropped = compacted = 0
    for m in calls:
        assert m
        sent, passed = int(m[3]), int(m[4])
        tokens_before, tokens_after = number(m[5]), number(m[6])
        assert tokens_after <= budget
        assert tokens_after <= tokens_before
        assert sent - passed == int(m[7] or 0)
        before += tokens_before
        after += tokens_after
        dropped += int(m[7] or 0)
        compacted += m[7] is not None
    assert compacted > len(calls) / 2  # the history outgrew the budget early on

    history = HISTORY.match(lines[-2])
    assert history, lines[-2]
    assert number(history[2]) <= budget

    stats = STATS.match(lines[-1])
    assert stats, lines[-1]
    assert int(stats[1]) == len(calls)
    assert int(stats[2]) == compacted
    assert number(stats[3]) == dropped
    assert (number(stats[4]), number(stats[5])) == (before, after)
    assert number(stats[6]) == before - after


def test_chatbot_is_deterministic() -> None:
    assert run_chatbot() == run_chatbot()
