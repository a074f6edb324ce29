"""Progress on standard error, gzip by extension, and the optional orjson backend."""

from __future__ import annotations

import gzip
import io
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, List

import pytest
from helpers import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from ctx_compact import compact, estimate_tokens
from ctx_compact.cli import json as cli_json
from ctx_compact.cli import main
from ctx_compact.cli import progress as cli_progress
from ctx_compact.cli.work import Outcome, Settings, do_line

ROOT = Path(__file__).resolve().parent.parent
WEATHER = ROOT / "examples" / "weather.json"
MESSAGES: List[Any] = json.loads(WEATHER.read_text(encoding="utf-8"))
KEPT = [MESSAGES[0], *MESSAGES[4:]]
EXAMPLE = ["--max-tokens", "150", "--keep-head", "1", "--keep-tail", "2"]
KEPT_LINE = (json.dumps(KEPT, separators=(",", ":"), ensure_ascii=False) + "\n").encode()


def jsonl(*values: Any) -> bytes:
    return "".join(json.dumps(v, ensure_ascii=False) + "\n" for v in values).encode("utf-8")


def feed_stdin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


# --- progress -------------------------------------------------------------------------------

TERMINAL_LINE = re.compile(r"ctx-compact: (\d+) conversations, (\d+)% of (\d+\.\d) kB, \d+/s")


def test_progress_on_a_terminal_is_redrawn_then_cleared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    data = tmp_path / "data.jsonl"
    data.write_bytes(jsonl(MESSAGES, MESSAGES, MESSAGES))
    stderr = _Terminal()
    monkeypatch.setattr(sys, "stderr", stderr)
    monkeypatch.setattr(cli_progress, "TERMINAL_INTERVAL", -1)
    assert main(["--jsonl", *EXAMPLE, "--stats", str(data)]) == 0
    shown = stderr.getvalue()
    redraws = shown.split("\r")
    assert TERMINAL_LINE.match(redraws[1])
    counts = [TERMINAL_LINE.match(text.strip()) for text in redraws[1:4]]
    assert [m.group(1) for m in counts if m] == ["1", "2", "3"]
    assert [m.group(2) for m in counts if m][-1] == "100"
    assert "\n" not in "".join(redraws[:-1])
    # Cleared with spaces before the summary, so the summary starts on a clean line.
    assert redraws[-2].strip() == ""
    assert redraws[-1] == (
        "ctx-compact: conversations 3, messages 30 -> 21, tokens 585 -> 372, dropped 9,"
        " all fit within 150\n"
    )


def test_progress_forced_for_logs_is_plain_lines(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(cli_progress, "PLAIN_INTERVAL", -1)
    done = subprocess.run(
        [sys.executable, "-m", "ctx_compact", "--jsonl", *EXAMPLE, "--progress", "-"],
        input=jsonl(MESSAGES, MESSAGES),
        capture_output=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0
    # The interval cannot be patched in another process: forced progress still shows the
    # lines it has time for, and never a control character.
    assert all(32 <= byte < 127 or byte == 10 for byte in done.stderr)


def test_plain_progress_lines_in_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    data = tmp_path / "data.jsonl"
    data.write_bytes(jsonl(MESSAGES, MESSAGES))
    monkeypatch.setattr(cli_progress, "PLAIN_INTERVAL", -1)
    assert main(["--jsonl", *EXAMPLE, "--progress", str(data)]) == 0
    out, err = capsys.readouterr()
    assert out == KEPT_LINE.decode() * 2
    lines = err.splitlines()
    assert len(lines) == 4
    assert re.fullmatch(rf"ctx-compact: started: {re.escape(str(data))} \(\d+\.\d kB\)", lines[0])
    assert lines[1].startswith("ctx-compact: 1 conversations, 50% of ")
    assert re.fullmatch(r"ctx-compact: 2 conversations, 100% of \d+\.\d kB, \d+/s", lines[2])
    assert re.fullmatch(DONE.format(2, r"100% of \d+\.\d kB"), lines[3])
    assert "\r" not in err


def test_progress_from_a_pipe_has_no_share_or_eta(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    monkeypatch.setattr(cli_progress, "PLAIN_INTERVAL", -1)
    feed_stdin(monkeypatch, jsonl(MESSAGES))
    assert main(["--jsonl", *EXAMPLE, "--progress"]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "ctx-compact: started: <stdin>"
    assert re.fullmatch(r"ctx-compact: 1 conversations, \d+/s", lines[1])
    assert re.fullmatch(DONE.format(1, "100%"), lines[2])
    assert len(lines) == 3


# The final line's figures; the rate and the time are whatever the run took.
DONE = r"ctx-compact: done: {} conversations, {}, \d+/s, \d+:\d\d elapsed"


def test_progress_for_a_log_has_a_first_and_a_last_line_on_a_short_run(tmp_path: Path):
    # Far shorter than the ten seconds between periodic lines: without a first and a last
    # line, a log would show nothing at all of this run.
    data = tmp_path / "data.jsonl"
    data.write_bytes(jsonl(MESSAGES, MESSAGES, MESSAGES))
    log = tmp_path / "stderr.log"
    with log.open("wb") as stderr:
        done = subprocess.run(
            [sys.executable, "-m", "ctx_compact", "--jsonl", *EXAMPLE, "--progress", str(data)],
            stdout=subprocess.PIPE,
            stderr=stderr,
            cwd=ROOT,
            timeout=60,
            check=False,
        )
    assert done.returncode == 0
    assert done.stdout == KEPT_LINE * 3
    lines = log.read_text(encoding="utf-8").splitlines()
    assert re.fullmatch(rf"ctx-compact: started: {re.escape(str(data))} \(\d+\.\d kB\)", lines[0])
    assert re.fullmatch(DONE.format(3, r"100% of \d+\.\d kB"), lines[-1])


def test_no_progress_turns_it_off_on_a_terminal(monkeypatch: pytest.MonkeyPatch):
    stderr = _Terminal()
    monkeypatch.setattr(sys, "stderr", stderr)
    monkeypatch.setattr(cli_progress, "TERMINAL_INTERVAL", -1)
    feed_stdin(monkeypatch, jsonl(MESSAGES))
    assert main(["--jsonl", *EXAMPLE, "--no-progress"]) == 0
    assert stderr.getvalue() == ""


def test_no_progress_when_standard_error_is_not_a_terminal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    monkeypatch.setattr(cli_progress, "TERMINAL_INTERVAL", -1)
    feed_stdin(monkeypatch, jsonl(MESSAGES, MESSAGES))
    assert main(["--jsonl", *EXAMPLE]) == 0
    assert capsys.readouterr().err == ""


def test_no_redrawn_progress_when_the_output_is_the_terminal(monkeypatch: pytest.MonkeyPatch):
    stderr, stdout = _Terminal(), _Terminal()
    monkeypatch.setattr(sys, "stderr", stderr)
    monkeypatch.setattr(sys, "stdout", stdout)
    monkeypatch.setattr(cli_progress, "TERMINAL_INTERVAL", -1)
    feed_stdin(monkeypatch, jsonl(MESSAGES))
    assert main(["--jsonl", *EXAMPLE]) == 0
    assert stderr.getvalue() == ""
    assert stdout.getvalue() == KEPT_LINE.decode()


def test_array_mode_shows_no_progress_even_on_a_terminal(monkeypatch: pytest.MonkeyPatch):
    stderr = _Terminal()
    monkeypatch.setattr(sys, "stderr", stderr)
    monkeypatch.setattr(cli_progress, "TERMINAL_INTERVAL", -1)
    assert main([str(WEATHER), *EXAMPLE]) == 0
    assert stderr.getvalue() == ""


def test_progress_needs_jsonl(capsys: pytest.CaptureFixture[str]):
    assert main([str(WEATHER), *EXAMPLE, "--progress"]) == 2
    assert "--progress needs --jsonl" in capsys.readouterr().err


def test_progress_text_has_share_rate_and_eta():
    progress = cli_progress.Progress("plain", 2_000_000, lambda: 500_000)
    assert progress.text(100, 10.0) == (
        "ctx-compact: 100 conversations, 25% of 2.0 MB, 10/s, ETA 0:30"
    )
    slow = cli_progress.Progress("plain", 10**9, lambda: 10**8)
    assert slow.text(1, 600.0).endswith("10% of 1.0 GB, 0/s, ETA 1:30:00")


# --- gzip -----------------------------------------------------------------------------------


def test_gzip_input_and_output_by_extension(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    source = tmp_path / "train.jsonl.gz"
    source.write_bytes(gzip.compress(jsonl(MESSAGES, MESSAGES)))
    target = tmp_path / "trimmed.jsonl.gz"
    assert main(["--jsonl", *EXAMPLE, "-o", str(target), str(source)]) == 0
    assert gzip.decompress(target.read_bytes()) == KEPT_LINE * 2
    # The same input gives the same bytes: no timestamp or temporary name in the header.
    first = target.read_bytes()
    assert main(["--jsonl", *EXAMPLE, "-o", str(target), str(source)]) == 0
    assert target.read_bytes() == first
    assert capsys.readouterr().err == ""


def test_gzip_input_to_plain_standard_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    source = tmp_path / "weather.json.gz"
    source.write_bytes(gzip.compress(WEATHER.read_bytes()))
    assert main([*EXAMPLE, "--indent", "0", str(source)]) == 0
    assert capsys.readouterr().out == KEPT_LINE.decode()


def test_gzip_report_and_rejects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    feed_stdin(monkeypatch, jsonl(MESSAGES) + b"[x]\n")
    report, rejects = tmp_path / "report.jsonl.gz", tmp_path / "rejects.jsonl.gz"
    args = [
        "--jsonl",
        *EXAMPLE,
        "--skip-invalid",
        "--report",
        str(report),
        "--rejects",
        str(rejects),
    ]
    assert main([*args, "-o", str(tmp_path / "out.jsonl")]) == 4
    assert json.loads(gzip.decompress(report.read_bytes()))["line"] == 1
    assert gzip.decompress(rejects.read_bytes()) == b"[x]\n"


@pytest.mark.parametrize(
    ("data", "reason"),
    [(b"not gzip at all\n", "Not a gzipped file"), (gzip.compress(b"[]\n")[:-12], "ended")],
    ids=["not-gzip", "truncated"],
)
def test_unreadable_gzip_is_status_2(
    data: bytes, reason: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    source = tmp_path / "bad.jsonl.gz"
    source.write_bytes(data)
    assert main(["--jsonl", *EXAMPLE, str(source)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"ctx-compact: {source}: cannot read: ")
    assert reason in err


# --- the JSON backends give the same bytes --------------------------------------------------


@pytest.fixture(params=["stdlib", "orjson"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "orjson":
        orjson = pytest.importorskip("orjson")
        monkeypatch.setattr(cli_json, "orjson", orjson)
    else:
        monkeypatch.setattr(cli_json, "orjson", None)
    return str(request.param)


TRICKY = [
    {"role": "user", "content": 'quote " backslash \\ tab \t nul \u0000 \u2028 é 東京 🎉'},
    {"role": "assistant", "content": None, "x": [1e-05, 1.5e-7, 0.0001, 1e16, -0.0, 5e-324]},
    {"role": "user", "content": "big", "n": [18446744073709551616, -9223372036854775809, 2**63]},
    {"role": "user", "content": "half \ud83c surrogate"},
]


def reference_line(value: Any, max_tokens: int, keep_tail: int) -> bytes:
    """What ctx-compact writes for one line, from the public compact and json.dumps."""
    messages = value["messages"] if isinstance(value, dict) else value
    kept = compact(messages, max_tokens=max_tokens, keep_tail=keep_tail).messages
    result = dict(value, messages=kept) if isinstance(value, dict) else kept
    text = json.dumps(result, ensure_ascii=False, separators=(",", ":"))
    # A lone surrogate (from a \\udXXX escape) is written escaped again.
    return text.encode("utf-8", "backslashreplace")


def test_backends_write_the_same_bytes(
    backend: str, monkeypatch: pytest.MonkeyPatch, capsysbinary: pytest.CaptureFixture[bytes]
):
    lines = [
        MESSAGES,
        {"id": 1, "messages": MESSAGES, "meta": {"score": 1e-9, "big": 10**30}},
        *[[message] for message in TRICKY],
        TRICKY,
    ]
    # ASCII-escaped input: the lone surrogate can only come in as its \\u escape.
    feed_stdin(monkeypatch, "".join(json.dumps(v) + "\n" for v in lines).encode())
    assert main(["--jsonl", "--max-tokens", "60", "--keep-tail", "2"]) == 0
    out = capsysbinary.readouterr().out
    assert out.splitlines() == [reference_line(value, 60, 2) for value in lines]


def test_non_finite_numbers_fail_the_same_way(
    backend: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    feed_stdin(monkeypatch, b'[{"role": "user", "content": "x", "n": 1e400}]\n')
    assert main(["--jsonl", "--max-tokens", "100"]) == 2
    # Python 3.13 adds ": inf" to json's message.
    assert capsys.readouterr().err.startswith(
        "ctx-compact: <stdin>:1: cannot write the result as JSON: Out of range float values"
        " are not JSON compliant"
    )


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
)
messages_strategy = st.lists(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant", "system"]), "content": json_values}
    ),
    max_size=8,
)


@settings(max_examples=examples(150), deadline=None)
@given(messages=messages_strategy, budget=st.integers(min_value=1, max_value=200))
def test_orjson_and_stdlib_agree_on_any_json(messages: List[Any], budget: int):
    orjson = pytest.importorskip("orjson")
    value = {"id": 0, "messages": messages}
    raw = json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")
    chosen = Settings(max_tokens=budget, keep_head=1, keep_tail=1)
    saved = cli_json.orjson
    try:
        cli_json.orjson = None
        plain = do_line(chosen, "x", 1, raw)
        cli_json.orjson = orjson
        fast = do_line(chosen, "x", 1, raw)
    finally:
        cli_json.orjson = saved
    assert fast == plain
    if isinstance(plain, Outcome):
        assert plain.output == reference_line(json.loads(raw), budget, 1) + b"\n"
        assert plain.tokens_before == sum(estimate_tokens(m) for m in json.loads(raw)["messages"])
