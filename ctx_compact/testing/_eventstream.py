"""AWS's event-stream framing (``application/vnd.amazon.eventstream``), the encoding side.

Bedrock's streaming operations send their events as binary messages, each:

- a prelude: the message's total length and its headers' length (4 bytes each,
  big-endian), then the CRC-32 of those 8 bytes;
- the headers: per header, its name's length (1 byte), the name, the value's
  type (1 byte; 7 is a string), the value's length (2 bytes) and the value;
- the payload (here, compact JSON);
- the CRC-32 of everything before it.

Only what Bedrock sends is written: string headers and JSON payloads.
"""

from __future__ import annotations

import json
import struct
import zlib
from typing import Any, Dict

_STRING = 7
_PRELUDE = struct.Struct(">II")
_CRC = struct.Struct(">I")


def _header(name: str, value: str) -> bytes:
    encoded_name, encoded_value = name.encode(), value.encode()
    return (
        struct.pack(">B", len(encoded_name))
        + encoded_name
        + struct.pack(">BH", _STRING, len(encoded_value))
        + encoded_value
    )


def message(headers: Dict[str, str], payload: bytes) -> bytes:
    """One event-stream message carrying ``headers`` and ``payload``."""
    encoded = b"".join(_header(name, value) for name, value in headers.items())
    total = _PRELUDE.size + _CRC.size + len(encoded) + len(payload) + _CRC.size
    prelude = _PRELUDE.pack(total, len(encoded))
    head = prelude + _CRC.pack(zlib.crc32(prelude)) + encoded + payload
    return head + _CRC.pack(zlib.crc32(head))


def event(event_type: str, data: Any) -> bytes:
    """An ``event`` message of type ``event_type`` whose payload is ``data`` as JSON."""
    headers = {
        ":event-type": event_type,
        ":content-type": "application/json",
        ":message-type": "event",
    }
    return message(headers, json.dumps(data, separators=(",", ":")).encode())
