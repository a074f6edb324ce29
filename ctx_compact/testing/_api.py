"""What a provider's module gives the server, and the pieces every such module uses.

A provider API in the kit is one module (``openai_chat``, ``responses``,
``anthropic``, ``gemini``, ``bedrock``) that offers its ``Route`` (or routes): the
path it serves, the ``Envelope`` its errors go out in, and ``serve``, which
checks a request body as the provider does and returns the reply (a JSON
object, a stream's server-sent events, or a ``Stream`` framed otherwise). A path
may name segments (``/v1beta/models/{model}:generateContent``), which ``serve``
gets decoded in its ``Target``. The server only frames, routes and records; it
knows no provider's rules.

Standard library only, and independent of ctx-compact's own rules on purpose:
the kit is a second, separate reading of what each provider accepts.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional, Pattern, Protocol, Union
from urllib.parse import unquote

from ._cache import PromptCache

Json = Dict[str, Any]


def count_tokens(value: Any) -> int:
    """Return the fake provider's token count for one JSON value.

    Args:
        value: A message, a system prompt or a reply text, as decoded JSON.

    Returns:
        ``ceil(utf16_len(json.dumps(value, separators=(",", ":"), ensure_ascii=False)) / 4)``.
    """
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    # surrogatepass: a lone surrogate decoded from a \\uD83D escape counts as one unit.
    units = len(text.encode("utf-16-le", "surrogatepass")) // 2
    return -(-units // 4)


class RequestRejected(Exception):
    """A request the provider answers with an error status, a JSON body and any headers."""

    def __init__(self, status: int, body: Json, headers: Optional[Dict[str, str]] = None) -> None:
        super().__init__(f"{status}: {json.dumps(body)}")
        self.status = status
        self.body = body
        self.headers: Dict[str, str] = dict(headers or {})


@dataclass(frozen=True)
class Problem:
    """One thing a provider rejects in a conversation, in the provider's own words.

    The validators that return these (``gemini.validate_contents``,
    ``bedrock.validate_messages``) list every problem in order; a route answers
    with the first, as the provider names one per 400.

    Attributes:
        index: The index of the content or message the provider names, or ``None``
            for the conversation as a whole (e.g. an empty one).
        message: The provider's error message.
    """

    index: Optional[int]
    message: str


def json_type(value: Any) -> str:
    """How the providers' validation messages name a JSON value's type."""
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return "null"


@dataclass(frozen=True)
class ToolCall:
    """A call to one of the request's tools, which the reply makes instead of text."""

    call_id: str
    name: str
    arguments: str  # JSON text, as OpenAI sends it; Anthropic gets it decoded


Reply = Union[str, ToolCall]


def output_tokens(reply: Reply) -> int:
    """A text reply costs ``count_tokens(text)``, a tool call ``count_tokens(arguments)``."""
    return count_tokens(reply.arguments if isinstance(reply, ToolCall) else reply)


def pieces(text: str) -> List[str]:
    """Split a reply into the word-sized deltas a stream sends."""
    return re.findall(r"\s*\S+|\s+\Z", text)


def sse(data: Any, event: Optional[str] = None) -> bytes:
    """One server-sent event: an optional ``event:`` line and compact JSON ``data:``."""
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    prefix = f"event: {event}\n" if event else ""
    return f"{prefix}data: {payload}\n\n".encode()


class Envelope(Protocol):
    """How one provider frames its errors and names the request id it returns."""

    #: The response header that carries the request id, if the provider sends one.
    request_id_header: Optional[str]
    #: A request header that marks this provider's SDK, for requests no route claims.
    sdk_header: Optional[str]

    def framing_error(self, message: str, status: int) -> RequestRejected:
        """The error for a body the server will not read: framing broken (400), too large (413)."""

    def not_found(self, method: str, path: str) -> RequestRejected:
        """The 404 for a path or method the provider does not serve."""

    def unparseable(self) -> RequestRejected:
        """The 400 for a body that is not JSON."""

    def failed(self, message: str) -> RequestRejected:
        """The 500 for a request the kit itself failed on."""

    def identified(self, body: Json, request_id: str) -> Json:
        """``body`` as sent, with the request id where this provider puts it in a body."""


@dataclass(frozen=True)
class Billing:
    """What the provider billed for one request it answered.

    Attributes:
        path: The URL path the request was sent to, e.g. ``"/v1/messages"``.
        model: The model the request named.
        input_tokens: Every input token of the request, cached or not (OpenAI's
            ``prompt_tokens``; Anthropic's ``input_tokens`` and Bedrock's
            ``inputTokens`` plus both cache figures).
        output_tokens: The reply's tokens.
        cache_read_tokens: The input tokens served from the prompt cache (OpenAI's
            ``cached_tokens``, Anthropic's ``cache_read_input_tokens``, Bedrock's
            ``cacheReadInputTokens``).
        cache_write_tokens: The input tokens written to the prompt cache
            (Anthropic's ``cache_creation_input_tokens``, Bedrock's
            ``cacheWriteInputTokens``; OpenAI bills none).
    """

    path: str
    model: str
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def uncached_tokens(self) -> int:
        """The input tokens neither read from nor written to the cache."""
        return self.input_tokens - self.cache_read_tokens - self.cache_write_tokens


class Model(Protocol):
    """The model behind every route, for one request (see ``_scripted.ScriptedModel``)."""

    @property
    def context_limit(self) -> Optional[int]:
        """The most input tokens a request may hold, or ``None``."""

    @property
    def prompt_cache(self) -> Optional[PromptCache]:
        """The provider's prompt cache, or ``None`` when caching is off."""

    def bill(
        self,
        model: str,
        input_tokens: int,
        output_tokens: int,
        cache_read_tokens: int = 0,
        cache_write_tokens: int = 0,
    ) -> None:
        """Record what the provider billed for this request (see ``Billing``)."""

    def new_id(self, prefix: str) -> str:
        """A fresh id for a completion, a message or a call: ``prefix`` and a counter."""

    def answer(
        self, messages: List[Json], tool: Optional[Tool], results: int, call_prefix: str
    ) -> Reply:
        """A call to ``tool`` while ``results`` is under ``tool_calls``; text otherwise."""


@dataclass(frozen=True)
class Tool:
    """The first function tool a request offers: its name and its parameters' JSON schema."""

    name: str
    schema: Any


@dataclass(frozen=True)
class Stream:
    """A streamed reply framed as its provider frames it: its chunks and their content type."""

    chunks: Iterator[bytes]
    content_type: str


#: What a route returns: a JSON body (sent with 200), a stream's server-sent events, or
#: a ``Stream`` of another framing.
Answer = Union[Json, Iterator[bytes], Stream]


@dataclass(frozen=True)
class Target:
    """Where a request was sent, beyond its route.

    Attributes:
        params: The values of the route path's ``{name}`` segments, percent-decoded.
        query: The query string's fields (the last value of each).
    """

    params: Dict[str, str]
    query: Dict[str, str]


@dataclass(frozen=True)
class Route:
    """One POST path of a provider API: its error envelope and what answers it.

    ``path`` is literal but for ``{name}`` segments, each matching one path
    segment. ``serve(body, model, target)`` gets the decoded JSON body and returns
    the reply, or raises ``RequestRejected`` with the provider's own status and body.
    """

    path: str
    envelope: Envelope
    serve: Callable[[Any, Model, Target], Answer]

    def match(self, path: str) -> Optional[Dict[str, str]]:
        """The decoded ``{name}`` segments of ``path`` if this route serves it, else ``None``."""
        found = _pattern(self.path).fullmatch(path)
        if found is None:
            return None
        return {name: unquote(value) for name, value in found.groupdict().items()}


@functools.cache
def _pattern(path: str) -> Pattern[str]:
    # "{name}" is one segment as sent (still percent-encoded); the rest is literal.
    pieces = re.split(r"\{(\w+)\}", path)
    return re.compile(
        "".join(re.escape(p) if i % 2 == 0 else f"(?P<{p}>[^/]+)" for i, p in enumerate(pieces))
    )
