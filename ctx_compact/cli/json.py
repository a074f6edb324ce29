"""JSON for the command line: the standard library, or orjson when it is installed.

The default estimator serialises every message once to count it; the command
keeps that serialisation and writes the compacted line from the kept
messages' pieces, so each message is serialised once, not twice. With orjson
(``pip install "ctx-compact[orjson]"``) a line is also parsed and serialised in
Rust. Either way the output is byte-identical, and so are the token counts:

- orjson and ``json`` write a float alike only where ``json`` uses no exponent,
  from 1e-4 to 1e16 in magnitude (below, ``1e-05`` against ``0.00001``; above,
  orjson's own releases disagree on ``1e+16`` or ``1e16``), and orjson reads an
  integer beyond 64 bits as a float (of 9.2e18 or more). A parsed line holding a
  float outside that range is parsed again by the standard library
  (``_exact``); a rare false alarm costs speed.
- Anything orjson refuses (a lone surrogate, NaN, invalid UTF-8, a byte order
  mark) is parsed again by the standard library, which gives the usual error.

``CTX_COMPACT_JSON=stdlib`` in the environment turns orjson off (for
comparisons).
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Dict, List, Optional, Union

from .._contract import utf16_length

orjson: Any
try:
    import orjson
except ImportError:  # optional: the standard library does the same work, slower
    orjson = None
if os.environ.get("CTX_COMPACT_JSON") == "stdlib":
    orjson = None

# Floats that orjson and json write alike, whatever orjson's release: json writes no
# exponent there. Beyond 2**63 (inside the exponent range) a float may also be an
# integer that orjson could not hold.
_EXACT_FLOATS = (1e-4, 1e16)

LONE_SURROGATE = re.compile("[\ud800-\udfff]")

# The estimator's serialisation, but refusing NaN and infinities as the output must.
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


class Unencodable(Exception):
    """A message the fast path cannot serialise: the conversation is done the plain way."""


def fast_enabled() -> bool:
    return orjson is not None


def _exact(value: Any) -> bool:
    """Whether orjson writes ``value`` as json would: no float outside ``_EXACT_FLOATS``."""
    low, high = _EXACT_FLOATS
    stack = [value]
    pop, push = stack.pop, stack.extend
    while stack:
        item = pop()
        kind = type(item)
        if kind is str:  # most values: settled with one comparison
            continue
        if kind is dict:
            push(item.values())
        elif kind is list:
            push(item)
        elif kind is float and item and not low <= abs(item) < high:
            return False
    return True


def loads_fast(raw: bytes) -> Optional[Any]:
    """The line parsed by orjson, or ``None`` when the standard library must parse it."""
    if orjson is None:
        return None
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return value if _exact(value) else None


def utf8_line(text: str) -> bytes:
    """``text`` and a newline as UTF-8, a lone surrogate written as its ``\\u`` escape."""
    text += "\n"
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate from a "\udXXX" escape in the input cannot be UTF-8;
        # writing it escaped again keeps the output valid and equal to the input.
        escaped = LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
        return escaped.encode("utf-8")


class Pieces:
    """Counts messages as the default estimator does, keeping each one's JSON for the output.

    ``count`` is passed to ``compact`` as ``count_tokens``: it returns exactly
    what the default estimator returns for a message parsed from JSON (compact
    separators, no ASCII escaping, UTF-16 length divided by 4, rounded up).
    """

    __slots__ = ("_fast", "_json")

    def __init__(self, fast: bool) -> None:
        self._fast = fast
        self._json: Dict[int, Union[bytes, str]] = {}

    def count(self, message: Any) -> int:
        if self._fast:
            try:
                packed: bytes = orjson.dumps(message)
            except orjson.JSONEncodeError:
                raise Unencodable from None
            self._json[id(message)] = packed
            length = len(packed) if packed.isascii() else utf16_length(packed.decode("utf-8"))
        else:
            try:
                text = _ENCODER.encode(message)
            except (TypeError, ValueError, RecursionError):
                raise Unencodable from None
            self._json[id(message)] = text
            length = len(text) if text.isascii() else utf16_length(text)
        return -(-length // 4)

    def line(self, holder: Optional[Dict[str, Any]], messages: List[Any]) -> bytes:
        """The output line: ``messages`` (all counted) in ``holder``'s place, or alone."""
        pieces = self._json
        if self._fast:
            body = b"[" + b",".join([pieces[id(m)] for m in messages]) + b"]"  # type: ignore[misc]
            if holder is None:
                return body + b"\n"
            dumps = orjson.dumps
            fields = [
                dumps(k) + b":" + (body if k == "messages" else dumps(v)) for k, v in holder.items()
            ]
            return b"{" + b",".join(fields) + b"}\n"
        text = "[" + ",".join([pieces[id(m)] for m in messages]) + "]"  # type: ignore[misc]
        if holder is not None:
            encode = _ENCODER.encode
            try:
                parts = [
                    encode(k) + ":" + (text if k == "messages" else encode(v))
                    for k, v in holder.items()
                ]
            except (TypeError, ValueError, RecursionError):
                raise Unencodable from None
            text = "{" + ",".join(parts) + "}"
        return utf8_line(text)
