"""``ctx-compact --jsonl`` on real datasets: bad lines, reports, broken pairing, misfits."""

from __future__ import annotations

import gzip
import io
import json
import os
import sys
from pathlib import Path
from typing import Any, List

import pytest

from ctx_compact.cli import main

ROOT = Path(__file__).resolve().parent.parent
WEATHER = ROOT / "examples" / "weather.json"
BROKEN = ROOT / "examples" / "broken.json"
MESSAGES: List[Any] = json.loads(WEATHER.read_text(encoding="utf-8"))
BROKEN_MESSAGES: List[Any] = json.loads(BROKEN.read_text(encoding="utf-8"))
KEPT = [MESSAGES[0], *MESSAGES[4:]]
EXAMPLE = ["--max-tokens", "150", "--keep-head", "1", "--keep-tail", "2"]
HUGE = [{"role": "user", "content": "x" * 1000}]  # 257 tokens in one message that must be kept
ORPHAN = (
    "message 2 [openai orphan_tool_result] call_1: Invalid parameter: messages with role 'tool'"
    " must be a response to a preceeding message with 'tool_calls'."
)


def feed_stdin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


def jsonl(*values: Any) -> bytes:
    return "".join(json.dumps(v, ensure_ascii=False) + "\n" for v in values).encode("utf-8")


def lines_of(out: str) -> List[Any]:
    return [json.loads(line) for line in out.splitlines()]


# --- --skip-invalid, --rejects, --max-errors ------------------------------------------------

BAD_JSON = b'[{"role": "user"}, x]\n'
BAD_UTF8 = b'["\xff"]\n'
BAD_SHAPE = b'{"prompt": "hi"}\n'


def test_skip_invalid_goes_on_and_reports_each_bad_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    data = jsonl(MESSAGES) + BAD_JSON + jsonl(MESSAGES) + BAD_UTF8 + BAD_SHAPE + jsonl(MESSAGES)
    feed_stdin(monkeypatch, data)
    assert main(["--jsonl", *EXAMPLE, "--skip-invalid"]) == 4
    out, err = capsys.readouterr()
    assert lines_of(out) == [KEPT, KEPT, KEPT]
    assert err.splitlines() == [
        "ctx-compact: skipped <stdin>:2:20: invalid JSON: Expecting value",
        "ctx-compact: skipped <stdin>:4:3: not valid UTF-8 (byte 0xff)",
        "ctx-compact: skipped <stdin>:5: expected an array of messages or an object with a"
        ' "messages" array, got an object',
        "ctx-compact: skipped 3 bad lines",
    ]


def test_skip_invalid_without_bad_lines_is_status_0(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    feed_stdin(monkeypatch, jsonl(MESSAGES, MESSAGES))
    assert main(["--jsonl", *EXAMPLE, "--skip-invalid"]) == 0
    assert capsys.readouterr().err == ""


def test_rejects_file_holds_the_bad_lines_verbatim(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    rejects = tmp_path / "rejects.jsonl"
    cut = b'[{"role": "user", "content": "caf\xc3'  # the last line, cut inside a character
    feed_stdin(monkeypatch, jsonl(MESSAGES) + BAD_UTF8 + b"\r\n" + BAD_JSON + cut)
    args = ["--jsonl", *EXAMPLE, "--skip-invalid", "--rejects", str(rejects)]
    assert main(args) == 4
    assert rejects.read_bytes() == BAD_UTF8 + BAD_JSON + cut + b"\n"
    assert lines_of(capsys.readouterr().out) == [KEPT]


def test_max_errors_stops_at_the_next_bad_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    target = tmp_path / "out.jsonl"
    target.write_text("precious\n")
    feed_stdin(monkeypatch, jsonl(MESSAGES) + BAD_JSON + BAD_SHAPE + jsonl(MESSAGES))
    assert main(["--jsonl", *EXAMPLE, "--max-errors", "1", "-o", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "ctx-compact: skipped <stdin>:2:20: invalid JSON: Expecting value",
        'ctx-compact: <stdin>:3: expected an array of messages or an object with a "messages"'
        " array, got an object (a bad line beyond --max-errors 1: stopped)",
    ]
    assert target.read_text() == "precious\n"
    assert os.listdir(tmp_path) == ["out.jsonl"]


def test_max_errors_allows_exactly_n(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    feed_stdin(monkeypatch, jsonl(MESSAGES) + BAD_JSON + BAD_SHAPE + jsonl(MESSAGES))
    assert main(["--jsonl", *EXAMPLE, "--max-errors", "2"]) == 4
    assert lines_of(capsys.readouterr().out) == [KEPT, KEPT]


def test_max_errors_zero_stops_at_the_first_bad_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    feed_stdin(monkeypatch, jsonl(MESSAGES) + BAD_JSON)
    assert main(["--jsonl", *EXAMPLE, "--max-errors", "0"]) == 2
    assert "beyond --max-errors 0" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (["--skip-invalid"], "--skip-invalid needs --jsonl"),
        (["--max-errors", "3"], "--max-errors needs --jsonl"),
        (["--rejects", "r.jsonl"], "--rejects needs --jsonl"),
        (["--report", "r.jsonl"], "--report needs --jsonl"),
        (["--jsonl", "--report", "-"], "--report needs a file"),
        (["--jsonl", "--max-errors", "-1"], "argument --max-errors: must be a non-negative"),
    ],
)
def test_batch_option_usage_errors(
    args: List[str], complaint: str, capsys: pytest.CaptureFixture[str]
):
    assert main([str(WEATHER), *EXAMPLE, *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: ctx-compact")
    assert f"ctx-compact: error: {complaint}" in err


# --- --report -------------------------------------------------------------------------------


def test_report_has_one_line_per_conversation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    report = tmp_path / "report.jsonl"
    data = jsonl(MESSAGES) + b"\n" + BAD_JSON + jsonl({"id": 1, "messages": HUGE})
    feed_stdin(monkeypatch, data)
    assert main(["--jsonl", *EXAMPLE, "--skip-invalid", "--report", str(report)]) == 4
    assert lines_of(report.read_text()) == [
        {
            "line": 1,
            "messages_before": 10,
            "messages_after": 7,
            "tokens_before": 195,
            "tokens_after": 124,
            "dropped": 3,
            "fits": True,
        },
        {
            "line": 4,
            "messages_before": 1,
            "messages_after": 1,
            "tokens_before": 257,
            "tokens_after": 257,
            "dropped": 0,
            "fits": False,
        },
    ]
    capsys.readouterr()


# --- exit status 3 names the conversations --------------------------------------------------


def test_status_3_names_every_misfit_up_to_ten_and_counts_the_rest(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    values = [HUGE if n % 2 else MESSAGES for n in range(30)]  # lines 2, 4, ..., 30 do not fit
    feed_stdin(monkeypatch, jsonl(*values))
    assert main(["--jsonl", *EXAMPLE]) == 3
    err = capsys.readouterr().err
    named = ", ".join(f"<stdin>:{n}" for n in range(2, 21, 2))
    assert err == f"ctx-compact: 15 of 30 conversations do not fit within 150: {named} and 5 more\n"


def test_skipped_lines_outrank_misfits_in_the_status_and_the_summary_says_both(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    feed_stdin(monkeypatch, jsonl(HUGE, MESSAGES) + BAD_JSON)
    assert main(["--jsonl", *EXAMPLE, "--skip-invalid"]) == 4
    assert capsys.readouterr().err.splitlines()[-2:] == [
        "ctx-compact: 1 of 2 conversations do not fit within 150: <stdin>:1",
        "ctx-compact: skipped 1 bad line; 1 of 2 conversations do not fit within 150"
        " (status 4 outranks 3)",
    ]


def test_a_run_stopped_by_a_bad_line_points_to_skip_invalid(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    feed_stdin(monkeypatch, jsonl(MESSAGES) + BAD_JSON + jsonl(MESSAGES))
    assert main(["--jsonl", *EXAMPLE]) == 2
    out, err = capsys.readouterr()
    assert lines_of(out) == [KEPT]
    assert err.splitlines() == [
        "ctx-compact: <stdin>:2:20: invalid JSON: Expecting value",
        "ctx-compact: stopped at line 2; --skip-invalid skips such lines and goes on"
        " (--rejects FILE keeps them)",
    ]


def test_skipped_lines_are_shown_up_to_20_then_counted_like_pairing_warnings(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    feed_stdin(monkeypatch, jsonl(MESSAGES) + BAD_SHAPE * 124)
    assert main(["--jsonl", *EXAMPLE, "--skip-invalid"]) == 4
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 21
    assert err[19].startswith("ctx-compact: skipped <stdin>:21: expected an array")
    assert err[20] == (
        "ctx-compact: skipped 124 bad lines (104 not shown; --rejects FILE keeps them all,"
        " with why each was skipped)"
    )


@pytest.mark.parametrize(
    ("name", "sidecar"),
    [
        ("bad.jsonl", "bad.reasons.jsonl"),
        ("bad.jsonl.gz", "bad.reasons.jsonl.gz"),
        ("bad.txt", "bad.txt.reasons.jsonl"),
    ],
)
def test_rejects_have_their_reasons_in_a_sidecar_beside_them(
    name: str,
    sidecar: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
):
    rejects = tmp_path / name
    feed_stdin(monkeypatch, jsonl(MESSAGES) + BAD_JSON + BAD_SHAPE * 24 + BAD_UTF8)
    assert main(["--jsonl", *EXAMPLE, "--skip-invalid", "--rejects", str(rejects)]) == 4
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == (
        f"ctx-compact: skipped 26 bad lines (6 not shown; {rejects} has them,"
        f" {tmp_path / sidecar} why each was skipped)"
    )
    read = gzip.decompress if name.endswith(".gz") else bytes
    # The rejected lines stay verbatim; line N of the sidecar is about line N of them.
    assert read(rejects.read_bytes()) == BAD_JSON + BAD_SHAPE * 24 + BAD_UTF8
    reasons = [json.loads(line) for line in read((tmp_path / sidecar).read_bytes()).splitlines()]
    assert reasons[0] == {"line": 2, "reason": "<stdin>:2:20: invalid JSON: Expecting value"}
    assert reasons[-1] == {"line": 27, "reason": "<stdin>:27:3: not valid UTF-8 (byte 0xff)"}
    assert [r["line"] for r in reasons] == list(range(2, 28))
    assert sorted(os.listdir(tmp_path)) == sorted([name, sidecar])


# --- where a line went wrong ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("last", "message"),
    [
        (
            b'[{"role": "user", "content": "hello wor',
            "<stdin>:2:40: invalid JSON: the line ends before its value does (cut short?)",
        ),
        (
            '[{"role": "user", "content": "東京 caf'.encode(),
            "<stdin>:2:37: invalid JSON: the line ends before its value does (cut short?)",
        ),
        (b'[{"role": "user", "content": ', "<stdin>:2:29: invalid JSON: the line ends before"),
        (
            '[{"role": "user", "content": "東京 caf\xe9'.encode()[:-1],
            "<stdin>:2:37: not valid UTF-8 (byte 0xc3) at the end of the line (cut short?)",
        ),
    ],
    ids=["string", "non-ascii", "value", "utf8"],
)
def test_truncated_last_line_is_reported_where_it_stops(
    last: bytes, message: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    feed_stdin(monkeypatch, jsonl(MESSAGES) + last)
    assert main(["--jsonl", *EXAMPLE]) == 2
    assert capsys.readouterr().err.startswith(f"ctx-compact: {message}")


def test_jsonl_on_a_pretty_printed_array_hints_at_the_mode(capsys: pytest.CaptureFixture[str]):
    assert main(["--jsonl", *EXAMPLE, str(WEATHER)]) == 2
    assert capsys.readouterr().err.splitlines()[0] == (
        f"ctx-compact: {WEATHER}:1:2: invalid JSON: the line ends before its value does"
        " (with --jsonl each line must hold one whole conversation; read a pretty-printed"
        " JSON array without --jsonl)"
    )


def test_array_mode_on_jsonl_hints_at_the_mode(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    feed_stdin(monkeypatch, jsonl(MESSAGES, MESSAGES))
    assert main(EXAMPLE) == 2
    assert capsys.readouterr().err == (
        "ctx-compact: <stdin>:2:1: invalid JSON: Extra data (the input holds more than one"
        " JSON value: for one conversation per line, use --jsonl)\n"
    )


# --- input whose pairing is already broken --------------------------------------------------


def test_broken_input_pairing_is_warned_in_checks_wording_and_is_status_5(
    capsys: pytest.CaptureFixture[str],
):
    # The output is written, but the provider would reject it: not status 0.
    assert main([str(BROKEN), "--max-tokens", "1000"]) == 5
    out, err = capsys.readouterr()
    assert json.loads(out) == BROKEN_MESSAGES  # compacted (here: kept whole) all the same
    assert err.splitlines() == [
        f"ctx-compact: warning: {BROKEN}: {ORPHAN}",
        "ctx-compact: warning: the input's tool pairing was already broken: 1 problem in 1 of"
        " 1 conversation; compaction does not repair pairing, and the provider would reject"
        " the output (status 5): run ctx-compact repair on the input first (--strict refuses"
        " such conversations)",
    ]


def test_repairing_first_as_the_warning_says_gives_output_the_provider_takes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    fixed, trimmed = tmp_path / "fixed.json", tmp_path / "trimmed.json"
    assert main(["repair", "-o", str(fixed), str(BROKEN)]) == 0
    assert main([str(fixed), "--max-tokens", "1000", "-o", str(trimmed)]) == 0
    assert main(["check", str(trimmed)]) == 0
    assert "warning" not in capsys.readouterr().err


def test_broken_input_whose_problem_compaction_dropped_keeps_its_status(
    capsys: pytest.CaptureFixture[str],
):
    # The orphaned result is among the messages dropped: the output is whole.
    assert main([str(BROKEN), "--max-tokens", "100", "--keep-tail", "2"]) == 0
    out, err = capsys.readouterr()
    assert ORPHAN not in out
    assert err.splitlines()[-1] == (
        "ctx-compact: warning: the input's tool pairing was already broken: 1 problem in 1 of"
        " 1 conversation; the messages concerned were dropped, so the output has no pairing"
        " problems"
    )


def test_status_5_outranks_skipped_lines_and_misfits(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    huge = [{"role": "user", "content": "x" * 4000}]
    feed_stdin(monkeypatch, jsonl(MESSAGES, BROKEN_MESSAGES, huge) + b"not json\n")
    assert main(["--jsonl", "--max-tokens", "1000", "--skip-invalid"]) == 5
    out, err = capsys.readouterr()
    assert lines_of(out) == [MESSAGES, BROKEN_MESSAGES, huge]
    lines = err.splitlines()
    assert lines[2] == (
        "ctx-compact: warning: the input's tool pairing was already broken: 1 problem in 1 of"
        " 3 conversations; compaction does not repair pairing, and the provider would reject"
        " 1 of the conversations written (status 5): run ctx-compact repair on the input first"
        " (--strict refuses such conversations)"
    )
    assert lines[-1] == "ctx-compact: skipped 1 bad line"  # no "(status 4 outranks 3)"


def test_intact_input_gives_no_warning(capsys: pytest.CaptureFixture[str]):
    assert main([str(WEATHER), "--max-tokens", "1000"]) == 0
    assert capsys.readouterr().err == ""


def test_strict_refuses_broken_input_with_status_2(capsys: pytest.CaptureFixture[str]):
    assert main([str(BROKEN), "--max-tokens", "1000", "--strict"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"ctx-compact: {BROKEN}: tool pairing already broken (--strict): {ORPHAN}\n"


def test_strict_with_skip_invalid_skips_and_rejects_broken_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    rejects = tmp_path / "rejects.jsonl"
    broken_line = jsonl(BROKEN_MESSAGES)
    feed_stdin(monkeypatch, jsonl(MESSAGES) + broken_line + jsonl(MESSAGES))
    args = ["--jsonl", *EXAMPLE, "--strict", "--skip-invalid", "--rejects", str(rejects)]
    assert main(args) == 4
    out, err = capsys.readouterr()
    assert lines_of(out) == [KEPT, KEPT]
    assert err.splitlines()[0] == (
        f"ctx-compact: skipped <stdin>:2: tool pairing already broken (--strict): {ORPHAN}"
    )
    assert rejects.read_bytes() == broken_line


def test_pairing_warnings_are_bounded(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    feed_stdin(monkeypatch, jsonl(*[BROKEN_MESSAGES] * 25))
    assert main(["--jsonl", "--max-tokens", "1000"]) == 5
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 21
    assert err[19] == f"ctx-compact: warning: <stdin>:20: {ORPHAN}"
    assert err[20] == (
        "ctx-compact: warning: the input's tool pairing was already broken: 25 problems in 25 of"
        " 25 conversations (5 not shown; ctx-compact check lists them); compaction does not"
        " repair pairing, and the provider would reject 25 of the conversations written"
        " (status 5): run ctx-compact repair on the input first (--strict refuses such"
        " conversations)"
    )
