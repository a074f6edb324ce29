"""The testing kit's billing on crafted payloads: bounded work, and the library's figures.

The kit reads what each provider bills on its own (``ctx_compact/testing/_billing.py``
imports nothing of the core). On the payloads made to stall or exhaust a reader
(tests/test_media_bounds.py), its readers stop at the same bounds as the library's and
bill what ``media_aware_counter()`` counts, and the server answers such a request with
that figure. Work is counted as the Python lines run (``sys.settrace``) or as
tracemalloc's peak, never as time.
"""

from __future__ import annotations

import base64
import functools
import json
import tracemalloc
import urllib.error
import urllib.request
import zlib
from typing import Any, Callable, Dict, List, Tuple

import media_files as files
import pytest
from test_media_bounds import (
    jpeg_restarts,
    lines_run,
    object_stream,
    pdf_digits,
    pdf_object_stream,
    pdf_objects,
    png_header,
    wav_chunks,
    webp_vp8x,
)

from ctx_compact import media_aware_counter
from ctx_compact.testing import FakeProvider, count_tokens
from ctx_compact.testing import _billing as kit

COUNT = media_aware_counter()
KB = 1024
MB = 1024 * KB
Message = Dict[str, Any]

# -- the crafted payloads: (kind, MIME type, bytes) ------------------------------------------

BILLION_PAGES = b"%PDF-1.4\n1 0 obj\n<< /Type /Pages /Count 1000000000 /Kids [] >>\nendobj\n"
PAYLOADS: Dict[str, Tuple[str, str, Callable[[], bytes]]] = {
    "a PNG declaring 2**31-1 x 2**31-1": (
        "image",
        "image/png",
        lambda: png_header(2**31 - 1, 2**31 - 1),
    ),
    "a WebP at its largest, 2**24 x 2**24": (
        "image",
        "image/webp",
        lambda: webp_vp8x(2**24, 2**24),
    ),
    "a PDF declaring /Count 1000000000": ("document", "application/pdf", lambda: BILLION_PAGES),
    "a zip bomb in an object stream, 64 MB in 62 KB": (
        "document",
        "application/pdf",
        lambda: object_stream(64 * MB),
    ),
    "1 MB of digits in a PDF": ("document", "application/pdf", lambda: pdf_digits(MB)),
    "2M restart markers before a JPEG's frame": (
        "image",
        "image/jpeg",
        lambda: jpeg_restarts(4 * MB),
    ),
    "500k empty chunks before a WAV's data": ("audio", "audio/wav", lambda: wav_chunks(4 * MB)),
    "a real 150-page PDF": ("document", "application/pdf", lambda: files.pdf(150)),
}


@functools.cache
def payload(name: str) -> Tuple[str, str, bytes]:
    """The payload ``name``: its kind, MIME type and bytes (made once)."""
    kind, mime, make = PAYLOADS[name]
    return kind, mime, make()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


# -- the payload as each API carries it, and the kit's reader of that API's parts --------


def chat(kind: str, mime: str, data: bytes) -> Message:
    if kind == "image":
        part = {"type": "image_url", "image_url": {"url": files.data_url(mime, data)}}
    elif kind == "audio":
        part = {"type": "input_audio", "input_audio": {"data": b64(data), "format": "wav"}}
    else:
        part = {"type": "file", "file": {"file_data": files.data_url(mime, data)}}
    return {"role": "user", "content": [{"type": "text", "text": "What is this?"}, part]}


def responses(kind: str, mime: str, data: bytes) -> Message:
    if kind == "image":
        part = {"type": "input_image", "image_url": files.data_url(mime, data)}
    else:
        part = {
            "type": "input_file",
            "filename": "d.pdf",
            "file_data": files.data_url(mime, data),
        }
    return {"role": "user", "content": [{"type": "input_text", "text": "What is this?"}, part]}


def anthropic(kind: str, mime: str, data: bytes) -> Message:
    source = {"type": "base64", "media_type": mime, "data": b64(data)}
    return {"role": "user", "content": [{"type": kind, "source": source}]}


def gemini(kind: str, mime: str, data: bytes) -> Message:
    return {"role": "user", "parts": [{"inline_data": {"mime_type": mime, "data": b64(data)}}]}


def bedrock(kind: str, mime: str, data: bytes) -> Message:
    block: Dict[str, Any] = {"format": mime.split("/")[1], "source": {"bytes": b64(data)}}
    if kind == "document":
        block["name"] = "d"
    return {"role": "user", "content": [{kind: block}, {"text": "What is this?"}]}


APIS: Dict[str, Tuple[Callable[[str, str, bytes], Message], kit.Reader, Tuple[str, ...]]] = {
    "chat": (chat, kit.openai_chat_part, ("image", "document", "audio")),
    "responses": (responses, kit.responses_part, ("image", "document")),
    "anthropic": (anthropic, kit.anthropic_part, ("image", "document")),
    "gemini": (gemini, kit.gemini_part, ("image", "document", "audio")),
    "bedrock": (bedrock, kit.bedrock_part, ("image", "document")),
}


def kit_bills(api: str, name: str) -> Tuple[int, Message]:
    """The kit's figure for the payload ``name`` in a message of ``api``, and the message."""
    make, read, _ = APIS[api]
    message = make(*payload(name))
    return kit.billed(message, read, count_tokens), message


CASES = [
    pytest.param(api, name, id=f"{api}: {name}")
    for name in PAYLOADS
    for api, (_, _, kinds) in APIS.items()
    if PAYLOADS[name][0] in kinds
]


@pytest.mark.parametrize(("api", "name"), CASES)
def test_the_kit_bills_a_crafted_payload_as_the_library_counts_it(api: str, name: str) -> None:
    # Before, the kit billed the lying PNG 2.0e15 tokens for Gemini, the PDF declaring a
    # billion pages a billion pages, and the JPEG and the WAV as read at the end of their
    # millions of steps, where the library stops and counts a payload of unknown size.
    figure, message = kit_bills(api, name)
    assert figure == COUNT(message)


@pytest.mark.parametrize(
    ("api", "field", "tokens"),
    [
        ("chat", "content", 100 * 2265),
        ("anthropic", "content", 600 * 3100),
        ("gemini", "parts", 1000 * 258),
    ],
)
def test_a_pdf_costs_at_most_the_pages_its_provider_accepts(
    api: str, field: str, tokens: int
) -> None:
    figure, message = kit_bills(api, "a PDF declaring /Count 1000000000")
    without = {**message, field: message[field][:-1]}  # the document is the last part
    assert figure == count_tokens(without) + tokens


def test_gemini_scales_a_large_image_to_fit_3072() -> None:
    for size, tiles in (((2**31 - 1, 2**31 - 1), 16), ((6144, 1536), 4), ((3000, 2000), 12)):
        assert kit.image_price("gemini", size) == 258 * tiles


# -- the work and memory of the readers -------------------------------------------------


@pytest.mark.parametrize(
    ("make", "read"),
    [(jpeg_restarts, kit.pixels), (wav_chunks, kit.seconds)],
    ids=["jpeg restarts", "wav chunks"],
)
def test_a_walk_past_its_bound_stops_there(make: Callable[[int], bytes], read: Any) -> None:
    # 4 MB of markers or chunks before the frame header or the data: the kit walked
    # through every one (2 million restart markers, 0.5 million chunks), and now
    # stops at 1,000, so it does the same work as for 40 KB of them.
    assert read(make(4 * MB)) is None
    assert lines_run(read, make(4 * MB)) <= lines_run(read, make(40 * KB))


def test_a_jpeg_with_many_segments_before_its_frame_is_still_read() -> None:
    frame = b"\xff\xc0\x00\x11\x08\x02\x00\x03\x00\x03" + bytes(9) + b"\xff\xda" + bytes(100)
    segment = b"\xff\xe2\x00\x10" + bytes(14)
    assert kit.pixels(b"\xff\xd8" + segment * 999 + frame) == (768, 512)
    assert kit.pixels(b"\xff\xd8" + segment * 1000 + frame) is None


def peak_bytes(function: Callable[..., Any], *args: Any) -> Tuple[Any, int]:
    """``function(*args)`` and the most memory it held at once, in every thread."""
    tracemalloc.start()
    try:
        result = function(*args)
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_zip_bomb_is_inflated_within_its_budget() -> None:
    # 64 MB of spaces in 62 KB: the kit inflated all of it (a peak of 142 MB); a
    # 32 MiB request body could carry a bomb of 32 GB.
    bomb = object_stream(64 * MB)
    pages, peak = peak_bytes(kit.pages, bomb)
    assert pages == 1
    assert peak < 40 * MB, peak


def test_an_object_stream_s_table_is_read_within_the_objects_budget() -> None:
    # A table listing an object every 4 bytes, 4 MiB of it: the kit split it whole
    # into a million entries (at 16 MiB, 340 MB and two minutes).
    pages, peak = peak_bytes(kit.pages, pdf_object_stream(4 * MB))
    assert pages == 1
    assert peak < 40 * MB, peak


def test_the_objects_read_are_bounded() -> None:
    def page_objects(count: int) -> bytes:
        return b"%PDF-1.4\n" + b"".join(b"%d 0 obj /Type/Page endobj\n" % k for k in range(count))

    assert kit.pages(page_objects(100_500)) == 100_000
    assert kit.pages(page_objects(500)) == 500


def test_the_inflation_budget_is_shared_by_a_payload_s_object_streams() -> None:
    # Two object streams of 12 MiB with a page object at the end of each: the first
    # is inflated whole, the second only as far as what is left of the 16 MiB.
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

    assert kit.pages(b"%PDF-1.7\n" + stream(1, 5)) == 1
    assert kit.pages(b"%PDF-1.7\n" + stream(1, 5) + stream(2, 6)) == 1  # page 6 unread


@pytest.mark.parametrize("make", [pdf_digits, pdf_objects], ids=["digits", "objects"])
def test_a_crafted_pdf_of_a_megabyte_is_read(make: Callable[[int], bytes]) -> None:
    # The kit's patterns backtracked: a run of digits took 16 s at 32 KB and four times
    # as long at each doubling (hours at 1 MB), objects without "endobj" 5.6 s at 64 KB.
    # The patterns run in C, where no line is traced: reading 1 MB at all is the proof.
    assert kit.pages(make(MB)) == 1


# -- the server answers -------------------------------------------------------------------


def post(provider: FakeProvider, path: str, body: Any) -> Tuple[int, Any]:
    data = json.dumps(body).encode()
    headers = {"Content-Type": "application/json", "x-api-key": "test", "x-goog-api-key": "test"}
    request = urllib.request.Request(provider.base_url + path, data, headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        with error:
            return error.code, json.loads(error.read())


COUNT_TOKENS = "/v1beta/models/gemini-2.5-flash:countTokens"


@pytest.mark.parametrize("name", [n for n in PAYLOADS if n != "a real 150-page PDF"])
def test_the_server_answers_a_crafted_payload_with_the_bounded_count(
    provider: FakeProvider, name: str
) -> None:
    content = gemini(*payload(name))
    assert post(provider, COUNT_TOKENS, {"contents": [content]}) == (
        200,
        {"totalTokens": COUNT(content)},
    )


def test_the_server_s_memory_stays_bounded_on_a_zip_bomb(provider: FakeProvider) -> None:
    # 256 MB of spaces in 255 KB, sent as an Anthropic document: the server inflated
    # all of it. Now it holds its 16 MiB budget and the request.
    bomb = object_stream(256 * MB)
    message = anthropic("document", "application/pdf", bomb)
    body = {"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": [message]}
    (status, reply), peak = peak_bytes(post, provider, "/v1/messages", body)
    assert (status, reply["usage"]["input_tokens"]) == (200, COUNT(message))
    assert peak < 48 * MB, peak


BROKEN_PDFS: List[Any] = [
    pytest.param(
        b"%PDF-1.4\n1 0 obj << /Type /Pages /Count " + b"9" * 5000 + b" >> endobj",
        id="a /Count of 5,000 digits",
    ),
    pytest.param(
        b"%PDF-1.4\n1 0 obj << /Type /ObjStm /Filter /FlateDecode >> streamx endobj",
        id="an object stream without its line break",
    ),
    pytest.param(
        b"%PDF-1.4\n1 0 obj << /Type /ObjStm /Filter /FlateDecode >>\nstream\n"
        + zlib.compress(b"3 0 << /Type /Page >>")
        + b"\nendstream\nendobj",
        id="an object stream without /First",
    ),
    pytest.param(
        b"%PDF-1.4\n1 0 obj << /Type /ObjStm /First 9 /Filter /FlateDecode >>\nstream\n"
        + zlib.compress(b"3 x 4 0 \n<< /Type /Page >>")
        + b"\nendstream\nendobj",
        id="an object stream's table with a word in it",
    ),
]


@pytest.mark.parametrize("data", BROKEN_PDFS)
def test_a_broken_pdf_is_billed_not_a_server_error(provider: FakeProvider, data: bytes) -> None:
    # Each made the kit raise (ValueError, IndexError, AttributeError): a 500.
    content = gemini("document", "application/pdf", data)
    assert post(provider, COUNT_TOKENS, {"contents": [content]}) == (
        200,
        {"totalTokens": COUNT(content)},
    )
