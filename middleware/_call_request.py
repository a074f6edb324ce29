"""``CallRequest``: what a summarizer that takes ``request`` sees of the call being compacted."""

from __future__ import annotations

from typing import Any, Iterator, Mapping, Optional, Tuple


class CallRequest(Mapping[str, Any]):
    """A read-only mapping of what the call sends beside its messages, and where they go.

    As a mapping it is what it always was: an intercepted SDK request's body (its
    ``model``, ``system``, ``tools``, ...) or a decorated call's keyword arguments.
    The attributes say what a summarizer needs to repeat the conversation as the
    provider last saw it (``llm_summarizer``'s cache-aligned requests).

    Attributes:
        api: The API whose request body the mapping is (``"openai /chat/completions"``,
            ``"anthropic /v1/messages"``), or ``None`` for a call's keyword arguments.
        sent_before: The messages the conversation's request sent before the dropped
            ones the summarizer is given, as it sent them: the kept head, then the
            previous summary's message as it was inserted (when the summarizer is
            given ``previous``), then the pinned messages kept between them.
    """

    __slots__ = ("_values", "api", "sent_before")

    def __init__(
        self, values: Mapping[str, Any], api: Optional[str], sent_before: Tuple[Any, ...]
    ) -> None:
        self._values = values
        self.api = api
        self.sent_before = sent_before

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"CallRequest({dict(self._values)!r}, api={self.api!r})"
