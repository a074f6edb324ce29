"""The pairing validator: every tool-pairing problem a provider would reject a request for,
each format's own in its provider's words, in message order."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ._checks import check_messages
from ._grouping import group_bounds
from ._option_docs import with_option_docs
from ._problems import PairingProblem
from ._views import message_views
from .formats import FORMATS, Format, recognise


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


@with_option_docs()
def check_pairing(messages: Sequence[Any]) -> List[PairingProblem]:
    """Report every tool-pairing problem that would make a provider reject ``messages``.

    Reads every wire format of ``compact`` and SDK message models, mixed freely:
    results without their call, calls without their results, results out of place,
    and each provider's own rules on order (docs/grouping.md lists them). It reads
    exchanges exactly as the grouping does, so whatever it accepts, it accepts after
    any compaction.

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
    """``check_pairing`` of message views that grouping has already validated (the
    command line's compaction is the validation, so it is not done twice)."""
    # A message's format, read once however many problems it has: reading a message of
    # n blocks is O(n), and it may have n problems (tests/test_repair_growth.py).
    owners: Dict[int, Optional[Format]] = {}
    problems = [
        problem
        for fmt in FORMATS
        for problem in fmt.problems(views)
        if not _read_by_another(fmt, views, problem.index, owners)
    ]
    problems.sort(key=lambda p: p.index)
    return problems


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
