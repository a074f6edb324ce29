"""``--jobs N``: JSONL lines done by N worker processes, handed back in input order.

The input is cut into chunks of about a mebibyte of whole lines. From a regular
file, a chunk is a span (offset, length) that the worker reads itself, so the
main process only finds where lines end; from standard input or a gzip stream,
the main process reads the lines and sends them. Each chunk goes to the worker
with the least work waiting, and the answers are taken from whichever worker has
one ready and written out in input order. At most a window of chunks is read
but not yet written, so memory stays bounded by the window, never by the
dataset. Each worker runs the same ``do_line`` as a single-process run, so the
output is byte-identical to ``--jobs 1``. Workers ignore Ctrl-C: the main
process decides how the run ends and stops them. While they start, the main
process holds Ctrl-C and SIGTERM (``interrupts.held``), so neither is lost nor
ends it before its cleanup is in place.
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
from typing import (
    Any,
    Deque,
    Dict,
    Iterable,
    Iterator,
    List,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
    Union,
)

from .interrupts import held, unblock
from .io import Failure, Source, read_jsonl, read_spans
from .work import Done, Settings, serial

Lines = Iterable[Tuple[int, bytes]]
# Numbered lines read by the main process and sent on.
LineChunk = List[Tuple[int, bytes]]


class Span(NamedTuple):
    """Whole lines of the input file, for a worker to read itself: ``length`` bytes at ``offset``.

    ``fd`` is the file as the main process opened it, which forked workers share;
    the first of the lines is line ``first_line``.
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
# How long stopping waits for a feeder thread, in seconds.
_FEEDER_JOIN = 5.0


def _worker_signals() -> None:
    # Ctrl-C reaches the whole process group; the main process handles it for everyone.
    # SIGTERM (from the main process stopping the pool, or sent to the group) ends a
    # worker at once and quietly, whatever handler the main process had installed.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    # Started inside held(), a worker has had both blocked until now: a Ctrl-C that
    # came meanwhile is dropped (ignored), a SIGTERM ends it here.
    unblock()


def _lines(chunk: Chunk, name: str) -> Lines:
    """A chunk's lines; a span is read here, from the file shared with the main process.

    Raises:
        Failure: The span cannot be read, or the file now ends before it does.
    """
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
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _serve(
    connection: Connection, settings: Settings, name: str, inherited: Sequence[Connection] = ()
) -> None:
    """A worker: do each chunk it is sent, send the results back, stop at ``None``.

    One thread: the main process sends from threads of its own and reads answers
    from whichever worker has one, so neither side waits on the other to read.
    An answer is the list of lines done, or the text of a ``Failure``.

    A worker ends with the main process, however that ends (SIGKILL, the
    out-of-memory killer): its pipe then reads as ended, a send to it fails, and
    in the middle of a chunk it sees that its parent has changed. ``inherited``
    are the main process's ends of the pipes, which a forked worker holds copies
    of; closed here, so that the pipe can end at all.
    """
    for end in inherited:
        end.close()
    parent = os.getppid()
    _worker_signals()
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
    """A main-process thread sending one worker its chunks, so reading answers never waits.

    Ends after sending ``None``, or when the worker is gone (the main thread
    learns that from the worker's pipe).
    """
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


def _live_fd(source: Source) -> Optional[int]:
    """The descriptor of a live input whose lines may trickle in, or ``None``."""
    if not source.live or sys.platform == "win32":  # select() takes only sockets there
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
        # Lines already buffered by the reader are merely sent in the next chunk.
        if (
            size >= CHUNK_BYTES
            or len(chunk) >= CHUNK_LINES
            or (live is not None and not _readable(live))
        ):
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


class Workers:
    """``jobs`` worker processes for one run; a context manager that stops them.

    Each worker has a pipe of its own and a thread in the main process that
    sends it its chunks. A chunk goes to the worker with the fewest chunks
    waiting, so a worker that drew short conversations is not left idle behind
    one that drew long ones; a worker answers its chunks in the order it got
    them, which tells which chunk each answer is for. No lock is shared with
    the workers, so one killed by a signal can never leave the others or the
    main process waiting on it.

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
        # Held while workers start: the main process gets a Ctrl-C or SIGTERM once they
        # all have, and each worker starts with both blocked until it ignores Ctrl-C.
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
        self._queues: List[queue.SimpleQueue[Optional[Chunk]]] = []
        self._feeders: List[threading.Thread] = []
        for pipe in self._pipes:
            chunks: queue.SimpleQueue[Optional[Chunk]] = queue.SimpleQueue()
            feeder = threading.Thread(target=_feed, args=(pipe, chunks), daemon=True)
            feeder.start()
            self._queues.append(chunks)
            self._feeders.append(feeder)

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        if exc_info[0] is not None:
            for process in self._processes:
                process.terminate()
        for chunks in self._queues:
            chunks.put(None)  # a worker still running stops after its last chunk
        for feeder in self._feeders:
            feeder.join(_FEEDER_JOIN)
        for process in self._processes:
            process.join()
        for pipe in self._pipes:
            pipe.close()

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
        process.join(_FEEDER_JOIN)  # its pipe can end a moment before it can be waited for
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
            Failure: A worker could not read its span of the input.
        """
        chunks = iter(chunks)
        live = None if source is None else _live_fd(source)
        jobs = len(self._pipes)
        window = WINDOW_PER_JOB * jobs
        waiting: List[Deque[int]] = [collections.deque() for _ in range(jobs)]
        answers: Dict[int, List[Done]] = {}  # answered, not yet handed back
        more = True
        sent = written = 0
        while True:
            while more and sent - written < window:
                if live is not None and sent > written and not _readable(live):
                    break  # reading would wait for input: hand back the answers first
                chunk = next(chunks, None)
                if chunk is None:
                    more = False
                    break
                worker = min(range(jobs), key=lambda w: len(waiting[w]))
                waiting[worker].append(sent)
                self._queues[worker].put(chunk)
                sent += 1
            if written in answers:
                yield from answers.pop(written)
                written += 1
                continue
            if written == sent:
                return
            busy = {self._pipes[w]: w for w in range(jobs) if waiting[w]}
            # With room in the window, input arriving is also worth waking for.
            room = live is not None and more and sent - written < window
            inputs: List[Any] = [live] if room else []
            for ready in wait(list(busy) + inputs):
                if ready in busy:
                    worker = busy[ready]  # type: ignore[index]
                    answers[waiting[worker].popleft()] = self._answer(worker)
