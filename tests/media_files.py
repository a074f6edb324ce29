"""Small real media files for the media tests: images, PDFs and recordings, made here.

PNG, GIF, WAV and PDF are written by hand (struct and zlib); JPEG and WebP by
Pillow (the test extra), as a camera or a browser would write them.
"""

from __future__ import annotations

import base64
import io
import struct
import zlib
from typing import List

from PIL import Image


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def data_url(mime: str, data: bytes) -> str:
    return f"data:{mime};base64,{b64(data)}"


def png(width: int, height: int) -> bytes:
    """A valid RGB PNG, black, written with struct and zlib."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body) & 0xFFFFFFFF
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    rows = b"".join(b"\x00" + b"\x00" * (width * 3) for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def gif(width: int, height: int) -> bytes:
    """A valid one-colour GIF89a, written by hand (one LZW clear-and-end image block)."""
    screen = struct.pack("<HHBBB", width, height, 0x80, 0, 0)  # a 2-entry global palette
    palette = b"\x00\x00\x00\xff\xff\xff"
    descriptor = b"\x2c" + struct.pack("<HHHHB", 0, 0, width, height, 0)
    # LZW minimum code size 2: a clear code, one pixel of colour 0, the end code.
    pixels = b"\x02\x02\x44\x01\x00"
    return b"GIF89a" + screen + palette + descriptor + pixels + b"\x3b"


def pillow(width: int, height: int, kind: str, **options: object) -> bytes:
    """An image of ``kind`` ("JPEG", "WEBP", "PNG", "GIF") from Pillow's encoders."""
    image = Image.new("RGB", (width, height), (200, 120, 40))
    out = io.BytesIO()
    image.save(out, kind, **options)
    return out.getvalue()


def noisy_jpeg(width: int, height: int, quality: int = 95) -> bytes:
    """A JPEG as heavy as a photo of that size (noise does not compress)."""
    image = Image.frombytes("RGB", (width, height), _noise(width * height * 3))
    out = io.BytesIO()
    image.save(out, "JPEG", quality=quality)
    return out.getvalue()


def _noise(n: int) -> bytes:
    state = 12345
    out = bytearray(n)
    for i in range(0, n, 4):
        state = (state * 1103515245 + 12345) & 0x7FFFFFFF
        out[i : i + 4] = state.to_bytes(4, "little")[: min(4, n - i)]
    return bytes(out)


def wav(seconds: float, rate: int = 16000) -> bytes:
    """A mono 16-bit PCM WAV of silence."""
    frames = int(seconds * rate)
    data = b"\x00\x00" * frames
    fmt = struct.pack("<HHIIHH", 1, 1, rate, rate * 2, 2, 16)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt
    body += b"data" + struct.pack("<I", len(data)) + data
    return b"RIFF" + struct.pack("<I", len(body)) + body


def mp3(seconds: float, kbits: int = 128) -> bytes:
    """Constant-bitrate MPEG-1 layer III frames at 44.1 kHz (silent, zeroed side data)."""
    index = (0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320).index(kbits)
    header = bytes([0xFF, 0xFB, (index << 4) | 0x00, 0xC4])
    size = 144 * kbits * 1000 // 44100
    frames = int(seconds * kbits * 1000 / 8 / size)
    return (header + b"\x00" * (size - 4)) * frames


def pdf(pages: int, *, padding: int = 0, object_stream: bool = False) -> bytes:
    """A PDF of ``pages`` pages; its page objects in a compressed object stream if asked.

    ``padding`` adds a stream of that many bytes (a scanned page's weight).
    """
    objects: List[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids ["
        + b" ".join(b"%d 0 R" % (3 + i) for i in range(pages))
        + b"] /Count %d >>" % pages,
    ]
    page_bodies = [b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>" for _ in range(pages)]
    if object_stream:
        table = b" ".join(
            b"%d %d" % (3 + i, sum(len(p) + 1 for p in page_bodies[:i])) for i in range(pages)
        )
        inner = table + b"\n" + b"\n".join(page_bodies)
        packed = zlib.compress(inner)
        first = len(table) + 1
        objects.append(
            b"<< /Type /ObjStm /N %d /First %d /Filter /FlateDecode /Length %d >>\nstream\n"
            % (pages, first, len(packed))
            + packed
            + b"\nendstream"
        )
    else:
        objects.extend(page_bodies)
    if padding:
        objects.append(b"<< /Length %d >>\nstream\n" % padding + _noise(padding) + b"\nendstream")
    out = b"%PDF-1.7\n"
    numbers = [1, 2] + ([3 + pages] if object_stream else list(range(3, 3 + pages)))
    numbers += [numbers[-1] + 1] if padding else []
    for number, body in zip(numbers, objects):
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    return out + b"trailer\n<< /Root 1 0 R >>\n%%EOF\n"


def updated_pdf(pages: int) -> bytes:
    """A PDF saved again by an incremental update: its first page object written twice."""
    base = pdf(pages)
    update = b"3 0 obj\n<< /Type /Page /Parent 2 0 R /Rotate 90 >>\nendobj\n"
    return base + update + b"trailer\n<< /Root 1 0 R >>\n%%EOF\n"
