"""Reading conversations and writing results: every problem is a ``Failure`` naming where.

A regular ``--output`` file is written beside itself and moved into place when the run succeeds.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import itertools
import json
import os
import stat
import sys
import tempfile
import zlib
from dataclasses import dataclass
from typing import IO, Any, Callable, Dict, Iterator, List, Optional, Tuple, Type, TypeVar, Union

from .interrupts import held
from .json import loads_fast, utf8_line
from .status import USAGE

STDIN_NAME = "<stdin>"
STDOUT_NAME = "<stdout>"
_READ_BUFFER = 1 << 20


class Failure(Exception):
    """An error to report as ``ctx-compact: <message>``, ending the run with ``status``.

    Args:
        message: What went wrong, naming where.
        status: The exit status: 2, or another (a ``--jobs`` worker killed by a signal).
    """

    def __init__(self, message: str, status: int = USAGE) -> None:
        super().__init__(message)
        self.status = status


class UnwritableStdout(Failure):
    """Standard output refused a write (a full disk, a file-size limit): status 2, as for ``-o``."""


class NonStandardConstant(ValueError):
    pass


_JSON_TYPES = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}


def json_type(value: object) -> str:
    """What a parsed JSON value is, in words."""
    return "null" if value is None else _JSON_TYPES.get(type(value), "a number")


def reject_constant(name: str) -> Any:
    raise NonStandardConstant(f"{name} is not valid JSON")


_JSONL_HINT = (
    " (with --jsonl each line must hold one whole conversation; read a pretty-printed"
    " JSON array without --jsonl)"
)
_ARRAY_HINT = (
    " (the input holds more than one JSON value: for one conversation per line, use --jsonl)"
)


def parse(text: str, name: str, line: Optional[int]) -> Any:
    """Parse ``text``; ``line`` is the input line it came from, ``None`` for a whole file."""
    try:
        return json.loads(text, parse_constant=reject_constant)
    except json.JSONDecodeError as exc:
        if line is None:
            hint = _ARRAY_HINT if exc.msg == "Extra data" else ""
            raise Failure(
                f"{name}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}{hint}"
            ) from None
        end = len(text.rstrip(" \t\r\n")) + 1
        if exc.pos >= end - 1 or exc.msg.startswith("Unterminated string"):
            # The text ran out before its value did: Python names where the unfinished
            # string or value began; the reader needs where the line stopped, and why.
            hint = _JSONL_HINT if line == 1 else " (cut short?)"
            raise Failure(
                f"{name}:{line}:{end}: invalid JSON: the line ends before its value does{hint}"
            ) from None
        raise Failure(f"{name}:{line}:{exc.colno}: invalid JSON: {exc.msg}") from None
    except (NonStandardConstant, RecursionError) as exc:
        where = name if line is None else f"{name}:{line}"
        why = "nested too deeply" if isinstance(exc, RecursionError) else exc
        raise Failure(f"{where}: invalid JSON: {why}") from None


def decode(data: Union[bytes, str], name: str, line: Optional[int], first: bool) -> str:
    """Decode UTF-8 input, dropping a byte order mark at the very start."""
    if isinstance(data, str):
        return data[1:] if first and data.startswith("\ufeff") else data
    try:
        return data.decode("utf-8-sig" if first else "utf-8")
    except UnicodeDecodeError as exc:
        line_start = 0
        if line is None:
            line = data.count(b"\n", 0, exc.start) + 1
            line_start = data.rfind(b"\n", 0, exc.start) + 1
        # Columns count characters, as JSON errors do, not bytes.
        column = len(data[line_start : exc.start].decode("utf-8", "replace")) + 1
        bad = data[exc.start : exc.start + 1].hex()
        cut = (
            " at the end of the line (cut short?)" if exc.reason == "unexpected end of data" else ""
        )
        raise Failure(f"{name}:{line}:{column}: not valid UTF-8 (byte 0x{bad}){cut}") from None


def jsonl_conversation(
    raw: bytes, name: str, lineno: int
) -> Optional[Tuple[List[Any], Optional[Dict[str, Any]], bool]]:
    """A JSONL line's messages and holding object (as ``conversation`` gives them), and whether
    orjson parsed it (else the standard library did); ``None`` for a blank line.

    Raises:
        Failure: The line is not UTF-8, not JSON or not a conversation; the message names it.
    """
    value = loads_fast(raw)
    fast = value is not None
    if not fast:
        text = decode(raw, name, lineno, lineno == 1)
        if not text.strip(" \t\r\n"):
            return None
        value = parse(text, name, lineno)
    messages, holder = conversation(value, f"{name}:{lineno}")
    return messages, holder, fast


def conversation(value: Any, where: str) -> Tuple[List[Any], Optional[Dict[str, Any]]]:
    """The messages of one input value, and the object holding them if it is not the array."""
    holder: Optional[Dict[str, Any]] = None
    if isinstance(value, dict) and "messages" in value:
        holder = value
        messages = value["messages"]
        if not isinstance(messages, list):
            raise Failure(f'{where}: "messages" must be an array, got {json_type(messages)}')
    elif isinstance(value, list):
        messages = value
    else:
        raise Failure(
            f'{where}: expected an array of messages or an object with a "messages" array,'
            f" got {json_type(value)}"
        )
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise Failure(f"{where}: message {index}: expected an object, got {json_type(message)}")
    return messages, holder


def read_array(path: str) -> Tuple[str, List[Any], Optional[Dict[str, Any]]]:
    """The input name, messages and holding object of a whole-file conversation."""
    with open_input(path) as source:
        name = source.name
        data: Union[bytes, str] = _reading(source.stream.read, name, name, "the input")
    text = decode(data, name, None, True)
    if not text.strip(" \t\r\n"):
        raise Failure(
            f"{name}: the input is empty: expected an array of messages or an object with a"
            ' "messages" array'
        )
    value = parse(text, name, None)
    messages, holder = conversation(value, name)
    return name, messages, holder


def read_jsonl(stream: IO[Any], name: str) -> Iterator[Tuple[int, bytes]]:
    """``(line number, raw line)`` for each line of ``stream``, read one at a time."""
    for lineno in itertools.count(1):
        # A line too large stops the run: where the next one starts cannot be found.
        raw = _reading(stream.readline, name, f"{name}:{lineno}", "the line")
        if not raw:
            return
        yield lineno, raw if isinstance(raw, bytes) else raw.encode("utf-8", "surrogatepass")


def with_messages(holder: Optional[Dict[str, Any]], messages: List[Any]) -> Any:
    if holder is None:
        return messages
    # "messages" is already a key, so it keeps its place among the others.
    return dict(holder, messages=messages)


def dump(value: Any, indent: int, where: str) -> bytes:
    try:
        if indent:
            text = json.dumps(value, ensure_ascii=False, allow_nan=False, indent=indent)
        else:
            text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (ValueError, RecursionError) as exc:
        raise Failure(f"{where}: cannot write the result as JSON: {exc}") from None
    return utf8_line(text)


@dataclass
class Source:
    """An open input: its name in messages, its binary stream, and how far it has been read."""

    name: str
    stream: IO[Any]
    size: Optional[int] = None  # bytes, when the input is a regular file
    raw: Optional[IO[bytes]] = None  # the file under a decompressing stream
    # A pipe, terminal or socket: lines may arrive one at a time, so each result is
    # written as soon as it is done rather than when a buffer fills.
    live: bool = False

    def position(self) -> int:
        """Bytes of the file read so far (of the compressed file, for gzip)."""
        try:
            return (self.raw or self.stream).tell()
        except (OSError, ValueError):
            return 0


def _kind(handle: IO[Any]) -> Tuple[Optional[int], bool]:
    """The size of a regular file, and whether the input is live (a pipe, terminal or socket)."""
    try:
        info = os.fstat(handle.fileno())
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return None, False  # an in-memory stream: all there already
    mode = info.st_mode
    if stat.S_ISREG(mode):
        return info.st_size, False
    return None, stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISSOCK(mode)


_GZIP_SIGNATURE = b"\x1f\x8b"


def _refuse_gzipped(stream: IO[Any], name: str) -> None:
    """Refuse a stream that starts as a gzip file does, leaving it where it was.

    Read as text it fails on its second byte, "not valid UTF-8 (byte 0x8b)"; and
    with --jsonl --skip-invalid, every newline byte would make a bad line of it.
    """
    head = b""
    with contextlib.suppress(OSError, ValueError):  # reading it will say what is wrong
        peek = getattr(stream, "peek", None)
        if peek is not None:
            head = peek(2)[:2]
        elif stream.seekable():
            start = stream.tell()
            head = stream.read(2)
            stream.seek(start)
    if head != _GZIP_SIGNATURE:
        return
    if name == STDIN_NAME:
        how = "pipe it through gunzip -c, or give its name (a name ending in .gz is read gunzipped)"
    else:
        how = "a name ending in .gz is read gunzipped (or gunzip it first)"
    raise Failure(f"{name}: looks gzip-compressed: {how}")


@contextlib.contextmanager
def open_input(path: str) -> Iterator[Source]:
    """The input named ``path``: standard input for ``-``, gunzipped when it ends in ``.gz``.

    Raises:
        Failure: It cannot be opened, or it is gzip-compressed without a ``.gz`` name.
    """
    if path == "-":
        if sys.stdin is None:  # started with standard input closed (<&-)
            raise Failure(f"{STDIN_NAME}: cannot read: standard input is closed")
        stream = getattr(sys.stdin, "buffer", sys.stdin)
        _refuse_gzipped(stream, STDIN_NAME)
        size, live = _kind(stream)
        yield Source(STDIN_NAME, stream, size, live=live)
        return
    try:
        # A large buffer: conversations run to hundreds of kilobytes a line.
        handle = open(path, "rb", buffering=_READ_BUFFER)  # noqa: SIM115  # closed below
    except OSError as exc:
        raise Failure(f"{path}: {exc.strerror or exc}") from None
    with handle:
        size, live = _kind(handle)
        if path.endswith(".gz"):
            with gzip.GzipFile(fileobj=handle, mode="rb") as unpacked:
                yield Source(path, unpacked, size, handle, live)  # type: ignore[arg-type]
        else:
            _refuse_gzipped(handle, path)
            yield Source(path, handle, size, live=live)


def _unreadable(name: str, exc: Exception) -> Failure:
    # EOFError: a gzip stream that ends before its end-of-stream marker.
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
    return Failure(f"{name}: cannot read: {reason}")


_Read = TypeVar("_Read")


def _reading(read: Callable[[], _Read], name: str, where: str, what: str) -> _Read:
    """``read()``, its errors a ``Failure``: a value past the memory limit names ``where``.

    A gzip bomb, or a file with no newline for gigabytes: the value cannot be held.
    """
    try:
        return read()
    except (OSError, EOFError, zlib.error) as exc:
        raise _unreadable(name, exc) from None
    except MemoryError:
        raise Failure(f"{where}: cannot read: {what} is too large to hold in memory") from None


def read_spans(stream: IO[bytes], name: str, size: int) -> Iterator[Tuple[int, int, int]]:
    """``(number of its first line, offset, length)`` of spans of whole lines, about ``size`` bytes.

    Spans start where ``stream`` is, which is moved to the end of each span given,
    so that the progress line shows how far the run has got.
    """
    fd = stream.fileno()
    buffer = bytearray(size)
    find = buffer.find
    offset = stream.tell()
    lineno = 1
    while True:
        start, lines = offset, 0
        while True:
            try:
                got = os.preadv(fd, [buffer], offset)
            except OSError as exc:
                raise _unreadable(name, exc) from None
            if not got:
                break
            # One find per line (memchr), rather than bytearray.count, which looks at
            # every byte in Python's own loop: lines of a conversation run to kilobytes.
            end = 0
            while True:
                newline = find(b"\n", end, got)
                if newline < 0:
                    break
                lines += 1
                end = newline + 1
            if end:
                offset += end
                break
            offset += got  # a line longer than the buffer goes on
        if offset == start:
            return
        stream.seek(offset)
        yield lineno, start, offset - start
        lineno += lines


class _TextStdout:
    """Bytes written to a text-only stdout (an ``io.StringIO`` put in place by a caller)."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream

    def write(self, data: bytes) -> int:
        self._stream.write(data.decode("utf-8"))
        return len(data)

    def flush(self) -> None:
        self._stream.flush()


@contextlib.contextmanager
def _writing(name: str, failure: Type[Failure] = Failure) -> Iterator[None]:
    """Write errors as a ``Failure`` naming the output; a closed pipe keeps its own status."""
    try:
        yield
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise failure(f"{name}: cannot write: {exc.strerror or exc}") from None


class _Guarded:
    """An output whose write errors are a ``Failure`` naming it."""

    def __init__(self, stream: IO[bytes], name: str, failure: Type[Failure] = Failure) -> None:
        self._stream = stream
        self._name = name
        self._failure = failure

    def write(self, data: bytes) -> int:
        with _writing(self._name, self._failure):
            done = self._stream.write(data)
            # Unbuffered (python -u, PYTHONUNBUFFERED), standard output is the raw file,
            # which may take only part of the data: up to a file-size limit, onto a disk
            # filling up. What is left is written again, until that write fails.
            while done is not None and done < len(data):
                more = self._stream.write(memoryview(data)[done:])
                if more is None:  # a non-blocking descriptor that is full: as a buffer does
                    break
                done += more
        return len(data)

    def flush(self) -> None:
        with _writing(self._name, self._failure):
            self._stream.flush()


def new_file_mode(path: str) -> int:
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        # A new file gets what open() would have given it under the current umask.
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


# Following more links than this is a loop; open() will say so.
_MAX_LINKS = 40


def file_to_replace(path: str) -> Optional[str]:
    """The regular file that ``-o path`` replaces atomically, or ``None`` to write to it directly.

    A symbolic link is followed, and kept. A device, a FIFO, a socket and a link into
    ``/proc`` (``/dev/stdout``, a descriptor the shell opened) are written directly:
    a regular file put in their place would be where the reader is not looking.
    """
    current = path
    for _ in range(_MAX_LINKS):
        if os.path.abspath(current).startswith("/proc/"):
            return None
        try:
            info = os.lstat(current)
        except FileNotFoundError:
            return current
        except OSError:
            return None
        if stat.S_ISLNK(info.st_mode):
            current = os.path.join(os.path.dirname(current), os.readlink(current))
            continue
        return current if stat.S_ISREG(info.st_mode) else None
    return None


def file_identity(path: Optional[str], standard: Any) -> Optional[object]:
    """What names the file at ``path`` (``-``: the ``standard`` stream's) for comparing options.

    A regular file is its device and inode, a name not yet created its resolved path;
    a device, FIFO, terminal or no path is ``None``: nothing written there is replaced.
    """
    if path is None:
        return None
    try:
        info = os.fstat(standard.fileno()) if path == "-" else os.stat(path)
    except FileNotFoundError:
        return os.path.realpath(path)
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return None  # not there to compare (a captured stream); opening it will say why
    return (info.st_dev, info.st_ino) if stat.S_ISREG(info.st_mode) else None


class Temporaries:
    """The temporary files of one run's outputs that are neither in place nor removed yet.

    Each output removes its own as it unwinds; an interrupt that lands where nothing
    unwinds it (inside an ``ExitStack``'s exit) leaves the rest to ``remove``.
    """

    def __init__(self) -> None:
        self._files: Dict[str, IO[bytes]] = {}

    def add(self, handle: IO[bytes]) -> None:
        self._files[handle.name] = handle

    def done(self, handle: IO[bytes]) -> None:
        """``handle``'s file was put in place or removed."""
        self._files.pop(handle.name, None)

    def discard(self, handle: IO[bytes]) -> None:
        """Close and remove ``handle``'s file."""
        with contextlib.suppress(OSError, ValueError):
            handle.close()
        with contextlib.suppress(OSError):
            os.unlink(handle.name)
        self.done(handle)

    def remove(self) -> None:
        """Close and remove every temporary file still here."""
        for name in sorted(self._files):
            self.discard(self._files[name])


@contextlib.contextmanager
def _replacing(path: str, target: str, temporaries: Temporaries) -> Iterator[IO[bytes]]:
    directory = os.path.dirname(os.path.abspath(target))
    prefix = f".{os.path.basename(target)}."
    handle: Optional[IO[bytes]] = None
    with _writing(path):
        try:
            # Ctrl-C or SIGTERM landing after the file exists but before it is known
            # (inside tempfile, or on the assignment) would leave it behind: they wait.
            with held():
                handle = tempfile.NamedTemporaryFile(  # noqa: SIM115  # closed below
                    dir=directory, prefix=prefix, suffix=".tmp", delete=False
                )
                temporaries.add(handle)
            with handle:
                yield handle
            os.chmod(handle.name, new_file_mode(target))
            os.replace(handle.name, target)
            temporaries.done(handle)
        except BaseException:
            # Also on Ctrl-C and SIGTERM (which the command turns into an exception):
            # the temporary file never outlives the run; closed here too, as interrupted
            # before the ``with handle`` took it, it is open.
            if handle is not None:
                temporaries.discard(handle)
            raise


@contextlib.contextmanager
def _direct(path: str) -> Iterator[IO[bytes]]:
    # Appending: a FIFO or a device does not care, and a descriptor link to a file
    # the shell opened with >> must not be truncated.
    with _writing(path), open(path, "ab") as handle:
        yield handle


def reasons_path(rejects: Optional[str]) -> Optional[str]:
    """Where ``--rejects FILE`` says why each line was skipped: ``bad.reasons.jsonl``."""
    if rejects is None:
        return None
    stem, gz = (rejects[:-3], ".gz") if rejects.endswith(".gz") else (rejects, "")
    if stem.endswith(".jsonl"):
        stem = stem[: -len(".jsonl")]
    return f"{stem}.reasons.jsonl{gz}"


@contextlib.contextmanager
def output(path: Optional[str], temporaries: Temporaries) -> Iterator[IO[bytes]]:
    """A binary stream to write the output into, gzip-compressed when ``path`` ends in ``.gz``.

    Standard output (``None`` or ``"-"``) is written as the run goes; a regular file
    through a temporary file in ``temporaries``, moved over it if the block succeeds.
    """
    if path is None or path == "-":
        if sys.stdout is None:  # started with standard output closed (>&-)
            raise UnwritableStdout(f"{STDOUT_NAME}: cannot write: standard output is closed")
        sys.stdout.flush()  # anything already written through the text layer goes first
        binary = getattr(sys.stdout, "buffer", None) or _TextStdout(sys.stdout)
        stdout = _Guarded(binary, STDOUT_NAME, UnwritableStdout)  # type: ignore[arg-type]
        yield stdout  # type: ignore[misc]
        stdout.flush()
        return
    target = file_to_replace(path)
    with _direct(path) if target is None else _replacing(path, target, temporaries) as stream:
        if not path.endswith(".gz"):
            yield _Guarded(stream, path)  # type: ignore[misc]
            return
        # mtime 0 and no name: the same input always gives the same bytes. Level 6, as
        # gzip itself uses: level 9 would cost more than the compaction.
        with gzip.GzipFile(
            filename="", mode="wb", fileobj=stream, compresslevel=6, mtime=0
        ) as packed:
            yield _Guarded(packed, path)  # type: ignore[arg-type,misc]
