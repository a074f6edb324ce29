"""JSON for the command: orjson when installed (byte-identical output), and each message's JSON
kept from counting to writing. A line orjson refuses, or one holding a float the two write
differently, is parsed by the standard library (docs/command-line.md, the fast JSON backend).
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
# exponent there. From 2**63 (9.2e18) a float may also be an integer orjson could not hold.
_EXACT_FLOATS = (1e-4, 1e16)

LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class Unencodable(Exception):
    """A message the fast path cannot serialise: the conversation is done the plain way."""


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
    """Counts messages as the default estimator does, keeping each one's JSON for ``line``.

    With orjson (``fast``) each message's JSON is bytes, else the estimator's own text.
    """

    __slots__ = ("_fast", "_json")

    def __init__(self, fast: bool) -> None:
        self._fast = fast
        self._json: List[Any] = []

    def _dump(self, value: Any) -> Any:
        try:
            return orjson.dumps(value) if self._fast else compact_json(value)
        except (TypeError, ValueError, RecursionError):  # orjson's error is a TypeError
            raise Unencodable from None

    def _text(self, text: str) -> Any:
        """``text`` as the pieces are: bytes with orjson."""
        return text.encode() if self._fast else text

    def count_all(self, messages: List[Any]) -> List[int]:
        """Each message's tokens, in order; ``Unencodable`` for NaN, an infinity, deep nesting."""
        self._json = [self._dump(m) for m in messages]
        return [tokens_of_units(len(p) if p.isascii() else _units(p)) for p in self._json]

    def line(self, holder: Optional[Dict[str, Any]], kept: Sequence[Tuple[int, int]]) -> bytes:
        """The output line: the counted messages in the ``kept`` ranges, in ``holder``'s place."""
        text, pieces = self._text, self._json
        line = text("[") + text(",").join([p for a, b in kept for p in pieces[a:b]]) + text("]")
        if holder is not None:
            fields = [
                self._dump(k) + text(":") + (line if k == "messages" else self._dump(v))
                for k, v in holder.items()
            ]
            line = text("{") + text(",").join(fields) + text("}")
        if self._fast:
            return line + b"\n"  # type: ignore[no-any-return]
        # The estimator's encoder writes (and counts) an infinity from 1e400, which JSON
        # cannot hold: such a line is written the plain way, which refuses it. The same
        # word in a string is a false alarm, which only costs speed.
        if "Infinity" in line or "NaN" in line:
            raise Unencodable
        return utf8_line(line)


def _units(piece: Any) -> int:
    return utf16_length(piece.decode("utf-8") if isinstance(piece, bytes) else piece)
