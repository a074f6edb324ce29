"""Recognising a provider's refusal of a prompt for its length, and reading its figures.

For ``on_overflow="retry"``: by the error's class name and module, HTTP status
and text, as each SDK's module describes them (``sdks.Sdk.overflow_*``); no SDK
is imported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional

from .sdks import OVERFLOW_CLASSES, OVERFLOW_CODES, OVERFLOW_FIGURES, OVERFLOW_TEXTS, sdk_of_class

# What the retry's budget is multiplied by when the error names no figures (the
# Responses API): a quarter off the estimate of the refused prompt.
SHRINK_WITHOUT_FIGURES = 0.75
# Kept under the provider's own limit, because its count of a different cut of
# the history is not exactly the refused prompt's ratio.
RETRY_MARGIN = 0.05


@dataclass(frozen=True)
class Overflow:
    """A refusal for length, with the provider's figures when it gave them.

    Attributes:
        tokens: What the provider counted for the refused prompt.
        limit: The provider's context limit.
    """

    tokens: Optional[int] = None
    limit: Optional[int] = None

    def retry_budget(self, estimate: int) -> float:
        """The estimated-token budget for the retry of a prompt estimated at ``estimate``.

        With figures, the estimate scaled by ``limit / tokens`` (so that, at the
        refused prompt's ratio, the retry is at the limit) less ``RETRY_MARGIN``;
        without, ``SHRINK_WITHOUT_FIGURES`` of the estimate.
        """
        if self.tokens and self.limit is not None:
            return estimate * self.limit / self.tokens * (1 - RETRY_MARGIN)
        return estimate * SHRINK_WITHOUT_FIGURES


def _figures(text: str) -> Overflow:
    for figures in OVERFLOW_FIGURES:
        found = figures.pattern.search(text)
        if found:
            return Overflow(
                tokens=int(found.group(figures.tokens)), limit=int(found.group(figures.limit))
            )
    return Overflow()


def _text(err: BaseException) -> str:
    parts = [str(err)]
    message = getattr(err, "message", None)
    if isinstance(message, str):
        parts.append(message)
    body = getattr(err, "body", None)
    if body is not None:
        parts.append(str(body))
    return "\n".join(parts)


def overflow_of(err: BaseException) -> Optional[Overflow]:
    """The figures of a context-length refusal, or ``None`` when ``err`` is not one.

    A framework's own error raised from the SDK's (LangChain's
    ``OpenAIContextOverflowError`` ``from`` openai's ``BadRequestError``) is
    read through its ``__cause__``.
    """
    seen = 0
    cause: Optional[BaseException] = err
    while cause is not None and seen < 8:  # a cause chain may loop
        found = _overflow_of(cause)
        if found is not None:
            return found
        cause, seen = cause.__cause__, seen + 1
    return None


def _mentions(text: str, known: Iterable[str]) -> bool:
    return any(one in text for one in known)


def _overflow_of(err: BaseException) -> Optional[Overflow]:
    if not isinstance(err, Exception) or not sdk_of_class(type(err)):
        return None
    names = {cls.__name__ for cls in type(err).__mro__}
    text = _text(err)
    figures = _figures(text)
    if not names.isdisjoint(OVERFLOW_CLASSES) or _mentions(text, OVERFLOW_TEXTS):
        return figures
    if getattr(err, "status_code", None) != 400:
        return None
    code = getattr(err, "code", None)
    if code in OVERFLOW_CODES or _mentions(text, OVERFLOW_CODES):
        return figures
    return figures if figures.tokens is not None else None
