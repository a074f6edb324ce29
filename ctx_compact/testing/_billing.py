"""What the fake provider bills for a message: its text, and its media as each provider prices it.

A message's text costs ``count_tokens`` of the message with its media parts
left out; each media part (an image, a PDF, a recording) costs what its
provider's published formula gives, from the file itself: the image's pixel
size, the PDF's pages, the recording's length. So a context limit in a test
means what it means in production: a photo counts as a photo, not as the
length of its base64.

Written separately from ctx-compact's own counting on purpose (this module
imports nothing from the library): the kit is a second reading of what the
providers bill, so a mistake in one shows up as a disagreement in the tests.
The figures (see the library's "Media" documentation page for the sources):

- OpenAI (Chat ``image_url``, Responses ``input_image``): 85 in low detail;
  otherwise the image is fitted into 2048x2048, its shortest side brought down
  to 768, and each 512-pixel tile costs 170 on top of 85. PDF pages
  (``file``, ``input_file``): 2,265 each. Audio (``input_audio``): 10 a second.
- Anthropic (``image``, ``document``): width x height / 750 after fitting a
  1568-pixel long edge and 1,600 tokens; a PDF page 3,100.
- Gemini (``inline_data``/``file_data``): 258 for an image within 384x384, else
  258 per 768x768 tile; a PDF page 258; audio 32 a second, video 263.
- Bedrock Converse (``image``/``document`` blocks): Claude's, as Anthropic's.

A part whose size cannot be known (a URL, a file id, an unreadable file) costs
the provider's largest image (OpenAI 1,445 or 85 in low detail, Anthropic and
Bedrock 1,600, Gemini 1,032), one page, or a minute of audio or video.

A request body is anyone's bytes, so each reader is linear in its payload and
stops at a bound, whatever the payload claims: a JPEG is walked for at most
1,000 markers to its frame header and a WAV for 1,000 chunks to its data (past
them, the size is unknown); a PDF is read for at most 100,000 objects and 16 MiB
inflated from its object streams (the pages found in those count). A header
that lies about a size costs what the provider would make of it: Gemini scales
an image to fit 3072x3072 (at most 16 tiles), and a PDF costs at most the pages
its provider accepts in a request (OpenAI 100, Anthropic and Bedrock 600,
Gemini 1,000).
"""

from __future__ import annotations

import base64
import binascii
import math
import re
import struct
import zlib
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

Json = Dict[str, Any]
# A part's price: the provider and what the part is; None when the part is not media.
Reader = Callable[[Any], Optional[int]]

_PAGE_TOKENS = {"openai": 2265, "anthropic": 3100, "gemini": 258, "bedrock": 3100}
# The most pages of a PDF a request may carry, as each provider documents it.
_MOST_PAGES = {"openai": 100, "anthropic": 600, "gemini": 1000, "bedrock": 600}
_LARGEST_IMAGE = {"openai": 1445, "anthropic": 1600, "gemini": 1032, "bedrock": 1600}
_GEMINI_FIT = 3072  # Gemini scales a larger image down to fit 3072x3072
_PER_SECOND = {"openai": 10, "gemini": 32}
_MINUTE = 60

# What one payload is read for at most (see the module's docstring). A camera's
# JPEG has a few dozen markers before its frame header, a recorder's WAV a handful
# of chunks before its data, and a thousand-page PDF some tens of thousands of
# objects in a few megabytes of object streams.
_MOST_STEPS = 1000
_MOST_OBJECTS = 100_000
_MOST_INFLATED = 16 * 1024 * 1024
# A number in a PDF longer than this is larger than any page count or offset means,
# and is not converted (int() of a long run of digits is quadratic, and refused
# from 4,300 digits on).
_MOST_DIGITS = 12


def _decode(value: Any) -> Optional[bytes]:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if not isinstance(value, str):
        return None
    text = re.sub(r"\s+", "", value).replace("-", "+").replace("_", "/")
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        return None


def _object(value: Any) -> Json:
    return value if isinstance(value, dict) else {}


def _from_data_url(url: Any) -> Tuple[Optional[str], Optional[bytes]]:
    if not isinstance(url, str):
        return None, None
    found = re.match(r"data:([^;,]*)(?:;[^;,]*)*;base64,", url[:256])
    if not found:
        return None, None
    return found.group(1) or None, _decode(url[found.end() :])


def pixels(data: Optional[bytes]) -> Optional[Tuple[int, int]]:
    """The width and height a PNG, GIF, WebP or JPEG file declares."""
    if not data:
        return None
    if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 24:
        return struct.unpack(">2I", data[16:24])
    if data[:3] == b"GIF" and len(data) >= 10:
        return struct.unpack("<2H", data[6:10])
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP" and len(data) >= 30:
        chunk = data[12:16]
        if chunk == b"VP8 ":
            w, h = struct.unpack("<2H", data[26:30])
            return w & 0x3FFF, h & 0x3FFF
        if chunk == b"VP8L":
            b = data[21:25]
            w = 1 + (b[0] | (b[1] & 0x3F) << 8)
            h = 1 + ((b[1] >> 6) | b[2] << 2 | (b[3] & 0x0F) << 10)
            return w, h
        if chunk == b"VP8X":
            return 1 + int.from_bytes(data[24:27], "little"), 1 + int.from_bytes(
                data[27:30], "little"
            )
        return None
    if data[:2] == b"\xff\xd8":
        return _jpeg_frame(data)
    return None


# A JPEG marker's 0xFF and the fill bytes (more 0xFF) before it, found in one match.
_MARKER_START = re.compile(rb"\xff+")


def _jpeg_frame(data: bytes) -> Optional[Tuple[int, int]]:
    """A JPEG's frame size, from its start-of-frame marker, within ``_MOST_STEPS`` markers."""
    i = 2
    for _ in range(_MOST_STEPS):
        start = _MARKER_START.match(data, i)
        if start is None or start.end() + 8 > len(data):
            return None  # not on a marker, or the end of the file
        i = start.end()  # on the marker itself
        marker = data[i]
        if marker == 0x01 or 0xD0 <= marker <= 0xD7:  # a marker without a segment
            i += 1
            continue
        if marker in (0xD9, 0xDA):  # the end of the image, or its scan: no frame header
            return None
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):  # a frame header
            h, w = struct.unpack(">2H", data[i + 4 : i + 8])
            return w, h
        i += 1 + int.from_bytes(data[i + 1 : i + 3], "big")
    return None


# A PDF object's header ("12 0 obj"), matched from the first digit of its number only
# (the lookbehind), so that a run of digits is tried once, not once from each digit.
_OBJECT = re.compile(rb"(?<![0-9])([0-9]+)\s+[0-9]+\s+obj\b")
_PAGE = re.compile(rb"/Type\s*/Page(?![A-Za-z0-9_.#-])")
_COUNT = re.compile(rb"/Count\s+([0-9]+)")
_STREAM = re.compile(rb"stream\r?\n")
_FIRST = re.compile(rb"/First\s+([0-9]+)")
# An object stream's table: an object's number and its offset from /First.
_ENTRY = re.compile(rb"(?<![0-9])([0-9]+)\s+([0-9]+)")


def _number(digits: bytes) -> int:
    digits = digits.lstrip(b"0")
    return int(digits or b"0") if len(digits) <= _MOST_DIGITS else 10**_MOST_DIGITS


def pages(data: Optional[bytes]) -> Optional[int]:
    """How many page objects a PDF holds, compressed object streams included.

    Read for at most ``_MOST_OBJECTS`` objects and ``_MOST_INFLATED`` bytes
    inflated; without a page object, the largest ``/Count``, else one page.
    """
    if not data or b"%PDF" not in data[:1024]:
        return None
    reading = _PdfReading(data)
    at = 0
    while reading.objects > 0:
        header = _OBJECT.search(data, at)
        if header is None:
            break
        end = data.find(b"endobj", header.end())
        if end < 0:
            break  # an object without its end is not read
        reading.read(header[1], header.end(), end)
        at = end + len(b"endobj")
    if reading.found:
        return len(reading.found)
    counts = (_number(c[1]) for c in _COUNT.finditer(data))
    return max(counts, default=1)


class _PdfReading:
    """The page objects found in one PDF, and what is left of its budget."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.found: Set[bytes] = set()
        self.objects = _MOST_OBJECTS
        self.inflated = _MOST_INFLATED

    def read(self, number: bytes, start: int, end: int) -> None:
        """Read the object ``number`` whose body is ``data[start:end]``."""
        self.objects -= 1
        data = self.data
        head_end = data.find(b"stream", start, end)
        head_end = end if head_end < 0 else head_end  # the object's dictionary
        if _PAGE.search(data, start, head_end):
            self.found.add(number)
        if data.find(b"/ObjStm", start, head_end) < 0:
            return
        if data.find(b"/FlateDecode", start, head_end) < 0:
            return
        stream = _STREAM.search(data, head_end, end)
        first = _FIRST.search(data, start, head_end)
        if stream is not None and first is not None:
            self._object_stream(memoryview(data)[stream.end() : end], _number(first[1]))

    def _object_stream(self, raw: memoryview, first: int) -> None:
        """Read the objects packed in a compressed object stream (``first``: its /First)."""
        if self.inflated <= 0:
            return  # (a max_length of 0 would inflate it all)
        try:
            inner = zlib.decompressobj().decompress(raw, self.inflated)
        except zlib.error:
            return
        self.inflated -= len(inner)
        table = min(first, len(inner))
        entries: List[Tuple[int, bytes]] = []
        for entry in _ENTRY.finditer(inner, 0, table):
            if self.objects <= 0:
                break
            self.objects -= 1
            entries.append((min(table + _number(entry[2]), len(inner)), entry[1]))
        # Each object's body runs from its offset to the next one's, in the order they
        # lie: whatever the table's order, no byte is searched twice.
        entries.sort()
        ends = [at for at, _ in entries[1:]] + [len(inner)]
        for (at, number), end in zip(entries, ends):
            if _PAGE.search(inner, at, end):
                self.found.add(number)


def seconds(data: Optional[bytes]) -> Optional[float]:
    """A WAV or MP3 recording's length (a WAV's data within ``_MOST_STEPS`` chunks)."""
    if not data:
        return None
    if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        i, rate = 12, 0
        for _ in range(_MOST_STEPS):
            if i + 8 > len(data):
                return None
            kind, size = data[i : i + 4], int.from_bytes(data[i + 4 : i + 8], "little")
            if kind == b"fmt ":
                rate = int.from_bytes(data[i + 16 : i + 20], "little")
            elif kind == b"data":
                return min(size, len(data) - i - 8) / rate if rate else None
            i += 8 + size + size % 2
        return None
    start = 0
    if data[:3] == b"ID3" and len(data) >= 10:
        start = 10 + (data[6] << 21 | data[7] << 14 | data[8] << 7 | data[9])
    if len(data) < start + 4 or data[start] != 0xFF or data[start + 1] & 0xE0 != 0xE0:
        return None
    version, layer = (data[start + 1] >> 3) & 3, (data[start + 1] >> 1) & 3
    index = data[start + 2] >> 4
    if layer != 1 or version == 1 or index in (0, 15):
        return None
    mpeg1 = (0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320)
    mpeg2 = (0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160)
    rate = (mpeg1 if version == 3 else mpeg2)[index] * 1000
    return (len(data) - start) * 8 / rate


def image_price(provider: str, size: Optional[Tuple[int, int]], detail: Any = None) -> int:
    """The provider's price of an image of ``size`` (its largest when the size is unknown)."""
    if provider == "openai" and detail == "low":
        return 85
    if size is None or min(size) <= 0:
        return _LARGEST_IMAGE[provider]
    width, height = size
    if provider == "openai":
        shrink = min(1.0, 2048 / max(width, height))
        w, h = width * shrink, height * shrink
        shrink = min(1.0, 768 / min(w, h))
        w, h = int(w * shrink), int(h * shrink)
        return 85 + 170 * max(1, -(-w // 512) * -(-h // 512))
    if provider == "gemini":
        if width <= 384 and height <= 384:
            return 258
        longest = max(width, height)
        if longest > _GEMINI_FIT:  # scaled down to fit, in whole pixels
            width = max(1, width * _GEMINI_FIT // longest)
            height = max(1, height * _GEMINI_FIT // longest)
        return 258 * -(-width // 768) * -(-height // 768)
    ratio = min(1.0, 1568 / max(width, height))
    if width * height * ratio * ratio > 1_200_000:
        ratio *= math.sqrt(1_200_000 / (width * height * ratio * ratio))
    if ratio < 1.0:
        width, height = max(1, int(width * ratio)), max(1, int(height * ratio))
    return min(1600, -(-(width * height) // 750))


def document_price(provider: str, mime: Any, data: Optional[bytes]) -> int:
    """A document's price: a PDF's pages (at most its provider's), a text's length, else a page."""
    textual = isinstance(mime, str) and mime.startswith(("text/", "txt", "csv", "md", "html"))
    if textual and data is not None:
        text = data.decode("utf-8", "replace")
        return -(-len(text.encode("utf-16-le", "surrogatepass")) // 8)
    count = pages(data)
    count = min(count if count is not None else 1, _MOST_PAGES[provider])
    return _PAGE_TOKENS[provider] * count


def sound_price(provider: str, kind: str, data: Optional[bytes]) -> int:
    """A recording's price, by its length (a minute when unknown)."""
    if kind == "video":
        return math.ceil(_MINUTE * 263)
    length = seconds(data)
    rate = _PER_SECOND.get(provider, 32)
    return math.ceil((_MINUTE if length is None else length) * rate)


def _by_mime(provider: str, mime: Any, data: Optional[bytes]) -> int:
    kind = mime.split("/", 1)[0] if isinstance(mime, str) else ""
    if kind == "image":
        return image_price(provider, pixels(data))
    if kind in ("audio", "video"):
        return sound_price(provider, kind, data)
    return document_price(provider, mime, data)


# --- the parts of each API ------------------------------------------------------


def openai_chat_part(part: Any) -> Optional[int]:
    """A Chat Completions content part's media price, ``None`` for text."""
    if not isinstance(part, dict):
        return None
    kind = part.get("type")
    if kind == "image_url":
        image = part.get("image_url")
        url = image.get("url") if isinstance(image, dict) else image
        detail = image.get("detail") if isinstance(image, dict) else None
        return image_price("openai", pixels(_from_data_url(url)[1]), detail)
    if kind == "input_audio":
        audio = _object(part.get("input_audio"))
        return sound_price("openai", "audio", _decode(audio.get("data")))
    if kind == "file":
        file = _object(part.get("file"))
        data = _from_data_url(file.get("file_data"))[1] or _decode(file.get("file_data"))
        return document_price("openai", "application/pdf", data)
    return None


def responses_part(part: Any) -> Optional[int]:
    """A Responses content part's media price, ``None`` for text."""
    if not isinstance(part, dict):
        return None
    if part.get("type") == "input_image":
        size = pixels(_from_data_url(part.get("image_url"))[1])
        return image_price("openai", size, part.get("detail"))
    if part.get("type") == "input_file":
        data = _from_data_url(part.get("file_data"))[1] or _decode(part.get("file_data"))
        name = part.get("filename")
        mime = None if isinstance(name, str) and not name.lower().endswith(".pdf") else "pdf"
        return document_price("openai", mime, data) if mime else _PAGE_TOKENS["openai"]
    return None


def anthropic_part(part: Any) -> Optional[int]:
    """An Anthropic content block's media price, ``None`` for any other block."""
    if not isinstance(part, dict) or part.get("type") not in ("image", "document"):
        return None
    source = _object(part.get("source"))
    data = _decode(source.get("data")) if source.get("type") == "base64" else None
    if part["type"] == "image":
        return image_price("anthropic", pixels(data))
    if source.get("type") not in ("base64", "url", "file"):
        return None  # a text or content document is text
    return document_price("anthropic", "application/pdf", data)


def gemini_part(part: Any) -> Optional[int]:
    """A Gemini part's media price (``inline_data``/``file_data``, either spelling)."""
    if not isinstance(part, dict):
        return None
    for key, mime_key in (("inline_data", "mime_type"), ("inlineData", "mimeType")):
        blob = part.get(key)
        if isinstance(blob, dict):
            return _by_mime("gemini", blob.get(mime_key), _decode(blob.get("data")))
    for key, mime_key in (("file_data", "mime_type"), ("fileData", "mimeType")):
        file = part.get(key)
        if isinstance(file, dict):
            return _by_mime("gemini", file.get(mime_key), None)
    return None


def bedrock_part(part: Any) -> Optional[int]:
    """A Bedrock Converse content block's media price (``image``, ``document``, ``video``)."""
    if not isinstance(part, dict) or "type" in part:
        return None
    for kind in ("image", "document", "video"):
        block = part.get(kind)
        if isinstance(block, dict):
            source = _object(block.get("source"))
            if kind == "document" and ("text" in source or "content" in source):
                return None
            data = _decode(source.get("bytes"))
            if kind == "image":
                return image_price("bedrock", pixels(data))
            if kind == "video":
                return sound_price("bedrock", "video", data)
            mime = block.get("format")
            return document_price("bedrock", "application/pdf" if mime == "pdf" else mime, data)
    return None


def _strip(parts: List[Any], read: Reader, nested: Callable[[Any], Any]) -> Tuple[List[Any], int]:
    kept: List[Any] = []
    price = 0
    for part in parts:
        cost = read(part)
        if cost is not None:
            price += cost
            continue
        inner, inner_price = nested(part)
        kept.append(inner)
        price += inner_price
    return kept, price


def billed(message: Any, read: Reader, count: Callable[[Any], int]) -> int:
    """``message``'s tokens: ``count`` of it without its media parts, plus their prices.

    Parts are read in ``content`` (and a tool result's own ``content``),
    ``parts`` (Gemini) and ``output`` (a Responses output item).
    """
    if not isinstance(message, dict):
        return count(message)

    def nested(part: Any) -> Tuple[Any, int]:
        if not isinstance(part, dict):
            return part, 0
        if part.get("type") == "tool_result" and isinstance(part.get("content"), list):
            inner, price = _strip(part["content"], read, lambda p: (p, 0))
            return {**part, "content": inner}, price
        result = part.get("toolResult")
        if isinstance(result, dict) and isinstance(result.get("content"), list):
            inner, price = _strip(result["content"], read, lambda p: (p, 0))
            return {**part, "toolResult": {**result, "content": inner}}, price
        return part, 0

    text = dict(message)
    price = 0
    for field in ("content", "parts", "output"):
        value = message.get(field)
        if isinstance(value, list):
            text[field], cost = _strip(value, read, nested)
            price += cost
    return count(text) + price
