"""The command's exit statuses: one constant each, and the table its help and docs show.

Status 1 has one cause per mode: a closed standard output, or ``check``'s problems
(``check`` writes only problem lines, so its output can only close early then).
"""

from __future__ import annotations

import signal
import textwrap
from typing import Optional, Tuple

OK = 0
CLOSED_OR_PROBLEMS = 1
USAGE = 2
DOES_NOT_FIT = 3
SKIPPED = 4
REJECTED = 5
# What a shell reports for a command ended by the signal: 128 + its number.
INTERRUPTED = 128 + signal.SIGINT
TERMINATED = 128 + signal.SIGTERM
# A --jobs worker killed by signal N gives 128 + N, as if the command had been.
KILLED = "128+N"

_KILLED = "a --jobs worker was killed by signal N (137: SIGKILL, out of memory?)"

# The modes, in the order of TABLE's columns after the status.
MODES = ("compact", "check", "repair")

# (status, what it means when compacting, for check, for repair; None: not used there).
TABLE: Tuple[Tuple[str, Optional[str], Optional[str], Optional[str]], ...] = (
    (
        str(OK),
        "the result fits within --max-tokens",
        "no pairing problems",
        "every conversation was written, repaired where it had pairing problems",
    ),
    (
        str(CLOSED_OR_PROBLEMS),
        "standard output was closed before everything was written",
        "at least one pairing problem",
        "standard output was closed before everything was written",
    ),
    (
        str(USAGE),
        "usage error, input that cannot be read, parsed or compacted, or an output that"
        " cannot be written (--output is left untouched; with --jsonl, standard output has"
        " the lines before the bad one)",
        "usage error, input that cannot be read or parsed, or standard output that cannot"
        " be written (no problem lines are written)",
        "usage error, input that cannot be read, parsed or repaired, or an output that"
        " cannot be written (--output is left untouched; with --jsonl, standard output has"
        " the lines before the bad one)",
    ),
    (
        str(DOES_NOT_FIT),
        "the result does not fit, even with everything droppable dropped (the best result"
        " is still written; with --jsonl, any conversation)",
        None,
        None,
    ),
    (
        str(SKIPPED),
        f"--skip-invalid skipped at least one bad line (the rest is written); it outranks"
        f" {DOES_NOT_FIT}, and the last line on standard error says both",
        f"--skip-invalid skipped at least one bad line; it outranks {CLOSED_OR_PROBLEMS},"
        " and the summary line on standard error says both",
        "--skip-invalid skipped at least one bad line (the rest is written)",
    ),
    (
        str(REJECTED),
        "a conversation written still has the tool pairing problems its input had, so the"
        " provider would reject it (compaction cannot repair them: run ctx-compact repair on the"
        f" input first, or --strict to refuse such conversations); it outranks {SKIPPED} and"
        f" {DOES_NOT_FIT}",
        None,
        None,
    ),
    (
        f"{INTERRUPTED}, {TERMINATED}",
        "interrupted by Ctrl-C or SIGTERM (--output is left untouched)",
        "interrupted by Ctrl-C or SIGTERM",
        "interrupted by Ctrl-C or SIGTERM (--output is left untouched)",
    ),
    (KILLED, _KILLED, _KILLED, _KILLED),
)


def help_section(mode: str) -> str:
    """The ``exit status:`` section of one mode's ``--help`` (one of ``MODES``), from ``TABLE``."""
    lines = ["exit status:"]
    column = MODES.index(mode) + 1
    for row in TABLE:
        status, meaning = row[0], row[column]
        if meaning is None:
            continue
        lead = f"  {status}  "
        lines += textwrap.wrap(
            meaning, 78, initial_indent=lead, subsequent_indent=" " * 5, break_on_hyphens=False
        )
    return "\n".join(lines) + "\n"
