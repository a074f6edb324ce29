"""JSON for the command line: the standard library, or orjson when it is installed.

The default estimator serialises every message once to count it; the command
keeps that serialisation and writes the compacted line from the kept
messages' pieces, so each message is serialised once, not twice. With orjson
(``pip install orjson``, or the ``orjson`` extra) a line is also parsed and serialised in
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

import os
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .._contract import compact_json, tokens_of_units, utf16_length

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


tokens = tokens_of_units  # the estimator's tokens for a JSON text of that many UTF-16 units


class Pieces:
    """Counts messages as the default estimator does, keeping each one's JSON for the output.

    ``count_all`` returns exactly what the default estimator returns for messages
    parsed from JSON (compact separators, no ASCII escaping, UTF-16 length
    divided by 4, rounded up); ``line`` writes the kept ones from their JSON.
    """

    __slots__ = ("_fast", "_json")

    def __init__(self, fast: bool) -> None:
        self._fast = fast
        self._json: List[Any] = []

    def count_all(self, messages: List[Any]) -> List[int]:
        """Each message's tokens, in order.

        Raises:
            Unencodable: A message this serialisation refuses (NaN, an infinity, deep nesting).
        """
        if self._fast:
            dumps = orjson.dumps
            try:
                packed: List[bytes] = [dumps(m) for m in messages]
            except orjson.JSONEncodeError:
                raise Unencodable from None
            self._json = packed
            return [
                tokens(len(b) if b.isascii() else utf16_length(b.decode("utf-8"))) for b in packed
            ]
        encode = compact_json  # the estimator's own text, from its encoder built once
        try:
            texts: List[str] = [encode(m) for m in messages]
        except (TypeError, ValueError, RecursionError):
            raise Unencodable from None
        self._json = texts
        return [tokens(len(t) if t.isascii() else utf16_length(t)) for t in texts]

    def line(self, holder: Optional[Dict[str, Any]], kept: Sequence[Tuple[int, int]]) -> bytes:
        """The output line: the counted messages in the ``kept`` ranges, in ``holder``'s place.

        Raises:
            Unencodable: A value of ``holder`` this serialisation refuses.
        """
        pieces = self._json
        if self._fast:
            body = b"[" + b",".join([p for a, b in kept for p in pieces[a:b]]) + b"]"
            if holder is None:
                return body + b"\n"
            dumps = orjson.dumps
            try:
                fields = [
                    dumps(k) + b":" + (body if k == "messages" else dumps(v))
                    for k, v in holder.items()
                ]
            except orjson.JSONEncodeError:
                raise Unencodable from None
            return b"{" + b",".join(fields) + b"}\n"
        text = "[" + ",".join([p for a, b in kept for p in pieces[a:b]]) + "]"
        if holder is not None:
            encode = compact_json
            try:
                parts = [
                    encode(k) + ":" + (text if k == "messages" else encode(v))
                    for k, v in holder.items()
                ]
            except (TypeError, ValueError, RecursionError):
                raise Unencodable from None
            text = "{" + ",".join(parts) + "}"
        # The estimator's encoder writes (and counts) an infinity from 1e400, which JSON
        # cannot hold: such a line is written the plain way, which refuses it. The same
        # word in a string is a false alarm, which only costs speed.
        if "Infinity" in text or "NaN" in text:
            raise Unencodable
        return utf8_line(text)
