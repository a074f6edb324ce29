"""ctx-compact --max-result-tokens, --pin-role and --pin-first-user."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Dict, List

import pytest
from helpers import run_cli as run

from ctx_compact import check_pairing, clear_tool_results, compact, truncate_tool_results
from ctx_compact.cli import main

LOG = "".join(f"line {n} of the build log\n" for n in range(3000))
MARKER = re.compile(r"\[\.\.\. \d+ characters \(about \d+ tokens\) cut \.\.\.\]")


def agent(turns: int = 6) -> List[Dict[str, Any]]:
    messages: List[Dict[str, Any]] = [
        {"role": "system", "content": "You fix builds."},
        {"role": "user", "content": "TASK: find why the build fails."},
    ]
    for n in range(turns):
        name = "read_log" if n % 2 else "grep"
        call = {"id": f"c{n}", "type": "function", "function": {"name": name, "arguments": "{}"}}
        messages.append({"role": "user", "content": f"Step {n}."})
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{n}", "content": LOG[: 2000 * (n + 1)]})
        messages.append({"role": "assistant", "content": f"Step {n} done."})
    return messages


def test_every_result_over_n_is_cut_before_anything_is_dropped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    messages = agent()
    status, out, err = run(
        ["--max-tokens", "100000", "--max-result-tokens", "300", "--stats"],
        messages,
        tmp_path,
        capsys,
    )
    assert status == 0
    assert out == truncate_tool_results(messages, max_result_tokens=300).messages
    results = [m["content"] for m in out if m["role"] == "tool"]
    assert all(len(MARKER.findall(text)) == 1 for text in results[1:])
    assert all(text.startswith("line 0 of the build log") for text in results)
    assert "dropped 0" in err


def test_tool_caps_leave_other_tools_whole_without_a_star(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    messages = agent()
    _, out, _ = run(
        ["--max-tokens", "100000", "--max-result-tokens", "read_log=200"],
        messages,
        tmp_path,
        capsys,
    )
    for message, original in zip(out, messages):
        if message["role"] != "tool":
            continue
        name = "read_log" if int(message["tool_call_id"][1:]) % 2 else "grep"
        assert (message["content"] == original["content"]) == (name == "grep")
    _, both, _ = run(
        [
            "--max-tokens",
            "100000",
            "--max-result-tokens",
            "read_log=200",
            "--max-result-tokens",
            "900",
        ],
        messages,
        tmp_path,
        capsys,
    )
    expected = truncate_tool_results(messages, max_result_tokens={"read_log": 200, "*": 900})
    assert both == expected.messages


def test_the_steps_in_order_clear_cut_then_drop(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    messages = agent()
    args = ["--max-tokens", "1500", "--clear-tool-results", "--max-result-tokens", "400"]
    status, out, _ = run(args, messages, tmp_path, capsys)
    assert status == 0
    cleared = clear_tool_results(messages, max_tokens=1500).messages
    cut = truncate_tool_results(cleared, max_result_tokens=400).messages
    assert out == compact(cut, max_tokens=1500).messages
    assert check_pairing(out) == []


def test_pinned_messages_stay_and_explain_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    messages = agent()
    args = ["--max-tokens", "4000", "--pin-first-user", "--pin-role", "system", "--explain"]
    status, out, err = run(args, messages, tmp_path, capsys)
    assert status == 0
    assert out[:2] == messages[:2]
    assert messages[1] not in compact(messages, max_tokens=4000).messages
    assert re.search(r"\n +1 +user +\d+ +1 +kept: pinned \(group kept whole\)", err)


def test_pin_role_keeps_every_message_of_the_role(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    messages = agent()
    _, out, _ = run(["--max-tokens", "1000", "--pin-role", "user"], messages, tmp_path, capsys)
    users = [m for m in messages if m["role"] == "user"]
    assert [m for m in out if m["role"] == "user"] == users
    assert check_pairing(out) == []


def test_pinned_results_are_neither_cleared_nor_cut(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    messages = agent()
    args = [
        "--max-tokens", "100000", "--max-result-tokens", "100", "--pin-role", "tool",
        "--clear-tool-results",
    ]  # fmt: skip
    _, out, _ = run(args, messages, tmp_path, capsys)
    assert out == messages


def test_explain_marks_a_cut_result(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--max-tokens", "100000", "--max-result-tokens", "300", "--explain"]
    _, _, err = run(args, agent(), tmp_path, capsys)
    assert re.search(r"tool .* kept: input already fits; result cut to its head and tail", err)


def test_the_same_in_a_dataset_with_workers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(agent(n)) + "\n" for n in range(1, 9)))
    outputs = []
    for jobs in ("1", "2"):
        out = tmp_path / f"out{jobs}.jsonl"
        args = ["--jsonl", "--jobs", jobs, "--max-tokens", "900", "--max-result-tokens", "250"]
        assert main([*args, "--pin-first-user", "-o", str(out), str(source)]) == 0
        outputs.append(out.read_text())
    assert outputs[0] == outputs[1]
    for line in outputs[0].splitlines():
        conversation = json.loads(line)
        assert conversation[1]["content"].startswith("TASK")


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("0", "positive integer"),
        ("read=x", "positive integer"),
        ("=5", "TOOL=N"),
        ("-3", "positive"),
    ],
)
def test_a_wrong_cap_is_a_usage_error(
    value: str, words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "in.json"
    source.write_text(json.dumps(agent()))
    assert main(["--max-tokens", "100", "--max-result-tokens", value, str(source)]) == 2
    assert words in capsys.readouterr().err


def test_check_and_repair_take_no_compaction_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "in.json"
    source.write_text(json.dumps(agent()))
    assert main(["check", "--pin-first-user", str(source)]) == 2
    assert "--pin-first-user" in capsys.readouterr().err
