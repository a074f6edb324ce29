"""Reading a request body as its headers frame it, and refusing what cannot be trusted.

A body whose framing is broken (a ``Content-Length`` that is not a number,
conflicting lengths, a bad chunk size) is refused with 400, and its connection
is then closed, as where the next request starts is unknown. One over
``MAX_BODY_BYTES`` (32 MiB, Anthropic's documented limit for its Messages API)
is refused with 413 from its headers, before any of it is read.
"""

from __future__ import annotations

import re
from email.message import Message
from io import BufferedIOBase
from typing import List, Optional

# The largest request body read, as Anthropic documents for its Messages API (32 MB);
# a larger one is refused from its headers with 413, before any of it is read.
MAX_BODY_BYTES = 32 * 1024 * 1024
_MAX_LINE = 4096  # a chunk-size or trailer line
_MAX_TRAILERS = 64


class FramingError(Exception):
    """A request body whose length cannot be known, or is over the limit, from its headers."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def read_body(headers: Message, rfile: BufferedIOBase) -> bytes:
    """The request body, as its headers frame it; never more than ``MAX_BODY_BYTES``.

    Raises:
        FramingError: For framing that cannot be trusted or a body over the limit.
    """
    coding = headers.get("Transfer-Encoding")
    lengths = headers.get_all("Content-Length") or []
    if coding is not None:
        if coding.strip().lower() != "chunked":
            raise FramingError(f"Unsupported Transfer-Encoding: {coding!r}.")
        if lengths:
            raise FramingError("A request must not have both Content-Length and chunks.")
        return _read_chunks(rfile)
    if not lengths:
        return b""
    if len(set(lengths)) > 1:
        raise FramingError(f"Conflicting Content-Length headers: {', '.join(lengths)}.")
    text = lengths[0].strip()
    if not re.fullmatch("[0-9]+", text):
        raise FramingError(f"Invalid Content-Length header: {text[:40]!r}.")
    length = _size(int(text) if len(text) <= 12 else None)
    data = _read_exactly(rfile, length)
    if len(data) < length:
        raise FramingError(f"The request body ended after {len(data)} of {length} bytes.")
    return data


def _size(length: Optional[int], before: int = 0) -> int:
    """``length``, unless with the ``before`` bytes already read it is over the limit."""
    # None: too many digits to be worth converting (int() refuses 4,300 and more).
    if length is None or before + length > MAX_BODY_BYTES:
        raise FramingError(
            f"Request exceeds the maximum allowed number of bytes ({MAX_BODY_BYTES}).", 413
        )
    return length


def _read_chunks(rfile: BufferedIOBase) -> bytes:
    parts: List[bytes] = []
    total = 0
    while True:
        line = _read_line(rfile, "chunk size")
        size = line.split(b";", 1)[0].strip()
        if not re.fullmatch(b"[0-9A-Fa-f]+", size):
            raise FramingError(f"Invalid chunk size: {size[:40]!r}.")
        length = _size(int(size, 16) if len(size) <= 12 else None, total)
        if length == 0:
            break
        chunk = _read_exactly(rfile, length)
        if len(chunk) < length or rfile.readline(3) != b"\r\n":
            raise FramingError("A chunk of the request body did not end as its size said.")
        parts.append(chunk)
        total += length
    # Trailer fields, if any, up to the empty line that ends the body.
    for _ in range(_MAX_TRAILERS):
        if _read_line(rfile, "trailer") == b"":
            return b"".join(parts)
    raise FramingError(f"More than {_MAX_TRAILERS} trailer fields.")


def _read_line(rfile: BufferedIOBase, what: str) -> bytes:
    line = rfile.readline(_MAX_LINE + 1)
    if len(line) > _MAX_LINE or not line.endswith(b"\n"):
        raise FramingError(f"The request body's {what} line is too long or unterminated.")
    return line.rstrip(b"\r\n")


def _read_exactly(rfile: BufferedIOBase, length: int) -> bytes:
    # In pieces, so what is held is what arrived, not what the headers announced.
    parts: List[bytes] = []
    remaining = length
    while remaining:
        piece = rfile.read(min(remaining, 1 << 20))
        if not piece:
            break
        parts.append(piece)
        remaining -= len(piece)
    return b"".join(parts)
