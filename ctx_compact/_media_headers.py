"""What a media payload says about itself: an image's size, a PDF's pages, a recording's length.

Read from the payload's own header, standard library only. ``Payload`` decodes only the bytes
asked for (base64 maps every 4 characters to 3 bytes); a PDF is decoded whole. Every reader
is linear in the payload and bounded (``_MOST_SEGMENTS``, ``_MOST_OBJECTS``, ``_MOST_INFLATED``).
"""

from __future__ import annotations

import binascii
import re
import struct
import zlib
from itertools import tee, zip_longest
from typing import Iterator, Optional, Set, Tuple, Union

Data = Union[str, bytes, bytearray, memoryview]

_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")
_URLSAFE = str.maketrans("-_", "+/")
# A JPEG segment at most, and what any other header reader asks for at once.
_CHUNK = 64
# The bytes decoded on a payload's first read, kept for the reads that follow: a
# PNG, GIF or WebP header, and a JPEG's first segments (a JFIF file's frame header).
_HEAD = 96
# The steps a walk through a JPEG's segments or a WAV's chunks takes at most (docs/media.md,
# "Crafted payloads"); a camera's JPEG takes a few dozen: a file needing more has no size.
_MOST_SEGMENTS = 1000


class Payload:
    """Random access to the bytes a payload stands for, decoding only what is read.

    Args:
        data: Base64 text (standard or URL-safe alphabet, padded or not) or raw bytes.
        start: Where the base64 text begins in ``data`` (after a data URL's comma).
    """

    __slots__ = ("_bytes", "_end", "_head", "_start", "_text")

    def __init__(self, data: Data, start: int = 0) -> None:
        self._text: Optional[str] = None
        self._bytes: Optional[bytes] = None
        # The first _HEAD bytes, decoded on the first read; b"" when they are not
        # clean base64 (line breaks): every read then refuses, and the payload is
        # read whole, as a MIME text must be.
        self._head: Optional[bytes] = None
        self._start = start
        if isinstance(data, str):
            self._text = data
            end = len(data)
            while end > start and data[end - 1] == "=":
                end -= 1
            self._end = end
        else:
            self._bytes = bytes(data) if not isinstance(data, bytes) else data
            self._end = len(self._bytes)

    @property
    def size(self) -> int:
        """The number of bytes the payload decodes to (base64 without line breaks)."""
        if self._text is None:
            return self._end
        return (self._end - self._start) * 3 // 4

    def read(self, offset: int, length: int) -> bytes:
        """The decoded bytes ``[offset, offset + length)``; fewer at the end, ``b""`` past it.

        Raises:
            ValueError: The base64 text is not base64 where it was read (line breaks
                included: such a payload is read with ``whole()``).
        """
        if self._text is None:
            assert self._bytes is not None
            return self._bytes[offset : offset + length]
        if offset < 0 or length <= 0 or self._start >= self._end:
            return b""
        head = self._first_bytes()
        if not head:
            raise ValueError("not base64 in its first bytes")
        if offset + length <= len(head) or self._start + _HEAD // 3 * 4 >= self._end:
            return head[offset : offset + length]  # within the head, or the head is everything
        start = self._start
        first = offset // 3 * 4 + start
        last = min(-(-(offset + length) // 3) * 4 + start, self._end)
        if first >= last:
            return b""
        skip = offset - (first - start) // 4 * 3
        return self._decode(first, last)[skip : skip + length]

    def _first_bytes(self) -> bytes:
        if self._head is None:
            try:
                self._head = self._decode(self._start, min(self._start + _HEAD // 3 * 4, self._end))
            except ValueError:
                self._head = b""
        return self._head

    def _decode(self, first: int, last: int) -> bytes:
        """The bytes of the base64 text ``[first, last)``, ``first`` on the 4-character grid."""
        assert self._text is not None
        chunk = self._text[first:last]
        if not _BASE64.fullmatch(chunk):
            chunk = chunk.translate(_URLSAFE)
            if not _BASE64.fullmatch(chunk):
                raise ValueError("not base64")
        chunk += "=" * (-len(chunk) % 4)
        return binascii.a2b_base64(chunk)

    def whole(self) -> bytes:
        """Every byte of the payload (line breaks and other whitespace in base64 ignored).

        Raises:
            ValueError: The text is not base64.
        """
        if self._text is None:
            assert self._bytes is not None
            return self._bytes
        text = self._text[self._start :]
        if "-" in text or "_" in text:
            text = text.translate(_URLSAFE)
        try:
            return binascii.a2b_base64(text + "=" * (-len(text.rstrip()) % 4))
        except binascii.Error as exc:
            raise ValueError(f"not base64 ({exc})") from None


def image_size(payload: Payload) -> Optional[Tuple[int, int]]:
    """``(width, height)`` in pixels from a PNG, JPEG, GIF or WebP header, else ``None``.

    ``None`` too for a payload that is not base64, or whose header is cut short.
    Base64 broken into lines (as MIME writes it) is decoded whole first: line
    breaks move every later character off the 4-character grid.
    """
    try:
        return _image_size(payload)
    except ValueError:
        try:
            return _image_size(Payload(payload.whole()))
        except ValueError:
            return None


def _image_size(payload: Payload) -> Optional[Tuple[int, int]]:
    try:
        head = payload.read(0, _HEAD)
        if head[:2] == b"\xff\xd8":
            return _jpeg(payload)
        return _not_jpeg(head)
    except struct.error:
        return None


def _not_jpeg(head: bytes) -> Optional[Tuple[int, int]]:
    """The size of a PNG, GIF or WebP from its first bytes; ``None`` for anything else."""
    if head.startswith(b"\x89PNG\r\n\x1a\n") and head[12:16] in (b"IHDR", b"CgBI"):
        return _positive(struct.unpack(">II", head[16:24])) if len(head) >= 24 else None
    if head[:6] in (b"GIF87a", b"GIF89a") and len(head) >= 10:
        return _positive(struct.unpack("<HH", head[6:10]))
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return _webp(head)
    return None


def _positive(size: Tuple[int, int]) -> Optional[Tuple[int, int]]:
    return size if size[0] > 0 and size[1] > 0 else None


def _webp(head: bytes) -> Optional[Tuple[int, int]]:
    kind = head[12:16]
    if kind == b"VP8X" and len(head) >= 30:
        width = int.from_bytes(head[24:27], "little") + 1
        height = int.from_bytes(head[27:30], "little") + 1
        return width, height
    if kind == b"VP8L" and len(head) >= 25 and head[20] == 0x2F:
        bits = int.from_bytes(head[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if kind == b"VP8 " and len(head) >= 30 and head[23:26] == b"\x9d\x01\x2a":
        width, height = struct.unpack("<HH", head[26:30])
        return _positive((width & 0x3FFF, height & 0x3FFF))
    return None


# Start-of-frame markers: baseline, extended, progressive, lossless, and their
# arithmetic-coded and hierarchical variants (C4 is DHT, C8 JPG, CC DAC).
_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
# Markers standing alone, without a length: TEM and the restart markers.
_STANDALONE = frozenset({0x01, *range(0xD0, 0xD8)})


def _jpeg(payload: Payload) -> Optional[Tuple[int, int]]:
    """A JPEG's frame size, read segment by segment from the payload."""
    at = 2
    for _ in range(_MOST_SEGMENTS):
        head = payload.read(at, _CHUNK)
        if len(head) < 4 or head[0] != 0xFF:
            return None  # the file's end, or not on a marker: a broken file
        fill = len(head) - len(head.lstrip(b"\xff"))  # the marker's 0xFF and any fill bytes
        if fill == len(head):
            at += fill
            continue
        marker = head[fill]
        if marker in _STANDALONE:
            at += fill + 1
            continue
        if marker in (0xD9, 0xDA):  # end of image, or the scan before any frame header
            return None
        segment = head[fill + 1 : fill + 8]
        if len(segment) < 7:
            segment = payload.read(at + fill + 1, 7)
        (length,) = struct.unpack(">H", segment[:2])  # cut short: struct.error, no size
        if length < 2:
            return None
        if marker in _SOF:
            height, width = struct.unpack(">HH", segment[3:7])
            return _positive((width, height))
        at += fill + 1 + length
    return None  # no frame header within _MOST_SEGMENTS steps


# The patterns a PDF is searched with, each linear in the bytes searched: a literal
# start, then runs of whitespace or digits that end at the first byte that cannot
# continue them, so a failed attempt gives back at most its own run. A number is
# matched from its first digit only (the lookbehind: not two digits in a row), so a
# run of digits is tried once, not once from each of its digits; the lookbehind
# follows that digit so that the engine still skips to the next digit in one step.
_OBJECT = re.compile(rb"([0-9](?<![0-9]{2})[0-9]*)\s+[0-9]+\s+obj\b")
_PAGE = re.compile(rb"/Type\s*/Page(?![A-Za-z0-9_.#-])")
_PAGES = re.compile(rb"/Type\s*/Pages(?![A-Za-z0-9_.#-])")
_COUNT = re.compile(rb"/Count\s+([0-9]+)")
_OBJECT_STREAM = re.compile(rb"/Type\s*/ObjStm\b")
_STREAM = re.compile(rb"stream\r?\n")
_FIRST = re.compile(rb"/First\s+([0-9]+)")
_ENTRY = re.compile(rb"([0-9](?<![0-9]{2})[0-9]*)\s+([0-9]+)")  # in an object stream's table
# What one PDF is read for at most (docs/media.md): the objects looked at and the bytes
# inflated from its object streams; a thousand-page document needs a fraction of either.
_MOST_OBJECTS = 100_000
_MOST_INFLATED = 16 << 20
# A number longer than this many digits is larger than any a PDF means (a page
# count, an offset): read as 10**12, without converting its digits.
_DIGITS = 12


def _number(digits: bytes) -> int:
    digits = digits.lstrip(b"0")
    return int(digits or b"0") if len(digits) <= _DIGITS else 10**_DIGITS


def pdf_pages(data: bytes) -> Optional[int]:
    """The number of pages of a PDF, or ``None`` when ``data`` is not one.

    Counted as the provider renders them: the distinct page objects (``/Type
    /Page``, not the ``/Pages`` tree nodes), by object number, so a page saved
    again by an incremental update counts once. Page objects inside compressed
    object streams (PDF 1.5 ``/ObjStm``, ``/FlateDecode``) are found by
    inflating those streams. When no page object can be read (another filter,
    an encrypted file), the largest ``/Count`` of a ``/Pages`` node is used;
    failing that, one page. At most ``_MOST_OBJECTS`` objects and
    ``_MOST_INFLATED`` inflated bytes are read; the pages found in them count.
    """
    if not data.startswith(b"%PDF-") and b"%PDF-" not in data[:1024]:
        return None
    found = _Pages(data)
    headers, following = tee(_OBJECT.finditer(data))
    next(following, None)
    for header, after in zip_longest(headers, following):
        if not found.plain(header, len(data) if after is None else after.start()):
            break
    if found.pages:
        return len(found.pages)
    return 1 if found.count is None else found.count


class _Pages:
    """The page objects and page-tree counts of one PDF, read within its budget."""

    __slots__ = ("count", "data", "inflated", "objects", "pages")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pages: Set[bytes] = set()
        self.count: Optional[int] = None  # the largest /Count of a /Pages node
        self.objects = _MOST_OBJECTS  # what is left of the budget
        self.inflated = _MOST_INFLATED

    def plain(self, header: re.Match[bytes], end: int) -> bool:
        """Read the object whose header is ``header`` and body ends at ``end``.

        Returns:
            Whether the budget allows reading on.
        """
        self.objects -= 1
        data, start = self.data, header.end()
        stream = _STREAM.search(data, start, end)
        stop = end if stream is None else stream.start()  # the dictionary's end
        self._dictionary(header[1], data, start, stop)
        if (
            stream is not None
            and data.find(b"/FlateDecode", start, stop) >= 0
            and _OBJECT_STREAM.search(data, start, stop)
        ):
            first = _FIRST.search(data, start, stop)
            if first is not None:
                self._object_stream(memoryview(data)[stream.end() : end], _number(first[1]))
        return self.objects > 0

    def _dictionary(self, number: bytes, text: bytes, start: int, end: int) -> None:
        if _PAGE.search(text, start, end):
            self.pages.add(number)
        if _PAGES.search(text, start, end):
            count = _COUNT.search(text, start, end)
            if count is not None:
                self.count = max(self.count or 0, _number(count[1]))

    def _object_stream(self, raw: memoryview, first: int) -> None:
        """Read the objects packed in a compressed object stream, ``first``: its /First."""
        if self.inflated <= 0:
            return  # (a max_length of 0 would mean no limit)
        try:
            inflated = zlib.decompressobj().decompress(raw, self.inflated)
        except zlib.error:
            return
        self.inflated -= len(inflated)
        # The table: object numbers and their offsets from /First, in increasing
        # order. Each object's body is read from no earlier than where the one
        # before it ended, so a table whose offsets go back and forth cannot have
        # the same bytes searched twice.
        table = min(first, len(inflated))

        def starts() -> Iterator[Tuple[bytes, int]]:
            at = table
            for entry in _ENTRY.finditer(inflated, 0, table):
                at = max(min(table + _number(entry[2]), len(inflated)), at)
                yield entry[1], at
            yield b"", len(inflated)  # where the last object ends

        objects, ends = tee(starts())
        next(ends)
        for (number, start), (_, end) in zip(objects, ends):
            if self.objects <= 0:
                return
            self.objects -= 1
            self._dictionary(number, inflated, start, end)


# MPEG audio bitrates in kbit/s by bitrate index: MPEG-1 layer III, and MPEG-2/2.5 layer III.
_MP3_BITRATES = {
    3: (0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320),
    2: (0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160),
}


def audio_seconds(payload: Payload) -> Optional[float]:
    """A WAV or MP3 recording's length in seconds, from its header, else ``None``.

    WAV: the ``data`` chunk's size over the ``fmt`` chunk's byte rate. MP3: the
    bytes after the ID3 tag at the first frame's bitrate (exact for a constant
    bitrate; for a variable one, the first frame's).
    """
    try:
        head = payload.read(0, 12)
        if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
            return _wav(payload)
        return _mp3(payload)
    except (ValueError, struct.error):
        return None


def _wav(payload: Payload) -> Optional[float]:
    at = 12
    rate = 0
    for _ in range(_MOST_SEGMENTS):
        chunk = payload.read(at, 16)
        if len(chunk) < 8:
            return None
        kind, size = chunk[:4], int.from_bytes(chunk[4:8], "little")
        if kind == b"fmt " and len(chunk) >= 16:
            rate = int.from_bytes(payload.read(at + 16, 4), "little")
        elif kind == b"data":
            if rate <= 0:
                return None
            size = min(size, payload.size - at - 8)  # a streamed file's size is a placeholder
            return max(size, 0) / rate
        at += 8 + size + (size & 1)
    return None  # no data chunk within _MOST_SEGMENTS chunks


def _mp3(payload: Payload) -> Optional[float]:
    at = 0
    head = payload.read(0, 10)
    if head[:3] == b"ID3" and len(head) == 10:
        size = (head[6] << 21) | (head[7] << 14) | (head[8] << 7) | head[9]
        at = 10 + size
    frame = payload.read(at, 4)
    if len(frame) < 4 or frame[0] != 0xFF or frame[1] & 0xE0 != 0xE0:
        return None
    version = (frame[1] >> 3) & 0x3  # 3: MPEG-1, 2: MPEG-2, 0: MPEG-2.5
    layer = (frame[1] >> 1) & 0x3  # 1: layer III
    index = frame[2] >> 4
    if layer != 1 or version == 1 or not 0 < index < 15:
        return None
    kbits = _MP3_BITRATES[3 if version == 3 else 2][index]
    return (payload.size - at) * 8 / (kbits * 1000)
