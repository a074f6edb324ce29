"""What the command does to one conversation: an ``Outcome`` to write and report, no I/O.

A line written as compact JSON is decided from counts that keep each message's
JSON (``json.Pieces``), so that each message is serialised once, not twice.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, replace
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

from .. import (
    CompactResult,
    RepairChange,
    check_pairing,
    clear_tool_results,
    repair_pairing,
    truncate_tool_results,
)
from .._contract import (
    KEEP_HEAD,
    KEEP_RESULTS,
    KEEP_TAIL,
    MEDIA_AWARE,
    OPENS_TURN,
    REPAIR_PLACEHOLDER,
    Compaction,
    MessageRow,
    SpecCounter,
    count_all,
    group_bounds,
    media_parts,
    message_views,
    pairing_problems,
    prefix_sums,
    prepare,
    step,
)
from .io import Failure, dump, jsonl_conversation, with_messages
from .json import Pieces, Unencodable
from .words import Budget, change_text, explain_table, figures, number, plural, problem_text


@dataclass(frozen=True)
class Settings:
    """The options that decide what is done to each conversation (picklable, for workers)."""

    check: bool = False
    repair: bool = False
    answer_unanswered: bool = False
    placeholder: str = REPAIR_PLACEHOLDER
    max_tokens: Budget = 1
    target_tokens: Optional[Budget] = None
    keep_head: int = KEEP_HEAD
    keep_tail: int = KEEP_TAIL
    indent: int = 0
    explain: bool = False  # compaction's table, repair's changes
    strict: bool = False
    clear_tool_results: bool = False
    keep_results: int = KEEP_RESULTS
    exclude_tools: Tuple[str, ...] = ()
    count_media: bool = True
    max_result_tokens: Tuple[Tuple[str, int], ...] = ()  # (tool or "*", cap), as given
    pin_roles: Tuple[str, ...] = ()
    pin_first_user: bool = False

    def limits(self) -> Dict[str, Any]:
        """The budget and the kept ends, as ``compact`` takes them."""
        return {
            "max_tokens": self.max_tokens,
            "target_tokens": self.target_tokens,
            "keep_head": self.keep_head,
            "keep_tail": self.keep_tail,
        }

    @property
    def caps(self) -> Union[int, Dict[str, int], None]:
        """``--max-result-tokens`` as ``truncate_tool_results`` takes it: one cap for every
        tool, or a mapping (``"*"`` for the tools it does not name); the last one given wins."""
        caps = dict(self.max_result_tokens)
        if not caps:
            return None
        return caps["*"] if list(caps) == ["*"] else caps

    def pinned(self, messages: Sequence[Any]) -> List[int]:
        """The indices of the messages ``--pin-role`` and ``--pin-first-user`` pin."""
        if not (self.pin_roles or self.pin_first_user):
            return []
        views = message_views(messages)
        chosen = [i for i, view in enumerate(views) if view.get("role") in self.pin_roles]
        if self.pin_first_user:
            first = next((i for i, v in enumerate(views) if step(v) == OPENS_TURN), None)
            if first is not None:
                chosen = sorted({*chosen, first})
        return chosen

    def pin(self, messages: Sequence[Any]) -> Optional[Callable[[Any], bool]]:
        """``pinned`` as the predicate the public functions take: the chosen messages, by
        identity, so that edited copies of other messages are never taken for them."""
        chosen = {id(messages[i]) for i in self.pinned(messages)}
        return (lambda message: id(message) in chosen) if chosen else None

    @property
    def counter(self) -> Optional[SpecCounter]:
        """The counting: the media-aware estimate, or the specification's (``None``)."""
        return MEDIA_AWARE if self.count_media else None


@dataclass(frozen=True)
class Outcome:
    """One conversation done: what to write, and the figures to report.

    Checking, ``output`` holds the problem lines; repairing, the token figures are 0.
    ``problems`` are always the input's.
    """

    where: str
    output: bytes
    messages_before: int
    messages_after: int
    tokens_before: int
    tokens_after: int
    fits: bool
    problems: Tuple[str, ...] = ()
    explain: str = ""
    changes: Tuple[RepairChange, ...] = ()
    # Compaction: ``output`` still has pairing problems, which the provider rejects.
    rejected: bool = False

    @property
    def dropped(self) -> int:
        return self.messages_before - self.messages_after


@dataclass(frozen=True)
class Rejected:
    """A JSONL line that cannot be used: why (naming the line), and the line verbatim."""

    line: int
    reason: str
    raw: bytes


# A line number and what became of that line.
Done = Tuple[int, Union[Outcome, Rejected]]


def _check(messages: List[Any], where: str) -> Outcome:
    problems = tuple(problem_text(p) for p in check_pairing(messages))
    output = "".join(f"{where}: {text}\n" for text in problems).encode("utf-8")
    n = len(messages)
    return Outcome(where, output, n, n, 0, 0, True, problems)


def _repair(
    settings: Settings, messages: List[Any], holder: Optional[Dict[str, Any]], where: str
) -> Outcome:
    result = repair_pairing(
        messages, answer_unanswered=settings.answer_unanswered, placeholder=settings.placeholder
    )
    output = dump(with_messages(holder, result.messages), settings.indent, where)
    problems = tuple(problem_text(p) for p in result.problems)
    explain = ""
    if settings.explain:
        explain = "".join(f"{where}: {change_text(c)}\n" for c in result.changes)
    n = len(result.messages)
    changes = tuple(result.changes)
    return Outcome(where, output, len(messages), n, 0, 0, True, problems, explain, changes)


# The result, the --explain rows, the tokens the input held before anything, and the
# output line when it was written from the counted pieces.
Decision = Tuple[CompactResult, Sequence[MessageRow], int, Optional[bytes]]


def _from_pieces(
    settings: Settings, messages: List[Any], holder: Optional[Dict[str, Any]], fast: bool
) -> Decision:
    """The decision from counts that keep each message's JSON, and the line written from it.

    ``Unencodable`` (NaN, deep nesting) leaves the conversation to the public functions.
    """
    restarts: List[int] = []  # the messages holding a provider's compaction item
    bounds = group_bounds(messages, 0, restarts)  # validates every message, as compact's does
    pieces = Pieces(fast)
    counts = pieces.count_all(messages)
    counter = settings.counter
    if counter is not None:
        # A media part counts at its billed tokens, not as the base64 just serialised.
        for i, message in enumerate(messages):
            if media_parts(message):
                counts[i] = counter(message)
    plan = Compaction(
        messages,
        prefix_sums(counts),
        bounds,
        count_tokens=counter,
        restart=restarts[-1] if restarts else -1,
        pinned=settings.pinned(messages),
        **settings.limits(),
    )
    result = plan.result()
    rows = _rows(settings, plan)
    return result, rows, result.tokens_before, pieces.line(holder, plan.kept_ranges())


def _rows(settings: Settings, plan: Compaction) -> Sequence[MessageRow]:
    """The ``--explain`` rows of ``plan``, or none without ``--explain``."""
    return plan.rows(settings.keep_head, settings.keep_tail) if settings.explain else ()


def _decision(
    settings: Settings, messages: List[Any], holder: Optional[Dict[str, Any]], fast: bool
) -> Decision:
    if not settings.indent and not settings.clear_tool_results and settings.caps is None:
        # NaN or an infinity (from 1e400) or very deep nesting are Unencodable: the
        # default estimator and the plain dump give the usual count or error.
        with contextlib.suppress(Unencodable):
            return _from_pieces(settings, messages, holder, fast)
    return _public(settings, messages)


def _public(settings: Settings, messages: List[Any]) -> Decision:
    """``clear_tool_results`` (with ``--clear-tool-results``), ``truncate_tool_results``
    (with ``--max-result-tokens``), then ``compact``'s decision: the steps in their order.

    ``Compaction.result()`` is what ``compact()`` returns; one decision gives both the
    result and its rows, so they never disagree. Pinned messages are chosen in the input
    and followed through the steps by identity (an edited message is never a pinned one).
    """
    counter = settings.counter
    pin = settings.pin(messages)
    original, edited, before = messages, False, None
    marks: Dict[int, str] = {}  # what --explain says was done to a message's results
    if settings.clear_tool_results:
        cleared = clear_tool_results(
            messages,
            max_tokens=settings.max_tokens,
            target_tokens=settings.target_tokens,
            keep=settings.keep_results,
            exclude_tools=settings.exclude_tools,
            count_tokens=counter,
            pin=pin,
        )
        messages, before, edited = cleared.messages, cleared.tokens_before, bool(cleared.cleared)
        marks.update((entry.index, "result cleared") for entry in cleared.cleared)
    if settings.caps is not None:
        cut = truncate_tool_results(
            messages,
            max_result_tokens=settings.caps,
            exclude_tools=settings.exclude_tools,
            count_tokens=counter,
            pin=pin,
        )
        messages, edited = cut.messages, edited or bool(cut.cleared)
        marks.update((entry.index, "result cut to its head and tail") for entry in cut.cleared)
        before = cut.tokens_before if before is None else before
    uncleared = None
    if settings.target_tokens is not None and edited:
        # The step rule reads the history as it was before any edit, as the middleware's does.
        uncleared = prefix_sums(count_all(message_views(original), counter))
    plan = prepare(
        messages, count_tokens=counter, uncleared=uncleared, pin=pin, **settings.limits()
    )
    result = plan.result()
    tokens_before = result.tokens_before if before is None else before
    rows = [
        replace(row, reason=f"{row.reason}; {marks[row.index]}") if row.index in marks else row
        for row in _rows(settings, plan)
    ]
    return result, rows, tokens_before, None


def _compact(
    settings: Settings,
    messages: List[Any],
    holder: Optional[Dict[str, Any]],
    where: str,
    fast: bool,
) -> Outcome:
    result, rows, before, output = _decision(settings, messages, holder, fast)
    # Compaction cannot repair a pairing the input already breaks; it is reported
    # (or, with --strict, the conversation refused) in check's own wording. The
    # compaction's grouping validated every message: the check does not again.
    problems = tuple(problem_text(p) for p in pairing_problems(messages))
    # Compaction never breaks a pairing, so only a broken input can give a broken result.
    rejected = bool(problems) and bool(pairing_problems(result.messages))
    if problems and settings.strict:
        more = f" (and {plural(len(problems) - 1, 'more problem')})" if len(problems) > 1 else ""
        raise Failure(f"{where}: tool pairing already broken (--strict): {problems[0]}{more}")
    if output is None:
        output = dump(with_messages(holder, result.messages), settings.indent, where)
    kept = len(result.messages)
    explain = ""
    if settings.explain:
        summary = figures(len(messages), kept, before, result.tokens_after)
        fits = "fits" if result.fits else "does not fit"
        explain = explain_table(
            f"{where}: {summary}, {fits} within {number(settings.max_tokens)}", rows
        )
    return Outcome(
        where,
        output,
        len(messages),
        kept,
        before,
        result.tokens_after,
        result.fits,
        problems,
        explain,
        rejected=rejected,
    )


def run_one(
    settings: Settings,
    messages: List[Any],
    holder: Optional[Dict[str, Any]],
    where: str,
    fast: bool = False,
) -> Outcome:
    """One conversation checked, repaired or compacted (``fast``: orjson parsed it).

    Raises:
        Failure: The conversation cannot be used; the message names ``where``.
    """
    try:
        if settings.check:
            return _check(messages, where)
        if settings.repair:
            return _repair(settings, messages, holder, where)
        return _compact(settings, messages, holder, where, fast)
    except (TypeError, ValueError) as exc:  # InvalidMessageError and PairingError are both
        raise Failure(f"{where}: {exc}") from None


def do_line(
    settings: Settings, name: str, lineno: int, raw: bytes
) -> Union[Outcome, Rejected, None]:
    """One JSONL line done, ``None`` for a blank line, or ``Rejected`` naming why it cannot be."""
    where = f"{name}:{lineno}"
    try:
        read = jsonl_conversation(raw, name, lineno)
        if read is None:
            return None
        messages, holder, fast = read
        return run_one(settings, messages, holder, where, fast)
    except Failure as exc:
        return Rejected(lineno, str(exc), raw)
    except MemoryError:  # what it took is freed on the way here: the next line can go on
        return Rejected(lineno, f"{where}: the line is too large to compact in memory", raw)


def serial(settings: Settings, name: str, lines: Iterable[Tuple[int, bytes]]) -> Iterator[Done]:
    """``--jobs 1``: each non-blank line done in this process, in order."""
    for lineno, raw in lines:
        done = do_line(settings, name, lineno, raw)
        if done is not None:
            yield lineno, done
