"""The media-aware count's usual case gives what the general rule gives, on every shape.

A message holding one media part, found by the scan at the top level of its
field among parts the scan can vouch for, is read by that part's format alone
(``Format.media_of``) instead of by the format's whole ``media`` walk. These
tests hold that shortcut to the general rule on messages mixing every format's
media parts with text, holders, parts of odd types and the wrong fields.
"""

from __future__ import annotations

import enum
from types import MappingProxyType
from typing import Any, Dict, List

import media_files as files
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ctx_compact import estimate_tokens, media_aware_counter
from ctx_compact._contract import count_all
from ctx_compact._media import _without, media_readers, media_tokens
from ctx_compact.formats import FORMATS

COUNT = media_aware_counter()

PNG = files.b64(files.png(40, 30))
JPEG = files.b64(files.pillow(900, 700, "JPEG"))
PDF = files.b64(files.pdf(2))


class Kind(str, enum.Enum):
    IMAGE_URL = "image_url"
    IMAGE = "image"


def general(view: Dict[str, Any]) -> int:
    """The media-aware count as the general rule states it: each found format's ``media``."""
    mark = media_readers(view)
    if not mark:
        return estimate_tokens(view)
    formats = [mark[0]] if type(mark) is tuple else mark
    found = [m for fmt in formats for m in fmt.media(view)]
    if not found:
        return estimate_tokens(view)
    rest = _without(view, [m.path for m in found])
    return estimate_tokens(rest) + sum(media_tokens(m) for m in found)


MEDIA = [
    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}", "detail": "low"}},
    {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{JPEG}"}},
    {"type": "image_url", "image_url": "https://example.invalid/a.png"},
    {"type": "file", "file": {"file_data": f"data:application/pdf;base64,{PDF}"}},
    {"type": "input_image", "image_url": f"data:image/jpeg;base64,{JPEG}", "detail": "high"},
    {"type": "input_file", "file_data": PDF, "filename": "a.pdf"},
    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
    {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": PDF},
    },
    {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "hi"}},
    {"inline_data": {"mime_type": "image/jpeg", "data": JPEG}},
    {"fileData": {"mimeType": "application/pdf", "fileUri": "gs://b/a.pdf"}},
    {"image": {"format": "png", "source": {"bytes": PNG}}},
    {"document": {"format": "pdf", "name": "a", "source": {"bytes": PDF}}},
    {"document": {"format": "txt", "name": "a", "source": {"text": "plain"}}},
]
OTHERS = [
    {"type": "text", "text": "look at this"},
    {"text": "a Gemini or Bedrock text part"},
    {"type": "thinking", "thinking": "hm", "signature": "s"},
    # A typed part carrying a key-named format's media key: Gemini's reader takes it.
    {"type": "text", "text": "x", "inline_data": {"mime_type": "image/png", "data": PNG}},
    {"type": Kind.IMAGE_URL, "image_url": {"url": f"data:image/png;base64,{PNG}"}},
    {"type": Kind.IMAGE, "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
    MappingProxyType({"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}),
    MappingProxyType({"type": "text", "text": "a read-only mapping"}),
    "a bare string",
    7,
    {
        "type": "tool_result",
        "tool_use_id": "t1",
        "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}
        ],
    },
    {"type": "tool_result", "tool_use_id": "t2", "content": [{"type": "text", "text": "ok"}]},
    {
        "toolResult": {
            "toolUseId": "t3",
            "content": [{"image": {"format": "png", "source": {"bytes": PNG}}}],
        }
    },
    {"toolResult": {"toolUseId": "t4", "content": [{"text": "ok"}]}},
]
PARTS = st.sampled_from(MEDIA + OTHERS)


@settings(max_examples=600, deadline=None)
@example("user", None, {"parts": [MEDIA[9], OTHERS[3]]}, False)  # Gemini reads a typed part too
@example("user", None, {"content": [MEDIA[6], OTHERS[3]]}, False)  # Anthropic does not
@example("user", None, {"content": [OTHERS[4], MEDIA[0]]}, False)  # a str Enum type
@example("user", None, {"content": [OTHERS[6], MEDIA[4]]}, True)  # a read-only mapping
@example(None, "message", {"content": [MEDIA[4]]}, False)  # an item's content, read
@example(None, "function_call_output", {"content": [MEDIA[4]]}, False)  # not read there
@example("user", None, {"parts": [MEDIA[0]]}, False)  # Chat's part where Chat does not read
@given(
    st.sampled_from(["user", "assistant", "model", None]),
    st.sampled_from([None, "message", "function_call_output", "program_output"]),
    st.dictionaries(
        st.sampled_from(["content", "parts", "output"]),
        st.lists(PARTS, max_size=4) | st.sampled_from(["text", None]),
        min_size=1,
    ),
    st.booleans(),
)
def test_the_usual_case_counts_as_the_general_rule(
    role: Any, kind: Any, fields: Dict[str, Any], as_tuple: bool
) -> None:
    view: Dict[str, Any] = dict(fields)
    if as_tuple:
        view = {k: tuple(v) if isinstance(v, list) else v for k, v in view.items()}
    if role is not None:
        view["role"] = role
    if kind is not None:
        view["type"] = kind
    expected = general(view)
    assert COUNT(view) == expected
    assert count_all([view, view], COUNT) == [expected, expected]


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(["user", "assistant", None]),
    st.sampled_from([None, "message", "function_call_output"]),
    st.sampled_from(["content", "parts", "output"]),
    st.lists(PARTS, max_size=4),
)
def test_each_format_reads_its_top_level_media_in_its_media_field(
    role: Any, kind: Any, field: str, parts: List[Any]
) -> None:
    view: Dict[str, Any] = {field: parts}
    if role is not None:
        view["role"] = role
    if kind is not None:
        view["type"] = kind
    for fmt in FORMATS:
        for media in fmt.media(view):
            if len(media.path) == 2:
                assert media.path[0] == fmt.media_field(view), fmt


def test_a_single_photo_is_marked_for_its_format_alone() -> None:
    part = MEDIA[1]
    mark = media_readers({"role": "user", "content": [OTHERS[0], part]})
    assert type(mark) is tuple
    assert mark[1:] == ("content", part)
    # Two media parts, or a part the scan cannot vouch for: the formats read the message.
    assert type(media_readers({"role": "user", "content": [part, part]})) is list
    assert type(media_readers({"role": "user", "content": [part, OTHERS[4]]})) is list
    assert media_readers({"role": "user", "content": [OTHERS[0], "text"]}) == ()


def test_a_part_typed_by_a_str_enum_counts_as_billed() -> None:
    url = f"data:image/jpeg;base64,{JPEG}"
    source = {"type": "base64", "media_type": "image/jpeg", "data": JPEG}
    text = {"type": "text", "text": "this one"}
    for kind, body, billed in (
        (Kind.IMAGE_URL, {"image_url": {"url": url}}, 765),  # 900x700: 2 x 2 tiles
        (Kind.IMAGE, {"source": source}, 840),  # 900 x 700 / 750
    ):
        view = {"role": "user", "content": [text, {"type": kind, **body}]}
        plain = {"role": "user", "content": [text, {"type": kind.value, **body}]}
        rest = estimate_tokens({"role": "user", "content": [text]})
        assert COUNT(view) == COUNT(plain) == rest + billed
