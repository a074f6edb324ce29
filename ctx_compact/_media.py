"""Counting a message with media as the provider bills it: the media-aware estimate.

A message without media counts exactly as the specification's estimator says
(``estimate_tokens``). A media part (an image, a PDF, a recording) is not text
to the provider: it costs the tokens its formula gives (``_media_rates``), from
the size its own header declares (``_media_headers``), and the rest of the
message counts as before, the part left out of the JSON it is measured by.
The payload is never serialised to be measured, so counting a photo costs the
same whatever its size (a few microseconds of Python: finding the part, its
header's first bytes, the formula and the rest of the message).

Which parts are media is each format's to say (``Format.media``); this module
only walks, prices and adds up.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from . import _media_rates as rates
from ._checks import must
from ._media_headers import Payload, audio_seconds, image_size_of, pdf_pages
from ._tokens import SpecCounter, compact_json, default_count_tokens, utf16_length
from ._views import holds_objects, message_view
from .formats import FORMATS
from .formats._base import Media

__all__ = ["MediaAwareCounter", "media_aware_counter", "media_tokens"]

# Which format names each media marker: a part type (a part's "type"), a part key
# (a part without a type, keyed by what it holds), or a part that may hold media
# parts in its own "content" (a tool result).
_BY_TYPE = {t: f for f in FORMATS for t in f.media_types}
_BY_KEY = {k: f for f in FORMATS for k in f.media_keys}
_HOLDERS = frozenset(t for f in FORMATS for t in f.media_holders)
# Where a message keeps its parts: Chat, Anthropic, Responses and Bedrock
# messages in "content", Gemini's in "parts", a Responses output item in "output".
_CONTAINERS = ("content", "parts", "output")
_TEXT_MIMES = ("text/", "txt", "csv", "md", "html")


def _is_array(value: Any) -> bool:
    return type(value) is list or isinstance(value, (list, tuple))


# What the scan adds for a part it cannot vouch for (not a dict, a type that is not
# a string): the message is then counted by the formats' own ``media``, as they read
# it. A marker whose field is None (inside a tool result, or typed by a str subclass)
# likewise leaves the reading to its format's ``media``.
_ODD: Tuple[Any, ...] = (None, None, None)


def _scan(parts: Any, found: List[Any], field: Optional[str]) -> None:
    """Add to ``found`` ``(format, field, part)`` for every media marker among ``parts``.

    ``field`` is the message's field holding ``parts``; ``None`` inside a holder
    part (a tool result), where the marker's place is not read from the mark.
    """
    for part in parts:
        if type(part) is not dict:
            found.append(_ODD)
            if not isinstance(part, Mapping):
                continue
            part = dict(part)
        kind = part.get("type")
        if kind is None:
            for name in part:
                fmt = _BY_KEY.get(name)
                if fmt is not None:
                    found.append((fmt, field, part))
                elif name in _HOLDERS:
                    inner = part[name]
                    if isinstance(inner, Mapping) and _is_array(inner.get("content")):
                        _scan(inner["content"], found, None)
        elif type(kind) is str:
            fmt = _BY_TYPE.get(kind)
            if fmt is not None:
                found.append((fmt, field, part))
            elif kind in _HOLDERS and _is_array(part.get("content")):
                _scan(part["content"], found, None)
        else:
            # A str Enum member, say: marked by its value, read by its format's own
            # ``media`` (which compares it as the string it is).
            fmt = _BY_TYPE.get(str.__str__(kind)) if isinstance(kind, str) else None
            found.append(_ODD if fmt is None else (fmt, None, part))


def media_readers(view: Mapping[str, Any]) -> Any:
    """What the media-aware count needs of ``view``'s media parts, falsy for a message without.

    The mark ``count_marked`` takes: for the usual media message (one media
    part, a dict at the top level of its field, every other part a dict with
    a string type or none) the tuple ``(format, field, part)``, read by that
    format alone; else the list of the formats whose media parts
    ``view`` may hold, read by their ``media``; ``()`` for none. Written for
    speed: a message with string content is settled by three lookups.
    """
    get = view.get
    content = get("content")
    if (content is None or type(content) is str) and get("parts") is None:
        output = get("output")
        if output is None or type(output) is str:
            return ()  # the usual message: settled without a loop
    found: List[Any] = []
    for name in _CONTAINERS:
        parts = get(name)
        if parts is not None and type(parts) is not str and _is_array(parts):
            _scan(parts, found, name)
    if not found:
        return ()  # parts, none of them media: a text part, a tool call
    if len(found) == 1:
        mark = found[0]
        if mark[1] is not None:
            return mark  # the usual media message
        return [mark[0]] if mark[0] is not None else ()
    return [*dict.fromkeys(fmt for fmt, _, _ in found if fmt is not None)] or ()


def media_parts(view: Mapping[str, Any], formats: Sequence[Any] = FORMATS) -> List[Media]:
    """The media parts of a message view, as ``formats`` read them."""
    if len(formats) == 1:
        return [*formats[0].media(view)]
    return [m for fmt in formats for m in fmt.media(view)]


def _keyed_elsewhere(parts: Sequence[Any], k: int, keys: Sequence[str]) -> bool:
    """Whether a part other than ``parts[k]`` has a type and one of ``keys``.

    A format naming its media by key may read such a part as media too (Gemini's
    reader does not look at a part's type), though the scan marks a typed part by
    its type alone: the general way reads the message then.
    """
    for j, part in enumerate(parts):
        if j != k and "type" in part and any(name in part for name in keys):
            return True
    return False


def _without(value: Any, paths: Iterable[Tuple[Any, ...]]) -> Any:
    """``value`` with the parts at ``paths`` left out; copies only along the paths."""
    heads: Dict[Any, List[Tuple[Any, ...]]] = {}
    for path in paths:
        heads.setdefault(path[0], []).append(path[1:])
    if isinstance(value, Mapping):
        out = dict(value)
        for name, rest in heads.items():
            out[name] = _without(out[name], rest)
        return out
    kept = []
    for k, item in enumerate(value):
        if k not in heads:
            kept.append(item)
        elif () not in heads[k]:
            kept.append(_without(item, heads[k]))
    return kept


def _without_one(view: Any, path: Tuple[Any, ...]) -> Any:
    """``_without(view, [path])``, written out for the usual path: a part of a message's list."""
    if len(path) != 2 or type(view) is not dict:
        return _without(view, [path])
    name, k = path
    parts = view[name]
    rest = dict(view)
    rest[name] = [*parts[:k], *parts[k + 1 :]]
    return rest


@dataclass(frozen=True)
class _Defaults:
    unsized_image_tokens: Optional[int] = None
    unsized_document_tokens: Optional[int] = None
    unsized_audio_tokens: Optional[int] = None
    pdf_page_tokens: Optional[int] = None


def _is_pdf(mime: Optional[str]) -> bool:
    return mime is None or mime.lower() in ("application/pdf", "pdf")


def media_tokens(media: Media, defaults: _Defaults = _Defaults()) -> int:
    """What the provider bills for one media part (see the module ``_media_rates``)."""
    # One unpacking, not seven attribute reads: a named tuple's fields are properties.
    _, provider, kind, data, start, mime, detail = media
    if kind == "image":
        size = None if data is None else image_size_of(data, start)
        if size is None:
            if defaults.unsized_image_tokens is not None:
                return defaults.unsized_image_tokens
            return rates.unsized_image_tokens(provider, detail)
        return rates.image_tokens(provider, size[0], size[1], detail)
    payload = None if data is None else Payload(data, start)
    if kind == "document":
        if not _is_pdf(mime):
            text = _text_document(payload, mime)
            if text is not None:
                return -(-utf16_length(text) // 4)
            pages = None
        else:
            pages = _pages(payload)
        if pages is None:
            if defaults.unsized_document_tokens is not None:
                return defaults.unsized_document_tokens
            pages = 1
        # A document declaring more pages than its provider accepts costs no more than those.
        pages = min(pages, rates.PDF_MOST_PAGES[provider])
        per_page = defaults.pdf_page_tokens
        return pages * (rates.PDF_PAGE_TOKENS[provider] if per_page is None else per_page)
    table = rates.VIDEO_TOKENS_PER_SECOND if kind == "video" else rates.AUDIO_TOKENS_PER_SECOND
    seconds = None if payload is None or kind == "video" else audio_seconds(payload)
    if seconds is None:
        if kind == "audio" and defaults.unsized_audio_tokens is not None:
            return defaults.unsized_audio_tokens
        seconds = rates.UNSIZED_SECONDS
    found = rates.seconds_tokens(table, provider, seconds)
    # A provider publishing no rate of its own: Gemini's, the one published.
    return found if found is not None else rates.seconds_tokens(table, rates.GEMINI, seconds) or 0


def _pages(payload: Optional[Payload]) -> Optional[int]:
    if payload is None:
        return None
    try:
        return pdf_pages(payload.whole())
    except ValueError:
        return None


def _text_document(payload: Optional[Payload], mime: Optional[str]) -> Optional[str]:
    if payload is None or mime is None or not mime.lower().startswith(_TEXT_MIMES):
        return None
    try:
        return payload.whole().decode("utf-8", "replace")
    except ValueError:
        return None


class MediaAwareCounter(SpecCounter):
    """The media-aware estimate, a ``count_tokens`` (built by ``media_aware_counter``)."""

    def __init__(self, defaults: _Defaults) -> None:
        self._defaults = defaults

    def __repr__(self) -> str:
        given = {k: v for k, v in vars(self._defaults).items() if v is not None}
        return f"media_aware_counter({', '.join(f'{k}={v!r}' for k, v in given.items())})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MediaAwareCounter) and other._defaults == self._defaults

    def __hash__(self) -> int:
        return hash(self._defaults)

    # Whether a message view holds a media part: the formats that read its media,
    # () for none. The function itself, not a method calling it: count_all asks
    # it of every message, and a plain one is settled in its first lines.
    marked = staticmethod(media_readers)

    def count_marked(self, view: Any, mark: Any = None) -> int:
        """A message view's count: its media parts billed, the rest as the specification counts.

        ``mark``: what ``marked`` found in ``view`` (``None``: look again).
        """
        if type(mark) is not tuple:
            return self._count_parts(view, FORMATS if mark is None else mark)
        fmt, field, part = mark
        parts = view[field]
        k = 0
        while parts[k] is not part:  # the scan saw it there, as this very object
            k += 1
        if fmt.media_field(view) != field or (
            fmt.media_keys and len(parts) > 1 and _keyed_elsewhere(parts, k, fmt.media_keys)
        ):
            return self._count_parts(view, (fmt,))
        # The usual media message: the one part the scan found is the only one its
        # format reads (the scan vouched for the others), so it is read alone.
        media = fmt.media_of(part, (field, k))
        if media is None:
            return default_count_tokens(view)
        # _count_parts' one-part case written out (_without_one's copy, the rest's
        # count): sharing it costs 7% more instructions a photo, on the hot path.
        rest = dict(view)
        rest[field] = [*parts[:k], *parts[k + 1 :]] if len(parts) > 1 else []
        text = compact_json(rest)
        units = len(text) if text.isascii() else utf16_length(text)
        return -(-units // 4) + media_tokens(media, self._defaults)

    def _count_parts(self, view: Any, formats: Sequence[Any]) -> int:
        """The count with the media parts ``formats`` read in ``view`` (the general way)."""
        found = media_parts(view, formats)
        if len(found) == 1:
            media = found[0]
            rest = _without_one(view, media.path)
            tokens = media_tokens(media, self._defaults)
        elif not found:
            return default_count_tokens(view)
        else:
            rest = _without(view, [m.path for m in found])
            tokens = sum(media_tokens(m, self._defaults) for m in found)
        text = compact_json(rest)
        return -(-(len(text) if text.isascii() else utf16_length(text)) // 4) + tokens

    def __call__(self, message: Any) -> int:
        """Count one message (a mapping or an SDK model, as ``estimate_tokens`` takes)."""
        view = (
            message
            if type(message) is dict and not holds_objects(message)
            else message_view(message, None)
        )
        mark = media_readers(view)
        if mark:
            return self.count_marked(view, mark)
        return default_count_tokens(view)


def _check_tokens(name: str, value: Any) -> Optional[int]:
    if value is None:
        return None
    if type(value) is not int:
        raise must(name, "an int or None", value)
    if value < 0:
        raise must(name, "a non-negative int", value, ValueError)
    return value


def media_aware_counter(
    *,
    unsized_image_tokens: Optional[int] = None,
    unsized_document_tokens: Optional[int] = None,
    unsized_audio_tokens: Optional[int] = None,
    pdf_page_tokens: Optional[int] = None,
) -> MediaAwareCounter:
    """Build the media-aware estimate: the default counting of the middleware and the CLI.

    On a message without media the figure is the specification's estimate
    exactly (``estimate_tokens``). Each media part counts at the tokens its
    provider bills for it, and the rest of the message as before, with the
    part left out (its payload is never serialised):

    - images (OpenAI Chat ``image_url``, Responses ``input_image``, Anthropic
      ``image``, Gemini ``inline_data``/``file_data``, Bedrock ``image``): the
      provider's formula on the size read from the image's own header (PNG,
      JPEG, GIF, WebP), scaled as the provider scales a large image; OpenAI's
      ``detail`` is honoured;
    - PDFs (Chat ``file``, Responses ``input_file``, Anthropic and Bedrock
      ``document``, Gemini PDF parts): the pages counted in the document, at
      most those the provider accepts in a request (OpenAI 100, Anthropic and
      Bedrock 600, Gemini 1,000), times the provider's per-page figure; a
      plain-text document counts as its text;
    - audio (Chat ``input_audio``, Gemini audio parts): the WAV or MP3 length
      at the provider's tokens per second;
    - a part whose size cannot be known offline (a URL, a file id, a header
      that cannot be read, or not cheaply: a JPEG's frame header or a WAV's
      data more than 1,000 segments in): the provider's maximum for an image
      at that detail, one page for a document, one minute for audio or video,
      unless told otherwise below.

    The formulas, their sources and the per-provider figures are in the
    documentation's "Media" page (``docs/media.md``).

    Args:
        unsized_image_tokens: What an image of unknown size counts, for every
            provider; ``None``: the provider's maximum at the part's detail
            (OpenAI 1,445, or 85 for ``"low"``; Anthropic and Bedrock 1,600;
            Gemini 1,032).
        unsized_document_tokens: What a document of unknown length counts;
            ``None``: one page.
        unsized_audio_tokens: What a recording of unknown length counts;
            ``None``: one minute.
        pdf_page_tokens: The cost of one PDF page, for every provider; ``None``:
            the provider's (OpenAI 2,265, Anthropic and Bedrock 3,100, Gemini 258).

    Returns:
        A ``count_tokens`` callable, ``(message) -> int``; equal counters
        (the same options) compare equal.

    Raises:
        TypeError: An option is neither an int nor ``None``.
        ValueError: An option is negative.

    Example::

        from ctx_compact import compact, media_aware_counter

        result = compact(messages, max_tokens=8000, count_tokens=media_aware_counter())
    """
    return MediaAwareCounter(
        _Defaults(
            _check_tokens("unsized_image_tokens", unsized_image_tokens),
            _check_tokens("unsized_document_tokens", unsized_document_tokens),
            _check_tokens("unsized_audio_tokens", unsized_audio_tokens),
            _check_tokens("pdf_page_tokens", pdf_page_tokens),
        )
    )


#: The media-aware estimate with its documented defaults (the middleware's and the CLI's).
MEDIA_AWARE = media_aware_counter()


def part_tokens(part: Mapping[str, Any], readers: Sequence[Any]) -> Optional[int]:
    """What one content part bills, read by the first of ``readers`` that knows it, or ``None``.

    For a counter that walks parts itself (``openai_chat_counter``).
    """
    for read in readers:
        media = read(part, ())
        if media is not None:
            return media_tokens(media)
    return None
