"""Where ``ctx-compact`` writes: -o safety, streamed standard output, Ctrl-C and SIGTERM."""

from __future__ import annotations

import contextlib
import gc
import io
import json
import os
import select
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import IO, Any, Dict, List

import pytest

from ctx_compact.cli import interrupts as cli_interrupts
from ctx_compact.cli import io as cli_io
from ctx_compact.cli import main

ROOT = Path(__file__).resolve().parent.parent
WEATHER = ROOT / "examples" / "weather.json"
MESSAGES: List[Any] = json.loads(WEATHER.read_text(encoding="utf-8"))
KEPT = [MESSAGES[0], *MESSAGES[4:]]
EXAMPLE = ["--max-tokens", "150", "--keep-head", "1", "--keep-tail", "2"]
TO_STDOUT = ["--indent", "0", "-o", "/dev/stdout"]
KEPT_LINE = (json.dumps(KEPT, separators=(",", ":"), ensure_ascii=False) + "\n").encode()

posix = pytest.mark.skipif(sys.platform == "win32", reason="POSIX files and signals")


def jsonl(*values: Any) -> bytes:
    return "".join(json.dumps(v, ensure_ascii=False) + "\n" for v in values).encode("utf-8")


def start(*args: str, **kwargs: Any) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "ctx_compact", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        **kwargs,
    )


# --- -o safety ------------------------------------------------------------------------------


@posix
def test_output_through_a_symlink_replaces_the_target_and_keeps_the_link(tmp_path: Path):
    target = tmp_path / "data" / "trimmed.jsonl"
    target.parent.mkdir()
    target.write_text("old\n")
    link = tmp_path / "latest.jsonl"
    link.symlink_to(Path("data") / "trimmed.jsonl")
    assert main([str(WEATHER), *EXAMPLE, "--indent", "0", "-o", str(link)]) == 0
    assert link.is_symlink()
    assert os.readlink(link) == os.path.join("data", "trimmed.jsonl")
    assert target.read_bytes() == KEPT_LINE
    assert sorted(os.listdir(target.parent)) == ["trimmed.jsonl"]


@posix
def test_output_through_a_dangling_symlink_creates_its_target(tmp_path: Path):
    link = tmp_path / "out.json"
    link.symlink_to(tmp_path / "new.json")
    assert main([str(WEATHER), *EXAMPLE, "--indent", "0", "-o", str(link)]) == 0
    assert link.is_symlink()
    assert (tmp_path / "new.json").read_bytes() == KEPT_LINE


@posix
def test_output_to_dev_null_writes_to_the_device(tmp_path: Path):
    before = os.stat(os.devnull)
    assert main([str(WEATHER), *EXAMPLE, "-o", os.devnull]) == 0
    after = os.stat(os.devnull)
    assert stat.S_ISCHR(after.st_mode)
    assert (after.st_ino, after.st_rdev) == (before.st_ino, before.st_rdev)


@posix
def test_output_to_a_fifo_is_written_directly(tmp_path: Path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: List[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    assert main([str(WEATHER), *EXAMPLE, "--indent", "0", "-o", str(fifo)]) == 0
    reader.join(timeout=30)
    assert received == [KEPT_LINE]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert os.listdir(tmp_path) == ["pipe"]


@pytest.mark.skipif(not os.path.exists("/proc/self/fd"), reason="needs /proc")
@pytest.mark.parametrize("path", ["/dev/stdout", "/proc/self/fd/1"])
def test_output_to_a_descriptor_link_reaches_the_pipe(path: str):
    command = ["examples/weather.json", *EXAMPLE, "--indent", "0", "-o", path]
    done = subprocess.run(
        [sys.executable, "-m", "ctx_compact", *command],
        capture_output=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == KEPT_LINE


@pytest.mark.skipif(not os.path.exists("/proc/self/fd"), reason="needs /proc")
def test_output_to_a_descriptor_link_appends_to_the_shells_file(tmp_path: Path):
    log = tmp_path / "log.jsonl"
    log.write_bytes(b"earlier\n")
    with log.open("ab") as handle:
        done = subprocess.run(
            [sys.executable, "-m", "ctx_compact", "examples/weather.json", *EXAMPLE, *TO_STDOUT],
            stdout=handle,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            timeout=60,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    assert log.read_bytes() == b"earlier\n" + KEPT_LINE
    assert sorted(os.listdir(tmp_path)) == ["log.jsonl"]


# --- standard output is streamed ------------------------------------------------------------


# Python's own buffering as a user's shell has it: with PYTHONUNBUFFERED set (as CI and some
# containers do) every write is flushed anyway, and streaming could not be seen failing.
BUFFERED = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}


def read_line_within(stream: IO[bytes], seconds: float) -> bytes:
    """One line from a pipe, or what arrived of it when ``seconds`` ran out (never hangs)."""
    fd, got = stream.fileno(), b""
    deadline = time.monotonic() + seconds
    while not got.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            break
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        got += chunk
    return got


@posix
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_each_result_from_a_pipe_arrives_while_the_input_is_still_open(jobs: str):
    process = start("--jsonl", *EXAMPLE, "--jobs", jobs, env=BUFFERED)
    assert process.stdin is not None
    assert process.stdout is not None
    try:
        for _ in range(2):  # tail -f: each line is answered before the next one is written
            process.stdin.write(jsonl(MESSAGES))
            process.stdin.flush()
            assert read_line_within(process.stdout, 30) == KEPT_LINE
        process.stdin.close()
        assert process.stdout.read() == b""
        assert process.wait(timeout=60) == 0
    finally:
        process.kill()
        process.wait(timeout=60)
        for stream in (process.stdin, process.stdout, process.stderr):
            if stream is not None:
                stream.close()


@posix
def test_each_result_from_a_named_fifo_arrives_while_it_is_still_open(tmp_path: Path):
    fifo = tmp_path / "calls.jsonl"
    os.mkfifo(fifo)
    process = start("--jsonl", *EXAMPLE, str(fifo), env=BUFFERED)
    assert process.stdout is not None
    try:
        with os.fdopen(_writer(fifo), "wb") as writer:
            writer.write(jsonl(MESSAGES))
            writer.flush()
            assert read_line_within(process.stdout, 30) == KEPT_LINE
        assert process.wait(timeout=60) == 0
    finally:
        process.kill()
        process.wait(timeout=60)
        for stream in (process.stdin, process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def _writer(fifo: Path, timeout: float = 30) -> int:
    """The FIFO opened for writing once the command has opened it for reading (bounded)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:  # ENXIO: no reader yet
            time.sleep(0.02)
            continue
        os.set_blocking(fd, True)
        return fd
    raise AssertionError("the command never opened the FIFO")


def test_standard_output_needs_no_temporary_directory(tmp_path: Path):
    environment = dict(os.environ, TMPDIR=str(tmp_path / "missing"), TEMP="", TMP="")
    done = subprocess.run(
        [sys.executable, "-m", "ctx_compact", "--jsonl", *EXAMPLE],
        input=jsonl(MESSAGES, MESSAGES),
        capture_output=True,
        cwd=ROOT,
        env=environment,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, b"")
    assert done.stdout == KEPT_LINE * 2


# --- Ctrl-C and SIGTERM ---------------------------------------------------------------------


def wait_for_temporary(directory: Path, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(name.endswith(".tmp") for name in os.listdir(directory)):
            return
        time.sleep(0.02)
    raise AssertionError("the run never started writing")


@posix
@pytest.mark.parametrize(
    ("sent", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["ctrl-c", "sigterm"]
)
def test_signal_ends_the_run_quietly_leaving_the_output_untouched(
    sent: int, status: int, tmp_path: Path
):
    target = tmp_path / "out.jsonl"
    target.write_text("precious\n")
    process = start("--jsonl", *EXAMPLE, "-o", str(target))
    assert process.stdin is not None
    process.stdin.write(jsonl(MESSAGES))
    process.stdin.flush()
    wait_for_temporary(tmp_path)
    process.send_signal(sent)
    _, err = process.communicate(timeout=60)
    assert process.returncode == status
    assert err == b""
    assert target.read_text() == "precious\n"
    assert os.listdir(tmp_path) == ["out.jsonl"]


class _Interrupter:
    """A trace function sending this process ``signum`` at one chosen step of the run.

    The steps counted are the bytecode instructions run while an output is being
    opened, registered for cleanup, closed or put in place (while a frame of
    ``output``, of its ``with`` or of the run's ``ExitStack`` is on the stack),
    where CPython also runs signal handlers: step ``n`` of one run is the moment
    a Ctrl-C landing ``n`` instructions in would be seen.
    """

    def __init__(self, signum: int, step: int) -> None:
        self.signum = signum
        self.step = step
        self.counted = 0
        self.depth = 0
        self.sent = False
        # Each interrupts.held frame seen, and whether its block is under way: a signal
        # anywhere in the block is delivered as it ends, so the block is one step.
        self.blocks: Dict[FrameType, bool] = {}

    def __call__(self, frame: FrameType, event: str, arg: Any) -> Any:
        watched = _watched(frame)
        if frame.f_code is _HELD:
            if event == "return" and frame not in self.blocks:  # at its yield
                self.blocks[frame] = True
                if self.depth:
                    self._step()
            elif event == "call" and self.blocks.get(frame):  # resumed: the block is over
                self.blocks[frame] = False
        if event == "call":
            self.depth += watched
            if not (watched or self.depth):
                return None
            frame.f_trace_opcodes = True
        elif event == "return":
            self.depth -= watched
        elif event == "opcode" and self.depth and not any(self.blocks.values()):
            self._step()
        return self

    def _step(self) -> None:
        if not self.sent:
            self.counted += 1
            if self.counted == self.step:
                self.sent = True
                signal.raise_signal(self.signum)  # its handler runs now, as a real one would


_HELD = cli_interrupts.held.__wrapped__.__code__  # type: ignore[attr-defined]
_OUTPUT = {
    cli_io.output.__wrapped__.__code__,  # type: ignore[attr-defined]
    cli_io._replacing.__wrapped__.__code__,  # type: ignore[attr-defined]
}
# What a @contextmanager function returns: its __enter__ and __exit__ run the generator.
_GENERATOR_CM = type(cli_io.output(None, cli_io.Temporaries()))
_ENTER_EXIT = {_GENERATOR_CM.__enter__.__code__, _GENERATOR_CM.__exit__.__code__}
_EXIT_STACK = {contextlib.ExitStack.enter_context.__code__, contextlib.ExitStack.__exit__.__code__}


def _watched(frame: FrameType) -> bool:
    code = frame.f_code
    if code in _ENTER_EXIT:  # an output's only: not the input's, nor any other's
        generator = getattr(frame.f_locals.get("self"), "gen", None)
        return getattr(generator, "gi_code", None) in _OUTPUT
    return code in _OUTPUT or code in _EXIT_STACK


def _interrupted_at(interrupter: _Interrupter, args: List[str]) -> int:
    # No collection during the run: a handler running inside a finaliser that the
    # collector calls would have its error ignored, and the signal with it.
    gc.disable()
    previous = sys.gettrace()
    sys.settrace(interrupter)
    try:
        return main(args)
    finally:
        sys.settrace(previous)
        gc.enable()


@posix
@pytest.mark.parametrize(
    ("mode", "sent", "status"),
    [("array", signal.SIGINT, 130), ("jsonl", signal.SIGTERM, 143)],
    ids=["array-ctrl-c", "jsonl-sigterm"],
)
# An interrupt inside ExitStack's own code can skip the input's exit: the collector
# then closes the input file, with a ResourceWarning. The outputs are what is tested.
@pytest.mark.filterwarnings("ignore::ResourceWarning")
def test_a_signal_at_any_step_of_opening_or_replacing_an_output_leaves_no_file(
    mode: str, sent: int, status: int, tmp_path: Path
):
    # Every instruction from the output's opening to its replacing, one run each: a
    # signal landing anywhere ends the run with its status, leaves no temporary file,
    # leaves the output as it was or whole, and leaves the handlers as they were.
    data = tmp_path / "data.json"
    data.write_bytes(WEATHER.read_bytes() if mode == "array" else jsonl(MESSAGES, MESSAGES))
    out = tmp_path / "out.jsonl"
    args = [*EXAMPLE, "-o", str(out), str(data)]
    args = ["--jsonl", *args] if mode == "jsonl" else ["--indent", "0", *args]
    # One run untouched first, which also does the standard library's one-time set-up
    # (tempfile's name sequence, under a lock that an interrupt could leave held).
    assert main(args) == 0
    whole = KEPT_LINE * (2 if mode == "jsonl" else 1)
    assert out.read_bytes() == whole
    handlers = [signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)]
    step = 0
    while True:
        step += 1
        out.write_bytes(b"precious\n")
        interrupter = _Interrupter(sent, step)
        code = _interrupted_at(interrupter, args)
        assert sorted(os.listdir(tmp_path)) == ["data.json", "out.jsonl"], step
        assert out.read_bytes() in (b"precious\n", whole), step
        # main() called from a program leaves the program's handlers as they were.
        assert [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)] == handlers, step
        if not interrupter.sent:
            break  # past the last step: the run went through untouched
        assert code == status, step
        if step % 200 == 0:
            gc.collect()
    assert (code, out.read_bytes()) == (0, whole)
    assert step > 200  # the steps really were walked through


# --- a terminal as standard input -----------------------------------------------------------


class _TerminalInput(io.TextIOWrapper):
    def isatty(self) -> bool:
        return True


def test_no_file_on_a_terminal_says_it_reads_standard_input(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    monkeypatch.setattr(sys, "stdin", _TerminalInput(io.BytesIO(WEATHER.read_bytes())))
    assert main(EXAMPLE) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == KEPT
    assert err.startswith("ctx-compact: reading standard input (end it with Ctrl-D")


def test_a_file_or_a_pipe_is_read_without_a_notice(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(WEATHER.read_bytes())))
    assert main(EXAMPLE) == 0
    assert capsys.readouterr().err == ""
