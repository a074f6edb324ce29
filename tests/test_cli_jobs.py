"""``ctx-compact --jsonl --jobs N``: the same bytes as one process, in order, bounded memory."""

from __future__ import annotations

import gzip
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator, List, Tuple

import pytest

from ctx_compact.cli import jobs as cli_jobs
from ctx_compact.cli import main
from ctx_compact.cli.io import Failure, open_input, read_spans
from ctx_compact.cli.work import Settings

ROOT = Path(__file__).resolve().parent.parent
WEATHER = ROOT / "examples" / "weather.json"
BROKEN = ROOT / "examples" / "broken.json"
MESSAGES: List[Any] = json.loads(WEATHER.read_text(encoding="utf-8"))
BROKEN_MESSAGES: List[Any] = json.loads(BROKEN.read_text(encoding="utf-8"))
HUGE = [{"role": "user", "content": "x" * 1000}]
COMMAND = [sys.executable, "-m", "ctx_compact", "--jsonl", "--max-tokens", "150"]
OPTIONS = ["--keep-tail", "2", "--skip-invalid"]
PARALLEL = ["--jobs", "2", "-o"]


def dataset() -> bytes:
    """A mixed dataset: fitting, misfitting, broken, blank, invalid and unicode lines."""
    lines: List[bytes] = []
    for n in range(400):
        kind = n % 9
        if kind == 3:
            lines.append(b'[{"role": "user"}, x]')
        elif kind == 5:
            lines.append(b"")
        else:
            value: Any = [HUGE, BROKEN_MESSAGES, {"id": n, "messages": MESSAGES}][kind % 3]
            if kind == 7:
                value = [{"role": "user", "content": f"café 東京 {n}"}, *MESSAGES]
            lines.append(json.dumps(value, ensure_ascii=False).encode())
    return b"\n".join(lines) + b"\n"


def run(tmp_path: Path, jobs: int, *extra: str) -> Tuple[int, bytes, bytes, bytes, bytes]:
    data = tmp_path / "data.jsonl"
    if not data.exists():
        data.write_bytes(dataset())
    report, rejects = tmp_path / f"report{jobs}.jsonl", tmp_path / f"rejects{jobs}.jsonl"
    files = ["--report", str(report), "--rejects", str(rejects)]
    done = subprocess.run(
        [*COMMAND, *OPTIONS, *files, "--jobs", str(jobs), *extra, str(data)],
        capture_output=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    # The closing line names the rejects files, which differ by run.
    stderr = done.stderr.replace(f"rejects{jobs}.".encode(), b"rejects.")
    reasons = tmp_path / f"rejects{jobs}.reasons.jsonl"
    rejected = rejects.read_bytes() + reasons.read_bytes()
    return done.returncode, done.stdout, stderr, report.read_bytes(), rejected


def test_jobs_2_gives_the_same_bytes_as_jobs_1(tmp_path: Path):
    one = run(tmp_path, 1, "--explain")
    two = run(tmp_path, 2, "--explain")
    assert one[0] == 5  # its broken lines are written broken; 5 outranks 4
    assert two == one
    assert len(one[1].splitlines()) == 400 - 400 // 9 * 2 - 1  # less blank and invalid lines


def test_jobs_0_means_one_per_cpu(tmp_path: Path):
    assert run(tmp_path, 0) == run(tmp_path, 1)


def test_jobs_needs_jsonl(capsys: pytest.CaptureFixture[str]):
    from ctx_compact.cli import main

    assert main([str(WEATHER), "--max-tokens", "150", "--jobs", "2"]) == 2
    assert "--jobs needs --jsonl" in capsys.readouterr().err


def test_jobs_in_process_and_bad_line_stops_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    from ctx_compact.cli import main

    data = tmp_path / "data.jsonl"
    data.write_bytes(dataset())
    target = tmp_path / "out.jsonl"
    target.write_text("precious\n")
    assert (
        main(["--jsonl", "--max-tokens", "150", "--jobs", "2", "-o", str(target), str(data)]) == 2
    )
    assert capsys.readouterr().err.endswith(
        "ctx-compact: " + str(data) + ":4:20: invalid JSON: Expecting value\n"
        "ctx-compact: stopped at line 4; --skip-invalid skips such lines and goes on"
        " (--rejects FILE keeps them)\n"
    )
    assert target.read_text() == "precious\n"
    assert sorted(os.listdir(tmp_path)) == ["data.jsonl", "out.jsonl"]


def test_at_most_a_window_of_chunks_is_in_flight(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(cli_jobs, "CHUNK_LINES", 3)
    read = 0
    line = json.dumps(MESSAGES).encode()

    def lines() -> Iterator[Tuple[int, bytes]]:
        nonlocal read
        for n in range(1, 301):
            read += 1
            yield n, line

    window = cli_jobs.WINDOW_PER_JOB * 2
    seen = []
    with cli_jobs.Workers(Settings(max_tokens=150), "x", 2) as workers:
        for lineno, _ in workers.run(cli_jobs._chunks(lines())):
            seen.append(lineno)
            # Lines read but not yet handed back never exceed the window of chunks.
            assert read - len(seen) <= window * 3
    assert seen == list(range(1, 301))


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX process groups and signals")
@pytest.mark.parametrize(
    ("sent", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["ctrl-c", "sigterm"]
)
def test_interrupted_parallel_run_is_quiet_and_leaves_nothing(
    sent: int, status: int, tmp_path: Path
):
    target = tmp_path / "out.jsonl"
    target.write_text("precious\n")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ctx_compact",
            "--jsonl",
            "--max-tokens",
            "150",
            *PARALLEL,
            str(target),
        ],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        start_new_session=True,
    )
    assert process.stdin is not None
    process.stdin.write(json.dumps(MESSAGES).encode() + b"\n")
    process.stdin.flush()
    deadline = time.monotonic() + 30
    while not any(name.endswith(".tmp") for name in os.listdir(tmp_path)):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    time.sleep(0.3)  # the workers are up
    os.killpg(process.pid, sent)  # as a terminal's Ctrl-C does: the whole group
    _, err = process.communicate(timeout=60)
    assert (process.returncode, err) == (status, b"")
    assert target.read_text() == "precious\n"
    assert os.listdir(tmp_path) == ["out.jsonl"]


# Run in a process of its own (fork needs one thread): main() once per step, with the
# signal sent at the step-th line run in Workers.__init__, its _start or a block they
# hold. Each step runs in a child forked from a process that never ran main(), and
# reports what the run left running.
_WORKER_START_STEPS = """
import json, multiprocessing, os, signal, sys, threading
from ctx_compact.cli import interrupts, jobs, main

signum, status, data, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
whole = open(out, "rb").read()
starts = (jobs.Workers.__init__.__code__, jobs.Workers._start.__code__)
hold = interrupts.held.__wrapped__.__code__


def walk(step):
    state = {"lines": 0, "sent": False, "starting": 0}

    def tracer(frame, event, arg):
        code = frame.f_code
        if code in starts:
            state["starting"] += {"call": 1, "return": -1}.get(event, 0)
        elif code is not hold or not state["starting"]:
            return None
        if event == "line" and not state["sent"]:
            state["lines"] += 1
            if state["lines"] == step:
                state["sent"] = True
                signal.raise_signal(signum)
        return tracer

    with open(out, "wb") as handle:
        handle.write(b"precious\\n")
    sys.settrace(tracer)
    try:
        code = main(["--jsonl", "--jobs", "2", "--max-tokens", "150", "--keep-tail", "2",
                     "-o", out, data])
    finally:
        sys.settrace(None)
    return {
        "step": step,
        "sent": state["sent"],
        "status": code,
        "files": sorted(os.listdir(os.path.dirname(out))),
        "output": open(out, "rb").read() in (b"precious\\n", whole),
        # Nothing the run started outlives it: no feeder thread, no worker.
        "left": threading.active_count() - 1 + len(multiprocessing.active_children()),
    }


step = 0
while True:
    step += 1
    reading, writing = os.pipe()
    child = os.fork()
    if not child:
        os.close(reading)
        with os.fdopen(writing, "w") as report:
            report.write(json.dumps(walk(step)))
        os._exit(0)
    os.close(writing)
    with os.fdopen(reading) as report:
        run = json.loads(report.read())
    assert os.waitpid(child, 0)[1] == 0
    print(json.dumps(run), flush=True)
    if not run["sent"]:
        break
"""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize(
    ("sent", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["ctrl-c", "sigterm"]
)
def test_a_signal_at_any_step_of_starting_the_workers_ends_the_run(
    sent: int, status: int, tmp_path: Path
):
    # While workers are forked, they must start ignoring Ctrl-C; the main process must not:
    # a signal then was lost (Ctrl-C, ignored) or ended it at once, its temporary file left
    # behind (SIGTERM, at its default).
    data = tmp_path / "data.jsonl"
    data.write_bytes(json.dumps(MESSAGES).encode() + b"\n")
    out = tmp_path / "out.jsonl"
    assert (
        main(["--jsonl", "--max-tokens", "150", "--keep-tail", "2", "-o", str(out), str(data)]) == 0
    )
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _WORKER_START_STEPS,
            str(int(sent)),
            str(status),
            str(data),
            str(out),
        ],
        capture_output=True,
        cwd=ROOT,
        timeout=600,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, b"")
    runs = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(runs) > 20  # the steps really were walked through
    for run in runs[:-1]:
        assert run == {
            "step": run["step"],
            "sent": True,
            "status": status,
            "files": ["data.jsonl", "out.jsonl"],
            "output": True,
            "left": 0,
        }
    assert runs[-1]["status"] == 0
    assert runs[-1]["left"] == 0


def test_workers_beside_another_thread_are_spawned_and_agree(tmp_path: Path):
    # fork is only safe while the process has one thread; main() called from a
    # threaded program gets spawned workers, which cannot share the open file:
    # they are sent its lines, with the same answers.
    line = json.dumps({"id": 1, "messages": MESSAGES}).encode() + b"\n"
    data = tmp_path / "data.jsonl"
    data.write_bytes(line * 20)
    settings = Settings(max_tokens=150, keep_tail=2)
    expected = list(cli_jobs.serial(settings, "x", enumerate([line] * 20, 1)))
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        with open_input(str(data)) as source, cli_jobs.Workers(settings, "x", 2) as workers:
            chunks = list(workers.chunks(source))
            assert all(isinstance(chunk, list) for chunk in chunks)
            assert list(workers.run(chunks)) == expected
    finally:
        stop.set()
        other.join()


# Forked workers need a process with one thread, which a test session is not
# always (a server thread another test left): these run in a fresh interpreter.
SPANS = """
import sys
from ctx_compact.cli import jobs as cli_jobs
from ctx_compact.cli.io import Failure, open_input, read_jsonl
from ctx_compact.cli.work import Settings

path, cut = sys.argv[1], int(sys.argv[2])
settings = Settings(max_tokens=150, keep_tail=2)
with open_input(path) as source:
    expected = list(cli_jobs.serial(settings, path, read_jsonl(source.stream, path)))
with open_input(path) as source, cli_jobs.Workers(settings, path, 2) as workers:
    chunks = list(workers.chunks(source))
    print(len(chunks), all(isinstance(chunk, cli_jobs.Span) for chunk in chunks))
    if cut:
        with open(path, "r+b") as data:
            data.truncate(cut)
    try:
        print(list(workers.run(chunks)) == expected)
    except Failure as exc:
        print(exc)
"""


@pytest.mark.skipif(sys.platform != "linux", reason="workers are forked on Linux only")
@pytest.mark.parametrize("cut", [0, 100], ids=["whole", "cut short"])
def test_forked_workers_read_spans_of_a_regular_file_themselves(cut: int, tmp_path: Path):
    data = tmp_path / "data.jsonl"
    data.write_bytes(dataset())
    done = subprocess.run(
        [sys.executable, "-c", SPANS, str(data), str(cut)],
        capture_output=True,
        cwd=ROOT,
        timeout=120,
        check=True,
        text=True,
    )
    spans, answer = done.stdout.splitlines()
    assert spans == "1 True"  # the dataset is under a mebibyte: one span
    if cut:
        # Never a short output: the run stops, naming the file.
        assert answer == f"{data}: the file was cut short while it was being read"
    else:
        assert answer == "True"


def test_a_span_read_in_short_preads_gives_its_lines(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    # A single pread returns at most about 2 GiB: a span with a longer line takes several.
    data = tmp_path / "data.jsonl"
    data.write_bytes(b"skipped\nfirst\n\nthird line\nlast")
    real = os.pread
    monkeypatch.setattr(cli_jobs.os, "pread", lambda fd, n, at: real(fd, min(n, 3), at))
    with data.open("rb") as stream:
        span = cli_jobs.Span(stream.fileno(), 2, 8, data.stat().st_size - 8)
        lines = list(cli_jobs._lines(span, "x"))
        assert lines == [(2, b"first\n"), (3, b"\n"), (4, b"third line\n"), (5, b"last")]
        with pytest.raises(Failure, match=r"^x: the file was cut short while it was being read$"):
            list(cli_jobs._lines(span._replace(length=span.length + 1), "x"))


@pytest.mark.parametrize("size", [1, 7, 64, 1 << 20])
@pytest.mark.parametrize("ending", [b"\n", b""], ids=["newline", "no final newline"])
def test_read_spans_cuts_whole_lines_and_numbers_them(size: int, ending: bytes, tmp_path: Path):
    lines = [b"", b"a", b"bb\r", b"x" * 100, b"", b"\xc3\xa9\xe6\x9d\xb1", b"last"]
    data = tmp_path / "data.jsonl"
    data.write_bytes(b"skipped\n" + b"\n".join(lines) + ending)
    with data.open("rb") as stream:
        stream.readline()  # spans start where the stream is
        spans = list(read_spans(stream, "x", size))
        assert stream.tell() == data.stat().st_size
    content = data.read_bytes()
    got = []
    for first, offset, length in spans:
        block = content[offset : offset + length]
        assert block.endswith(b"\n") or offset + length == len(content)
        got += enumerate(io.BytesIO(block), first)
    assert spans[0][1] == len(b"skipped\n")
    assert got == list(enumerate(io.BytesIO(content[len(b"skipped\n") :]), 1))
    if size == 1:  # a buffer shorter than every line: one line a span
        assert len(spans) == len(lines)
    elif size == 1 << 20:  # all in one buffer: a last line with no newline ends another span
        assert len(spans) == (1 if ending else 2)


@pytest.mark.parametrize("source", ["gzip", "pipe", "stdin file"])
def test_jobs_2_agrees_on_gzip_piped_and_partly_read_input(source: str, tmp_path: Path):
    raw = dataset()
    data = tmp_path / "data.jsonl"
    data.write_bytes(raw)
    name, stdin_data, stdin_file = str(data), None, None
    if source == "gzip":
        name = str(tmp_path / "data.jsonl.gz")
        Path(name).write_bytes(gzip.compress(raw))
    elif source == "pipe":
        name, stdin_data = "-", raw
    else:
        name, stdin_file = "-", data
    outputs = []
    for jobs in ("1", "2"):
        stdin = open(stdin_file, "rb") if stdin_file else None  # noqa: SIM115
        try:
            if stdin is not None:
                stdin.seek(len(raw) // 2)  # standard input already partly read
            done = subprocess.run(
                [*COMMAND, *OPTIONS, "--jobs", jobs, name],
                input=stdin_data,
                stdin=stdin,
                capture_output=True,
                cwd=ROOT,
                timeout=120,
                check=False,
            )
        finally:
            if stdin is not None:
                stdin.close()
        outputs.append((done.returncode, done.stdout, done.stderr))
    assert outputs[0] == outputs[1]
    assert outputs[0][1]
