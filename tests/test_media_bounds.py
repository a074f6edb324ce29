"""The media readers on crafted payloads: linear work, bounded memory, figures a provider bills.

Every reader of a payload's bytes (an image's header, a PDF's objects, a WAV's
chunks) is linear in the payload and bounded, whatever the payload claims: the
work is counted here as the Python lines run (``sys.settrace``), the same on
every run, never as time; the memory as tracemalloc's peak. A header that lies
about a size counts what the provider would bill for it, never more than its
own limits allow.
"""

from __future__ import annotations

import struct
import sys
import tracemalloc
import zlib
from types import FrameType
from typing import Any, Callable, Dict, Optional

import media_files as files
import pytest

from ctx_compact import _media_rates as rates
from ctx_compact import estimate_tokens, media_aware_counter
from ctx_compact._media_headers import Payload, audio_seconds, image_size, pdf_pages

COUNT = media_aware_counter()
KB = 1024
MB = 1024 * KB


def lines_run(function: Callable[..., Any], *args: Any) -> int:
    """The Python lines ``function(*args)`` runs, in every frame it calls: its work, counted."""
    count = 0

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "line":
            count += 1
        return trace

    previous = sys.gettrace()
    sys.settrace(trace)
    try:
        function(*args)
    finally:
        sys.settrace(previous)
    return count


# -- the crafted payloads, each about ``size`` bytes ----------------------------------------


def pdf_digits(size: int) -> bytes:
    """A PDF header and one run of digits: each digit could start an object header."""
    return b"%PDF-1.4\n" + b"7" * size


def pdf_pages_nodes(size: int) -> bytes:
    """``/Type/Pages`` again and again, with no ``>`` to end a dictionary."""
    return b"%PDF-1.4\n" + b"/Type/Pages " * (size // 12)


def pdf_counts(size: int) -> bytes:
    """``/Count 1`` again and again, with no ``>`` to end a dictionary."""
    return b"%PDF-1.4\n" + b"/Count 1 " * (size // 9)


def pdf_objects(size: int) -> bytes:
    """Empty objects, one every 8 bytes."""
    return b"%PDF-1.4\n" + b"1 0 obj\n" * (size // 8)


def pdf_page_objects(size: int) -> bytes:
    """Page objects, each of its own number."""
    return b"%PDF-1.4\n" + b"".join(b"%d 0 obj /Type/Page " % k for k in range(size // 24))


def object_stream(inflated_size: int, first: bytes = b"4", chunk: bytes = b" ") -> bytes:
    """A PDF of one object stream inflating to ``inflated_size`` bytes of ``chunk``.

    Compressed a megabyte at a time, so that building a zip bomb costs no memory.
    """
    packer = zlib.compressobj(9)
    piece = chunk * (MB // len(chunk))
    packed = b"".join(packer.compress(piece) for _ in range(inflated_size // MB))
    packed += packer.compress(chunk * (inflated_size % MB // len(chunk))) + packer.flush()
    return (
        b"%PDF-1.7\n1 0 obj\n<< /Type /ObjStm /N 1 /First "
        + first
        + b" /Filter /FlateDecode >>\nstream\n"
        + packed
        + b"\nendstream\nendobj\n"
    )


def pdf_object_stream(size: int) -> bytes:
    """An object stream whose table lists an object every 4 bytes."""
    return object_stream(size, first=b"%d" % size, chunk=b"3 0 ")


def jpeg_restarts(size: int) -> bytes:
    """A JPEG whose frame header follows ``size / 2`` restart markers."""
    frame = b"\xff\xc0\x00\x11\x08\x00\x10\x00\x10\x03" + bytes(9)
    return b"\xff\xd8" + b"\xff\xd0" * (size // 2) + frame + b"\xff\xda" + bytes(100)


def jpeg_segments(size: int) -> bytes:
    """A JPEG whose frame header follows ``size / 4`` empty segments."""
    frame = b"\xff\xc0\x00\x11\x08\x00\x10\x00\x10\x03" + bytes(9)
    return b"\xff\xd8" + b"\xff\xe1\x00\x02" * (size // 4) + frame + b"\xff\xda" + bytes(100)


def wav_chunks(size: int) -> bytes:
    """A WAV whose data chunk follows ``size / 8`` empty chunks."""
    fmt = struct.pack("<HHIIHH", 1, 1, 16000, 32000, 2, 16)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt
    body += b"JUNK\x00\x00\x00\x00" * (size // 8)
    body += b"data" + struct.pack("<I", 32000) + bytes(32000)
    return b"RIFF" + struct.pack("<I", len(body)) + body


def read_pdf(data: bytes) -> Optional[int]:
    return pdf_pages(data)


def read_image(data: bytes) -> Any:
    return image_size(Payload(files.b64(data)))


def read_audio(data: bytes) -> Optional[float]:
    return audio_seconds(Payload(files.b64(data)))


CRAFTED: Dict[str, Any] = {
    "PDF: a run of digits": (pdf_digits, read_pdf),
    "PDF: /Type/Pages repeated": (pdf_pages_nodes, read_pdf),
    "PDF: /Count repeated": (pdf_counts, read_pdf),
    "PDF: empty objects": (pdf_objects, read_pdf),
    "PDF: page objects": (pdf_page_objects, read_pdf),
    "PDF: an object stream's table": (pdf_object_stream, read_pdf),
    "JPEG: restart markers": (jpeg_restarts, read_image),
    "JPEG: empty segments": (jpeg_segments, read_image),
    "WAV: empty chunks": (wav_chunks, read_audio),
}


@pytest.mark.parametrize("name", sorted(CRAFTED))
def test_the_readers_work_grows_at_most_linearly_from_1_kb_to_1_mb(name: str) -> None:
    make, read = CRAFTED[name]
    small = lines_run(read, make(KB))
    large = lines_run(read, make(MB))
    # 1,024 times the bytes: at most about 1,024 times the work (a quadratic reader
    # would do a million times more), and no more than a bounded reader allows.
    assert large <= 1100 * max(small, 1), (name, small, large)


# -- 9: a PDF's patterns stay linear ------------------------------------------------------
#
# Each of these took seconds at 8 KB before (0.4 s, 3.3 s, 2.5 s) and did not finish at
# 60 KB; at 1 MB a quadratic reader would run for hours. The regular expressions run in
# C, where no line is traced: their linearity is shown by these 1 MB payloads being read
# at all, and the Python work around them by the growth test above.


@pytest.mark.parametrize("make", [pdf_digits, pdf_pages_nodes, pdf_counts])
def test_a_crafted_pdf_of_a_megabyte_is_read(make: Callable[[int], bytes]) -> None:
    assert pdf_pages(make(MB)) == 1


def test_a_line_of_digits_in_a_document_counts_as_one_page() -> None:
    # One line of a JSONL dataset: an Anthropic document holding a PDF header and
    # digits, which the command line counts by default.
    message = {
        "role": "user",
        "content": [
            {
                "type": "document",
                "source": {
                    "type": "base64",
                    "media_type": "application/pdf",
                    "data": files.b64(pdf_digits(MB)),
                },
            }
        ],
    }
    assert COUNT(message) == estimate_tokens({"role": "user", "content": []}) + 3100


def test_numbers_too_long_for_a_pdf_are_not_converted() -> None:
    # int() of a 100,000-digit number is quadratic (and refused from Python 3.11 on).
    count = b"%PDF-1.4\n1 0 obj << /Type /Pages /Count " + b"9" * 100_000 + b" >> endobj"
    assert pdf_pages(count) == 10**12
    first = object_stream(KB, first=b"9" * 100_000, chunk=b"3 0 ")
    assert pdf_pages(first) == 1


# -- 10: object streams are inflated within a budget ---------------------------------------


def test_a_zip_bomb_in_an_object_stream_is_inflated_within_its_budget() -> None:
    # 64 MB of spaces in 62 KB (a reported one was 1 GB in 972 KB, and took 2.1 GB).
    bomb = object_stream(64 * MB)
    assert len(bomb) < 64 * KB
    tracemalloc.start()
    try:
        assert pdf_pages(bomb) == 1
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # The 16 MiB budget inflated, zlib's buffer grown to it once: not the 64 MB.
    assert peak < 40 * MB, peak


def test_the_inflation_budget_is_shared_by_a_payload_s_object_streams() -> None:
    # Two object streams of 12 MiB, each within the 16 MiB budget alone, a page object
    # at the end of each: the first is inflated whole, the second only as far as the
    # budget left.
    pad = b" " * (12 * MB)

    def stream(number: int, page: int) -> bytes:
        table = b"%d %d\n" % (page, len(pad))
        inner = table + pad + b"<< /Type /Page >>"
        return (
            b"%d 0 obj\n<< /Type /ObjStm /N 1 /First %d /Filter /FlateDecode >>\nstream\n"
            % (number, len(table))
            + zlib.compress(inner)
            + b"\nendstream\nendobj\n"
        )

    assert pdf_pages(b"%PDF-1.7\n" + stream(1, 5)) == 1
    assert pdf_pages(b"%PDF-1.7\n" + stream(1, 5) + stream(2, 6)) == 1  # page 6 unread


def test_the_objects_read_are_bounded() -> None:
    most = 100_000  # objects read at most (docs/media.md)
    assert pdf_pages(pdf_page_objects(24 * (most + 500))) == most
    assert pdf_pages(pdf_page_objects(24 * 500)) == 500


# -- 11: a JPEG's and a WAV's walks are bounded --------------------------------------------


@pytest.mark.parametrize(
    ("make", "read"),
    [(jpeg_restarts, read_image), (jpeg_segments, read_image), (wav_chunks, read_audio)],
    ids=["jpeg restarts", "jpeg segments", "wav chunks"],
)
def test_a_walk_past_its_bound_stops_there(make: Callable[[int], bytes], read: Any) -> None:
    # 4 MB of markers (2 million restart markers) before the frame header: before, the
    # walk went through every one (2 to 5 seconds); now it stops, and the work is
    # the same as for 40 KB of them.
    assert read(make(4 * MB)) is None
    assert lines_run(read, make(4 * MB)) <= lines_run(read, make(40 * KB))


def test_a_jpeg_with_many_segments_before_its_frame_is_still_read() -> None:
    most = 1000  # steps a walk takes at most (docs/media.md)
    frame = b"\xff\xc0\x00\x11\x08\x02\x00\x03\x00\x03" + bytes(9) + b"\xff\xda" + bytes(100)
    segments = b"\xff\xe2\x00\x10" + bytes(14)  # an ICC profile's pieces, say
    read = b"\xff\xd8" + segments * (most - 1) + frame
    unread = b"\xff\xd8" + segments * most + frame
    for data, size in ((read, (768, 512)), (unread, None)):
        assert image_size(Payload(files.b64(data))) == size
        assert image_size(Payload(data)) == size


def test_a_payload_that_cannot_be_read_cheaply_counts_as_one_of_unknown_size() -> None:
    image = {
        "role": "user",
        "content": [
            {
                "type": "image",
                "source": {
                    "type": "base64",
                    "media_type": "image/jpeg",
                    "data": files.b64(jpeg_restarts(MB)),
                },
            }
        ],
    }
    empty = estimate_tokens({"role": "user", "content": []})
    assert COUNT(image) == empty + rates.unsized_image_tokens(rates.ANTHROPIC)
    audio = {
        "role": "user",
        "content": [
            {
                "type": "input_audio",
                "input_audio": {"data": files.b64(wav_chunks(MB)), "format": "wav"},
            }
        ],
    }
    assert COUNT(audio) == empty + 60 * 10  # a minute at OpenAI's 10 a second
    told = media_aware_counter(unsized_image_tokens=100, unsized_audio_tokens=7)
    assert told(image) == empty + 100
    assert told(audio) == empty + 7


# -- 12: lying headers count what the provider would bill --------------------------------


def png_header(width: int, height: int) -> bytes:
    """A PNG's signature and header chunk declaring ``width`` x ``height``, and nothing else."""
    body = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    crc = struct.pack(">I", zlib.crc32(b"IHDR" + body))
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", len(body)) + b"IHDR" + body + crc


def webp_vp8x(width: int, height: int) -> bytes:
    """A WebP's extended header declaring ``width`` x ``height`` (each at most 2**24)."""
    sizes = (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    return b"RIFF" + struct.pack("<I", 22) + b"WEBPVP8X" + struct.pack("<I", 10) + bytes(4) + sizes


def gemini_part(data: bytes, mime: str) -> Dict[str, Any]:
    return {
        "role": "user",
        "parts": [{"inline_data": {"mime_type": mime, "data": files.b64(data)}}],
    }


GEMINI_EMPTY = estimate_tokens({"role": "user", "parts": []})
LARGEST_IMAGE = {rates.OPENAI: 1445, rates.ANTHROPIC: 1600, rates.GEMINI: 16 * 258}


@pytest.mark.parametrize(
    ("size", "tokens"),
    [
        ((3072, 3072), 16 * 258),
        ((3073, 3073), 16 * 258),  # scaled to 3072 x 3072
        ((6144, 1536), 4 * 258),  # scaled to 3072 x 768
        ((20000, 100), 4 * 258),  # scaled to 3072 x 15
        ((2**31 - 1, 2**31 - 1), 16 * 258),
        ((3000, 2000), 3096),  # within 3072 x 3072: as before
    ],
)
def test_gemini_scales_a_large_image_to_fit_3072(size: Any, tokens: int) -> None:
    assert rates.gemini_image_tokens(*size) == tokens
    assert rates.image_tokens(rates.GEMINI, *size) == tokens


def test_a_png_declaring_the_largest_size_counts_the_provider_s_largest_image() -> None:
    # A 57-byte PNG declaring 2**31-1 x 2**31-1 pixels: Gemini counted 2.0e15 tokens.
    data = png_header(2**31 - 1, 2**31 - 1)
    assert image_size(Payload(files.b64(data))) == (2**31 - 1, 2**31 - 1)
    assert COUNT(gemini_part(data, "image/png")) == GEMINI_EMPTY + 16 * 258
    for provider, largest in LARGEST_IMAGE.items():
        assert rates.image_tokens(provider, 2**31 - 1, 2**31 - 1) <= largest


def test_a_webp_declaring_its_largest_size_counts_gemini_s_largest_image() -> None:
    # VP8X's largest, 2**24 x 2**24: Gemini counted 1.2e11 tokens.
    data = webp_vp8x(2**24, 2**24)
    assert image_size(Payload(files.b64(data))) == (2**24, 2**24)
    assert COUNT(gemini_part(data, "image/webp")) == GEMINI_EMPTY + 16 * 258


def test_a_pdf_declaring_a_billion_pages_counts_the_most_its_provider_accepts() -> None:
    data = b"%PDF-1.4\n1 0 obj\n<< /Type /Pages /Count 1000000000 /Kids [] >>\nendobj\n"
    assert pdf_pages(data) == 10**9
    empty = estimate_tokens({"role": "user", "content": []})
    anthropic = {
        "role": "user",
        "content": [
            {
                "type": "document",
                "source": {
                    "type": "base64",
                    "media_type": "application/pdf",
                    "data": files.b64(data),
                },
            }
        ],
    }
    chat = {
        "role": "user",
        "content": [
            {"type": "file", "file": {"file_data": files.data_url("application/pdf", data)}}
        ],
    }
    bedrock = {
        "role": "user",
        "content": [{"document": {"format": "pdf", "name": "d", "source": {"bytes": data}}}],
    }
    assert COUNT(anthropic) == empty + 600 * 3100  # was 3.1e12
    assert COUNT(chat) == empty + 100 * 2265
    assert COUNT(gemini_part(data, "application/pdf")) == GEMINI_EMPTY + 1000 * 258
    assert COUNT(bedrock) == empty + 600 * 3100
    per_page = media_aware_counter(pdf_page_tokens=10)
    assert per_page(anthropic) == empty + 600 * 10


def test_a_real_document_longer_than_the_provider_accepts_counts_its_limit() -> None:
    data = files.pdf(150)
    assert pdf_pages(data) == 150
    chat = {
        "role": "user",
        "content": [
            {"type": "file", "file": {"file_data": files.data_url("application/pdf", data)}}
        ],
    }
    assert COUNT(chat) == estimate_tokens({"role": "user", "content": []}) + 100 * 2265
    assert COUNT(gemini_part(data, "application/pdf")) == GEMINI_EMPTY + 150 * 258
