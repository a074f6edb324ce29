"""How long counting a message holding a photo takes, with the media-aware estimate.

The media-aware estimate reads an image's size from the first bytes of its
payload and never serialises the payload, so the time does not grow with the
photo. This script times ``media_aware_counter()`` on a message holding a 1 MB
base64 JPEG in each wire format's image part (and a JPEG whose frame header
sits behind 180 KB of metadata segments, and one with its quantisation tables
first, as encoders write it), on 1 KB of text for scale, with the
specification's estimator on the same photo for contrast, and on photos of
10 KB to 10 MB. It prints figures; it asserts nothing.

Run from the repository root::

    python benchmarks/bench_media.py
    python benchmarks/bench_media.py --repeat 9 --loops 20000 --clock cpu

Standard library only (the photo is built by hand: a JPEG's segment structure
around random bytes, which the counter reads exactly as a camera's file).
"""

from __future__ import annotations

import argparse
import base64
import platform
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List

try:
    import ctx_compact
except ImportError:  # a checkout that was never installed: use the sources beside us
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import ctx_compact

CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
CLOCK = time.perf_counter
PAYLOAD_BYTES = 786_432  # 1 MiB of base64 text


def jpeg(width: int, height: int, size: int, metadata: int = 0, tables: bool = False) -> bytes:
    """A JPEG's markers (SOI, APP segments, a baseline frame header, a scan) around noise.

    ``tables``: two quantisation tables before the frame header, as Pillow and most
    encoders write them (the frame header then starts at byte 158).
    """
    rng = random.Random(0)
    app = b""
    while metadata > 0:
        length = min(metadata, 65533)
        app += b"\xff\xe1" + (length + 2).to_bytes(2, "big") + bytes(length)
        metadata -= length
    if tables:
        app += b"".join(b"\xff\xdb\x00\x43" + bytes([k]) + bytes(range(1, 65)) for k in (0, 1))
    frame = b"\xff\xc0\x00\x11\x08" + height.to_bytes(2, "big") + width.to_bytes(2, "big")
    frame += b"\x03\x01\x22\x00\x02\x11\x01\x03\x11\x01"
    head = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00" + app + frame
    scan = b"\xff\xda\x00\x0c\x03\x01\x00\x02\x11\x03\x11\x00\x3f\x00"
    body = bytes(rng.getrandbits(8) for _ in range(max(size - len(head) - len(scan) - 2, 0)))
    return head + scan + body.replace(b"\xff", b"\xfe") + b"\xff\xd9"


def scaled(size: int) -> Dict[str, Any]:
    """A Chat message holding a photo of ``size`` payload bytes."""
    photo = base64.b64encode(jpeg(1024, 768, size)).decode()
    part = {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64," + photo}}
    return {"role": "user", "content": [part]}


def messages() -> Dict[str, Dict[str, Any]]:
    photo = base64.b64encode(jpeg(1024, 768, PAYLOAD_BYTES)).decode()
    tall = base64.b64encode(jpeg(1024, 768, PAYLOAD_BYTES, metadata=180_000)).decode()
    encoded = base64.b64encode(jpeg(1024, 768, PAYLOAD_BYTES, tables=True)).decode()
    url = "data:image/jpeg;base64," + photo
    text = "The quick brown fox jumps over the lazy dog. " * 23  # about 1 KB
    return {
        "text, 1 KB (Chat)": {"role": "user", "content": text[:1024]},
        "text part, 1 KB (Chat)": {
            "role": "user",
            "content": [{"type": "text", "text": text[:1024]}],
        },
        "Chat image_url, 1 MB": {
            "role": "user",
            "content": [{"type": "image_url", "image_url": {"url": url, "detail": "high"}}],
        },
        "Chat image_url, 1 MB, tables first": {
            "role": "user",
            "content": [
                {
                    "type": "image_url",
                    "image_url": {"url": "data:image/jpeg;base64," + encoded, "detail": "high"},
                }
            ],
        },
        "Responses input_image, 1 MB": {
            "role": "user",
            "content": [{"type": "input_image", "image_url": url}],
        },
        "Anthropic image, 1 MB": {
            "role": "user",
            "content": [
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/jpeg", "data": photo},
                }
            ],
        },
        "Anthropic image, 1 MB, SOF after 180 KB": {
            "role": "user",
            "content": [
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/jpeg", "data": tall},
                }
            ],
        },
        "Gemini inline_data, 1 MB": {
            "role": "user",
            "parts": [{"inline_data": {"mime_type": "image/jpeg", "data": photo}}],
        },
        "Bedrock image, 1 MB": {
            "role": "user",
            "content": [{"image": {"format": "jpeg", "source": {"bytes": photo}}}],
        },
    }


def per_call(count: Callable[[Any], int], message: Any, loops: int, repeat: int) -> float:
    """The median over ``repeat`` runs of the seconds one call takes, ``loops`` calls a run."""
    runs: List[float] = []
    for _ in range(repeat):
        start = CLOCK()
        for _ in range(loops):
            count(message)
        runs.append((CLOCK() - start) / loops)
    return statistics.median(runs)


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--loops", type=int, default=5000)
    parser.add_argument(
        "--clock",
        choices=sorted(CLOCKS),
        default="wall",
        help="wall (perf_counter) or cpu (process_time: steadier on a shared machine)",
    )
    args = parser.parse_args(argv)
    global CLOCK
    CLOCK = CLOCKS[args.clock]
    count = ctx_compact.media_aware_counter()
    found = messages()
    print(f"ctx-compact {ctx_compact.__version__}, Python {platform.python_version()}")
    print(f"{'message':<42} {'tokens':>8} {'us/call':>10}")
    times: Dict[str, float] = {}
    for name, message in found.items():
        times[name] = per_call(count, message, args.loops, args.repeat)
        print(f"{name:<42} {count(message):>8} {times[name] * 1e6:>10.2f}")
    spec = ctx_compact.estimate_tokens
    photo = found["Chat image_url, 1 MB"]
    slow = per_call(spec, photo, max(args.loops // 100, 5), args.repeat)
    print(f"{'(estimate_tokens on the Chat photo)':<42} {spec(photo):>8} {slow * 1e6:>10.2f}")
    text = times["text, 1 KB (Chat)"]
    photos = [v for k, v in times.items() if "MB" in k]
    print(
        f"1 MB photos: {min(photos) * 1e6:.2f} to {max(photos) * 1e6:.2f} us, "
        f"{min(photos) / text:.2f}x to {max(photos) / text:.2f}x the 1 KB text"
    )
    print(
        f"estimate_tokens on the photo / media-aware: {slow / times['Chat image_url, 1 MB']:.0f}x"
    )
    print("the payload's size does not matter (Chat image_url):")
    for size in (10_000, 100_000, 1_000_000, 10_000_000):
        message = scaled(size)
        took = per_call(count, message, args.loops, args.repeat)
        print(f"  {size:>10,} bytes: {took * 1e6:8.2f} us, {took / text:.2f}x the 1 KB text")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
