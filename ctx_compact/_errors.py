"""The exception raised for a message that the library cannot work with."""

from __future__ import annotations

from typing import Any, Optional, Tuple


class InvalidMessageError(TypeError, ValueError):
    """A message, or something computed from one, is not usable.

    Raised when ``messages`` is not a sequence of mappings, when a message's
    ``tool_calls`` is malformed, when the default estimator cannot serialise a
    message, or when ``count_tokens`` or ``summarize`` misbehave for a message.

    It subclasses both :class:`TypeError` and :class:`ValueError`, so code that
    catches either keeps working.

    Attributes:
        index: The position of the offending message in the input, or ``None``
            when the problem is not tied to one message.
        reason: What is wrong and what to do about it, without the index prefix.
    """

    def __init__(self, reason: str, index: Optional[int] = None) -> None:
        self.index = index
        self.reason = reason
        prefix = "" if index is None else f"message {index}: "
        super().__init__(prefix + reason)

    def __reduce__(self) -> Tuple[Any, ...]:
        # Rebuilt from its fields, not from the formatted message (pickle, copy).
        return type(self), (self.reason, self.index)
