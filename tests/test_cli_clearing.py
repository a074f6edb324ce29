"""ctx-compact --clear-tool-results: clear old tool output before dropping any message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, List, Tuple

import pytest
from helpers import run_cli as run

from ctx_compact import check_pairing, clear_tool_results, compact, estimate_tokens
from ctx_compact.cli import main


def loop(results: int, tools: Tuple[str, ...] = ("read",)) -> List[Any]:
    messages: List[Any] = [{"role": "system", "content": "You read files."}]
    for i in range(results):
        name = tools[i % len(tools)]
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"c{i}",
                        "type": "function",
                        "function": {"name": name, "arguments": "{}"},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": "x" * 400})
    return messages


def test_clearing_alone_fits_and_keeps_every_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    messages = loop(8)
    total = sum(estimate_tokens(m) for m in messages)
    budget = total * 6 // 10
    status, out, err = run(
        ["--max-tokens", str(budget), "--clear-tool-results", "--stats"], messages, tmp_path, capsys
    )
    assert status == 0
    assert len(out) == len(messages)
    assert out == clear_tool_results(messages, max_tokens=budget).messages
    assert [m["content"] for m in out if m["role"] == "tool"][:2] == ["[cleared]", "[cleared]"]
    assert check_pairing(out) == []
    assert f"tokens {total} -> " in err


def test_keep_results_and_exclude_tool(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    messages = loop(8, tools=("read", "secret"))
    args = ["--max-tokens", "50", "--keep-head", "0", "--keep-tail", "0", "--clear-tool-results"]
    status, out, _ = run(
        [*args, "--keep-results", "0", "--exclude-tool", "secret"], messages, tmp_path, capsys
    )
    cleared = clear_tool_results(messages, max_tokens=50, keep=0, exclude_tools=("secret",))
    expected = compact(cleared.messages, max_tokens=50, keep_head=0, keep_tail=0)
    assert out == expected.messages
    assert any(m.get("content") == "x" * 400 for m in cleared.messages)  # secret: kept whole
    assert status == (0 if expected.fits else 3)


def test_a_repeated_option_does_not_carry_over_to_the_next_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # main() from a program: each call parses afresh, with no --exclude-tool of an earlier one.
    messages = loop(8, tools=("read", "secret"))
    args = ["--max-tokens", "50", "--keep-head", "0", "--keep-tail", "0", "--clear-tool-results"]
    run([*args, "--exclude-tool", "secret", "--exclude-tool", "read"], messages, tmp_path, capsys)
    _, out, _ = run([*args, "--keep-results", "0"], messages, tmp_path, capsys)
    cleared = clear_tool_results(messages, max_tokens=50, keep=0)
    assert out == compact(cleared.messages, max_tokens=50, keep_head=0, keep_tail=0).messages


def test_without_the_flag_results_are_the_specifications(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    messages = loop(8)
    _, out, _ = run(["--max-tokens", "600"], messages, tmp_path, capsys)
    assert out == compact(messages, max_tokens=600).messages


def test_jsonl_with_jobs_gives_the_same_lines(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(loop(4 + i % 5)) + "\n" for i in range(30)))
    outputs = []
    for jobs in ("1", "2"):
        target = tmp_path / f"out{jobs}.jsonl"
        options = ["--jsonl", "--max-tokens", "700", "--clear-tool-results", "--jobs", jobs]
        status = main([*options, "--no-progress", "-o", str(target), str(source)])
        assert status in (0, 3)
        outputs.append(target.read_bytes())
    assert outputs[0] == outputs[1]
    assert b"[cleared]" in outputs[0]


@pytest.mark.parametrize("share", [3, 5, 7, 9, 12])
@pytest.mark.parametrize("explain", [False, True])
def test_the_command_gives_what_clearing_then_compact_give(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], share: int, explain: bool
) -> None:
    # What the command line writes and reports is what the two public calls give, at
    # budgets that clear some, all or none of the results and drop some or none of the
    # messages.
    messages = loop(10, tools=("read", "grep"))
    total = sum(estimate_tokens(m) for m in messages)
    budget = total * share // 10
    args = ["--max-tokens", str(budget), "--keep-results", "1", "--clear-tool-results", "--stats"]
    status, out, err = run([*args, *(["--explain"] if explain else [])], messages, tmp_path, capsys)
    cleared = clear_tool_results(messages, max_tokens=budget, keep=1)
    expected = compact(cleared.messages, max_tokens=budget)
    assert out == expected.messages
    assert status == (0 if expected.fits else 3)
    assert f"tokens {total} -> {expected.tokens_after}," in err
    assert messages == loop(10, tools=("read", "grep"))  # the input is left as it was
