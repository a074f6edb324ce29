"""How ``ctx-compact`` ends when a run cannot go on: one line on standard error, its status.

Outputs that would overwrite one another, a parent or a worker killed outright,
a full disk, a file-size limit, a line too large for memory, and input that
would write control characters to the terminal.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, List

import pytest

from ctx_compact.cli import main

ROOT = Path(__file__).resolve().parent.parent
WEATHER = ROOT / "examples" / "weather.json"
MESSAGES: List[Any] = json.loads(WEATHER.read_text(encoding="utf-8"))
EXAMPLE = ["--max-tokens", "150", "--keep-tail", "2"]

posix = pytest.mark.skipif(sys.platform == "win32", reason="POSIX files and signals")


def jsonl(*values: Any) -> bytes:
    return "".join(json.dumps(v, ensure_ascii=False) + "\n" for v in values).encode("utf-8")


# --- outputs that are one file --------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "complaint"),
    [
        (
            ["-o", "same.jsonl", "--report", "same.jsonl", "--rejects", "same.jsonl"],
            "--output and --report name the same file (same.jsonl)",
        ),
        (["--report", "r.jsonl", "--rejects", "./r.jsonl"], "--report and --rejects name the same"),
        (["-o", "sub/../out.jsonl", "--rejects", "out.jsonl"], "--output and --rejects name"),
        (["--report", "data.jsonl"], "--report is the input file (data.jsonl)"),
        (["-o", "data.jsonl", "--rejects", "data.jsonl"], "--output and --rejects name the same"),
    ],
)
def test_two_outputs_naming_one_file_are_a_usage_error(
    options: List[str],
    complaint: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    data = jsonl(MESSAGES, [{"role": "user"}, 1])
    (tmp_path / "data.jsonl").write_bytes(data)
    (tmp_path / "same.jsonl").write_bytes(b"kept\n")
    assert main(["--jsonl", "--skip-invalid", *EXAMPLE, *options, "data.jsonl"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: ctx-compact")
    assert f"ctx-compact: error: {complaint}" in err
    assert (tmp_path / "data.jsonl").read_bytes() == data
    assert (tmp_path / "same.jsonl").read_bytes() == b"kept\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.jsonl", "same.jsonl", "sub"]


@posix
def test_outputs_reaching_one_file_by_links_are_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    target = tmp_path / "report.jsonl"
    target.write_bytes(b"kept\n")
    (tmp_path / "link.jsonl").symlink_to(target)
    os.link(target, tmp_path / "hard.jsonl")
    (tmp_path / "dangling.jsonl").symlink_to(tmp_path / "new.jsonl")
    for first, second in [("link.jsonl", "hard.jsonl"), ("dangling.jsonl", "new.jsonl")]:
        options = ["--report", str(tmp_path / first), "--rejects", str(tmp_path / second)]
        assert main(["--jsonl", *EXAMPLE, *options, str(WEATHER)]) == 2
        assert "--report and --rejects name the same file" in capsys.readouterr().err
    assert target.read_bytes() == b"kept\n"
    assert not (tmp_path / "new.jsonl").exists()


@posix
def test_a_report_on_the_file_behind_standard_input_or_output_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    data = tmp_path / "data.jsonl"
    data.write_bytes(jsonl(MESSAGES))
    with open(data, "rb") as stdin:
        monkeypatch.setattr(sys, "stdin", stdin)
        assert main(["--jsonl", *EXAMPLE, "--report", str(data)]) == 2
    assert "--report is the input file" in capsys.readouterr().err
    with open(tmp_path / "out.jsonl", "wb") as stdout:
        monkeypatch.setattr(sys, "stdout", stdout)
        rejects = ["--rejects", str(tmp_path / "out.jsonl")]
        assert main(["--jsonl", *EXAMPLE, *rejects, str(data)]) == 2
    assert "standard output and --rejects name the same file" in capsys.readouterr().err
    assert data.read_bytes() == jsonl(MESSAGES)


def test_devices_and_the_output_on_the_input_are_still_allowed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    data = tmp_path / "data.jsonl"
    data.write_bytes(jsonl(MESSAGES))
    devices = ["--report", os.devnull, "--rejects", os.devnull]
    assert main(["--jsonl", *EXAMPLE, "-o", str(data), *devices, str(data)]) == 0
    assert capsys.readouterr().err == ""
    assert len(data.read_bytes().splitlines()) == 1


# --- control characters ---------------------------------------------------------------------


def test_explain_escapes_control_characters_as_check_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    # An escape sequence in a role could retitle or clear the terminal --explain writes to.
    hostile = "\x1b]0;owned\x07\x1b[2J\r\ud800"
    messages = [{"role": "system", "content": "s"}, {"role": hostile, "content": "x"}]
    data = tmp_path / "data.jsonl"
    data.write_text(json.dumps(messages) + "\n", encoding="ascii")
    assert main(["--jsonl", "--explain", *EXAMPLE, str(data)]) == 0
    err = capsys.readouterr().err
    assert not set(err) & {"\x1b", "\x07", "\r", "\ud800"}
    row = err.splitlines()[3].split()
    assert row[:2] == ["1", "\\u001b]0;owned\\u0007\\u001b[2J\\r\\ud800"]
