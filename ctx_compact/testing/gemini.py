"""The Gemini API in the kit: ``generateContent``, ``streamGenerateContent`` and ``countTokens``.

``validate_contents`` reads ``contents`` as Gemini does and lists what it
rejects, in Gemini's words: a content with no parts, a part with no data, a
role it does not know, and the function-calling turns out of order. A
*function call turn* (a content with ``functionCall`` parts) must come right
after a user turn or a function response turn; a *function response turn* (a
content with ``functionResponse`` parts) right after a function call turn, with
as many response parts as that turn has calls. Field names are read in both
spellings protobuf's JSON accepts (``functionCall`` and ``function_call``).

The routes are ``POST /v1beta/models/{model}:generateContent``,
``:streamGenerateContent`` (server-sent events with ``?alt=sse``, as google-genai
asks; one JSON array sent in pieces without) and ``:countTokens``, and the same
under ``/v1``, google-genai's default. A refusal is Google's ``{"error": {"code",
"message", "status"}}``. ``promptTokenCount`` is the sum over ``contents`` of each one's
``count_tokens`` (its media parts billed at Gemini's prices instead, ``_billing``)
plus ``count_tokens(systemInstruction)`` when one is given (``prompt_tokens``),
which is also what ``countTokens`` answers; over
``context_limit`` the request gets Gemini's "The input token count (N) exceeds
the maximum number of tokens allowed (M).". The scripted model's calls carry no
``id``, as the Gemini API's do not: a response answers its call by position.
With the prompt cache on, ``cachedContentTokenCount`` reports the prompt's longest
prefix shared with an earlier one, as Gemini's implicit cache does
(``cached_tokens``; ``promptTokenCount`` still includes it).
"""

from __future__ import annotations

import json
from typing import Any, Iterator, List, Optional, Sequence, Tuple

from ._api import (
    Answer,
    Json,
    Model,
    Problem,
    Reply,
    RequestRejected,
    Route,
    Stream,
    Target,
    Tool,
    ToolCall,
    count_tokens,
    output_tokens,
    pieces,
)
from ._billing import billed, gemini_part
from ._cache import PromptCache, openai_cached, unit_key

CONTENTS_NOT_SPECIFIED = "* GenerateContentRequest.contents: contents is not specified\n"
EMPTY_PARTS = (
    "* GenerateContentRequest.contents[{index}].parts: contents.parts must not be empty.\n"
)
EMPTY_PART = (
    "* GenerateContentRequest.contents[{index}].parts[{part}].data: required oneof field 'data' "
    "must have one initialized field\n"
)
INVALID_CONTENT = (
    "Invalid value at 'contents[{index}]' "
    "(type.googleapis.com/google.ai.generativelanguage.v1beta.Content), {value}"
)
INVALID_ROLE = "Please use a valid role: user, model."
RESPONSE_NOT_AFTER_CALL = (
    "Please ensure that function response turn comes immediately after a function call turn."
)
CALL_NOT_AFTER_USER = (
    "Please ensure that function call turn comes immediately after a user turn or after a "
    "function response turn."
)
RESPONSE_COUNT = (
    "Please ensure that the number of function response parts is equal to the number of "
    "function call parts of the function call turn."
)
MIXED_TURN = (
    "Please ensure that function call turn contains at least one function_call part which can "
    "not be mixed with function_response parts."
)
CONTEXT_LENGTH = (
    "The input token count ({tokens}) exceeds the maximum number of tokens allowed ({limit})."
)

#: Roles a content may have; a missing role is the user's. ``function`` and ``tool`` are
#: accepted for function response turns, as the API does.
ROLES = ("user", "model", "function", "tool")
#: The fields of a part's ``data`` oneof, in both spellings; ``null`` is a field not set.
DATA_FIELDS = frozenset(
    {
        "text",
        "inlineData",
        "inline_data",
        "fileData",
        "file_data",
        "functionCall",
        "function_call",
        "functionResponse",
        "function_response",
        "executableCode",
        "executable_code",
        "codeExecutionResult",
        "code_execution_result",
    }
)


def field(value: Json, name: str) -> Any:
    """``value[name]`` under its lowerCamel name or its snake_case one; ``None`` if neither is set.

    ``functionCall`` is read as ``function_call`` too, as protobuf's JSON reads
    both, and ``null`` is a field not set.
    """
    found = value.get(name)
    if found is None:
        found = value.get("".join(f"_{c.lower()}" if c.isupper() else c for c in name))
    return found


def parts(content: Any) -> List[Any]:
    """A content's ``parts``, or no parts when it has none (or is not an object)."""
    found = field(content, "parts") if isinstance(content, dict) else None
    return list(found) if isinstance(found, list) else []


def _count(content: Any, kind: str) -> int:
    return sum(1 for p in parts(content) if isinstance(p, dict) and field(p, kind) is not None)


def function_calls(content: Any) -> int:
    """How many ``functionCall`` parts a content has."""
    return _count(content, "functionCall")


def function_responses(content: Any) -> int:
    """How many ``functionResponse`` parts a content has."""
    return _count(content, "functionResponse")


def _role(content: Json) -> Any:
    return content.get("role") or "user"


# --- the request --------------------------------------------------------------


def validate_contents(contents: Any) -> List[Problem]:
    """List what Gemini rejects in ``contents``, in order, in Gemini's own words.

    Args:
        contents: A ``generateContent`` request's ``contents``, as decoded JSON.

    Returns:
        Every problem found: the fields' first, then the turns', each in content
        order; empty when Gemini accepts ``contents``. A request is answered with
        the first.
    """
    if not isinstance(contents, list) or not contents:
        return [Problem(None, CONTENTS_NOT_SPECIFIED)]
    problems: List[Problem] = []
    for index, content in enumerate(contents):
        problems += _check_content(index, content)
    if problems:
        # The fields are checked before the turns are read.
        return problems
    for index, content in enumerate(contents):
        problems += _check_turn(contents, index, content)
    return problems


def _check_content(index: int, content: Any) -> List[Problem]:
    if not isinstance(content, dict):
        return [Problem(index, INVALID_CONTENT.format(index=index, value=json.dumps(content)))]
    if _role(content) not in ROLES:
        return [Problem(index, INVALID_ROLE)]
    found = parts(content)
    if not found:
        return [Problem(index, EMPTY_PARTS.format(index=index))]
    return [
        Problem(index, EMPTY_PART.format(index=index, part=k))
        for k, part in enumerate(found)
        if not isinstance(part, dict) or all(part.get(name) is None for name in DATA_FIELDS)
    ]


def _check_turn(contents: Sequence[Json], index: int, content: Json) -> List[Problem]:
    calls, responses = function_calls(content), function_responses(content)
    if calls and responses:
        return [Problem(index, MIXED_TURN)]
    previous = contents[index - 1] if index else None
    if calls:
        # A user turn or a function response turn: any turn that is not the model's.
        if previous is None or _role(previous) == "model":
            return [Problem(index, CALL_NOT_AFTER_USER)]
    elif responses:
        if previous is None or not function_calls(previous):
            return [Problem(index, RESPONSE_NOT_AFTER_CALL)]
        if responses != function_calls(previous):
            return [Problem(index, RESPONSE_COUNT)]
    return []


def prompt_tokens(contents: Sequence[Any], system: Any = None) -> int:
    """``promptTokenCount``: each content as billed (``_billing``), plus the system's."""
    total = sum(billed(content, gemini_part, count_tokens) for content in contents)
    if system is not None:
        total += count_tokens(system)
    return total


def gemini_error(message: str, *, status: int = 400) -> RequestRejected:
    """Google's error envelope around ``message``: ``{"error": {"code", "message", "status"}}``."""
    return RequestRejected(
        status, {"error": {"code": status, "message": message, "status": STATUSES[status]}}
    )


#: The canonical status names Google's envelope gives an HTTP status.
STATUSES = {400: "INVALID_ARGUMENT", 404: "NOT_FOUND", 413: "INVALID_ARGUMENT", 500: "INTERNAL"}


class GeminiEnvelope:
    """Google's errors outside the request's rules; google-genai sends ``x-goog-api-client``."""

    # The Gemini API names no request id in a header the SDK reads.
    request_id_header: Optional[str] = None
    sdk_header: Optional[str] = "x-goog-api-client"

    def framing_error(self, message: str, status: int) -> RequestRejected:
        return gemini_error(message, status=status)

    def not_found(self, method: str, path: str) -> RequestRejected:
        return gemini_error("Requested entity was not found.", status=404)

    def unparseable(self) -> RequestRejected:
        return gemini_error("Invalid JSON payload received. Unexpected token.")

    def failed(self, message: str) -> RequestRejected:
        return gemini_error(message, status=500)

    def identified(self, body: Json, request_id: str) -> Json:
        return body


ENVELOPE = GeminiEnvelope()


def validate_request(body: Any) -> Tuple[List[Json], Any]:
    """Check a ``generateContent`` request as Gemini does; return its contents and system.

    Raises:
        RequestRejected: With Google's error envelope, for the first problem found.
    """
    if not isinstance(body, dict):
        # The kit's own wording: Gemini's names the proto type and the offending token.
        raise gemini_error("Invalid JSON payload received. Expected an object.")
    contents = field(body, "contents")
    problems = validate_contents(contents)
    if problems:
        raise gemini_error(problems[0].message)
    return contents, field(body, "systemInstruction")


def _lowered(schema: Any) -> Any:
    # Gemini's own schemas name types in capitals ("OBJECT"); JSON schemas do not.
    if isinstance(schema, dict):
        return {
            k: v.lower() if k == "type" and isinstance(v, str) else _lowered(v)
            for k, v in schema.items()
        }
    if isinstance(schema, list):
        return [_lowered(item) for item in schema]
    return schema


def first_tool(tools: Any, tool_config: Any = None) -> Optional[Tool]:
    """The first function a request declares: ``tools[].functionDeclarations[]``;
    ``None`` when its ``toolConfig`` sets the function calling mode ``NONE``."""
    calling = field(tool_config, "functionCallingConfig") if isinstance(tool_config, dict) else None
    if isinstance(calling, dict) and field(calling, "mode") == "NONE":
        return None
    for tool in tools if isinstance(tools, list) else []:
        declarations = field(tool, "functionDeclarations") if isinstance(tool, dict) else None
        for declaration in declarations if isinstance(declarations, list) else []:
            if isinstance(declaration, dict) and declaration.get("name"):
                schema = field(declaration, "parametersJsonSchema")
                if schema is None:
                    schema = _lowered(declaration.get("parameters") or {})
                return Tool(str(declaration["name"]), schema)
    return None


def function_responses_since_prompt(contents: Sequence[Json]) -> int:
    """How many ``functionResponse`` parts follow the last user content that is not only those."""
    count = 0
    for content in reversed(contents):
        if _role(content) == "model":
            continue
        responses = function_responses(content)
        count += responses
        if responses < len(parts(content)):
            return count
    return count


# --- the reply ----------------------------------------------------------------


def usage_metadata(prompt: int, candidates: Optional[int], cached: int = 0) -> Json:
    """``usageMetadata``; a stream's chunks before the last have no candidates figure yet.
    ``cachedContentTokenCount``, the part of the prompt read from the cache, when any."""
    usage: Json = {"promptTokenCount": prompt}
    if cached:
        usage["cachedContentTokenCount"] = cached
    if candidates is not None:
        usage["candidatesTokenCount"] = candidates
    usage["totalTokenCount"] = prompt + (candidates or 0)
    return usage


def _part(reply: Reply) -> Json:
    if isinstance(reply, ToolCall):
        # No id: the Gemini API pairs a response with its call by position and name.
        return {"functionCall": {"name": reply.name, "args": json.loads(reply.arguments)}}
    return {"text": reply}


def response(
    reply_parts: List[Json], model: str, response_id: str, usage: Json, done: bool = True
) -> Json:
    """A ``GenerateContentResponse`` with one candidate holding ``reply_parts``."""
    candidate: Json = {"content": {"role": "model", "parts": reply_parts}, "index": 0}
    if done:
        candidate["finishReason"] = "STOP"
    return {
        "candidates": [candidate],
        "usageMetadata": usage,
        "modelVersion": model,
        "responseId": response_id,
    }


def chunks(
    reply: Reply, model: str, response_id: str, prompt: int, cached: int = 0
) -> Iterator[Json]:
    """``reply`` as a stream's responses: a text in word-sized pieces, a call in one."""
    found = [{"text": p} for p in pieces(reply)] if isinstance(reply, str) else [_part(reply)]
    found = found or [{"text": ""}]
    for number, part in enumerate(found):
        last = number == len(found) - 1
        usage = usage_metadata(prompt, output_tokens(reply) if last else None, cached)
        yield response([part], model, response_id, usage, done=last)


def sse_events(responses: Iterator[Json]) -> Iterator[bytes]:
    """``?alt=sse``: each response as a ``data:`` event, lines ended by CRLF as Google's are."""
    for item in responses:
        yield b"data: " + json.dumps(item, separators=(",", ":")).encode() + b"\r\n\r\n"


def json_array(responses: Iterator[Json]) -> Iterator[bytes]:
    """Without ``alt=sse``: one JSON array, sent an element at a time."""
    opening = b"["
    for item in responses:
        yield opening + json.dumps(item).encode()
        opening = b"\r\n,"
    yield b"]" if opening != b"[" else b"[]"


def cached_tokens(cache: PromptCache, name: str, body: Json, contents: List[Json]) -> int:
    """The prompt's tokens read from Gemini's implicit cache: the system instruction,
    tools and tool config as one unit (the tools unbilled), then each content."""
    system = field(body, "systemInstruction")
    head = unit_key(system, body.get("tools"), field(body, "toolConfig"))
    units = [(head, count_tokens(system) if system is not None else 0)]
    units += [(unit_key(c), billed(c, gemini_part, count_tokens)) for c in contents]
    return openai_cached(cache, f"gemini:{name}", units, step=1)


def _answer(body: Any, model: Model, target: Target) -> Tuple[Reply, str, str, int, int]:
    contents, system = validate_request(body)
    prompt = prompt_tokens(contents, system)
    limit = model.context_limit
    if limit is not None and prompt > limit:
        raise gemini_error(CONTEXT_LENGTH.format(tokens=prompt, limit=limit))
    tool = first_tool(body.get("tools"), field(body, "toolConfig"))
    reply = model.answer(contents, tool, function_responses_since_prompt(contents), "call_fake")
    name = target.params["model"]
    cached = 0
    if model.prompt_cache is not None:
        cached = cached_tokens(model.prompt_cache, name, body, contents)
    model.bill(name, prompt, output_tokens(reply), cached)
    return reply, name, model.new_id("gemini_fake"), prompt, cached


def serve_generate(body: Any, model: Model, target: Target) -> Answer:
    """Answer one ``generateContent`` request, or raise its ``RequestRejected``."""
    reply, name, response_id, prompt, cached = _answer(body, model, target)
    usage = usage_metadata(prompt, output_tokens(reply), cached)
    return response([_part(reply)], name, response_id, usage)


def serve_stream(body: Any, model: Model, target: Target) -> Answer:
    """Answer one ``streamGenerateContent`` request: server-sent events with ``alt=sse``."""
    reply, name, response_id, prompt, cached = _answer(body, model, target)
    found = chunks(reply, name, response_id, prompt, cached)
    if target.query.get("alt") == "sse":
        return Stream(sse_events(found), "text/event-stream")
    return Stream(json_array(found), "application/json; charset=UTF-8")


def serve_count(body: Any, model: Model, target: Target) -> Answer:
    """Answer one ``countTokens`` request: ``{"totalTokens": N}``, as ``promptTokenCount``.

    The contents are counted, not checked for their turns: the request may be
    ``{"contents": [...]}`` or a whole ``{"generateContentRequest": {...}}``.
    """
    request = field(body, "generateContentRequest") if isinstance(body, dict) else None
    source = request if isinstance(request, dict) else body
    contents = field(source, "contents") if isinstance(source, dict) else None
    if not isinstance(contents, list) or not contents:
        raise gemini_error(CONTENTS_NOT_SPECIFIED)
    return {"totalTokens": prompt_tokens(contents, field(source, "systemInstruction"))}


#: ``/v1`` is google-genai's default for the Gemini API, ``/v1beta`` the REST reference's.
ROUTES = tuple(
    Route(f"/{version}/models/{{model}}:{method}", ENVELOPE, serve)
    for version in ("v1", "v1beta")
    for method, serve in (
        ("generateContent", serve_generate),
        ("streamGenerateContent", serve_stream),
        ("countTokens", serve_count),
    )
)
