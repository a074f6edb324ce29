"""OpenAI's error envelope and type checks, shared by Chat Completions and Responses.

Both APIs answer a bad request with ``{"error": {"message", "type", "param",
"code"}}`` and an ``x-request-id`` header, and word a wrong JSON type alike.
"""

from __future__ import annotations

from typing import Any, Optional

from ._api import Json, RequestRejected, json_type


def openai_error(
    message: str,
    *,
    param: Optional[str] = None,
    code: Optional[str] = None,
    status: int = 400,
    error_type: str = "invalid_request_error",
) -> RequestRejected:
    """OpenAI's error envelope around ``message``."""
    return RequestRejected(
        status, {"error": {"message": message, "type": error_type, "param": param, "code": code}}
    )


def expect_body_object(body: Any) -> None:
    """OpenAI's 400 for a request body that is not a JSON object."""
    if not isinstance(body, dict):
        raise openai_error(
            f"Invalid type for body: expected an object, but got {json_type(body)} instead."
        )


def expect_object(field: str, index: int, value: Any) -> None:
    """OpenAI's 400 for an entry of an array parameter that is not a JSON object."""
    if not isinstance(value, dict):
        raise openai_error(
            f"Invalid type for '{field}[{index}]': expected an object, but got "
            f"{json_type(value)} instead.",
            param=f"{field}[{index}]",
            code="invalid_type",
        )


class OpenAIEnvelope:
    """OpenAI's errors outside any one API: framing, unknown paths, bodies that are not JSON."""

    request_id_header: Optional[str] = "x-request-id"
    sdk_header: Optional[str] = None

    def framing_error(self, message: str, status: int) -> RequestRejected:
        return openai_error(message, status=status)

    def not_found(self, method: str, path: str) -> RequestRejected:
        return openai_error(f"Invalid URL ({method} {path})", status=404)

    def unparseable(self) -> RequestRejected:
        return openai_error(
            "We could not parse the JSON body of your request. (HINT: This likely means you "
            "aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, "
            "but what was sent was not valid JSON.)"
        )

    def failed(self, message: str) -> RequestRejected:
        return openai_error(message, status=500, error_type="server_error")

    def identified(self, body: Json, request_id: str) -> Json:
        return body


ENVELOPE = OpenAIEnvelope()
