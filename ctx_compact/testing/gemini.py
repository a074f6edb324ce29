"""The Gemini API in the kit: ``generateContent``, ``streamGenerateContent`` and ``countTokens``.

``validate_contents`` reads ``contents`` as Gemini does and lists what it
rejects, in Gemini's words: a content with no parts, a part with no data, a
role it does not know, and the function-calling turns out of order. A
*function call turn* (a content with ``functionCall`` parts) must come right
after a user turn or a function response turn; a *function response turn* (a
content with ``functionResponse`` parts) right after a function call turn, with
as many response parts as that turn has calls. Field names are read in both
spellings protobuf's JSON accepts (``functionCall`` and ``function_call``).

``promptTokenCount`` is the sum of ``count_tokens`` over ``contents`` plus
``count_tokens(systemInstruction)`` when one is given (``prompt_tokens``); over
``context_limit`` the request gets Gemini's "The input token count (N) exceeds
the maximum number of tokens allowed (M).".
"""

from __future__ import annotations

import json
from typing import Any, List, Sequence

from ._api import Json, Problem, count_tokens

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
#: The fields of a part's ``data`` oneof, in both spellings.
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
    """``value[name]`` under its lowerCamel name or its snake_case one (``functionCall``)."""
    if name in value:
        return value[name]
    snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in name)
    return value.get(snake)


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
        if not isinstance(part, dict) or not DATA_FIELDS.intersection(part)
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
    """``promptTokenCount``: ``count_tokens`` of each content, plus the system instruction's."""
    total = sum(count_tokens(content) for content in contents)
    if system is not None:
        total += count_tokens(system)
    return total
