"""What one crafted media payload can cost the media-aware count: time, memory, work, figure.

A payload is untrusted bytes: one line of a JSONL dataset the command line counts,
a tool's output. This script counts, with ``media_aware_counter()``, a message
holding each kind of crafted payload that can stall or flood a naive reader
(a PDF that is a run of digits, ``/Type/Pages`` or ``/Count`` repeated, empty
objects, an object stream inflating a thousandfold; a JPEG behind two million
restart markers; a WAV of 500,000 empty chunks), and prints for each the figure
counted, the best time of ``--repeat`` counts and tracemalloc's peak. Then the
work, counted as the Python lines run (``sys.settrace``, the same on every run),
at 1 KB and at 1 MB of each: a linear reader does at most about 1,024 times more
for 1,024 times the bytes, a quadratic one a million times. Then what headers
that lie about a size count, provider by provider. Nothing is asserted: the exit
status is 0 whatever the figures.

Run from the repository root::

    python benchmarks/bench_media_bounds.py
    python benchmarks/bench_media_bounds.py --repeat 5

Standard library only: every payload is built here, byte by byte.
"""

from __future__ import annotations

import argparse
import base64
import platform
import struct
import sys
import time
import tracemalloc
import zlib
from pathlib import Path
from types import FrameType
from typing import Any, Callable, Dict, List, Tuple

try:
    import ctx_compact
except ImportError:  # a checkout that was never installed: use the sources beside us
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import ctx_compact

KB = 1024
MB = 1024 * KB
COUNT = ctx_compact.media_aware_counter()


# -- the crafted payloads, each about ``size`` bytes ----------------------------------------


def pdf_digits(size: int) -> bytes:
    return b"%PDF-1.4\n" + b"7" * size


def pdf_pages_nodes(size: int) -> bytes:
    return b"%PDF-1.4\n" + b"/Type/Pages " * (size // 12)


def pdf_counts(size: int) -> bytes:
    return b"%PDF-1.4\n" + b"/Count 1 " * (size // 9)


def pdf_objects(size: int) -> bytes:
    return b"%PDF-1.4\n" + b"1 0 obj\n" * (size // 8)


def pdf_page_objects(size: int) -> bytes:
    return b"%PDF-1.4\n" + b"".join(b"%d 0 obj /Type/Page " % k for k in range(size // 24))


def pdf_bomb(size: int) -> bytes:
    """An object stream of ``size`` bytes of spaces (1 GB: 972 KB of PDF)."""
    packer = zlib.compressobj(9)
    piece = b" " * MB
    packed = b"".join(packer.compress(piece) for _ in range(size // MB))
    packed += packer.compress(b" " * (size % MB)) + packer.flush()
    return (
        b"%PDF-1.7\n1 0 obj\n<< /Type /ObjStm /N 1 /First 4 /Filter /FlateDecode >>\nstream\n"
        + packed
        + b"\nendstream\nendobj\n"
    )


def jpeg_restarts(size: int) -> bytes:
    frame = b"\xff\xc0\x00\x11\x08\x00\x10\x00\x10\x03" + bytes(9)
    return b"\xff\xd8" + b"\xff\xd0" * (size // 2) + frame + b"\xff\xda" + bytes(100)


def jpeg_segments(size: int) -> bytes:
    frame = b"\xff\xc0\x00\x11\x08\x00\x10\x00\x10\x03" + bytes(9)
    return b"\xff\xd8" + b"\xff\xe1\x00\x02" * (size // 4) + frame + b"\xff\xda" + bytes(100)


def wav_chunks(size: int) -> bytes:
    fmt = struct.pack("<HHIIHH", 1, 1, 16000, 32000, 2, 16)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt
    body += b"JUNK\x00\x00\x00\x00" * (size // 8)
    body += b"data" + struct.pack("<I", 32000) + bytes(32000)
    return b"RIFF" + struct.pack("<I", len(body)) + body


def png_header(width: int, height: int) -> bytes:
    body = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    crc = struct.pack(">I", zlib.crc32(b"IHDR" + body))
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", len(body)) + b"IHDR" + body + crc


def webp_vp8x(width: int, height: int) -> bytes:
    sizes = (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    return b"RIFF" + struct.pack("<I", 22) + b"WEBPVP8X" + struct.pack("<I", 10) + bytes(4) + sizes


# -- the messages holding them, as each format sends them -----------------------------------


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def anthropic(kind: str, mime: str, data: bytes) -> Dict[str, Any]:
    source = {"type": "base64", "media_type": mime, "data": b64(data)}
    return {"role": "user", "content": [{"type": kind, "source": source}]}


def chat_audio(data: bytes) -> Dict[str, Any]:
    part = {"type": "input_audio", "input_audio": {"data": b64(data), "format": "wav"}}
    return {"role": "user", "content": [part]}


def chat_file(data: bytes) -> Dict[str, Any]:
    url = "data:application/pdf;base64," + b64(data)
    return {"role": "user", "content": [{"type": "file", "file": {"file_data": url}}]}


def gemini(mime: str, data: bytes) -> Dict[str, Any]:
    return {"role": "user", "parts": [{"inline_data": {"mime_type": mime, "data": b64(data)}}]}


def bedrock_document(data: bytes) -> Dict[str, Any]:
    block = {"document": {"format": "pdf", "name": "d", "source": {"bytes": data}}}
    return {"role": "user", "content": [block]}


def document(data: bytes) -> Dict[str, Any]:
    return anthropic("document", "application/pdf", data)


def image(data: bytes) -> Dict[str, Any]:
    return anthropic("image", "image/jpeg", data)


# name: (payload of ``size`` bytes, the message holding it, the size it is measured at)
CRAFTED: Dict[str, Tuple[Callable[[int], bytes], Callable[[bytes], Any], int]] = {
    "PDF: a run of digits": (pdf_digits, document, 80_000),
    "PDF: /Type/Pages repeated": (pdf_pages_nodes, document, 8000 * 12),
    "PDF: /Count 1 repeated": (pdf_counts, document, 8000 * 9),
    "PDF: empty objects": (pdf_objects, document, 4 * MB),
    "PDF: page objects": (pdf_page_objects, document, 4 * MB),
    "PDF: object stream of 1 GB": (pdf_bomb, document, 1024 * MB),
    "JPEG: restart markers": (jpeg_restarts, image, 4 * MB),
    "JPEG: empty segments": (jpeg_segments, image, 4 * MB),
    "WAV: empty chunks": (wav_chunks, chat_audio, 4 * MB),
}


def lines_run(message: Any) -> int:
    """The Python lines counting ``message`` runs: its work, counted."""
    count = 0

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "line":
            count += 1
        return trace

    sys.settrace(trace)
    try:
        COUNT(message)
    finally:
        sys.settrace(None)
    return count


def best_time(message: Any, repeat: int) -> float:
    runs: List[float] = []
    for _ in range(repeat):
        start = time.perf_counter()
        COUNT(message)
        runs.append(time.perf_counter() - start)
    return min(runs)


def peak(message: Any) -> float:
    tracemalloc.start()
    try:
        COUNT(message)
        return tracemalloc.get_traced_memory()[1] / MB
    finally:
        tracemalloc.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="counts timed; the best is kept")
    args = parser.parse_args()
    print(f"ctx-compact {ctx_compact.__version__}, CPython {platform.python_version()}")

    print("\nOne crafted payload of a few MB at most (the figure is the tokens")
    print("the message counts, the payload's and the rest's):\n")
    print(f"{'payload':30} {'bytes':>11} {'tokens':>9} {'seconds':>9} {'peak MB':>9}")
    for name, (make, wrap, size) in CRAFTED.items():
        data = make(size)
        message = wrap(data)
        figure = COUNT(message)
        seconds = best_time(message, args.repeat)
        print(f"{name:30} {len(data):>11,} {figure:>9,} {seconds:>9.4f} {peak(message):>9.1f}")

    print("\nThe work (Python lines run) at 1 KB and at 1 MB of each: 1,024 times the bytes\n")
    print(f"{'payload':30} {'1 KB':>10} {'1 MB':>10} {'growth':>9}")
    for name, (make, wrap, _) in CRAFTED.items():
        small, large = lines_run(wrap(make(KB))), lines_run(wrap(make(MB)))
        print(f"{name:30} {small:>10,} {large:>10,} {large / max(small, 1):>8.1f}x")

    print("\nHeaders that lie about a size: the tokens each provider's message counts for them\n")
    huge_png = png_header(2**31 - 1, 2**31 - 1)
    huge_webp = webp_vp8x(2**24, 2**24)
    billion = b"%PDF-1.4\n1 0 obj\n<< /Type /Pages /Count 1000000000 /Kids [] >>\nendobj\n"
    lies = [
        ("PNG 2^31-1 x 2^31-1", "Gemini", gemini("image/png", huge_png)),
        ("PNG 2^31-1 x 2^31-1", "Anthropic", anthropic("image", "image/png", huge_png)),
        ("WebP VP8X 2^24 x 2^24", "Gemini", gemini("image/webp", huge_webp)),
        ("PDF /Count 1000000000", "Anthropic", document(billion)),
        ("PDF /Count 1000000000", "OpenAI Chat", chat_file(billion)),
        ("PDF /Count 1000000000", "Gemini", gemini("application/pdf", billion)),
        ("PDF /Count 1000000000", "Bedrock", bedrock_document(billion)),
    ]
    print(f"{'payload':24} {'provider':12} {'tokens':>11}")
    for name, provider, message in lies:
        print(f"{name:24} {provider:12} {COUNT(message):>11,}")


if __name__ == "__main__":
    main()
