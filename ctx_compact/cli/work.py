"""What the command line does to one conversation, and how it describes the result.

``run_one`` compacts (or checks) one conversation through the public
``compact`` and ``check_pairing`` and returns an ``Outcome``: the bytes to
write and the figures to report. It does no I/O, so it runs the same in the
main process and in a ``--jobs`` worker; the formatters here are the only place
the command's figures and tables are worded.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

from .._clearing import clear_tool_results
from .._compact import CompactResult, compact
from .._contract import MessageRow, message_views, pairing_problems, prepare
from .._pairing import PairingProblem, check_pairing
from .io import Failure, conversation, decode, dump, parse, with_messages
from .json import Pieces, Unencodable, loads_fast

PROG = "ctx-compact"

Budget = Union[int, float]

# What would break a problem's single line or its UTF-8 encoding.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f\ud800-\udfff]")


@dataclass(frozen=True)
class Settings:
    """The options that decide what is done to each conversation (picklable, for workers)."""

    check: bool = False
    max_tokens: Budget = 1
    target_tokens: Optional[Budget] = None
    keep_head: int = 1
    keep_tail: int = 4
    indent: int = 0
    explain: bool = False
    strict: bool = False
    clear_tool_results: bool = False
    keep_results: int = 3
    exclude_tools: Tuple[str, ...] = ()


@dataclass(frozen=True)
class Outcome:
    """One conversation done: what to write, and the figures to report.

    In check mode ``output`` holds the problem lines and the figures are those of
    the unchanged input.
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


def number(value: Budget) -> str:
    """A budget as the user wrote it: ``150`` rather than ``150.0``."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def figures(
    messages_before: int, messages_after: int, tokens_before: int, tokens_after: int
) -> str:
    """The figures every summary shares: ``messages 10 -> 7, tokens 195 -> 124, dropped 3``."""
    return (
        f"messages {messages_before} -> {messages_after}, "
        f"tokens {tokens_before} -> {tokens_after}, "
        f"dropped {messages_before - messages_after}"
    )


def _one_line(text: str) -> str:
    # Ids come from the input: a newline or a lone surrogate in one must not split the
    # problem's line or make the output invalid UTF-8, so they are written JSON-escaped.
    return _UNPRINTABLE.sub(lambda m: json.dumps(m.group())[1:-1], text)


def problem_text(problem: PairingProblem) -> str:
    """``message N [PROVIDER CODE] IDS: wording``, on one printable line."""
    ids = f" {', '.join(problem.ids)}" if problem.ids else ""
    return _one_line(
        f"message {problem.index} [{problem.provider} {problem.code}]{ids}: {problem.message}"
    )


def _role(value: Any) -> str:
    # The role comes from the input: an escape sequence in it must not reach the terminal.
    return _one_line(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))


def explain_table(header: str, rows: Sequence[MessageRow]) -> str:
    """``header``, then the ``--explain`` table of ``rows``, each line indented."""
    cells = [("#", "role", "tokens", "group", "status")]
    for row in rows:
        first, last = row.group_first, row.group_last
        cells.append(
            (
                str(row.index),
                _role(row.role),
                str(row.tokens),
                str(first) if first == last else f"{first}-{last}",
                f"{row.status}: {row.reason}",
            )
        )
    widths = [max(len(cell[col]) for cell in cells) for col in range(4)]
    lines = [header]
    for index, role, tokens, span, status in cells:
        lines.append(
            f"    {index:>{widths[0]}}  {role:<{widths[1]}}  "
            f"{tokens:>{widths[2]}}  {span:<{widths[3]}}  {status}"
        )
    return "\n".join(lines) + "\n"


def _checked(messages: List[Any], where: str) -> List[PairingProblem]:
    try:
        return check_pairing(messages)
    except (TypeError, ValueError) as exc:  # InvalidMessageError is both
        raise Failure(f"{where}: {exc}") from None


def _check(messages: List[Any], where: str) -> Outcome:
    problems = tuple(problem_text(p) for p in _checked(messages, where))
    output = "".join(f"{where}: {text}\n" for text in problems).encode("utf-8")
    n = len(messages)
    return Outcome(where, output, n, n, 0, 0, True, problems)


def _decide(
    settings: Settings, messages: List[Any], count: Optional[Callable[[Any], int]]
) -> Tuple[CompactResult, Sequence[MessageRow], int]:
    """The result, the --explain rows, and the tokens the input held before anything."""
    before: Optional[int] = None
    saved = 0
    if settings.clear_tool_results:
        cleared = clear_tool_results(
            messages,
            max_tokens=settings.max_tokens,
            keep=settings.keep_results,
            exclude_tools=settings.exclude_tools,
            count_tokens=count,
            target_tokens=settings.target_tokens,
        )
        messages, before = cleared.messages, cleared.tokens_before
        # Clearing and dropping together take off whole steps, as the middleware's do.
        if settings.target_tokens is not None:
            saved = cleared.tokens_before - cleared.tokens_after
    options: Dict[str, Any] = {
        "max_tokens": settings.max_tokens,
        "target_tokens": settings.target_tokens,
        "count_tokens": count,
        "keep_head": settings.keep_head,
        "keep_tail": settings.keep_tail,
    }
    if settings.explain or saved:
        # One decision gives both the result and its rows, so they never disagree;
        # Compaction.result() is what compact() returns (given what clearing saved).
        plan = prepare(messages, saved=saved, **options)
        result = plan.result()
        rows: Sequence[MessageRow] = (
            plan.rows(settings.keep_head, settings.keep_tail) if settings.explain else ()
        )
    else:
        result, rows = compact(messages, **options), ()
    return result, rows, result.tokens_before if before is None else before


def _compact(
    settings: Settings,
    messages: List[Any],
    holder: Optional[Dict[str, Any]],
    where: str,
    fast: bool,
) -> Outcome:
    output: Optional[bytes] = None
    try:
        if settings.indent:
            result, rows, before = _decide(settings, messages, None)
        else:
            # Counting keeps each message's JSON, so the line is written without a second dump.
            pieces = Pieces(fast)
            try:
                result, rows, before = _decide(settings, messages, pieces.count)
                output = pieces.line(holder, result.messages)
            except Unencodable:
                # NaN or an infinity (from 1e400) or very deep nesting: the default
                # estimator and the plain dump give the usual count or error.
                result, rows, before = _decide(settings, messages, None)
        # Compaction cannot repair a pairing the input already breaks; it is reported
        # (or, with --strict, the conversation refused) in check's own wording. The
        # compaction's grouping validated every message: the check does not again.
        problems = tuple(problem_text(p) for p in pairing_problems(message_views(messages)))
    except (TypeError, ValueError) as exc:  # InvalidMessageError is both
        raise Failure(f"{where}: {exc}") from None
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
        header = f"{where}: {summary}, {fits} within {number(settings.max_tokens)}"
        explain = explain_table(header, rows)
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
    )


def run_one(
    settings: Settings,
    messages: List[Any],
    holder: Optional[Dict[str, Any]],
    where: str,
    fast: bool = False,
) -> Outcome:
    """Compact or check one conversation; ``fast`` when orjson parsed it.

    Raises:
        Failure: The conversation cannot be used; the message names ``where``.
    """
    if settings.check:
        return _check(messages, where)
    return _compact(settings, messages, holder, where, fast)


def run_line(settings: Settings, name: str, lineno: int, raw: bytes) -> Optional[Outcome]:
    """One JSONL line done, or ``None`` for a blank line.

    Raises:
        Failure: The line cannot be read, parsed or compacted; the message names it.
    """
    where = f"{name}:{lineno}"
    value = loads_fast(raw)
    fast = value is not None
    if not fast:
        text = decode(raw, name, lineno, lineno == 1)
        if not text.strip(" \t\r\n"):
            return None
        value = parse(text, name, lineno)
    messages, holder = conversation(value, where)
    return run_one(settings, messages, holder, where, fast)


def do_line(
    settings: Settings, name: str, lineno: int, raw: bytes
) -> Union[Outcome, Rejected, None]:
    """``run_line``, with a line that cannot be used returned as ``Rejected`` instead of raised."""
    try:
        return run_line(settings, name, lineno, raw)
    except Failure as exc:
        return Rejected(lineno, str(exc), raw)
    except MemoryError:  # what it took is freed on the way here: the next line can go on
        return Rejected(lineno, f"{name}:{lineno}: the line is too large to compact in memory", raw)


def serial(settings: Settings, name: str, lines: Iterable[Tuple[int, bytes]]) -> Iterator[Done]:
    """``--jobs 1``: each non-blank line done in this process, in order."""
    for lineno, raw in lines:
        done = do_line(settings, name, lineno, raw)
        if done is not None:
            yield lineno, done
