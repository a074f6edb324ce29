"""What each layer of the media-aware count costs on one photo (issue 22's floor).

Counting 1 KB of text is one call of the C JSON encoder. Counting a photo is the
rest of the message through the same encoder, plus finding, reading and pricing
the part in Python. This script times, on ``bench_media.py``'s Chat photo, a
single function written for that one shape (no format interface: it knows the
part is the first of a Chat ``content`` list), then the same with each layer of
the library put back in turn, and the library's own count, against the 1 KB of
text. It shows how far below the text a photo can be counted in Python, and
what the layers the library's structure asks for (a generic scan, each format
reading its own parts, one pricing for every provider) cost.

Run from the repository root::

    python benchmarks/media_layers.py [--repeat 9] [--loops 200000]

Standard library only. The exit status is 0: the figures are printed, not asserted.
"""

from __future__ import annotations

import argparse
import sys
import timeit
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_media

from ctx_compact import _media_rates as rates
from ctx_compact import media_aware_counter
from ctx_compact._media import media_readers, media_tokens
from ctx_compact._media_headers import image_size_of
from ctx_compact._tokens import compact_json
from ctx_compact._views import holds_objects
from ctx_compact.formats._base import data_url

COUNT = media_aware_counter()


def _rest_tokens(view: Dict[str, Any]) -> int:
    rest = dict(view)
    rest["content"] = []
    return -(-len(compact_json(rest)) // 4)


def fused(view: Dict[str, Any]) -> int:
    """The Chat photo counted by one function that knows its shape."""
    if holds_objects(view):
        raise ValueError("not this benchmark's message")
    image = view["content"][0]["image_url"]
    _, url, start = data_url(image["url"])
    size = image_size_of(url, start)
    assert size is not None
    return _rest_tokens(view) + rates.image_tokens("openai", size[0], size[1], image.get("detail"))


def scanned(view: Dict[str, Any]) -> int:
    """The same, the part found by the library's generic scan."""
    if holds_objects(view):
        raise ValueError("not this benchmark's message")
    _, _, part = media_readers(view)
    image = part["image_url"]
    _, url, start = data_url(image["url"])
    size = image_size_of(url, start)
    assert size is not None
    return _rest_tokens(view) + rates.image_tokens("openai", size[0], size[1], image.get("detail"))


def read(view: Dict[str, Any]) -> int:
    """The same, the part read by its format (``Format.media_of``: a ``Media``)."""
    if holds_objects(view):
        raise ValueError("not this benchmark's message")
    fmt, field, part = media_readers(view)
    media = fmt.media_of(part, (field, 0))
    size = image_size_of(media.data, media.start)
    assert size is not None
    return _rest_tokens(view) + rates.image_tokens(media.provider, size[0], size[1], media.detail)


def priced(view: Dict[str, Any]) -> int:
    """The same, priced by the library's one pricing for every kind and provider."""
    if holds_objects(view):
        raise ValueError("not this benchmark's message")
    fmt, field, part = media_readers(view)
    return _rest_tokens(view) + media_tokens(fmt.media_of(part, (field, 0)))


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--loops", type=int, default=200_000)
    args = parser.parse_args(argv)
    messages = bench_media.messages()
    text, photo = messages["text, 1 KB (Chat)"], messages["Chat image_url, 1 MB"]
    rows: List[Tuple[str, Callable[[Any], int], Any]] = [
        ("1 KB of text, the library's count", COUNT, text),
        ("photo, one function for its shape", fused, photo),
        ("  + the generic scan", scanned, photo),
        ("  + the format reading the part", read, photo),
        ("  + the one pricing", priced, photo),
        ("photo, the library's count", COUNT, photo),
    ]
    expected = COUNT(photo)
    for name, count, message in rows[1:]:
        if count(message) != expected:
            raise SystemExit(f"{name!r} counts {count(message)}, not {expected}")
    figures = {}
    for name, count, message in rows:
        call = lambda count=count, message=message: count(message)  # noqa: E731
        runs = timeit.repeat(call, number=args.loops, repeat=args.repeat)
        figures[name] = min(runs) / args.loops
    base = figures[rows[0][0]]
    print(f"{'count':<40} {'us':>7} {'x text':>8}")
    for name, _, _ in rows:
        print(f"{name:<40} {figures[name] * 1e6:7.2f} {figures[name] / base:8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
