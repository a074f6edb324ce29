"""How the command words what it reports: its name, budgets, counts, figures, problems, tables."""

from __future__ import annotations

import json
import re
from typing import Any, Sequence, Union

from .. import PairingProblem, RepairChange
from .._contract import MessageRow

PROG = "ctx-compact"


def out_of_memory(doing: str) -> str:
    """What a run says when a value past the memory limit could not be tied to a line."""
    return f"{PROG}: out of memory: the input holds a value too large to {doing}\n"


# Skipped lines reported one by one on standard error; the closing line counts them all.
SHOWN_SKIPPED = 20

Budget = Union[int, float]

# What would break a problem's single line or its UTF-8 encoding.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f\ud800-\udfff]")


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


def change_text(change: RepairChange) -> str:
    """``message N [PROVIDER ACTION] IDS [-> message M] (repairs CODE)``, on one printable line."""
    ids = f" {', '.join(change.ids)}" if change.ids else ""
    into = "" if change.into is None else f" -> message {change.into}"
    return _one_line(
        f"message {change.index} [{change.provider} {change.action}]{ids}{into}"
        f" (repairs {change.problem})"
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
