"""Bedrock Runtime's Converse API in the kit: ``converse`` and ``converse-stream``.

``validate_messages`` reads ``messages`` as Bedrock does and lists what it
rejects, in Bedrock's words: a role it does not know, a message with no content
blocks, a conversation that does not start with a user message or whose roles
do not alternate, ``toolResult`` blocks that outnumber the ``toolUse`` blocks of
the assistant message before them, and ``toolUse`` ids the next message does not
answer with a ``toolResult``.

``inputTokens`` is the sum of ``count_tokens`` over ``messages`` plus
``count_tokens(system)`` when a ``system`` list is given (``input_tokens``); over
``context_limit`` the request gets Bedrock's "Input is too long for requested
model.".
"""

from __future__ import annotations

from typing import Any, List, Sequence

from ._api import Json, Problem, count_tokens

INVALID_ROLE = (
    "1 validation error detected: Value '{role}' at 'messages.{index}.member.role' failed to "
    "satisfy constraint: Member must satisfy enum value set: [user, assistant]"
)
EMPTY_CONTENT = (
    "The content field in the Message object at messages.{index} is empty. Add a ContentBlock "
    "object to the content field and try again."
)
START_WITH_USER = (
    "A conversation must start with a user message. Try again with a conversation that starts "
    "with a user message."
)
ALTERNATE = (
    "A conversation must alternate between user and assistant roles. Make sure the "
    "conversation alternates between user and assistant roles and try again."
)
EXCESS_RESULTS = (
    "The number of toolResult blocks at messages.{index}.content exceeds the number of toolUse "
    "blocks of previous turn."
)
MISSING_RESULTS = (
    "Expected toolResult blocks at messages.{index}.content for the following Ids: {ids}"
)
CONTEXT_LENGTH = "Input is too long for requested model."
ROLES = ("user", "assistant")


def blocks(message: Any) -> List[Any]:
    """A message's content blocks, or none when it has none (or is not an object)."""
    found = message.get("content") if isinstance(message, dict) else None
    return list(found) if isinstance(found, list) else []


def _of_kind(message: Any, kind: str) -> List[Json]:
    return [
        block[kind]
        for block in blocks(message)
        if isinstance(block, dict) and isinstance(block.get(kind), dict)
    ]


def tool_uses(message: Any) -> List[Json]:
    """A message's ``toolUse`` blocks (their inner objects), in order."""
    return _of_kind(message, "toolUse")


def tool_results(message: Any) -> List[Json]:
    """A message's ``toolResult`` blocks (their inner objects), in order."""
    return _of_kind(message, "toolResult")


# --- the request --------------------------------------------------------------


def validate_messages(messages: Any) -> List[Problem]:
    """List what Bedrock's Converse API rejects in ``messages``, in order, in its own words.

    Args:
        messages: A ``converse`` request's ``messages``, as decoded JSON.

    Returns:
        Every problem found: the fields' first, then the roles', then the tool
        blocks', each in message order; empty when Bedrock accepts ``messages``.
        A request is answered with the first.
    """
    if not isinstance(messages, list) or not messages:
        return [Problem(None, START_WITH_USER)]
    problems: List[Problem] = []
    for index, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role not in ROLES:
            problems.append(Problem(index, INVALID_ROLE.format(role=role, index=index)))
        elif not blocks(message):
            problems.append(Problem(index, EMPTY_CONTENT.format(index=index)))
    if problems:
        # The fields are checked before the conversation is read.
        return problems
    if messages[0]["role"] != "user":
        problems.append(Problem(0, START_WITH_USER))
    for index in range(1, len(messages)):
        if messages[index]["role"] == messages[index - 1]["role"]:
            problems.append(Problem(index, ALTERNATE))
    for index, message in enumerate(messages):
        problems += _check_tool_pairing(messages, index, message)
    return problems


def _check_tool_pairing(messages: Sequence[Json], index: int, message: Json) -> List[Problem]:
    problems: List[Problem] = []
    previous = messages[index - 1] if index else None
    results = tool_results(message)
    if results:
        uses = tool_uses(previous) if previous is not None else []
        if len(results) > len(uses):
            problems.append(Problem(index, EXCESS_RESULTS.format(index=index)))
    uses = tool_uses(message)
    if uses:
        # The answers are in the next message; none follows an unanswered call at the end.
        following = messages[index + 1] if index + 1 < len(messages) else None
        answered = {r.get("toolUseId") for r in tool_results(following)}
        missing = [str(u.get("toolUseId")) for u in uses if u.get("toolUseId") not in answered]
        if missing:
            ids = ", ".join(dict.fromkeys(missing))
            problems.append(Problem(index + 1, MISSING_RESULTS.format(index=index + 1, ids=ids)))
    return problems


def input_tokens(messages: Sequence[Any], system: Any = None) -> int:
    """``inputTokens``: ``count_tokens`` of each message, plus the ``system`` list's."""
    total = sum(count_tokens(message) for message in messages)
    if system is not None:
        total += count_tokens(system)
    return total
