"""``--jobs N``: JSONL lines done by N worker processes, handed back in input order.

How the work is shared out, and what it keeps (the bytes of one process, bounded
memory, workers that end with the run however it ends) is in docs/command-line.md.
"""

from __future__ import annotations

import collections
import io
import multiprocessing
import os
import queue
import select
import signal
import sys
import threading
from multiprocessing.connection import Connection, wait
from typing import Any, Deque, Dict, Iterable, Iterator, List, NamedTuple, Optional, Tuple, Union

from .interrupts import held, unblock
from .io import Failure, Source, read_jsonl, read_spans
from .work import Done, Settings, serial

Lines = Iterable[Tuple[int, bytes]]
# Numbered lines read by the main process and sent on.
LineChunk = List[Tuple[int, bytes]]


class Span(NamedTuple):
    """Whole lines of the input file for a worker to read itself: ``length`` bytes at ``offset``.

    ``fd`` is the file as the main process opened it, which forked workers share.
    """

    fd: int
    first_line: int
    offset: int
    length: int


# What a worker is sent: lines, or a span of the file to read them from.
Chunk = Union[LineChunk, Span]


# A chunk is cut once it holds this many bytes or lines: large enough that the pipe
# and the hand-over cost little per line, small enough to keep memory low.
CHUNK_BYTES = 1 << 20
CHUNK_LINES = 2000
# Chunks read but not yet written, per worker: one being worked on, one waiting.
WINDOW_PER_JOB = 2
# How long stopping waits for a feeder thread, or a worker's exit status, in seconds.
_PATIENCE = 5.0


def _lines(chunk: Chunk, name: str) -> Lines:
    """A chunk's lines; a span is read here, from the file shared with the main process."""
    if not isinstance(chunk, Span):
        return chunk
    try:
        block = _read(chunk, name)
    except MemoryError:  # a span is whole lines: here, one line of gigabytes
        raise Failure(
            f"{name}:{chunk.first_line}: cannot read: the line is too large to hold in memory"
        ) from None
    return enumerate(io.BytesIO(block), chunk.first_line)


def _read(span: Span, name: str) -> bytes:
    parts = []
    done = 0
    while done < span.length:  # one pread returns at most about 2 GiB
        try:
            data = os.pread(span.fd, span.length - done, span.offset + done)
        except OSError as exc:
            raise Failure(f"{name}: cannot read: {exc.strerror or exc}") from None
        if not data:
            raise Failure(f"{name}: the file was cut short while it was being read")
        parts.append(data)
        done += len(data)
    return b"".join(parts)


def _serve(
    connection: Connection, settings: Settings, name: str, inherited: List[Connection]
) -> None:
    """A worker: do each chunk it is sent, answer with its lines done (or a ``Failure``'s text).

    It ends at ``None``, and with the main process however that ends (SIGKILL,
    the out-of-memory killer): its pipe then reads as ended, a send to it fails,
    and in the middle of a chunk its parent has changed. ``inherited`` are the
    main process's ends of the pipes, copies of which a forked worker holds:
    closed here, so that its pipe can end at all.
    """
    for end in inherited:
        end.close()
    parent = os.getppid()
    # Ctrl-C reaches the whole process group: the main process handles it for everyone.
    # SIGTERM ends a worker at once and quietly, whatever the main process's handler.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    unblock()  # started inside held(): a Ctrl-C meanwhile is now dropped, a SIGTERM ends it
    while True:
        try:
            chunk = connection.recv()
        except EOFError:
            return
        if chunk is None:
            return
        answer: Union[List[Done], str]
        try:
            lines = _lines(chunk, name)
        except Failure as exc:
            answer = str(exc)
        else:
            answer = []
            for done in serial(settings, name, lines):
                if os.getppid() != parent:
                    return  # orphaned: nobody will read this chunk's answer
                answer.append(done)
        try:
            connection.send(answer)
        except OSError:  # the main process is gone
            return


def _feed(connection: Connection, chunks: queue.SimpleQueue[Optional[Chunk]]) -> None:
    """A main-process thread sending one worker its chunks until ``None``, or the worker is gone."""
    while True:
        chunk = chunks.get()
        try:
            connection.send(chunk)
        except OSError:
            return
        if chunk is None:
            return


def _readable(fd: int) -> bool:
    """Whether reading ``fd`` would return at once (POSIX; a pipe or terminal)."""
    return bool(select.select([fd], [], [], 0)[0])


def _may_read(live: Optional[int], due: int) -> bool:
    """Whether to read on: not when that waits for live input while ``due`` chunks are out."""
    return live is None or not due or _readable(live)


def _live_fd(source: Optional[Source]) -> Optional[int]:
    """The descriptor of a live input whose lines may trickle in, or ``None``."""
    # select() takes only sockets on Windows.
    if source is None or not source.live or sys.platform == "win32":
        return None
    return (source.raw or source.stream).fileno()


def _chunks(lines: Lines, live: Optional[int] = None) -> Iterator[LineChunk]:
    chunk: LineChunk = []
    size = 0
    for lineno, raw in lines:
        chunk.append((lineno, raw))
        size += len(raw)
        # From a live input a chunk is also cut when no more has arrived yet, so that a
        # line trickling in (tail -f) is done now, not once a thousand more follow it.
        full = size >= CHUNK_BYTES or len(chunk) >= CHUNK_LINES
        if full or (live is not None and not _readable(live)):
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


class Workers:
    """``jobs`` worker processes for one run; a context manager that stops them.

    Not ``concurrent.futures.ProcessPoolExecutor`` nor ``multiprocessing.Pool``,
    for three behaviours the tests hold (tests/test_cli_failures.py, test_cli_jobs.py).
    A worker killed by a signal (the out-of-memory killer) ends the run naming the
    worker and the signal, with the status 128 + N: the executor reports only
    ``BrokenProcessPool``, with neither, and ``Pool`` starts another worker and waits
    for the lost chunk forever. Memory stays bounded: ``Executor.map`` takes its whole
    input at once, and ``Pool.imap`` reads all of it ahead of the answers handed back.
    And the workers end when the main process is killed outright: the executor's
    forked workers hold copies of their task queue's writing end, so they wait on it
    forever. Here each worker has a pipe of its own, whose end tells which worker
    ended, and no lock is shared that a killed worker could leave held.

    A chunk goes to the worker with the fewest chunks waiting, sent by a thread
    per worker so that reading answers never waits on a send; a worker answers in
    the order it was sent its chunks, which tells which chunk an answer is for.

    Args:
        settings: What to do to each conversation.
        name: The input's name, for messages.
        jobs: The number of worker processes (2 or more).
    """

    def __init__(self, settings: Settings, name: str, jobs: int) -> None:
        # fork on Linux starts a worker in milliseconds with everything already imported,
        # and is safe while this is the only thread (as it is in the command, until the
        # feeders below start); with other threads (main() called from a program), or
        # where fork is unsafe or missing, spawn re-imports the package in each worker.
        alone = threading.active_count() == 1
        method = "fork" if sys.platform == "linux" and alone else "spawn"
        context: Any = multiprocessing.get_context(method)
        # Forked workers share the main process's open files, so they can read a span.
        self._forked = method == "fork"
        self._pipes: List[Connection] = []
        self._processes: List[Any] = []
        # Each worker's chunks: being sent by its feeder, and numbered, not yet answered.
        self._queues: List[queue.SimpleQueue[Optional[Chunk]]] = []
        self._feeders: List[threading.Thread] = []
        self._waiting: List[Deque[int]] = []
        try:
            self._start(context, settings, name, jobs)
        except BaseException:
            # A Ctrl-C or SIGTERM delivered as the workers have started (or a failed start)
            # stops what had started: no worker or feeder outlives the call.
            self.__exit__(*sys.exc_info())
            raise

    def _start(self, context: Any, settings: Settings, name: str, jobs: int) -> None:
        # Held while workers and feeders start: the main process gets a Ctrl-C or SIGTERM
        # once they all have (none lands inside a start, where what started is not yet
        # known), and each worker and feeder starts with both blocked.
        with held():
            for _ in range(jobs):
                mine, theirs = context.Pipe()
                # A forked worker closes its copies of this process's ends, its own included;
                # a spawned one never had them (pickling them would hand it copies).
                inherited = [*self._pipes, mine] if self._forked else []
                process = context.Process(
                    target=_serve, args=(theirs, settings, name, inherited), daemon=True
                )
                process.start()
                theirs.close()
                self._pipes.append(mine)
                self._processes.append(process)
            for pipe in self._pipes:
                chunks: queue.SimpleQueue[Optional[Chunk]] = queue.SimpleQueue()
                feeder = threading.Thread(target=_feed, args=(pipe, chunks), daemon=True)
                feeder.start()
                self._queues.append(chunks)
                self._feeders.append(feeder)
                self._waiting.append(collections.deque())

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        if exc_info[0] is not None:
            for process in self._processes:
                process.terminate()
        for chunks in self._queues:
            chunks.put(None)  # a worker still running stops after its last chunk
        for feeder in self._feeders:
            feeder.join(_PATIENCE)
        for process in self._processes:
            process.join()
        for pipe in self._pipes:
            pipe.close()

    def chunks(self, source: Source) -> Iterator[Chunk]:
        """The chunks of ``source``'s JSONL lines: spans of a regular file, else lines read."""
        if self._forked and source.size is not None and source.raw is None:
            fd = source.stream.fileno()
            for first, offset, length in read_spans(source.stream, source.name, CHUNK_BYTES):
                yield Span(fd, first, offset, length)
        else:
            yield from _chunks(read_jsonl(source.stream, source.name), _live_fd(source))

    def run(self, chunks: Iterable[Chunk], source: Optional[Source] = None) -> Iterator[Done]:
        """Each non-blank line of ``chunks`` done, in input order, with a window held at most.

        When ``source`` is a live input (a pipe or a terminal), the next chunk is
        not waited for while answers are due: they are handed back as they come.

        Raises:
            Failure: A worker could not read its span of the input, or was killed.
        """
        chunks = iter(chunks)
        live = _live_fd(source)
        window = WINDOW_PER_JOB * len(self._pipes)
        answers: Dict[int, List[Done]] = {}  # answered, not yet handed back
        more = True
        sent = written = 0
        while more or written < sent:
            while more and sent - written < window and _may_read(live, sent - written):
                chunk = next(chunks, None)
                more = chunk is not None
                if chunk is not None:
                    self._send(sent, chunk)
                    sent += 1
            if written in answers:
                yield from answers.pop(written)
                written += 1
            elif written < sent:
                # With room in the window, live input arriving is also worth waking for.
                self._take_answers(answers, live, more and sent - written < window)

    def _send(self, number: int, chunk: Chunk) -> None:
        """Chunk ``number`` to the worker with the fewest chunks waiting."""
        worker = min(range(len(self._waiting)), key=lambda w: len(self._waiting[w]))
        self._waiting[worker].append(number)
        self._queues[worker].put(chunk)

    def _take_answers(
        self, answers: Dict[int, List[Done]], live: Optional[int], room: bool
    ) -> None:
        """Wait for an answer (or, with ``room``, for ``live`` input); take all that came."""
        busy = {self._pipes[w]: w for w, waiting in enumerate(self._waiting) if waiting}
        for ready in wait([*busy, *([live] if room and live is not None else [])]):
            if ready in busy:
                worker = busy[ready]  # type: ignore[index]
                answers[self._waiting[worker].popleft()] = self._answer(worker)

    def _answer(self, worker: int) -> List[Done]:
        try:
            answer: Union[List[Done], str] = self._pipes[worker].recv()
        except (EOFError, OSError):  # a worker killed with answers unread: ECONNRESET
            raise self._lost(worker) from None
        if isinstance(answer, str):
            raise Failure(answer)
        return answer

    def _lost(self, worker: int) -> Failure:
        """Why a worker's pipe ended before its answers did, and the status to end with."""
        process = self._processes[worker]
        process.join(_PATIENCE)  # its pipe can end a moment before it can be waited for
        code = process.exitcode
        if code is None or code >= 0:
            status = "" if code is None else f" (exit code {code})"
            return Failure(f"worker process {worker + 1} ended before its answers{status}")
        number = -code
        try:
            what = signal.Signals(number).name
        except ValueError:
            what = f"signal {number}"
        why = " (out of memory?)" if number == signal.SIGKILL else ""
        # The status a shell gives a command killed by that signal, as if the command had been.
        return Failure(f"worker process {worker + 1} was killed by {what}{why}", 128 + number)
