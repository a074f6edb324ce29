"""The media-aware estimate: a message counted as the specification says, except each media
part (an image, a PDF, a recording), which costs what its provider bills for it
(``_media_rates``) from the size its own header declares (``_media_headers``), the payload
never serialised. Which parts are media is each format's to say (``Format.media``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, List, Optional

from . import _media_rates as rates
from ._checks import check_tokens
from ._media_headers import Payload, audio_seconds, image_size, pdf_pages
from ._tokens import SpecCounter, default_count_tokens, tokens_of_units, utf16_length
from ._views import message_view
from .formats import FORMATS
from .formats._base import Media
from .formats._shapes import LEFT_OUT, replace_paths

__all__ = ["MediaAwareCounter", "media_aware_counter", "media_tokens"]

# The media types of a document that is text, counted as its text.
_TEXT_MIMES = ("text/", "txt", "csv", "md", "html")


def media_parts(view: Mapping[str, Any]) -> List[Media]:
    """The media parts of a message view, as the formats read them (``Format.media``)."""
    return [media for fmt in FORMATS for media in fmt.media(view)]


def part_media(part: Any) -> Optional[Media]:
    """One content part read as media by the first format that reads it so, else ``None``.

    For a counter that walks a message's parts itself (``openai_chat_counter``):
    each format is shown the part as the only one of a user message, in the
    field where it keeps its parts (``content``, or a Gemini content's ``parts``).
    Media inside the part (a tool result's) is not the part's own.
    """
    alone = {"role": "user", "content": [part], "parts": [part]}
    for fmt in FORMATS:
        for media in fmt.media(alone):
            if len(media.path) == 2:
                return media
    return None


@dataclass(frozen=True, repr=False)
class MediaAwareCounter(SpecCounter):
    """The media-aware estimate, a ``count_tokens`` (built by ``media_aware_counter``, whose
    options it holds: ``None`` for the provider's own figure)."""

    unsized_image_tokens: Optional[int] = None
    unsized_document_tokens: Optional[int] = None
    unsized_audio_tokens: Optional[int] = None
    pdf_page_tokens: Optional[int] = None

    def __repr__(self) -> str:
        given = {k: v for k, v in vars(self).items() if v is not None}
        return f"media_aware_counter({', '.join(f'{k}={v!r}' for k, v in given.items())})"

    def __call__(self, message: Any) -> int:
        """Count one message (a mapping or an SDK model, as ``estimate_tokens`` takes)."""
        view = message_view(message, None)
        return self.counted(view, media_parts(view))

    def counted(self, view: Mapping[str, Any], found: List[Media]) -> int:
        """Count a message's view whose media parts are known (``media_parts(view)``), for a
        reader that needs them too: the message is scanned for media once."""
        if not found:
            return default_count_tokens(view)
        rest = replace_paths(view, dict.fromkeys((media.path for media in found), LEFT_OUT))
        return default_count_tokens(rest) + sum(media_tokens(m, self) for m in found)


def media_tokens(media: Media, counter: MediaAwareCounter = MediaAwareCounter()) -> int:
    """What the provider bills for one media part (see the module ``_media_rates``)."""
    payload = None if media.data is None else Payload(media.data, media.start)
    if media.kind == "image":
        return _image_tokens(media, payload, counter)
    if media.kind == "document":
        return _document_tokens(media, payload, counter)
    return _seconds_tokens(media, payload, counter)


def _image_tokens(media: Media, payload: Optional[Payload], counter: MediaAwareCounter) -> int:
    size = None if payload is None else image_size(payload)
    if size is not None:
        return rates.image_tokens(media.provider, size[0], size[1], media.detail)
    if counter.unsized_image_tokens is not None:
        return counter.unsized_image_tokens
    return rates.unsized_image_tokens(media.provider, media.detail)


def _document_tokens(media: Media, payload: Optional[Payload], counter: MediaAwareCounter) -> int:
    mime = (media.mime or "pdf").lower()
    pdf = mime in ("application/pdf", "pdf")
    data = _whole(payload) if pdf or mime.startswith(_TEXT_MIMES) else None
    if data is not None and not pdf:
        return tokens_of_units(utf16_length(data.decode("utf-8", "replace")))
    pages = None if data is None else pdf_pages(data)
    if pages is None:
        if counter.unsized_document_tokens is not None:
            return counter.unsized_document_tokens
        pages = 1
    # A document declaring more pages than its provider accepts costs no more than those.
    pages = min(pages, rates.PDF_MOST_PAGES[media.provider])
    per_page = counter.pdf_page_tokens
    return pages * (rates.PDF_PAGE_TOKENS[media.provider] if per_page is None else per_page)


def _whole(payload: Optional[Payload]) -> Optional[bytes]:
    if payload is None:
        return None
    try:
        return payload.whole()
    except ValueError:
        return None


def _seconds_tokens(media: Media, payload: Optional[Payload], counter: MediaAwareCounter) -> int:
    kind = media.kind
    table = rates.VIDEO_TOKENS_PER_SECOND if kind == "video" else rates.AUDIO_TOKENS_PER_SECOND
    seconds = None if payload is None or kind == "video" else audio_seconds(payload)
    if seconds is None:
        if kind == "audio" and counter.unsized_audio_tokens is not None:
            return counter.unsized_audio_tokens
        seconds = rates.UNSIZED_SECONDS
    return rates.seconds_tokens(table, media.provider, seconds)


def media_aware_counter(
    *,
    unsized_image_tokens: Optional[int] = None,
    unsized_document_tokens: Optional[int] = None,
    unsized_audio_tokens: Optional[int] = None,
    pdf_page_tokens: Optional[int] = None,
) -> MediaAwareCounter:
    """Build the media-aware estimate: the default counting of the middleware and the CLI.

    On a message without media the figure is ``estimate_tokens``'s exactly. Each media
    part counts what its provider bills for it, from the size its header declares (an
    image's pixels, a PDF's pages, a recording's length; a text document as its text), and
    the rest of the message as before. A part whose size cannot be known offline counts
    the figures below. docs/media.md has the formulas, their sources and the figures.

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
    options = dict(locals())
    return MediaAwareCounter(**{k: check_tokens(v, k, optional=True) for k, v in options.items()})


#: The media-aware estimate with its documented defaults (the middleware's and the CLI's).
MEDIA_AWARE = media_aware_counter()
