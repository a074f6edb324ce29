"""What each provider bills for an image, a PDF page and a second of audio: the published
formulas. Their sources, and the figures chosen where a provider publishes none, are on
docs/media.md ("The formulas and their sources").
"""

from __future__ import annotations

import math
from typing import Dict, Optional, Tuple

OPENAI = "openai"
ANTHROPIC = "anthropic"
GEMINI = "gemini"
BEDROCK = "bedrock"

OPENAI_LOW = 85
OPENAI_BASE = 85
OPENAI_TILE = 170
ANTHROPIC_LONG_EDGE = 1568
ANTHROPIC_MAX_TOKENS = 1600  # 1092 x 1092 / 750, Anthropic's largest unscaled 1:1 image
GEMINI_SMALL = 384
GEMINI_TILE = 768
GEMINI_TILE_TOKENS = 258
GEMINI_LARGEST = 3072  # a larger image is scaled down to fit 3072 x 3072

# The most pages of a PDF each provider accepts in a request: a document declaring
# more is refused (or cut) by the provider, so it never costs more than these.
# Anthropic's for its largest context windows (100 for the 200k-token ones).
PDF_MOST_PAGES: Dict[str, int] = {OPENAI: 100, ANTHROPIC: 600, GEMINI: 1000, BEDROCK: 600}

PDF_PAGE_TEXT = 1500
# A US Letter page (8.5 x 11 in) as an image: OpenAI scales it to 768 x 994 (4 tiles).
PDF_PAGE_TOKENS: Dict[str, int] = {
    OPENAI: PDF_PAGE_TEXT + OPENAI_BASE + 4 * OPENAI_TILE,
    ANTHROPIC: PDF_PAGE_TEXT + ANTHROPIC_MAX_TOKENS,
    GEMINI: GEMINI_TILE_TOKENS,
    BEDROCK: PDF_PAGE_TEXT + ANTHROPIC_MAX_TOKENS,
}
AUDIO_TOKENS_PER_SECOND: Dict[str, float] = {OPENAI: 10.0, GEMINI: 32.0}
VIDEO_TOKENS_PER_SECOND: Dict[str, float] = {GEMINI: 263.0}

# What a part costs when its size cannot be known offline (a URL, a file id, a
# header that cannot be read): the provider's maximum for an image at that
# detail; a one-page document; a minute of audio or video.
UNSIZED_SECONDS = 60
UNSIZED_IMAGE: Dict[str, int] = {
    OPENAI: OPENAI_BASE + 8 * OPENAI_TILE,  # 768 x 2048 after scaling: 2 x 4 tiles
    ANTHROPIC: ANTHROPIC_MAX_TOKENS,
    GEMINI: 4 * GEMINI_TILE_TOKENS,  # a 1536 x 1536 image (its largest, 3072 x 3072, is 16 tiles)
    BEDROCK: ANTHROPIC_MAX_TOKENS,
}


def openai_image_tokens(width: int, height: int, detail: Optional[str] = None) -> int:
    """OpenAI's tile formula (gpt-4o, gpt-4.1, gpt-5): 85 for low detail, else 85 + 170 a tile."""
    if detail == "low":
        return OPENAI_LOW
    w, h = float(width), float(height)
    if max(w, h) > 2048:
        scale = 2048 / max(w, h)
        w, h = w * scale, h * scale
    if min(w, h) > 768:
        scale = 768 / min(w, h)
        w, h = w * scale, h * scale
    tiles = math.ceil(math.floor(w) / 512) * math.ceil(math.floor(h) / 512)
    return OPENAI_BASE + OPENAI_TILE * max(tiles, 1)


def anthropic_size(width: int, height: int) -> Tuple[int, int]:
    """The size Anthropic scales an image to: long edge 1568 at most, ~1,600 tokens at most."""
    scale = min(1.0, ANTHROPIC_LONG_EDGE / max(width, height))
    area = width * height * scale * scale
    if area > ANTHROPIC_MAX_TOKENS * 750:
        scale *= math.sqrt(ANTHROPIC_MAX_TOKENS * 750 / area)
    if scale >= 1.0:
        return width, height
    return max(int(width * scale), 1), max(int(height * scale), 1)


def anthropic_image_tokens(width: int, height: int) -> int:
    """Anthropic's formula: width x height / 750 (rounded up) after its scaling."""
    w, h = anthropic_size(width, height)
    return min(math.ceil(w * h / 750), ANTHROPIC_MAX_TOKENS)


def gemini_image_tokens(width: int, height: int) -> int:
    """Gemini's: 258 up to 384 pixels both sides, else 258 per 768 x 768 tile.

    An image larger than 3072 x 3072 is first scaled down to fit it, so no image
    costs more than 16 tiles.
    """
    if width <= GEMINI_SMALL and height <= GEMINI_SMALL:
        return GEMINI_TILE_TOKENS
    longest = max(width, height)
    if longest > GEMINI_LARGEST:
        width = max(width * GEMINI_LARGEST // longest, 1)
        height = max(height * GEMINI_LARGEST // longest, 1)
    return GEMINI_TILE_TOKENS * math.ceil(width / GEMINI_TILE) * math.ceil(height / GEMINI_TILE)


def image_tokens(provider: str, width: int, height: int, detail: Optional[str] = None) -> int:
    """What ``provider`` bills for a ``width`` x ``height`` image (``detail``: OpenAI's)."""
    if provider == OPENAI:
        return openai_image_tokens(width, height, detail)
    if provider == GEMINI:
        return gemini_image_tokens(width, height)
    return anthropic_image_tokens(width, height)  # Anthropic, and Claude on Bedrock


def unsized_image_tokens(provider: str, detail: Optional[str] = None) -> int:
    """What an image of unknown size is counted as: the provider's maximum at that detail."""
    if provider == OPENAI and detail == "low":
        return OPENAI_LOW
    return UNSIZED_IMAGE[provider]


def seconds_tokens(rates: Dict[str, float], provider: str, seconds: float) -> int:
    """``seconds`` of audio or video at ``provider``'s rate (rounded up); a provider publishing
    no rate of its own: Gemini's, the one published."""
    return math.ceil(seconds * rates.get(provider, rates[GEMINI]))
