"""``--jobs N``: JSONL lines done by N worker processes, handed back in input order.

The main process reads lines, groups them into chunks of about a mebibyte,
and keeps a bounded window of chunks in flight; each worker runs the same
``do_line`` as a single-process run, so the output is byte-identical to
``--jobs 1`` and memory stays bounded by the window, never by the dataset.
Workers ignore Ctrl-C: the main process decides how the run ends and stops
them.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import queue
import signal
import sys
import threading
from multiprocessing.connection import Connection
from typing import Any, Iterable, Iterator, List, Tuple

from ._cli_work import Done, Settings, serial

Lines = Iterable[Tuple[int, bytes]]

# A chunk is sent to a worker once it holds this many bytes or lines: large enough
# that pickling and the pipe cost little per line, small enough to keep memory low.
CHUNK_BYTES = 1 << 20
CHUNK_LINES = 2000
# Chunks in flight per worker: one being worked on, one waiting in line.
WINDOW_PER_JOB = 2


def _worker_signals() -> None:
    # Ctrl-C reaches the whole process group; the main process handles it for everyone.
    # SIGTERM (from the main process stopping the pool, or sent to the group) ends a
    # worker at once and quietly, whatever handler the main process had installed.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _serve(connection: Connection, settings: Settings, name: str) -> None:
    """A worker: do each chunk it is sent, send the results back, stop at ``None``."""
    _worker_signals()
    # A thread takes the chunks off the pipe as they come, so the main process never
    # waits to send one while this worker waits to send it an answer (which would be a
    # deadlock once both pipes are full). The main process bounds what is in flight.
    chunks: queue.SimpleQueue[Any] = queue.SimpleQueue()

    def receive() -> None:
        while True:
            try:
                chunk = connection.recv()
            except EOFError:
                chunk = None
            chunks.put(chunk)
            if chunk is None:
                return

    threading.Thread(target=receive, daemon=True).start()
    while True:
        chunk = chunks.get()
        if chunk is None:
            return
        connection.send(list(serial(settings, name, chunk)))


@contextlib.contextmanager
def _signals_for_workers() -> Iterator[None]:
    """While workers are forked, the dispositions they must start with (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    _worker_signals()
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, saved[0])
        signal.signal(signal.SIGTERM, saved[1])


def _chunks(lines: Lines) -> Iterator[List[Tuple[int, bytes]]]:
    chunk: List[Tuple[int, bytes]] = []
    size = 0
    for lineno, raw in lines:
        chunk.append((lineno, raw))
        size += len(raw)
        if size >= CHUNK_BYTES or len(chunk) >= CHUNK_LINES:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


class Workers:
    """``jobs`` worker processes for one run; a context manager that stops them.

    Each worker has a pipe of its own and chunks go round the workers in turn, so
    the k-th answer on worker w's pipe belongs to w's k-th chunk and the answers
    are put back in input order without a shared queue. No lock is shared, so a
    worker killed by a signal can never leave the others or the main process
    waiting on it.

    Args:
        settings: What to do to each conversation.
        name: The input's name, for messages.
        jobs: The number of worker processes (2 or more).
    """

    def __init__(self, settings: Settings, name: str, jobs: int) -> None:
        # fork on Linux starts a worker in milliseconds with everything already imported,
        # and is safe while this is the only thread (as it is in the command); with other
        # threads (main() called from a program), or where fork is unsafe or missing,
        # spawn re-imports the package in each worker instead.
        alone = threading.active_count() == 1
        method = "fork" if sys.platform == "linux" and alone else "spawn"
        context: Any = multiprocessing.get_context(method)
        self._pipes: List[Connection] = []
        self._processes: List[Any] = []
        with _signals_for_workers():
            for _ in range(jobs):
                mine, theirs = context.Pipe()
                process = context.Process(target=_serve, args=(theirs, settings, name), daemon=True)
                process.start()
                theirs.close()
                self._pipes.append(mine)
                self._processes.append(process)

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        if exc_info[0] is None:
            for pipe in self._pipes:
                with contextlib.suppress(OSError):
                    pipe.send(None)
        else:
            for process in self._processes:
                process.terminate()
        for process in self._processes:
            process.join()
        for pipe in self._pipes:
            pipe.close()

    def _answer(self, worker: int) -> List[Done]:
        try:
            answer: List[Done] = self._pipes[worker].recv()
        except EOFError:
            code = self._processes[worker].exitcode
            raise RuntimeError(f"worker process {worker} ended (exit code {code})") from None
        return answer

    def run(self, lines: Lines) -> Iterator[Done]:
        """Each non-blank line done, in input order, with at most a window of chunks held."""
        jobs = len(self._pipes)
        window = WINDOW_PER_JOB * jobs
        sent = received = 0
        for chunk in _chunks(lines):
            self._pipes[sent % jobs].send(chunk)
            sent += 1
            if sent - received >= window:
                yield from self._answer(received % jobs)
                received += 1
        while received < sent:
            yield from self._answer(received % jobs)
            received += 1
