"""The ``ctx-compact`` command line: trim one conversation, or a JSONL dataset of them.

``ctx-compact check`` instead reports the tool-pairing problems of each
conversation, through the public ``check_pairing``, and changes nothing.

The result always comes from the public ``compact`` (or ``Compaction.result()``,
which is what ``compact`` returns). ``--explain`` also reads the internal
``Compaction`` for the head, tail and group boundaries that ``CompactResult``
does not expose.

Nothing half-written ever reaches the output: it is spooled to a temporary
file and only copied to standard output (or moved over ``--output``) once
every conversation has been compacted.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import re
import sys
import time
from dataclasses import dataclass
from typing import IO, Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from . import __version__
from ._cli_io import (
    Failure,
    dump,
    open_input,
    output,
    read_array,
    read_jsonl,
    with_messages,
)
from ._compact import CompactResult, compact
from ._engine import Compaction, prepare
from ._pairing import PairingProblem, check_pairing

PROG = "ctx-compact"
# Only as the first argument: "ctx-compact --max-tokens 9 check" still compacts a file named check.
CHECK = "check"

EXIT_OK = 0
EXIT_PIPE_CLOSED = 1
EXIT_USAGE = 2
EXIT_DOES_NOT_FIT = 3
EXIT_PAIRING_PROBLEMS = 1  # check mode; a closed stdout there also means problems were found

# Seconds between progress redraws; redrawing per line would cost more than compacting it.
_PROGRESS_INTERVAL = 0.1

# What would break a problem's single line or its UTF-8 encoding.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f\ud800-\udfff]")

Budget = Union[int, float]


@dataclass
class _Totals:
    conversations: int = 0
    messages_before: int = 0
    messages_after: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    dropped: int = 0
    not_fitting: int = 0
    first_not_fitting: str = ""

    def add(self, result: CompactResult, where: str) -> None:
        self.conversations += 1
        self.messages_before += len(result.messages) + len(result.dropped)
        self.messages_after += len(result.messages)
        self.tokens_before += result.tokens_before
        self.tokens_after += result.tokens_after
        self.dropped += len(result.dropped)
        if not result.fits:
            self.not_fitting += 1
            if not self.first_not_fitting:
                self.first_not_fitting = where


class _Progress:
    """A one-line counter redrawn in place on standard error, when it is a terminal."""

    def __init__(self, wanted: bool) -> None:
        isatty = getattr(sys.stderr, "isatty", None)
        self.enabled = wanted and bool(isatty and isatty())
        self._width = 0
        self._last = -math.inf

    def update(self, totals: _Totals) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last < _PROGRESS_INTERVAL:
            return
        self._last = now
        text = (
            f"{PROG}: conversations done: {totals.conversations}, "
            f"messages dropped: {totals.dropped}"
        )
        # Pad over the previous text: plain spaces work on every terminal, escape codes do not.
        sys.stderr.write("\r" + text.ljust(self._width))
        sys.stderr.flush()
        self._width = len(text)

    def clear(self) -> None:
        if self._width:
            sys.stderr.write("\r" + " " * self._width + "\r")
            sys.stderr.flush()
            self._width = 0


def _budget(text: str) -> Budget:
    try:
        value: Budget = int(text)
    except ValueError:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite positive number, got {text!r}")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, got {text!r}")
    return value


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Trim a conversation (a JSON array of chat messages) to a token budget.\n"
            "The oldest messages between the kept head and tail are dropped first, and an\n"
            "assistant message with tool_calls is always dropped or kept together with its\n"
            "tool results. The result is written to standard output as JSON."
        ),
        epilog=(
            "input:\n"
            '  A JSON array of message objects, or an object whose "messages" key holds\n'
            "  one (its other keys are kept). With --jsonl, one such value per line; blank\n"
            "  lines are skipped. Input is read as UTF-8.\n"
            "\n"
            "exit status:\n"
            "  0  the result fits within --max-tokens\n"
            "  1  standard output was closed before everything was written\n"
            "  2  usage error, or input that cannot be read, parsed or compacted\n"
            "     (nothing is written to standard output or --output)\n"
            "  3  the result does not fit, even with everything droppable dropped\n"
            "     (the best result is still written; with --jsonl, any conversation)\n"
            "\n"
            "examples:\n"
            "  ctx-compact --max-tokens 150 --keep-tail 2 --stats examples/weather.json\n"
            "  ctx-compact --jsonl --max-tokens 4000 -o trimmed.jsonl train.jsonl\n"
            "\n"
            "checking tool pairing:\n"
            "  ctx-compact check [--jsonl] [FILE] reports every tool call separated from\n"
            "  its result instead of compacting; see ctx-compact check --help. To compact\n"
            "  a file named check, write it ./check.\n"
        ),
    )
    parser.add_argument(
        "input",
        nargs="?",
        default="-",
        metavar="FILE",
        help="the input file; '-' or no argument reads standard input",
    )
    parser.add_argument(
        "--max-tokens",
        required=True,
        type=_budget,
        metavar="N",
        help="the token budget (required): a positive number",
    )
    parser.add_argument(
        "--keep-head",
        type=_count,
        default=1,
        metavar="N",
        help="leading messages always kept, widened to whole groups (default: 1)",
    )
    parser.add_argument(
        "--keep-tail",
        type=_count,
        default=4,
        metavar="N",
        help="trailing messages always kept, widened to whole groups (default: 4)",
    )
    parser.add_argument(
        "--jsonl",
        action="store_true",
        help="read one conversation per line and write one compacted conversation per line",
    )
    parser.add_argument(
        "--indent",
        type=_count,
        default=None,
        metavar="N",
        help="indent the JSON output by N spaces (default: 2); 0 writes a single compact line;"
        " not allowed with --jsonl, whose lines are always compact",
    )
    parser.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="write to FILE instead of standard output; it is replaced only when the run"
        " succeeds, so it may also be the input file",
    )
    parser.add_argument(
        "--stats",
        action="store_true",
        help="print a one-line summary (messages, tokens, dropped, fits) on standard error",
    )
    parser.add_argument(
        "--explain",
        action="store_true",
        help="print a table of every message, its group and why it was kept or dropped"
        " on standard error (with --jsonl, one table per conversation)",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    return parser


class _CompactionOnly(argparse.Action):
    """Refuses a compaction option given to ``check``, rather than silently ignoring it."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: Optional[str] = None,
    ) -> None:
        # Before check existed, "ctx-compact check --max-tokens 9" compacted a file named check.
        parser.error(
            f"{option_string} is a compaction option, which check does not take"
            " (to compact a file named check, write ./check)"
        )


def _build_check_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"{PROG} {CHECK}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Report every tool-pairing problem that would make a provider reject a\n"
            "conversation: a tool result with no call before it, a call whose results are\n"
            "missing, an Anthropic tool_result that does not open the next message, a\n"
            "Responses item without its call, output or following item. The input is only\n"
            "read, never changed."
        ),
        epilog=(
            "input:\n"
            "  The same as compaction: a JSON array of messages, or an object whose\n"
            '  "messages" key holds one; with --jsonl, one such value per line.\n'
            "\n"
            "output:\n"
            "  One line per problem on standard output, in message order:\n"
            "    FILE: message N [PROVIDER CODE] IDS: the provider's own wording\n"
            "  (FILE:LINE with --jsonl), then a summary line on standard error.\n"
            "\n"
            "exit status:\n"
            "  0  no pairing problems\n"
            "  1  at least one pairing problem\n"
            "  2  usage error, or input that cannot be read or parsed\n"
            "     (no problem lines are written)\n"
            "\n"
            "The compaction options (--max-tokens, --keep-head, --keep-tail, --indent,\n"
            "--output, --stats, --explain) are refused with status 2.\n"
            "\n"
            "examples:\n"
            "  ctx-compact check examples/broken.json\n"
            "  ctx-compact check --jsonl train.jsonl\n"
        ),
    )
    parser.add_argument(
        "input",
        nargs="?",
        default="-",
        metavar="FILE",
        help="the input file; '-' or no argument reads standard input",
    )
    parser.add_argument(
        "--jsonl",
        action="store_true",
        help="read one conversation per line and name each problem's line",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    for options, nargs in (
        (["--max-tokens"], "?"),
        (["--keep-head"], "?"),
        (["--keep-tail"], "?"),
        (["--indent"], "?"),
        (["-o", "--output"], "?"),
        (["--stats"], 0),
        (["--explain"], 0),
    ):
        parser.add_argument(*options, nargs=nargs, action=_CompactionOnly, help=argparse.SUPPRESS)
    return parser


def _parse_args(
    parser: argparse.ArgumentParser, argv: Optional[Sequence[str]]
) -> Union[argparse.Namespace, int]:
    """The parsed arguments, or the exit status when argparse has already answered."""
    try:
        return parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version and usage errors
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or EXIT_OK
        return EXIT_USAGE


def _compact(
    messages: List[Any], args: argparse.Namespace, where: str
) -> Tuple[CompactResult, Optional[Compaction]]:
    options: Dict[str, Any] = {
        "max_tokens": args.max_tokens,
        "keep_head": args.keep_head,
        "keep_tail": args.keep_tail,
    }
    try:
        if args.explain:
            # Compaction.result() is exactly what compact() returns; going through the
            # plan once keeps the table and the output from ever disagreeing.
            plan = prepare(messages, count_tokens=None, **options)
            return plan.result(), plan
        return compact(messages, **options), None
    except (TypeError, ValueError) as exc:  # InvalidMessageError is both
        raise Failure(f"{where}: {exc}") from None


def _number(value: Budget) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _explain(plan: Compaction, result: CompactResult, args: argparse.Namespace, where: str) -> str:
    n = len(plan.messages)
    pre, bounds = plan.pre, plan.bounds
    over = plan.tokens_before > plan.max_tokens
    rows = [("#", "role", "tokens", "group", "status")]
    group = 0
    for i, message in enumerate(plan.messages):
        while bounds[group + 1] <= i:
            group += 1
        first, last = bounds[group], bounds[group + 1] - 1
        role = message.get("role")
        if i < plan.head_end:
            why = "kept: head" if i < args.keep_head else "kept: head (group kept whole)"
        elif i >= plan.tail_start:
            why = "kept: tail" if i >= n - args.keep_tail else "kept: tail (group kept whole)"
        elif i < plan.cut:
            why = "dropped: oldest middle group while over budget"
        elif over:
            why = "kept: budget reached"
        else:
            why = "kept: input already fits"
        rows.append(
            (
                str(i),
                role if isinstance(role, str) else json.dumps(role, ensure_ascii=False),
                str(pre[i + 1] - pre[i]),
                str(first) if first == last else f"{first}-{last}",
                why,
            )
        )
    widths = [max(len(row[col]) for row in rows) for col in range(4)]
    lines = [
        f"{where}: messages {n} -> {len(result.messages)}, tokens {result.tokens_before} -> "
        f"{result.tokens_after}, dropped {len(result.dropped)}, "
        f"{'fits' if result.fits else 'does not fit'} within {_number(args.max_tokens)}"
    ]
    for number, role_text, tokens, span, status in rows:
        lines.append(
            f"    {number:>{widths[0]}}  {role_text:<{widths[1]}}  "
            f"{tokens:>{widths[2]}}  {span:<{widths[3]}}  {status}"
        )
    return "\n".join(lines) + "\n"


def _run_array(args: argparse.Namespace, say: Callable[[str], None]) -> int:
    name, messages, holder = read_array(args.input)
    result, plan = _compact(messages, args, name)
    indent = 2 if args.indent is None else args.indent
    encoded = dump(with_messages(holder, result.messages), indent, name)
    with output(args.output) as out:
        out.write(encoded)
    if plan is not None:
        say(_explain(plan, result, args, name))
    budget = _number(args.max_tokens)
    if args.stats:
        say(
            f"{PROG}: messages {len(messages)} -> {len(result.messages)}, "
            f"tokens {result.tokens_before} -> {result.tokens_after}, "
            f"dropped {len(result.dropped)}, "
            f"{'fits' if result.fits else 'does not fit'} within {budget}\n"
        )
    if result.fits:
        return EXIT_OK
    say(
        f"{PROG}: {name}: does not fit: {result.tokens_after} tokens with every droppable "
        f"message dropped, budget {budget}\n"
    )
    return EXIT_DOES_NOT_FIT


def _run_jsonl(args: argparse.Namespace, say: Callable[[str], None], progress: _Progress) -> int:
    totals = _Totals()
    # Output outermost: the input is closed before the output replaces it, which
    # Windows requires when both are the same file.
    with output(args.output) as out, open_input(args.input) as (name, stream):
        for where, messages, holder in read_jsonl(stream, name):
            result, plan = _compact(messages, args, where)
            out.write(dump(with_messages(holder, result.messages), 0, where))
            totals.add(result, where)
            if plan is not None:
                say(_explain(plan, result, args, where))
            progress.update(totals)
    budget = _number(args.max_tokens)
    if args.stats:
        fitting = (
            f"{totals.not_fitting} did not fit" if totals.not_fitting else "all fit"
        ) + f" within {budget}"
        say(
            f"{PROG}: conversations {totals.conversations}, "
            f"messages {totals.messages_before} -> {totals.messages_after}, "
            f"tokens {totals.tokens_before} -> {totals.tokens_after}, "
            f"dropped {totals.dropped}, {fitting}\n"
        )
    if not totals.not_fitting:
        return EXIT_OK
    say(
        f"{PROG}: {totals.not_fitting} of {totals.conversations} conversations do not fit "
        f"within {budget} (the first at {totals.first_not_fitting})\n"
    )
    return EXIT_DOES_NOT_FIT


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _one_line(text: str) -> str:
    # Ids come from the input: a newline or a lone surrogate in one must not split the
    # problem's line or make the output invalid UTF-8, so they are written JSON-escaped.
    return _UNPRINTABLE.sub(lambda m: json.dumps(m.group())[1:-1], text)


def _problem_line(where: str, problem: PairingProblem) -> bytes:
    ids = f" {', '.join(problem.ids)}" if problem.ids else ""
    line = (
        f"{where}: message {problem.index} [{problem.provider} {problem.code}]{ids}: "
        f"{problem.message}"
    )
    return (_one_line(line) + "\n").encode("utf-8")


@dataclass
class _CheckTotals:
    conversations: int = 0
    broken: int = 0
    problems: int = 0

    def add(self, messages: List[Any], where: str, out: IO[bytes]) -> None:
        try:
            problems = check_pairing(messages)
        except (TypeError, ValueError) as exc:  # InvalidMessageError is both
            raise Failure(f"{where}: {exc}") from None
        self.conversations += 1
        if problems:
            self.broken += 1
            self.problems += len(problems)
        for problem in problems:
            out.write(_problem_line(where, problem))


def _run_check(args: argparse.Namespace, say: Callable[[str], None]) -> int:
    totals = _CheckTotals()
    # Spooled like compaction output: an unreadable line 41 must not leave the
    # problems of lines 1-40 on standard output next to an exit status of 2.
    if args.jsonl:
        with output(None) as out, open_input(args.input) as (name, stream):
            for where, messages, _ in read_jsonl(stream, name):
                totals.add(messages, where, out)
    else:
        name, messages, _ = read_array(args.input)
        with output(None) as out:
            totals.add(messages, name, out)
    if not totals.problems:
        say(f"{PROG}: no pairing problems in {_plural(totals.conversations, 'conversation')}\n")
        return EXIT_OK
    say(
        f"{PROG}: {_plural(totals.problems, 'problem')} in {totals.broken} of "
        f"{totals.conversations} conversations\n"
    )
    return EXIT_PAIRING_PROBLEMS


def _check_main(argv: Sequence[str]) -> int:
    args = _parse_args(_build_check_parser(), argv)
    if isinstance(args, int):
        return args

    def say(text: str) -> None:
        sys.stderr.write(text)
        sys.stderr.flush()

    try:
        return _run_check(args, say)
    except Failure as exc:
        say(f"{PROG}: {exc}\n")
        return EXIT_USAGE
    except BrokenPipeError:
        # Only problem lines are ever written, so this is still status 1.
        return _stdout_closed()


def _stdout_closed() -> int:
    # Point stdout at devnull so the interpreter's final flush does not fail again
    # and print a traceback after we have already decided how to exit.
    with contextlib.suppress(OSError, ValueError, AttributeError, io.UnsupportedOperation):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return EXIT_PIPE_CLOSED


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the ``ctx-compact`` command, or ``ctx-compact check`` when ``check`` comes first.

    Args:
        argv: The arguments without the program name; ``sys.argv[1:]`` when ``None``.

    Returns:
        The exit status. Compaction: 0 when the result fits, 3 when it does not
        (the best result is still written), 2 for a usage error or unusable input
        (nothing is written), 1 when standard output was closed early. ``check``:
        0 when there are no pairing problems, 1 when there are, 2 for a usage error
        or unusable input.
    """
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == [CHECK]:
        return _check_main(arguments[1:])
    parser = _build_parser()
    args = _parse_args(parser, arguments)
    if isinstance(args, int):
        return args
    if args.jsonl and args.indent is not None:
        parser.print_usage(sys.stderr)
        sys.stderr.write(
            f"{PROG}: error: --indent cannot be used with --jsonl, "
            "whose output is one compact line per conversation\n"
        )
        return EXIT_USAGE

    progress = _Progress(wanted=args.jsonl)

    def say(text: str) -> None:
        progress.clear()
        sys.stderr.write(text)
        sys.stderr.flush()

    try:
        status = _run_jsonl(args, say, progress) if args.jsonl else _run_array(args, say)
    except Failure as exc:
        say(f"{PROG}: {exc}\n")
        return EXIT_USAGE
    except BrokenPipeError:
        return _stdout_closed()
    finally:
        progress.clear()
    return status
