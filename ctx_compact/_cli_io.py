"""Reading conversations and writing results for the command line.

Input is UTF-8 JSON: a whole file holding an array of messages (or an object
with a ``"messages"`` array), or JSONL read one line at a time. Every problem is
a ``Failure`` naming the file, line and column. Output is written to a spool
(or a temporary file beside ``--output``) and published only when the block that
writes it succeeds, so nothing half-written ever reaches the reader.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import sys
import tempfile
from typing import IO, Any, Dict, Iterator, List, Optional, Tuple, Union

STDIN_NAME = "<stdin>"
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class Failure(Exception):
    """An error to report as ``ctx-compact: <message>`` with exit status 2."""


class NonStandardConstant(ValueError):
    pass


def json_type(value: object) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    return "a number"


def reject_constant(name: str) -> Any:
    raise NonStandardConstant(f"{name} is not valid JSON")


def parse(text: str, name: str, line: Optional[int]) -> Any:
    """Parse ``text``; ``line`` is the input line it came from, ``None`` for a whole file."""
    try:
        return json.loads(text, parse_constant=reject_constant)
    except json.JSONDecodeError as exc:
        lineno = exc.lineno if line is None else line
        raise Failure(f"{name}:{lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
    except NonStandardConstant as exc:
        where = name if line is None else f"{name}:{line}"
        raise Failure(f"{where}: invalid JSON: {exc}") from None
    except RecursionError:
        where = name if line is None else f"{name}:{line}"
        raise Failure(f"{where}: invalid JSON: nested too deeply") from None


def decode(data: Union[bytes, str], name: str, line: Optional[int], first: bool) -> str:
    """Decode UTF-8 input, dropping a byte order mark at the very start."""
    if isinstance(data, str):
        return data[1:] if first and data.startswith("\ufeff") else data
    try:
        return data.decode("utf-8-sig" if first else "utf-8")
    except UnicodeDecodeError as exc:
        start = exc.start
        if line is None:
            line = data.count(b"\n", 0, start) + 1
            start -= data.rfind(b"\n", 0, start) + 1
        bad = data[exc.start : exc.start + 1].hex()
        raise Failure(f"{name}:{line}:{start + 1}: not valid UTF-8 (byte 0x{bad})") from None


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
    with open_input(path) as (name, stream):
        data = read_all(stream, name)
    value = parse(decode(data, name, None, True), name, None)
    messages, holder = conversation(value, name)
    return name, messages, holder


def read_jsonl(stream: IO[Any], name: str) -> Iterator[Tuple[int, bytes]]:
    """``(line number, raw line)`` for each line of ``stream``, read one at a time."""
    for lineno, raw in enumerate(read_lines(stream, name), 1):
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
    text += "\n"
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate from a "\udXXX" escape in the input cannot be UTF-8;
        # writing it escaped again keeps the output valid and equal to the input.
        escaped = LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
        return escaped.encode("utf-8")


@contextlib.contextmanager
def open_input(path: str) -> Iterator[Tuple[str, IO[Any]]]:
    if path == "-":
        yield STDIN_NAME, getattr(sys.stdin, "buffer", sys.stdin)
        return
    try:
        handle = open(path, "rb")  # noqa: SIM115  # closed by the with below
    except OSError as exc:
        raise Failure(f"{path}: {exc.strerror or exc}") from None
    with handle:
        yield path, handle


def read_all(stream: IO[Any], name: str) -> Union[bytes, str]:
    try:
        data: Union[bytes, str] = stream.read()
    except OSError as exc:
        raise Failure(f"{name}: cannot read: {exc.strerror or exc}") from None
    return data


def read_lines(stream: IO[Any], name: str) -> Iterator[Union[bytes, str]]:
    while True:
        try:
            line: Union[bytes, str] = stream.readline()
        except OSError as exc:
            raise Failure(f"{name}: cannot read: {exc.strerror or exc}") from None
        if not line:
            return
        yield line


def copy_to_stdout(spool: IO[bytes]) -> None:
    binary = getattr(sys.stdout, "buffer", None)
    if binary is None:
        # A text-only stdout (an io.StringIO put in place by a caller).
        text = io.TextIOWrapper(spool, encoding="utf-8")
        try:
            shutil.copyfileobj(text, sys.stdout)
        finally:
            text.detach()
        sys.stdout.flush()
        return
    sys.stdout.flush()
    shutil.copyfileobj(spool, binary)
    binary.flush()


def new_file_mode(path: str) -> int:
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        # A new file gets what open() would have given it under the current umask.
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


@contextlib.contextmanager
def output(path: Optional[str]) -> Iterator[IO[bytes]]:
    """A binary file to write the output into, published only if the block succeeds."""
    if path is None or path == "-":
        with tempfile.TemporaryFile() as spool:
            yield spool
            spool.seek(0)
            copy_to_stdout(spool)
        return
    directory = os.path.dirname(os.path.abspath(path))
    try:
        handle = tempfile.NamedTemporaryFile(  # noqa: SIM115  # closed below
            dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".tmp", delete=False
        )
    except OSError as exc:
        raise Failure(f"{path}: cannot write: {exc.strerror or exc}") from None
    try:
        with handle:
            yield handle
        os.chmod(handle.name, new_file_mode(path))
        os.replace(handle.name, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(handle.name)
        if isinstance(exc, OSError):
            raise Failure(f"{path}: cannot write: {exc.strerror or exc}") from None
        raise
