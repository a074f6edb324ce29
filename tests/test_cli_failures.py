"""How ``ctx-compact`` ends when a run cannot go on: one line on standard error, its status.

Outputs that would overwrite one another, a parent or a worker killed outright,
a full disk, a file-size limit, a line too large for memory, and input that
would write control characters to the terminal.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator, List

import pytest

from ctx_compact.cli import main
from ctx_compact.cli import work as cli_work

ROOT = Path(__file__).resolve().parent.parent
WEATHER = ROOT / "examples" / "weather.json"
MESSAGES: List[Any] = json.loads(WEATHER.read_text(encoding="utf-8"))
EXAMPLE = ["--max-tokens", "150", "--keep-tail", "2"]

posix = pytest.mark.skipif(sys.platform == "win32", reason="POSIX files and signals")
linux = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="/proc, /dev/full and enforced memory limits"
)
# Bounded waits: generous, so a slow machine never fails them, and never asserted as timings.
PATIENCE = 60.0


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


# --- processes killed outright --------------------------------------------------------------


def _children(pid: int) -> List[int]:
    """The processes whose parent is ``pid`` and that still run (zombies left out)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            state = _state(int(entry))
            if state is not None and state[1] == pid:
                found.append(int(entry))
    return found


def _state(pid: int) -> Any:
    """``(state letter, parent)`` of a running process, ``None`` once it is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] == b"Z" else (fields[0], int(fields[1]))


def _wait_for(condition: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"gave up waiting: {what}")


class _Feeder(threading.Thread):
    """Writes conversations to a pipe until told to stop or until nobody reads it any more."""

    def __init__(self, fd: int) -> None:
        super().__init__(daemon=True)
        self.fd = fd
        self.stop = threading.Event()
        self.ended: Any = None
        self.block = jsonl(*[MESSAGES] * 200)

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                os.write(self.fd, self.block)  # raw writes: no lock for the main thread to wait on
            self.ended = "stopped"
        except OSError as exc:
            self.ended = exc


class _Run:
    """A ``--jobs 2`` run kept busy by endless standard input, with its output file under way."""

    def __init__(self, tmp_path: Path) -> None:
        self.output = tmp_path / "out.jsonl"
        self.output.write_bytes(b"kept\n")
        command = [sys.executable, "-m", "ctx_compact", "--jsonl", "--jobs", "2", *EXAMPLE]
        self.process = subprocess.Popen(
            [*command, "-o", str(self.output)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            cwd=ROOT,
        )
        assert self.process.stdin is not None
        self.feeder = _Feeder(self.process.stdin.fileno())
        self.feeder.start()
        self.workers: List[int] = []
        pid = self.process.pid
        self.workers = _wait_for(lambda: len(_children(pid)) >= 2 and _children(pid), "workers")
        temporary = tmp_path.glob
        _wait_for(
            lambda: any(p.stat().st_size for p in temporary(".out.jsonl.*.tmp")),
            "the first answers written",
        )

    def close(self) -> None:
        self.feeder.stop.set()
        for pid in [self.process.pid, *self.workers]:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        self.process.wait(timeout=PATIENCE)
        self.feeder.join(timeout=PATIENCE)
        for stream in (self.process.stdin, self.process.stderr):
            if stream is not None:
                stream.close()


@contextlib.contextmanager
def _busy_parallel_run(tmp_path: Path) -> Iterator[_Run]:
    run: Any = None
    try:
        run = _Run(tmp_path)
        yield run
    finally:
        if run is not None:
            run.close()


@linux
def test_workers_end_when_the_main_process_is_killed_outright(tmp_path: Path):
    # SIGKILL (or the out-of-memory killer) runs no cleanup: the workers must see it themselves.
    with _busy_parallel_run(tmp_path) as run:
        os.kill(run.process.pid, signal.SIGKILL)
        assert run.process.wait(timeout=PATIENCE) == -signal.SIGKILL
        _wait_for(lambda: not any(_state(pid) for pid in run.workers), "the workers to end")
        # Nobody holds standard input open any more: its writer is told, not blocked.
        run.feeder.join(timeout=PATIENCE)
        assert isinstance(run.feeder.ended, BrokenPipeError)
    assert run.output.read_bytes() == b"kept\n"


@linux
def test_a_worker_killed_mid_run_ends_the_run_with_the_status_of_its_signal(tmp_path: Path):
    with _busy_parallel_run(tmp_path) as run:
        os.kill(run.workers[1], signal.SIGKILL)
        assert run.process.wait(timeout=PATIENCE) == 128 + signal.SIGKILL
        assert run.process.stderr is not None
        err = run.process.stderr.read().decode()
        assert err in (
            f"ctx-compact: worker process {n} was killed by SIGKILL (out of memory?)\n"
            for n in (1, 2)
        )
        _wait_for(lambda: not any(_state(pid) for pid in run.workers), "the other worker to end")
    assert run.output.read_bytes() == b"kept\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl"]


# --- outputs that refuse a write, input past the memory limit -------------------------------

Completed = subprocess.CompletedProcess[bytes]
# Runs the command under a resource limit: set here, kept across exec.
LIMITED = (
    "import os, resource, sys\n"
    "limit = getattr(resource, sys.argv[1])\n"
    "resource.setrlimit(limit, (int(sys.argv[2]), int(sys.argv[2])))\n"
    "os.execv(sys.executable, [sys.executable, '-m', 'ctx_compact', *sys.argv[3:]])\n"
)


def limited(
    limit: str, value: int, *args: str, **kwargs: Any
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-c", LIMITED, limit, str(value), *args],
        stderr=subprocess.PIPE,
        cwd=ROOT,
        timeout=PATIENCE,
        check=False,
        **kwargs,
    )


MODES = {
    "array": [*EXAMPLE, str(WEATHER)],
    "jsonl": ["--jsonl", *EXAMPLE],
    "jobs": ["--jsonl", "--jobs", "2", *EXAMPLE],
    "check": ["check", "--jsonl"],
}


def _dataset(tmp_path: Path, mode: str = "jsonl") -> Path:
    data = tmp_path / "data.jsonl"
    # check writes a line for each broken conversation; compaction, none for a good one.
    example = "broken.json" if mode == "check" else "weather.json"
    value = json.loads((ROOT / "examples" / example).read_text(encoding="utf-8"))
    data.write_bytes(jsonl(*[value] * 400))
    return data


@linux
@pytest.mark.parametrize("mode", list(MODES))
def test_standard_output_on_a_full_disk_is_one_line_and_status_2(mode: str, tmp_path: Path):
    args = MODES[mode] if mode == "array" else [*MODES[mode], str(_dataset(tmp_path, mode))]
    with open("/dev/full", "wb") as full:
        done = subprocess.run(
            [sys.executable, "-m", "ctx_compact", *args],
            stdout=full,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            timeout=PATIENCE,
            check=False,
        )
    assert (done.returncode, done.stderr) == (
        2,
        b"ctx-compact: <stdout>: cannot write: No space left on device\n",
    )


@posix
@pytest.mark.parametrize("buffered", [True, False], ids=["buffered", "unbuffered"])
@pytest.mark.parametrize("mode", ["array", "jsonl", "jobs"])
def test_output_past_the_file_size_limit_is_one_line_and_status_2(
    mode: str, buffered: bool, tmp_path: Path
):
    # Unbuffered (python -u), standard output is the raw file, which takes part of a write.
    environment = dict(os.environ, PYTHONUNBUFFERED="" if buffered else "1")
    data = _dataset(tmp_path)
    args = MODES[mode] if mode == "array" else [*MODES[mode], str(data)]
    with open(tmp_path / "stdout.jsonl", "wb") as stdout:
        done = limited("RLIMIT_FSIZE", 200, *args, stdout=stdout, env=environment)
    assert (done.returncode, done.stderr) == (
        2,
        b"ctx-compact: <stdout>: cannot write: File too large\n",
    )
    # An -o file is written beside itself: past the limit, it is left as it was.
    kept = tmp_path / "kept.jsonl"
    kept.write_bytes(b"kept\n")
    options = ["-o", str(kept)]
    done = limited("RLIMIT_FSIZE", 200, *args, *options, stdout=subprocess.DEVNULL, env=environment)
    assert (done.returncode, done.stderr) == (
        2,
        f"ctx-compact: {kept}: cannot write: File too large\n".encode(),
    )
    assert kept.read_bytes() == b"kept\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "data.jsonl",
        "kept.jsonl",
        "stdout.jsonl",
    ]


def _gzip_bomb(path: Path) -> None:
    """A gzip file of a few megabytes whose second line unpacks to a gibibyte, with no newline."""
    member = gzip.compress(b"a" * (1 << 20))  # gzip reads concatenated members as one stream
    with open(path, "wb") as bomb:
        bomb.write(gzip.compress(jsonl(MESSAGES)))
        for _ in range(1024):
            bomb.write(member)


@linux
@pytest.mark.parametrize("mode", ["array", "jsonl", "jobs"])
def test_a_gzip_bomb_past_the_memory_limit_is_one_line_and_status_2(mode: str, tmp_path: Path):
    bomb = tmp_path / "bomb.jsonl.gz"
    _gzip_bomb(bomb)
    kept = tmp_path / "kept.jsonl"
    kept.write_bytes(b"kept\n")
    args = [*EXAMPLE, str(bomb)] if mode == "array" else [*MODES[mode], str(bomb)]
    done = limited("RLIMIT_AS", 256 << 20, *args, "-o", str(kept), stdout=subprocess.DEVNULL)
    where = f"{bomb}" if mode == "array" else f"{bomb}:2"
    what = "the input" if mode == "array" else "the line"
    assert (done.returncode, done.stderr.decode()) == (
        2,
        f"ctx-compact: {where}: cannot read: {what} is too large to hold in memory\n",
    )
    assert kept.read_bytes() == b"kept\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bomb.jsonl.gz", "kept.jsonl"]


@linux
@pytest.mark.parametrize("mode", ["compact", "inspect"])
def test_a_value_past_the_memory_limit_is_one_line_and_status_2(mode: str, tmp_path: Path):
    # Read whole, then found too large to work on: no line to name, and no traceback.
    data = tmp_path / "big.json"
    data.write_text(json.dumps([{"role": "user", "content": "x" * (100 << 20)}]))
    args = ["inspect", str(data)] if mode == "inspect" else [*EXAMPLE, str(data)]
    done = limited("RLIMIT_AS", 256 << 20, *args, stdout=subprocess.DEVNULL)
    assert (done.returncode, done.stderr.decode()) == (
        2,
        f"ctx-compact: out of memory: the input holds a value too large to {mode}\n",
    )


def test_a_line_too_large_to_compact_in_memory_can_be_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    run_one = cli_work.run_one

    def short_of_memory(settings: Any, messages: Any, holder: Any, where: str, fast: bool) -> Any:
        if where.endswith(":2"):
            raise MemoryError
        return run_one(settings, messages, holder, where, fast)

    monkeypatch.setattr(cli_work, "run_one", short_of_memory)
    data = tmp_path / "data.jsonl"
    data.write_bytes(jsonl(MESSAGES, MESSAGES, MESSAGES))
    assert main(["--jsonl", *EXAMPLE, str(data)]) == 2
    assert capsys.readouterr().err.startswith(
        f"ctx-compact: {data}:2: the line is too large to compact in memory\n"
    )
    assert main(["--jsonl", "--skip-invalid", *EXAMPLE, str(data)]) == 4
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 2
    assert f"skipped {data}:2: the line is too large to compact in memory" in err


# --- standard streams closed before the run -------------------------------------------------

STREAM_MODES = {
    "array": [*EXAMPLE, "-"],
    "jsonl": ["--jsonl", *EXAMPLE],
    "jobs": ["--jsonl", "--jobs", "2", *EXAMPLE],
    "check": ["check"],
    "repair": ["repair", "--jsonl"],
}


def _closed(stream: str, args: List[str]) -> subprocess.CompletedProcess[bytes]:
    # As `ctx-compact ... <&-` in a shell: the descriptor is closed, not merely at its end.
    return subprocess.run(
        ["sh", "-c", f'exec "$0" -m ctx_compact "$@" {stream}&-', sys.executable, *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        cwd=ROOT,
        timeout=PATIENCE,
        check=False,
    )


@posix
@pytest.mark.parametrize("mode", list(STREAM_MODES))
def test_closed_standard_input_is_one_line_and_status_2(mode: str):
    done = _closed("<", STREAM_MODES[mode])
    assert (done.returncode, done.stdout, done.stderr) == (
        2,
        b"",
        b"ctx-compact: <stdin>: cannot read: standard input is closed\n",
    )


@posix
@pytest.mark.parametrize("mode", ["array", "check", "repair"])
def test_closed_standard_output_is_one_line_and_status_2(mode: str):
    args = {"array": [*EXAMPLE], "check": ["check"], "repair": ["repair"]}[mode]
    done = _closed(">", [*args, str(WEATHER)])
    assert (done.returncode, done.stderr) == (
        2,
        b"ctx-compact: <stdout>: cannot write: standard output is closed\n",
    )
