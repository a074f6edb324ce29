"""``ctx-compact repair``: files and datasets written repaired, the changes reported, statuses."""

from __future__ import annotations

import gzip
import io
import json
import os
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest

from ctx_compact import check_pairing, repair_pairing
from ctx_compact.cli import main
from ctx_compact.testing.anthropic import validate_messages
from ctx_compact.testing.openai_chat import validate_chat_completions

ROOT = Path(__file__).resolve().parent.parent
BROKEN = ROOT / "examples" / "broken.json"
WEATHER = ROOT / "examples" / "weather.json"
BROKEN_MESSAGES: List[Any] = json.loads(BROKEN.read_text(encoding="utf-8"))
CHAT = [
    {"role": "user", "content": "hi"},
    {"role": "tool", "tool_call_id": "lost", "content": "1"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    },
]
CLAUDE = [
    {"role": "user", "content": "q"},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "x", "name": "f", "input": {}}]},
    {"role": "user", "content": [{"type": "text", "text": "so?"}]},
]


def lines(*values: Any) -> bytes:
    return "".join(json.dumps(v) + "\n" for v in values).encode("utf-8")


def read_jsonl(path: Path) -> List[Any]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_a_file_is_written_repaired_and_the_summary_says_so(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["repair", str(BROKEN)]) == 0
    out, err = capsys.readouterr()
    repaired = json.loads(out)
    assert repaired == repair_pairing(BROKEN_MESSAGES).messages
    assert check_pairing(repaired) == []
    validate_chat_completions({"model": "gpt-4o", "messages": repaired})  # no 400
    assert out == json.dumps(repaired, indent=2, ensure_ascii=False) + "\n"
    assert err == "ctx-compact: repaired 1 of 1 conversation (1 change for 1 problem)\n"


def test_explain_lists_every_change(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["repair", "--explain", str(BROKEN)]) == 0
    err = capsys.readouterr().err
    assert err.splitlines()[0] == (
        f"{BROKEN}: message 2 [openai dropped_result] call_1 (repairs orphan_tool_result)"
    )


def test_a_valid_file_is_written_as_it_is(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["repair", "--indent", "0", str(WEATHER)]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == json.loads(WEATHER.read_text(encoding="utf-8"))
    assert err == "ctx-compact: no pairing problems in 1 conversation\n"


def test_answer_unanswered_with_a_placeholder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "chat.json"
    source.write_text(json.dumps({"model": "gpt-4o", "messages": CHAT}), encoding="utf-8")
    argv = ["repair", "--answer-unanswered", "--placeholder", "gone", str(source)]
    assert main(argv) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["model"] == "gpt-4o"  # the holder's other keys are kept
    assert body["messages"][-1] == {"role": "tool", "tool_call_id": "a", "content": "gone"}
    validate_chat_completions(body)


def test_a_dataset_is_repaired_line_by_line_with_a_report(tmp_path: Path) -> None:
    source = tmp_path / "train.jsonl"
    weather = json.loads(WEATHER.read_text(encoding="utf-8"))
    source.write_bytes(lines(CHAT, {"messages": CLAUDE, "id": 7}, weather))
    out, report = tmp_path / "fixed.jsonl.gz", tmp_path / "report.jsonl"
    argv = ["repair", "--jsonl", "-o", str(out), "--report", str(report), str(source)]
    assert main(argv) == 0
    with gzip.open(out, "rt", encoding="utf-8") as fixed:
        written = [json.loads(line) for line in fixed]
    assert written[0] == [CHAT[0]]
    assert written[1]["id"] == 7
    validate_messages({"model": "c", "max_tokens": 5, "messages": written[1]["messages"]})
    assert written[2] == weather
    records: List[Dict[str, Any]] = read_jsonl(report)
    assert [r["line"] for r in records] == [1, 2, 3]
    assert records[0] == {
        "line": 1,
        "problems": 2,
        "changes": [
            {
                "index": 1,
                "action": "dropped_result",
                "ids": ["lost"],
                "provider": "openai",
                "problem": "orphan_tool_result",
                "into": None,
            },
            {
                "index": 2,
                "action": "dropped_call",
                "ids": ["a"],
                "provider": "openai",
                "problem": "missing_tool_results",
                "into": None,
            },
            {
                "index": 2,
                "action": "dropped_empty",
                "ids": ["a"],
                "provider": "openai",
                "problem": "missing_tool_results",
                "into": None,
            },
        ],
    }
    assert records[2] == {"line": 3, "problems": 0, "changes": []}


def test_jobs_give_the_same_output(tmp_path: Path) -> None:
    source = tmp_path / "train.jsonl"
    source.write_bytes(lines(*([CHAT, CLAUDE] * 20)))
    one, two = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    assert main(["repair", "--jsonl", "-o", str(one), str(source)]) == 0
    assert main(["repair", "--jsonl", "--jobs", "2", "-o", str(two), str(source)]) == 0
    assert one.read_bytes() == two.read_bytes()


def test_the_output_may_be_the_input_and_is_replaced_only_on_success(tmp_path: Path) -> None:
    source = tmp_path / "train.jsonl"
    source.write_bytes(lines(CHAT, CHAT))
    assert main(["repair", "--jsonl", "-o", str(source), str(source)]) == 0
    assert read_jsonl(source) == [[CHAT[0]], [CHAT[0]]]
    bad = lines(CHAT) + b"{not json\n"
    source.write_bytes(bad)
    assert main(["repair", "--jsonl", "-o", str(source), str(source)]) == 2
    assert source.read_bytes() == bad  # untouched, no temporary file left
    assert os.listdir(tmp_path) == ["train.jsonl"]


def test_bad_lines_are_skipped_with_skip_invalid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "train.jsonl"
    unreadable = {"role": "user", "tool_calls": [{"id": "a"}]}  # no format reads it
    source.write_bytes(lines(CHAT, [unreadable], CHAT))
    rejects = tmp_path / "bad.jsonl"
    argv = ["repair", "--jsonl", "--skip-invalid", "--rejects", str(rejects), str(source)]
    assert main(argv) == 4
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 2
    assert "train.jsonl:2: message 0" in err
    assert err.splitlines()[-1].startswith("ctx-compact: repaired 2 of 2 conversations")
    assert read_jsonl(rejects) == [[unreadable]]


def test_a_message_no_format_reads_stops_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "bad.json"
    source.write_text(json.dumps([{"role": "user", "tool_calls": [{"id": "a"}]}]))
    assert main(["repair", str(source)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"ctx-compact: {source}: message 0: ")


def test_standard_input_and_output(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    data = lines(CHAT, CHAT)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
    assert main(["repair", "--jsonl"]) == 0
    out = capsys.readouterr().out
    assert [json.loads(line) for line in out.splitlines()] == [[CHAT[0]], [CHAT[0]]]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--placeholder", "x"], "--placeholder needs --answer-unanswered"),
        (["--answer-unanswered", "--placeholder", ""], "--placeholder must not be empty"),
        (["--jsonl", "--indent", "2"], "--indent cannot be used with --jsonl"),
        (["--report", "r.jsonl"], "--report needs --jsonl"),
        (
            ["--max-tokens", "5"],
            "unrecognized option --max-tokens: it is an option of compaction, not of"
            " ctx-compact repair",
        ),
        (["--answer"], "unrecognized option --answer (did you mean --answer-unanswered?)"),
    ],
)
def test_usage_errors(argv: List[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["repair", *argv, str(BROKEN)]) == 2
    assert message in capsys.readouterr().err


def test_a_file_named_repair_is_still_compacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("repair").write_text(WEATHER.read_text(encoding="utf-8"), encoding="utf-8")
    assert main(["--max-tokens", "1000", "repair"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(WEATHER.read_text(encoding="utf-8"))


def test_help_lists_the_statuses(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["repair", "--help"]) == 0
    out = capsys.readouterr().out
    assert "exit status:\n  0  every conversation was written" in out
    assert "--answer-unanswered" in out
    assert main(["--help"]) == 0
    assert "ctx-compact repair [--jsonl] [FILE]" in capsys.readouterr().out
