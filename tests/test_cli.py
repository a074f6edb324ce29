"""The ``ctx-compact`` command line: array and JSONL modes, reports, errors and exit statuses."""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, List

import pytest
from helpers import closed_early

from ctx_compact import __version__
from ctx_compact.cli import main

ROOT = Path(__file__).resolve().parent.parent
WEATHER = ROOT / "examples" / "weather.json"
MESSAGES: List[Any] = json.loads(WEATHER.read_text(encoding="utf-8"))
# What the specification's example keeps at --max-tokens 150 --keep-head 1 --keep-tail 2:
# the system message, then everything from "It is 72F in Denver." on.
KEPT = [MESSAGES[0], *MESSAGES[4:]]
EXAMPLE = ["--max-tokens", "150", "--keep-head", "1", "--keep-tail", "2"]
HUGE = [{"role": "user", "content": "x" * 1000}]  # 257 tokens in one message that must be kept


def feed_stdin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


def jsonl(*values: Any) -> bytes:
    return "".join(json.dumps(v, ensure_ascii=False) + "\n" for v in values).encode("utf-8")


def explain_rows(err: str) -> List[List[str]]:
    """The table rows of an --explain report (without its header row)."""
    return [
        re.split(r"\s{2,}", line.strip())
        for line in err.splitlines()
        if line.startswith("    ") and not line.strip().startswith("#")
    ]


# --- array mode -----------------------------------------------------------------------------


def test_weather_example_gives_the_specification_figures(capsys: pytest.CaptureFixture[str]):
    assert main([str(WEATHER), *EXAMPLE, "--stats"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == KEPT
    assert err == "ctx-compact: messages 10 -> 7, tokens 195 -> 124, dropped 3, fits within 150\n"


def test_output_is_indented_by_two_spaces_by_default(capsys: pytest.CaptureFixture[str]):
    assert main([str(WEATHER), *EXAMPLE]) == 0
    assert capsys.readouterr().out == json.dumps(KEPT, indent=2, ensure_ascii=False) + "\n"


def test_indent_zero_writes_one_compact_line(capsys: pytest.CaptureFixture[str]):
    assert main([str(WEATHER), *EXAMPLE, "--indent", "0"]) == 0
    out = capsys.readouterr().out
    assert out == json.dumps(KEPT, separators=(",", ":"), ensure_ascii=False) + "\n"


def test_indent_sets_the_number_of_spaces(capsys: pytest.CaptureFixture[str]):
    assert main([str(WEATHER), *EXAMPLE, "--indent", "4"]) == 0
    assert capsys.readouterr().out == json.dumps(KEPT, indent=4, ensure_ascii=False) + "\n"


@pytest.mark.parametrize("source", [["-"], []], ids=["dash", "no-argument"])
def test_reads_standard_input(
    source: List[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    feed_stdin(monkeypatch, WEATHER.read_bytes())
    assert main([*source, *EXAMPLE]) == 0
    assert json.loads(capsys.readouterr().out) == KEPT


def test_text_only_standard_streams_work(monkeypatch: pytest.MonkeyPatch):
    stdout = io.StringIO()
    monkeypatch.setattr(sys, "stdin", io.StringIO(WEATHER.read_text(encoding="utf-8")))
    monkeypatch.setattr(sys, "stdout", stdout)
    assert main([*EXAMPLE, "--indent", "0"]) == 0
    assert json.loads(stdout.getvalue()) == KEPT


def test_default_keep_head_is_1_and_keep_tail_is_4(capsys: pytest.CaptureFixture[str]):
    # At 60 tokens the default four-message tail (two whole groups) cannot fit...
    assert main([str(WEATHER), "--max-tokens", "60"]) == 3
    assert json.loads(capsys.readouterr().out) == [MESSAGES[0], *MESSAGES[6:]]
    # ...a two-message tail can, and the one-message head is still kept by default...
    assert main([str(WEATHER), "--max-tokens", "60", "--keep-tail", "2"]) == 0
    assert json.loads(capsys.readouterr().out) == [MESSAGES[0], *MESSAGES[8:]]
    # ...unless the head is turned off.
    assert main([str(WEATHER), "--max-tokens", "60", "--keep-tail", "2", "--keep-head", "0"]) == 0
    assert json.loads(capsys.readouterr().out) == MESSAGES[8:]


def test_result_that_cannot_fit_is_still_written_with_status_3(
    capsys: pytest.CaptureFixture[str],
):
    assert main([str(WEATHER), "--max-tokens", "60", "--stats"]) == 3
    out, err = capsys.readouterr()
    assert json.loads(out) == [MESSAGES[0], *MESSAGES[6:]]
    assert err.splitlines() == [
        "ctx-compact: messages 10 -> 5, tokens 195 -> 98, dropped 5, does not fit within 60",
        f"ctx-compact: {WEATHER}: does not fit: 98 tokens with every droppable message dropped,"
        " budget 60",
    ]


def test_fractional_budget_is_accepted(capsys: pytest.CaptureFixture[str]):
    assert main([str(WEATHER), "--max-tokens", "123.5", "--keep-tail", "2", "--stats"]) == 0
    assert capsys.readouterr().err.endswith(
        "messages 10 -> 6, tokens 195 -> 110, dropped 4, fits within 123.5\n"
    )


def test_non_ascii_is_written_as_utf8_not_escaped(
    monkeypatch: pytest.MonkeyPatch, capsysbinary: pytest.CaptureFixture[bytes]
):
    feed_stdin(monkeypatch, '[{"role": "user", "content": "café 🎉 東京"}]'.encode())
    assert main(["--max-tokens", "100", "--indent", "0"]) == 0
    out = capsysbinary.readouterr().out
    assert out == '[{"role":"user","content":"café 🎉 東京"}]\n'.encode()


def test_lone_surrogate_escape_survives_the_round_trip(
    monkeypatch: pytest.MonkeyPatch, capsysbinary: pytest.CaptureFixture[bytes]
):
    feed_stdin(monkeypatch, b'[{"role": "user", "content": "half \\ud83c of an emoji"}]')
    assert main(["--max-tokens", "100", "--indent", "0"]) == 0
    out = capsysbinary.readouterr().out
    assert out == b'[{"role":"user","content":"half \\ud83c of an emoji"}]\n'


def test_byte_order_mark_is_ignored(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    feed_stdin(monkeypatch, b"\xef\xbb\xbf" + WEATHER.read_bytes())
    assert main(EXAMPLE) == 0
    assert json.loads(capsys.readouterr().out) == KEPT


def test_object_with_messages_keeps_its_other_keys_in_order(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    request = {"model": "m", "messages": MESSAGES, "temperature": 0}
    feed_stdin(monkeypatch, json.dumps(request).encode())
    assert main([*EXAMPLE, "--indent", "0"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out) == ["model", "messages", "temperature"]
    assert out == {"model": "m", "messages": KEPT, "temperature": 0}


def test_empty_array_fits(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    feed_stdin(monkeypatch, b"[]")
    assert main(["--max-tokens", "1", "--stats"]) == 0
    out, err = capsys.readouterr()
    assert out == "[]\n"
    assert err == "ctx-compact: messages 0 -> 0, tokens 0 -> 0, dropped 0, fits within 1\n"


# --- errors ---------------------------------------------------------------------------------


def test_missing_file_is_status_2_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    missing = tmp_path / "nope.json"
    assert main([str(missing), "--max-tokens", "10"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"ctx-compact: {missing}: No such file or directory\n"


def test_invalid_json_names_file_line_and_column(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    (tmp_path / "weather.json").write_text(
        '[\n  {"role": "user", "content": "hi"}\n    {"role": "user"}\n]\n', encoding="utf-8"
    )
    monkeypatch.chdir(tmp_path)
    assert main(["weather.json", "--max-tokens", "10"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == "ctx-compact: weather.json:3:5: invalid JSON: Expecting ',' delimiter\n"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            b'{"role": "user"}',
            'ctx-compact: <stdin>: expected an array of messages or an object with a "messages"'
            " array, got an object\n",
        ),
        (b'"text"', "array, got a string\n"),
        (
            b'{"messages": {"role": "user"}}',
            'ctx-compact: <stdin>: "messages" must be an array, got an object\n',
        ),
        (
            b'[{"role": "user"}, "hello"]',
            "ctx-compact: <stdin>: message 1: expected an object, got a string\n",
        ),
        (b"[{}, {}, null]", "ctx-compact: <stdin>: message 2: expected an object, got null\n"),
        (b'[{"role": "user", "n": NaN}]', "ctx-compact: <stdin>: invalid JSON: NaN is not valid"),
        (b"", "ctx-compact: <stdin>: the input is empty: expected an array of messages or an"),
        (b" \r\n\n", "ctx-compact: <stdin>: the input is empty: expected an array of messages"),
        (
            b'[\n{"role": "user", "content": "caf\xe9"}]',
            "ctx-compact: <stdin>:2:33: not valid UTF-8 (byte 0xe9)\n",
        ),
    ],
    ids=[
        "object",
        "string",
        "messages-not-array",
        "string-message",
        "null",
        "nan",
        "empty",
        "blank",
        "utf8",
    ],
)
def test_unusable_input_is_status_2_with_nothing_written(
    data: bytes,
    message: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
):
    feed_stdin(monkeypatch, data)
    assert main(["--max-tokens", "10"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("ctx-compact: <stdin>")
    assert message in err


@pytest.mark.parametrize("mode", ["compact", "check", "repair"])
def test_an_empty_file_is_named_as_empty_in_every_mode(
    mode: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    empty = tmp_path / "empty.json"
    empty.write_bytes(b"")
    args = {"compact": ["--max-tokens", "10"], "check": ["check"], "repair": ["repair"]}[mode]
    assert main([*args, str(empty)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        f"ctx-compact: {empty}: the input is empty: expected an array of messages or an object"
        ' with a "messages" array\n'
    )


GZIP_MODES = {
    "array": ["--max-tokens", "150"],
    "jsonl": ["--jsonl", "--max-tokens", "150", "--skip-invalid"],
    "jobs": ["--jsonl", "--max-tokens", "150", "--skip-invalid", "--jobs", "2"],
    "check": ["check", "--jsonl"],
    "repair": ["repair"],
}


@pytest.mark.parametrize("mode", list(GZIP_MODES))
def test_gzip_on_standard_input_is_named_with_what_to_do(mode: str):
    # It was "not valid UTF-8 (byte 0x8b)", or with --skip-invalid a bad line per newline byte.
    packed = gzip.compress(jsonl(json.loads(WEATHER.read_text(encoding="utf-8"))) * 50)
    done = run_module(*GZIP_MODES[mode], stdin=packed)
    assert (done.returncode, done.stdout) == (2, b"")
    assert done.stderr == (
        b"ctx-compact: <stdin>: looks gzip-compressed: pipe it through gunzip -c, or give its"
        b" name (a name ending in .gz is read gunzipped)\n"
    )


def test_a_gzip_file_without_a_gz_name_is_named_with_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    data = tmp_path / "train.jsonl"
    data.write_bytes(gzip.compress(jsonl([{"role": "user", "content": "hi"}])))
    assert main(["--jsonl", "--max-tokens", "150", "--skip-invalid", str(data)]) == 2
    assert capsys.readouterr() == (
        "",
        f"ctx-compact: {data}: looks gzip-compressed: a name ending in .gz is read gunzipped"
        " (or gunzip it first)\n",
    )
    named = tmp_path / "train.jsonl.gz"
    data.rename(named)
    assert main(["--jsonl", "--max-tokens", "150", str(named)]) == 0


def test_library_error_is_reported_with_the_message_index(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    bad = [{"role": "user", "content": "hi"}, {"role": "assistant", "tool_calls": "get_weather"}]
    feed_stdin(monkeypatch, json.dumps(bad).encode())
    assert main(["--max-tokens", "10"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("ctx-compact: <stdin>: message 1: tool_calls must be a list")


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        ([], "the following arguments are required: --max-tokens"),
        (["--max-tokens", "0"], "argument --max-tokens: must be a finite positive number"),
        (["--max-tokens", "-5"], "argument --max-tokens: must be a finite positive number"),
        (["--max-tokens", "nan"], "argument --max-tokens: must be a finite positive number"),
        (["--max-tokens", "inf"], "argument --max-tokens: must be a finite positive number"),
        (["--max-tokens", "lots"], "argument --max-tokens: expected a number, got 'lots'"),
        (["--max-tokens", "9", "--keep-head", "-1"], "argument --keep-head: must be a non-neg"),
        (["--max-tokens", "9", "--keep-tail", "2.5"], "argument --keep-tail: must be a non-neg"),
        (["--max-tokens", "9", "--indent", "-2"], "argument --indent: must be a non-negative"),
        (["--max-tokens", "9", "--jsonl", "--indent", "2"], "--indent cannot be used with"),
        (["--max-tokens", "9", "--frobnicate"], "unrecognized option --frobnicate\n"),
    ],
)
def test_usage_errors_are_status_2(
    args: List[str], complaint: str, capsys: pytest.CaptureFixture[str]
):
    assert main([str(WEATHER), *args]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("usage: ctx-compact")
    assert f"ctx-compact: error: {complaint}" in err


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        # Abbreviations were taken: --max-tok for --max-tokens, --stat for --stats.
        (["--max-tok", "9"], "unrecognized option --max-tok (did you mean --max-tokens?)"),
        (["--max-tokens", "9", "--stat"], "unrecognized option --stat (did you mean --stats?)"),
        # argparse named another problem: "the following arguments are required", or
        # "unrecognized arguments: --keep-tial FILE" (it took the 3 for the file).
        (["--max-tokns", "9"], "unrecognized option --max-tokns (did you mean --max-tokens?)"),
        (
            ["--max-tokens", "9", "--keep-tial", "3"],
            "unrecognized option --keep-tial (did you mean --keep-tail?)",
        ),
        (["--max-tokens", "9", "--jsnl=1"], "unrecognized option --jsnl (did you mean --jsonl?)"),
        (
            ["--max-tokens", "9", "--answer-unanswered"],
            "unrecognized option --answer-unanswered: it is an option of ctx-compact repair, not"
            " of compaction",
        ),
        (
            ["--max-tokens", "9", "--keep", "2"],
            "unrecognized option --keep (did you mean --keep-head, --keep-tail or --keep-results?)",
        ),
        (["--max-tokens", "9", "--verbose"], "unrecognized option --verbose"),
        (["--max-tokens", "9", "-x"], "unrecognized option -x"),
    ],
)
def test_a_misspelt_or_abbreviated_option_is_named_with_the_one_meant(
    args: List[str], complaint: str, capsys: pytest.CaptureFixture[str]
):
    assert main([*args, str(WEATHER)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("usage: ctx-compact")
    assert err.endswith(f"ctx-compact: error: {complaint}\n")


def test_values_that_look_like_options_are_still_values(capsys: pytest.CaptureFixture[str]):
    # A negative number, an attached -oFILE, "-" for standard input and names after "--".
    assert "must be a finite positive" in _usage(["--max-tokens", "-5", str(WEATHER)], capsys)
    assert main(["--max-tokens", "1000", "--", str(WEATHER)]) == 0
    capsys.readouterr()


def _usage(args: List[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(args) == 2
    return capsys.readouterr().err


def test_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"ctx-compact {__version__}\n"


# --- --explain ------------------------------------------------------------------------------


def test_explain_table_for_the_weather_example(capsys: pytest.CaptureFixture[str]):
    assert main([str(WEATHER), *EXAMPLE, "--explain"]) == 0
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert lines[0] == f"{WEATHER}: messages 10 -> 7, tokens 195 -> 124, dropped 3, fits within 150"
    assert lines[1].split() == ["#", "role", "tokens", "group", "status"]
    dropped = "dropped: oldest middle group while over budget"
    assert explain_rows(err) == [
        ["0", "system", "15", "0", "kept: head"],
        ["1", "user", "15", "1", dropped],
        ["2", "assistant", "39", "2-3", dropped],
        ["3", "tool", "17", "2-3", dropped],
        ["4", "assistant", "14", "4", "kept: budget reached"],
        ["5", "user", "12", "5", "kept: budget reached"],
        ["6", "assistant", "39", "6-7", "kept: budget reached"],
        ["7", "tool", "17", "6-7", "kept: budget reached"],
        ["8", "assistant", "14", "8", "kept: tail"],
        ["9", "user", "13", "9", "kept: tail"],
    ]
    assert len(lines) == 12  # header, column titles, ten rows


def test_explain_does_not_change_the_output(capsys: pytest.CaptureFixture[str]):
    main([str(WEATHER), *EXAMPLE])
    plain = capsys.readouterr().out
    main([str(WEATHER), *EXAMPLE, "--explain"])
    assert capsys.readouterr().out == plain


def test_explain_shows_head_and_tail_widened_to_whole_groups(
    capsys: pytest.CaptureFixture[str],
):
    # Head 3 ends inside the 2-3 tool group and tail 3 starts inside 6-7: both widen,
    # leaving only messages 4 and 5 droppable, which is not enough for 150.
    args = [str(WEATHER), "--max-tokens", "150", "--keep-head", "3", "--keep-tail", "3"]
    assert main([*args, "--explain"]) == 3
    err = capsys.readouterr().err
    assert err.splitlines()[0].endswith("dropped 2, does not fit within 150")
    assert [row[4] for row in explain_rows(err)] == [
        "kept: head",
        "kept: head",
        "kept: head",
        "kept: head (group kept whole)",
        "dropped: oldest middle group while over budget",
        "dropped: oldest middle group while over budget",
        "kept: tail (group kept whole)",
        "kept: tail",
        "kept: tail",
        "kept: tail",
    ]


def test_explain_when_the_input_already_fits(capsys: pytest.CaptureFixture[str]):
    assert main([str(WEATHER), "--max-tokens", "1000", "--explain"]) == 0
    err = capsys.readouterr().err
    assert err.splitlines()[0].endswith(
        "messages 10 -> 10, tokens 195 -> 195, dropped 0, fits within 1000"
    )
    statuses = [row[4] for row in explain_rows(err)]
    assert statuses == ["kept: head"] + ["kept: input already fits"] * 5 + ["kept: tail"] * 4


def test_explain_rows_come_from_the_engine_decision():
    from ctx_compact._contract import MessageRow, prepare

    plan = prepare(MESSAGES, max_tokens=150, count_tokens=None, keep_head=1, keep_tail=2)
    rows = plan.rows(1, 2)
    assert rows[2] == MessageRow(
        2, "assistant", 39, 2, 3, "dropped", "oldest middle group while over budget"
    )
    assert [r.status for r in rows].count("dropped") == len(plan.result().dropped)
    assert sum(r.tokens for r in rows if r.status == "kept") == plan.result().tokens_after
    items = [
        {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "a", "output": "x"},
    ]
    plan = prepare(items, max_tokens=1000, count_tokens=None, keep_head=0, keep_tail=0)
    assert [(r.role, r.group_first, r.group_last, r.reason) for r in plan.rows(0, 0)] == [
        (None, 0, 1, "input already fits"),
        (None, 0, 1, "input already fits"),
    ]


# --- --jsonl --------------------------------------------------------------------------------


def test_jsonl_compacts_every_line_and_skips_blank_lines(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    record = {"id": 7, "messages": MESSAGES, "tools": []}
    data = jsonl(MESSAGES) + b"\n   \n" + jsonl(record)
    feed_stdin(monkeypatch, data)
    assert main(["--jsonl", *EXAMPLE]) == 0
    out = capsys.readouterr().out
    assert out.endswith("\n")
    lines = out.splitlines()
    assert lines == [
        json.dumps(KEPT, separators=(",", ":"), ensure_ascii=False),
        json.dumps({"id": 7, "messages": KEPT, "tools": []}, separators=(",", ":")),
    ]


def test_jsonl_stats_are_totals_over_all_conversations(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    feed_stdin(monkeypatch, jsonl(MESSAGES, {"messages": MESSAGES}))
    assert main(["--jsonl", *EXAMPLE, "--stats"]) == 0
    assert capsys.readouterr().err == (
        "ctx-compact: conversations 2, messages 20 -> 14, tokens 390 -> 248, dropped 6,"
        " all fit within 150\n"
    )


def test_jsonl_status_3_when_any_conversation_does_not_fit(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    feed_stdin(monkeypatch, jsonl(MESSAGES, HUGE, MESSAGES))
    assert main(["--jsonl", *EXAMPLE, "--stats"]) == 3
    out, err = capsys.readouterr()
    assert [json.loads(line) for line in out.splitlines()] == [KEPT, HUGE, KEPT]
    assert err.splitlines() == [
        "ctx-compact: conversations 3, messages 21 -> 15, tokens 647 -> 505, dropped 6,"
        " 1 did not fit within 150",
        "ctx-compact: 1 of 3 conversations do not fit within 150: <stdin>:2",
    ]


@pytest.mark.parametrize(
    ("bad_line", "message"),
    [
        (b'[{"role": "user"}, x]\n', "ctx-compact: <stdin>:3:20: invalid JSON: Expecting value\n"),
        (b'{"prompt": "hi"}\n', "ctx-compact: <stdin>:3: expected an array of messages"),
        (b"[1]\n", "ctx-compact: <stdin>:3: message 0: expected an object, got a number\n"),
        (
            b'[{"role": "assistant", "tool_calls": 5}]\n',
            "ctx-compact: <stdin>:3: message 0: tool_calls must be a list",
        ),
        (b'["\xff"]\n', "ctx-compact: <stdin>:3:3: not valid UTF-8 (byte 0xff)\n"),
    ],
    ids=["json", "shape", "message", "library", "utf8"],
)
def test_jsonl_error_names_the_line_and_stops_the_run(
    bad_line: bytes,
    message: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
):
    # Standard output is streamed: the two good conversations before the bad line are out
    # already, nothing after it is written (--output files stay untouched, tested below).
    feed_stdin(monkeypatch, jsonl(MESSAGES, MESSAGES) + bad_line + jsonl(MESSAGES))
    assert main(["--jsonl", *EXAMPLE]) == 2
    out, err = capsys.readouterr()
    assert [json.loads(line) for line in out.splitlines()] == [KEPT, KEPT]
    assert err.startswith(message)


def test_jsonl_reads_and_writes_line_by_line(monkeypatch: pytest.MonkeyPatch):
    stdout = io.BytesIO()
    seen: List[int] = []

    class Lines(io.BytesIO):
        def readline(self, size: Any = -1) -> bytes:
            seen.append(len(stdout.getvalue()))
            return super().readline(size)

    stdin = io.TextIOWrapper(Lines(jsonl(*[MESSAGES] * 5)), encoding="utf-8")
    monkeypatch.setattr(sys, "stdin", stdin)
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(stdout, encoding="utf-8"))
    assert main(["--jsonl", *EXAMPLE]) == 0
    # Five lines and the end of input, read one at a time, each written before the next read.
    line = len(json.dumps(KEPT, separators=(",", ":"))) + 1
    assert seen == [0, line, 2 * line, 3 * line, 4 * line, 5 * line]
    assert stdout.getvalue().decode().splitlines() == [json.dumps(KEPT, separators=(",", ":"))] * 5


def test_jsonl_first_line_may_carry_a_byte_order_mark(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    feed_stdin(monkeypatch, b"\xef\xbb\xbf" + jsonl(MESSAGES))
    assert main(["--jsonl", *EXAMPLE]) == 0
    assert json.loads(capsys.readouterr().out) == KEPT


def test_jsonl_explain_reports_each_conversation_under_its_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    feed_stdin(monkeypatch, jsonl(MESSAGES) + b"\n" + jsonl(HUGE))
    assert main(["--jsonl", *EXAMPLE, "--explain"]) == 3
    err = capsys.readouterr().err
    headers = [line for line in err.splitlines() if not line.startswith(" ")]
    assert headers == [
        "<stdin>:1: messages 10 -> 7, tokens 195 -> 124, dropped 3, fits within 150",
        "<stdin>:3: messages 1 -> 1, tokens 257 -> 257, dropped 0, does not fit within 150",
        "ctx-compact: 1 of 2 conversations do not fit within 150: <stdin>:3",
    ]
    assert explain_rows(err)[-1] == ["0", "user", "257", "0", "kept: head"]


# --- -o/--output ----------------------------------------------------------------------------


def test_output_file_receives_the_result(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    target = tmp_path / "trimmed.json"
    assert main([str(WEATHER), *EXAMPLE, "-o", str(target)]) == 0
    assert capsys.readouterr().out == ""
    assert json.loads(target.read_text(encoding="utf-8")) == KEPT
    assert os.listdir(tmp_path) == ["trimmed.json"]


def test_output_may_replace_the_input_file(tmp_path: Path):
    path = tmp_path / "weather.jsonl"
    path.write_bytes(jsonl(MESSAGES, MESSAGES))
    assert main([str(path), "--jsonl", *EXAMPLE, "--output", str(path)]) == 0
    assert [json.loads(line) for line in path.read_text().splitlines()] == [KEPT, KEPT]
    assert os.listdir(tmp_path) == ["weather.jsonl"]


@pytest.mark.parametrize("mode", [[], ["--jsonl"]], ids=["array", "jsonl"])
def test_failed_run_leaves_an_existing_output_file_untouched(
    mode: List[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    target = tmp_path / "out.json"
    target.write_text("precious\n")
    bad = tmp_path / "bad.json"
    bad.write_bytes(jsonl(MESSAGES) + b"[1]\n" if mode else b"[1]")
    assert main([str(bad), *mode, *EXAMPLE, "-o", str(target)]) == 2
    assert target.read_text() == "precious\n"
    assert sorted(os.listdir(tmp_path)) == ["bad.json", "out.json"]  # no temporary file left
    assert capsys.readouterr().out == ""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permission bits")
def test_replaced_output_keeps_its_permissions(tmp_path: Path):
    target = tmp_path / "out.json"
    target.write_text("old\n")
    target.chmod(0o640)
    assert main([str(WEATHER), *EXAMPLE, "-o", str(target)]) == 0
    assert target.stat().st_mode & 0o777 == 0o640


def test_output_to_a_missing_directory_is_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    target = tmp_path / "no" / "such" / "out.json"
    assert main([str(WEATHER), *EXAMPLE, "-o", str(target)]) == 2
    assert capsys.readouterr().err == (
        f"ctx-compact: {target}: cannot write: No such file or directory\n"
    )


def test_output_dash_means_standard_output(capsys: pytest.CaptureFixture[str]):
    assert main([str(WEATHER), *EXAMPLE, "-o", "-"]) == 0
    assert json.loads(capsys.readouterr().out) == KEPT


# --- as a real process ----------------------------------------------------------------------


def run_module(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "ctx_compact", *args],
        input=stdin,
        capture_output=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )


def test_module_runs_the_weather_example():
    done = run_module("examples/weather.json", *EXAMPLE, "--stats")
    assert done.returncode == 0
    assert json.loads(done.stdout) == KEPT
    assert done.stderr == (
        b"ctx-compact: messages 10 -> 7, tokens 195 -> 124, dropped 3, fits within 150\n"
    )


def test_module_jsonl_from_standard_input_with_status_3():
    done = run_module("--jsonl", *EXAMPLE, stdin=jsonl(HUGE, MESSAGES))
    assert done.returncode == 3
    assert [json.loads(line) for line in done.stdout.splitlines()] == [HUGE, KEPT]


def test_module_invalid_json_is_status_2_with_empty_output(tmp_path: Path):
    # A missing comma: its message is the same on every Python (a trailing comma's is not).
    (tmp_path / "weather.json").write_text('[{"role": "user" "x": 1}]')
    done = subprocess.run(
        [sys.executable, "-m", "ctx_compact", "weather.json", "--max-tokens", "9"],
        capture_output=True,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == b""
    assert done.stderr == (
        b"ctx-compact: weather.json:1:18: invalid JSON: Expecting ',' delimiter\n"
    )


def test_module_help_describes_the_options():
    done = run_module("--help")
    assert done.returncode == 0
    text = done.stdout.decode()
    assert text.startswith("usage: ctx-compact ")
    for option in ("--max-tokens", "--keep-head", "--keep-tail", "--jsonl", "--stats"):
        assert option in text
    assert "exit status:" in text


@pytest.mark.skipif(sys.platform == "win32", reason="relies on POSIX pipe semantics")
@pytest.mark.parametrize("report", [False, True], ids=["alone", "with --report"])
def test_closed_output_pipe_exits_quietly(tmp_path: Path, report: bool):
    big = tmp_path / "big.jsonl"
    big.write_bytes(jsonl(MESSAGES) * 3000)  # about 2 MB out: far more than a pipe holds
    # A report file being written does not turn the closed pipe into its own failure.
    extra = ["--report", str(tmp_path / "report.jsonl")] if report else []
    assert closed_early("--jsonl", *EXAMPLE, *extra, str(big)) == (1, b"")
    assert os.listdir(tmp_path) == ["big.jsonl"]  # no report, no temporary file left


# --- check ----------------------------------------------------------------------------------

BROKEN = ROOT / "examples" / "broken.json"
ORPHAN = (
    "message 2 [openai orphan_tool_result] call_1: Invalid parameter: messages with role 'tool'"
    " must be a response to a preceeding message with 'tool_calls'."
)
# Anthropic: the tool_use of message 1 is not answered by message 2, and message 3 answers a
# tool_use that message 2 (a user message) never made.
ANTHROPIC_BROKEN = [
    {"role": "user", "content": "Weather in Paris?"},
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}},
        ],
    },
    {"role": "user", "content": "never mind"},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_9"}]},
]
ANTHROPIC_PROBLEMS = [
    "message 1 [anthropic missing_tool_result_blocks] toolu_1: messages.1: `tool_use` ids were"
    " found without `tool_result` blocks immediately after: toolu_1. Each `tool_use` block must"
    " have a corresponding `tool_result` block in the next message.",
    "message 3 [anthropic unexpected_tool_result] toolu_9: messages.3.content.0: unexpected"
    " `tool_use_id` found in `tool_result` blocks: toolu_9. Each `tool_result` block must have"
    " a corresponding `tool_use` block in the previous message.",
]
RESPONSES_BROKEN = [
    {"role": "user", "content": "Weather in Oslo?"},
    {"type": "reasoning", "id": "rs_1", "summary": []},
    {"type": "function_call_output", "call_id": "fc_1", "output": "3C"},
    {"type": "function_call", "call_id": "fc_2", "name": "get_weather", "arguments": "{}"},
]
RESPONSES_PROBLEMS = [
    "message 1 [openai-responses reasoning_without_following_item] rs_1: Item 'rs_1' of type"
    " 'reasoning' was provided without its required following item.",
    "message 2 [openai-responses orphan_call_output] fc_1: No tool call found for function call"
    " output with call_id fc_1.",
    "message 3 [openai-responses missing_call_output] fc_2: No tool output found for function"
    " call fc_2.",
]


def test_broken_example_is_the_weather_example_without_its_first_tool_call():
    broken = json.loads(BROKEN.read_text(encoding="utf-8"))
    assert broken == [*MESSAGES[:2], *MESSAGES[3:]]


def test_check_valid_file_is_status_0_with_nothing_on_standard_output(
    capsys: pytest.CaptureFixture[str],
):
    assert main(["check", str(WEATHER)]) == 0
    out, err = capsys.readouterr()
    assert out == ""
    assert err == "ctx-compact: no pairing problems in 1 conversation\n"


def test_check_broken_example_is_status_1_with_the_problem_line(
    capsys: pytest.CaptureFixture[str],
):
    assert main(["check", str(BROKEN)]) == 1
    out, err = capsys.readouterr()
    assert out == f"{BROKEN}: {ORPHAN}\n"
    assert err == "ctx-compact: 1 problem in 1 of 1 conversations\n"


def test_check_module_output_is_the_readme_example():
    done = run_module("check", "examples/broken.json")
    assert done.returncode == 1
    stdout, stderr = done.stdout.decode(), done.stderr.decode()
    assert stdout == f"examples/broken.json: {ORPHAN}\n"
    assert stderr == "ctx-compact: 1 problem in 1 of 1 conversations\n"
    page = (ROOT / "docs" / "command-line-reference.md").read_text(encoding="utf-8")
    assert f"$ ctx-compact check examples/broken.json\n{stdout}{stderr}```" in page


@pytest.mark.parametrize(
    ("messages", "problems"),
    [(ANTHROPIC_BROKEN, ANTHROPIC_PROBLEMS), (RESPONSES_BROKEN, RESPONSES_PROBLEMS)],
    ids=["anthropic", "responses"],
)
def test_check_reports_every_shape_in_the_providers_wording(
    messages: List[Any],
    problems: List[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
):
    feed_stdin(monkeypatch, json.dumps({"model": "m", "messages": messages}).encode())
    assert main(["check"]) == 1
    out, err = capsys.readouterr()
    assert out.splitlines() == [f"<stdin>: {problem}" for problem in problems]
    assert err == f"ctx-compact: {len(problems)} problems in 1 of 1 conversations\n"


def test_check_lists_every_id_of_a_problem(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    calls = [{"id": f"call_{n}", "type": "function", "function": {}} for n in (1, 2)]
    feed_stdin(monkeypatch, json.dumps([{"role": "assistant", "tool_calls": calls}]).encode())
    assert main(["check", "-"]) == 1
    assert capsys.readouterr().out.startswith(
        "<stdin>: message 0 [openai missing_tool_results] call_1, call_2: An assistant message"
    )


@pytest.mark.parametrize("source", [["-"], []], ids=["dash", "no-argument"])
def test_check_reads_standard_input(
    source: List[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    feed_stdin(monkeypatch, BROKEN.read_bytes())
    assert main(["check", *source]) == 1
    assert capsys.readouterr().out == f"<stdin>: {ORPHAN}\n"


def test_check_jsonl_names_each_problems_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    broken = json.loads(BROKEN.read_text(encoding="utf-8"))
    data = jsonl(MESSAGES, {"id": 2, "messages": broken}) + b"\n" + jsonl(ANTHROPIC_BROKEN)
    feed_stdin(monkeypatch, data)
    assert main(["check", "--jsonl"]) == 1
    out, err = capsys.readouterr()
    # Line 3 is blank: it is skipped, but still counted.
    assert out.splitlines() == [
        f"<stdin>:2: {ORPHAN}",
        *(f"<stdin>:4: {problem}" for problem in ANTHROPIC_PROBLEMS),
    ]
    assert err == "ctx-compact: 3 problems in 2 of 3 conversations\n"


def test_check_jsonl_without_problems_is_status_0(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    feed_stdin(monkeypatch, jsonl(MESSAGES, {"messages": MESSAGES[:2]}))
    assert main(["check", "--jsonl"]) == 0
    assert capsys.readouterr() == ("", "ctx-compact: no pairing problems in 2 conversations\n")


def test_check_jsonl_bad_line_is_status_2_after_the_earlier_problems(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    broken = json.loads(BROKEN.read_text(encoding="utf-8"))
    feed_stdin(monkeypatch, jsonl(broken, broken) + b'[{"role": "user"}, x]\n')
    assert main(["check", "--jsonl"]) == 2
    out, err = capsys.readouterr()
    # Problem lines are streamed like compaction output.
    assert out.splitlines() == [f"<stdin>:1: {ORPHAN}", f"<stdin>:2: {ORPHAN}"]
    assert err.splitlines() == [
        "ctx-compact: <stdin>:3:20: invalid JSON: Expecting value",
        "ctx-compact: stopped at line 3; --skip-invalid skips such lines and goes on"
        " (--rejects FILE keeps them)",
    ]


def test_check_invalid_json_names_file_line_and_column(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    (tmp_path / "broken.json").write_text('[\n  {"role": "tool" "x": 1}\n]\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["check", "broken.json"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == ("ctx-compact: broken.json:2:19: invalid JSON: Expecting ',' delimiter\n")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"role": "tool"}', "<stdin>: expected an array of messages or an object with a"),
        (b'[{"role": "tool"}, 3]', "<stdin>: message 1: expected an object, got a number\n"),
        (
            b'[{"role": "assistant", "tool_calls": "get_weather"}]',
            "<stdin>: message 0: tool_calls must be a list",
        ),
        (b"", "<stdin>: the input is empty: expected an array of messages or an object"),
    ],
    ids=["shape", "message", "library", "empty"],
)
def test_check_unusable_input_is_status_2(
    data: bytes, message: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    feed_stdin(monkeypatch, data)
    assert main(["check"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"ctx-compact: {message}")


def test_check_missing_file_is_status_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    missing = tmp_path / "nope.json"
    assert main(["check", str(missing)]) == 2
    assert capsys.readouterr() == ("", f"ctx-compact: {missing}: No such file or directory\n")


def test_check_keeps_each_problem_on_one_line(
    monkeypatch: pytest.MonkeyPatch, capsysbinary: pytest.CaptureFixture[bytes]
):
    feed_stdin(monkeypatch, b'[{"role": "tool", "tool_call_id": "a\\nb \\ud83c c"}]')
    assert main(["check"]) == 1
    out = capsysbinary.readouterr().out
    assert out.startswith(b"<stdin>: message 0 [openai orphan_tool_result] a\\nb \\ud83c c: ")
    assert out.count(b"\n") == 1


@pytest.mark.parametrize(
    "option",
    [
        ["--max-tokens", "150"],
        ["--max-tokens=150"],
        ["--keep-head", "1"],
        ["--keep-tail", "2"],
        ["--indent", "0"],
        ["-o", "out.json"],
        ["--output", "out.json"],
        ["--stats"],
        ["--explain"],
    ],
)
def test_check_refuses_the_compaction_options(
    option: List[str], capsys: pytest.CaptureFixture[str]
):
    # A command meant to compact never passes quietly as a check: the option is refused,
    # and the error says whose it is.
    assert main(["check", *option, str(WEATHER)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("usage: ctx-compact check")
    name = option[0].split("=")[0]
    assert err.endswith(
        f"ctx-compact check: error: unrecognized option {name}: it is an option of compaction,"
        " not of ctx-compact check\n"
    )


def test_check_takes_the_same_input_options_as_compaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    # The compaction warning sends users to check; a dataset with bad lines must not stop it.
    broken = json.loads(BROKEN.read_text(encoding="utf-8"))
    rejects = tmp_path / "bad.jsonl"
    feed_stdin(monkeypatch, jsonl(broken) + b"not json\n" + jsonl(broken))
    args = ["check", "--jsonl", "--skip-invalid", "--rejects", str(rejects), "--no-progress"]
    assert main(args) == 4
    out, err = capsys.readouterr()
    assert out.splitlines() == [f"<stdin>:1: {ORPHAN}", f"<stdin>:3: {ORPHAN}"]
    assert err.splitlines() == [
        "ctx-compact: skipped <stdin>:2:1: invalid JSON: Expecting value",
        f"ctx-compact: 2 problems in 2 of 2 conversations; skipped 1 bad line ({rejects} has"
        f" them, {tmp_path / 'bad.reasons.jsonl'} why each was skipped) (status 4 outranks 1)",
    ]
    assert rejects.read_bytes() == b"not json\n"


@pytest.mark.parametrize(
    "options", [["--max-errors", "1"], ["--jobs", "2", "--progress"], ["--skip-invalid"]]
)
def test_check_skips_bad_lines_with_any_input_option(options: List[str], tmp_path: Path):
    data = tmp_path / "data.jsonl"
    data.write_bytes(jsonl(MESSAGES) + b"not json\n" + jsonl(MESSAGES))
    options = [*options, "--skip-invalid"] if "--jobs" in options else options
    done = run_module("check", "--jsonl", *options, str(data))
    assert done.returncode == 4, done.stderr
    assert done.stdout == b""
    assert done.stderr.decode().splitlines()[-1] == (
        "ctx-compact: no pairing problems in 2 conversations; skipped 1 bad line"
    )


def test_check_input_options_need_jsonl(capsys: pytest.CaptureFixture[str]):
    assert main(["check", "--skip-invalid", str(WEATHER)]) == 2
    assert "ctx-compact check: error: --skip-invalid needs --jsonl" in capsys.readouterr().err


def test_check_refuses_unknown_options_and_a_second_file(capsys: pytest.CaptureFixture[str]):
    assert main(["check", "--frobnicate", str(WEATHER)]) == 2
    assert capsys.readouterr().err.endswith(
        "ctx-compact check: error: unrecognized option --frobnicate\n"
    )
    assert main(["check", str(WEATHER), str(BROKEN)]) == 2
    assert f"unrecognized arguments: {BROKEN}" in capsys.readouterr().err


def test_a_file_named_check_is_still_compacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    (tmp_path / "check").write_bytes(WEATHER.read_bytes())
    monkeypatch.chdir(tmp_path)
    for args in (["./check", *EXAMPLE], [*EXAMPLE, "check"]):
        assert main(args) == 0
        assert json.loads(capsys.readouterr().out) == KEPT
    # First, "check" is the mode, which checks the file of that name.
    assert main(["check", "check"]) == 0
    assert capsys.readouterr() == ("", "ctx-compact: no pairing problems in 1 conversation\n")


def test_check_help_describes_the_mode():
    done = run_module("check", "--help")
    assert done.returncode == 0
    text = done.stdout.decode()
    assert text.startswith("usage: ctx-compact check [-h] [--jsonl] [--progress | --no-progress]")
    assert "FILE: message N [PROVIDER CODE] IDS:" in text
    assert "  1  at least one pairing problem\n" in text
    # argparse calls the section "optional arguments:" before Python 3.10.
    options = re.split(r"\n(?:options|optional arguments):\n", text)[1]
    assert "--max-tokens" not in options.split("input:")[0]  # refused, hidden


def test_compaction_help_points_to_check():
    done = run_module("--help")
    assert done.returncode == 0
    assert "ctx-compact check [--jsonl] [FILE]" in done.stdout.decode()


def test_check_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]):
    assert main(["check", "--version"]) == 0
    assert capsys.readouterr().out == f"ctx-compact {__version__}\n"


@pytest.mark.skipif(sys.platform == "win32", reason="relies on POSIX pipe semantics")
def test_check_closed_output_pipe_is_still_status_1(tmp_path: Path):
    big = tmp_path / "big.jsonl"
    big.write_bytes(jsonl(json.loads(BROKEN.read_text(encoding="utf-8"))) * 20000)
    assert closed_early("check", "--jsonl", str(big)) == (1, b"")
