"""The pairing validator: every tool-pairing problem a provider would reject a request for.

It reads the same shapes as the grouping (every format in ``formats``, and SDK
message models) and reports each problem with the index, the ids and the
provider's own wording: each format says its own problems; the check is theirs
together, in message order.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ._checks import check_messages
from ._grouping import group_bounds
from ._problems import PairingProblem
from ._views import message_views
from .formats import FORMATS, Format, recognise
from .formats.chat import CHAT


class PairingError(ValueError):
    """Raised when a message list has pairing problems and the caller asked for an error.

    Attributes:
        problems: Every problem found, in message order.
    """

    def __init__(self, problems: Sequence[PairingProblem]) -> None:
        self.problems = tuple(problems)
        lines = "; ".join(str(p) for p in self.problems)
        super().__init__(f"{len(self.problems)} tool pairing problem(s): {lines}")

    def __reduce__(self) -> Tuple[Any, ...]:
        # Rebuilt from its problems, not from the formatted message (pickle, copy).
        return type(self), (self.problems,)


def check_pairing(messages: Sequence[Any]) -> List[PairingProblem]:
    """Report every tool-pairing problem that would make a provider reject ``messages``.

    Reads OpenAI Chat Completions messages, Anthropic Messages, OpenAI Responses
    input items, Gemini contents, Bedrock Converse messages and SDK message
    models, mixed freely. It finds: a tool result
    with no call before it; a call whose results are missing; a legacy
    ``function`` message not right after an assistant's ``function_call``; an
    Anthropic ``tool_result`` that is not at the start of the next message, or
    answers no ``tool_use`` of the previous message; a Responses ``*_call``
    without its output, an output without its call (an output answers the most
    recent unanswered call with its ``call_id``, each call once), and a
    ``reasoning`` item without its following item; a Gemini function response
    turn not right after a function call turn or with another number of parts,
    and a function call turn not right after a user turn; Bedrock ``toolUse``
    ids the next message does not answer, surplus ``toolResult`` blocks, and a
    conversation that does not start with a user message or alternate roles.

    It reads exchanges exactly as the grouping does, so whatever it accepts,
    it accepts after any compaction.

    Args:
        messages: The message list (never mutated).

    Returns:
        The problems in message order (an empty list when the request is well formed).

    Raises:
        TypeError: ``messages`` is not a sequence.
        InvalidMessageError: A message is not a mapping or SDK model, its
            ``tool_calls`` is malformed, an id or ``type`` is not hashable, or an
            SDK block's ``model_dump`` fails; the error names the index, as
            ``compact``'s would.
    """
    views = message_views(list(check_messages(messages)))
    group_bounds(views)  # validates every message exactly as compaction does
    return pairing_problems(views)


def pairing_problems(views: Sequence[Mapping[str, Any]]) -> List[PairingProblem]:
    """``check_pairing`` of message views that grouping has already validated.

    For a caller that compacts the same list anyway (the command line): the
    compaction's grouping is the validation, so it is not done twice.
    """
    formats = (CHAT,) if _text_shaped(views) else FORMATS
    owners: Dict[int, Optional[Format]] = {}  # a message's format, read once however many
    problems = [
        problem
        for fmt in formats
        for problem in fmt.problems(views)
        if not _read_by_another(fmt, views, problem.index, owners)
    ]
    problems.sort(key=lambda p: p.index)
    return problems


def _text_shaped(views: Sequence[Mapping[str, Any]]) -> bool:
    """Whether every message has a role, string or no content and no ``parts``.

    Only Chat Completions' rules can find a problem in such a list: the other
    formats' tool structure lives in content blocks (Anthropic, Bedrock), in
    ``parts`` (Gemini) and in role-less items (Responses), so their ``problems``
    report nothing on it (``tests/test_hot_path.py`` holds them to that). Most
    conversations the command line compacts are such lists.
    """
    for view in views:
        get = view.get
        content = get("content")
        if get("role") is None or not (content is None or type(content) is str) or get("parts"):
            return False
    return True


def _read_by_another(
    fmt: Format,
    views: Sequence[Mapping[str, Any]],
    index: int,
    owners: Dict[int, Optional[Format]],
) -> bool:
    """Whether the message a problem is reported at is another format's (a Gemini function
    response turn with role ``"function"`` is not a Chat ``function`` message)."""
    if not 0 <= index < len(views):
        return False
    if index not in owners:
        owners[index] = recognise(views[index], index)
    found = owners[index]
    return found is not None and found is not fmt
