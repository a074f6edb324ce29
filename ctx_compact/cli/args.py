"""One parser builder for the four modes: every option defined once, its help, what it refuses."""

from __future__ import annotations

import argparse
import difflib
import functools
import math
import re
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from .. import __version__
from .._contract import KEEP_HEAD, KEEP_RESULTS, KEEP_TAIL, REPAIR_PLACEHOLDER
from . import status
from .io import file_identity, reasons_path
from .words import PROG, SHOWN_SKIPPED, Budget, number

# Only as the first argument: "ctx-compact --max-tokens 9 check" still compacts a file named check.
CHECK = "check"
REPAIR = "repair"
INSPECT = "inspect"
COMPACT = "compact"  # no mode word: the command compacts
MODES = (CHECK, REPAIR, INSPECT)


class _Parser(argparse.ArgumentParser):
    """A parser of one mode that knows its option strings, for "did you mean".

    No abbreviation: one accepted today would become ambiguous when an option is added.
    """

    def __init__(self, mode: str, description: str, epilog: str) -> None:
        self.option_names: List[str] = []  # before super().__init__, which adds --help
        super().__init__(
            prog=PROG if mode == COMPACT else f"{PROG} {mode}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
            description=description,
            epilog=epilog,
            allow_abbrev=False,
        )
        self.add_argument(
            "input",
            nargs="?",
            default="-",
            metavar="FILE",
            help="the input file; '-' or no argument reads standard input",
        )

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        action = super().add_argument(*args, **kwargs)
        self.option_names.extend(action.option_strings)
        return action

    def group(self, title: str) -> _Group:
        """An argument group, whose options this parser knows too."""
        return _Group(self, self.add_argument_group(title))

    def done(self) -> _Parser:
        """The parser with ``--version``, its last option."""
        self.add_argument("--version", action="version", version=f"{PROG} {__version__}")
        return self


class _Group:
    """An argument group (or a mutually exclusive one) whose options its parser knows."""

    def __init__(self, parser: _Parser, group: Any) -> None:
        self._parser = parser
        self._group = group

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        action: argparse.Action = self._group.add_argument(*args, **kwargs)
        self._parser.option_names.extend(action.option_strings)
        return action

    def add_mutually_exclusive_group(self) -> _Group:
        return _Group(self._parser, self._group.add_mutually_exclusive_group())


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


def _result_cap(text: str) -> Tuple[str, int]:
    """``N`` (every tool, ``"*"``) or ``TOOL=N``: a tool and its cap in tokens."""
    tool, _, figure = text.rpartition("=")
    try:
        value = int(figure)
    except ValueError:
        value = 0
    if value < 1 or ("=" in text and not tool):
        raise argparse.ArgumentTypeError(
            f"expected N or TOOL=N with N a positive integer, got {text!r}"
        )
    return (tool or "*", value)


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, got {text!r}")
    return value


_DESCRIPTIONS = {
    COMPACT: (
        "Trim a conversation (a JSON array of chat messages) to a token budget.\n"
        "The oldest messages between the kept head and tail are dropped first, and an\n"
        "assistant message with tool_calls is always dropped or kept together with its\n"
        "tool results. The result is written to standard output as JSON."
    ),
    CHECK: (
        "Report every tool-pairing problem that would make a provider reject a\n"
        "conversation: a tool result with no call before it, a call whose results are\n"
        "missing, an Anthropic tool_result that does not open the next message, a\n"
        "Responses item without its call, output or following item. The input is only\n"
        "read, never changed."
    ),
    REPAIR: (
        "Write each conversation repaired so that the provider takes it: a tool result\n"
        "answering no call is dropped, or moved to its call when the call is there\n"
        "without it; a call without its result is dropped (or, with\n"
        "--answer-unanswered, answered with a placeholder result); Anthropic text after\n"
        "the calls moves before them; a Responses reasoning item without its following\n"
        "item is dropped. A conversation without problems is written as it is."
    ),
    INSPECT: (
        "Show where a conversation's tokens go: a chart of the categories (system\n"
        "prompt, user and assistant text, tool calls and results, images, documents,\n"
        "thinking, ...) against the budget, the largest messages, and, with\n"
        "--max-tokens, what compaction would do to each message. The input is only\n"
        "read, never changed."
    ),
}
_EPILOGS = {
    COMPACT: (
        "input:\n"
        '  A JSON array of message objects, or an object whose "messages" key holds\n'
        "  one (its other keys are kept). With --jsonl, one such value per line; blank\n"
        "  lines are skipped. Input is read as UTF-8. A FILE ending in .gz is read\n"
        "  gunzipped; an --output, --report or --rejects FILE ending in .gz is\n"
        "  written gzipped.\n"
        "\n" + status.help_section(COMPACT) + "\n"
        "examples:\n"
        "  ctx-compact --max-tokens 150 --keep-tail 2 --stats examples/weather.json\n"
        "  ctx-compact --jsonl --max-tokens 4000 -o trimmed.jsonl train.jsonl\n"
        "\n"
        "checking, repairing and inspecting:\n"
        "  ctx-compact check [--jsonl] [FILE] reports every tool call separated from\n"
        "  its result instead of compacting; see ctx-compact check --help.\n"
        "  ctx-compact repair [--jsonl] [FILE] writes the conversations repaired so the\n"
        "  provider takes them; see ctx-compact repair --help. ctx-compact inspect\n"
        "  [FILE] draws where the tokens go; see ctx-compact inspect --help. To compact a\n"
        "  file named check, repair or inspect, write it ./check, ./repair or ./inspect.\n"
    ),
    CHECK: (
        "input:\n"
        "  The same as compaction: a JSON array of messages, or an object whose\n"
        '  "messages" key holds one; with --jsonl, one such value per line. The\n'
        "  dataset options (--skip-invalid, --max-errors, --rejects, --jobs,\n"
        "  --progress) are those of compaction.\n"
        "\n"
        "output:\n"
        "  One line per problem on standard output, in message order:\n"
        "    FILE: message N [PROVIDER CODE] IDS: the provider's own wording\n"
        "  (FILE:LINE with --jsonl), then a summary line on standard error.\n"
        "\n" + status.help_section(CHECK) + "\n"
        "examples:\n"
        "  ctx-compact check examples/broken.json\n"
        "  ctx-compact check --jsonl train.jsonl\n"
    ),
    REPAIR: (
        "input:\n"
        "  The same as compaction: a JSON array of messages, or an object whose\n"
        '  "messages" key holds one (its other keys are kept); with --jsonl, one such\n'
        "  value per line. The dataset options are those of compaction.\n"
        "\n"
        "output:\n"
        "  The repaired conversations, as compaction writes them (--indent, -o, .gz).\n"
        "  A summary line on standard error; with --explain, one line per change\n"
        "  before it:\n"
        "    FILE: message N [PROVIDER ACTION] IDS [-> message M] (repairs CODE)\n"
        "  (FILE:LINE with --jsonl); with --report FILE, one JSON line per\n"
        '  conversation: {"line", "problems", "changes": [{"index", "action", "ids",\n'
        '  "provider", "problem", "into"}, ...]}.\n'
        "\n" + status.help_section(REPAIR) + "\n"
        "examples:\n"
        "  ctx-compact repair --explain -o fixed.json examples/broken.json\n"
        "  ctx-compact repair --jsonl --report changes.jsonl -o fixed.jsonl train.jsonl\n"
    ),
    INSPECT: (
        "input:\n"
        "  The same as compaction: a JSON array of messages, or an object whose\n"
        '  "messages" key holds one. With --jsonl, one such value per line: --line N\n'
        "  (counted from 1, as editors count) picks one conversation; without it the\n"
        "  whole dataset is summed up (streamed, in bounded memory).\n"
        "\n"
        "output:\n"
        "  The chart on standard output (coloured on a terminal, plain characters when\n"
        "  piped or NO_COLOR is set); --json prints the breakdown as JSON instead;\n"
        "  --html FILE also writes one self-contained page.\n"
        "\n"
        "examples:\n"
        "  ctx-compact inspect --max-tokens 150 examples/weather.json\n"
        "  ctx-compact inspect --jsonl --line 12 --html report.html train.jsonl\n"
    ),
}
# The help of the options whose meaning depends on the mode.
_JSONL = {
    COMPACT: "read one conversation per line and write one compacted conversation per line",
    CHECK: "read one conversation per line and name each problem's line",
    REPAIR: "read one conversation per line and write one repaired conversation per line",
    INSPECT: "read one conversation per line: with --line N, that one's chart; without, the"
    " dataset's figures",
}
_EXPLAIN = {
    COMPACT: "print a table of every message, its group and why it was kept or dropped"
    " on standard error (with --jsonl, one table per conversation)",
    REPAIR: "print one line per change on standard error",
}
_REPORT = {
    COMPACT: "write one JSON line per conversation to FILE: line, messages_before,"
    " messages_after, tokens_before, tokens_after, dropped, fits",
    REPAIR: "write one JSON line per conversation to FILE: line, problems, changes",
}


# Built once per mode: parsing leaves a parser as it was (argparse copies a repeatable
# option's default list before appending; the run turns them into tuples), and main() called
# from a program would otherwise spend most of a small run adding options.
@functools.cache
def _parser(mode: str) -> _Parser:
    """The parser of ``mode``: the options it shares with the other modes are said once."""
    parser = _Parser(mode, _DESCRIPTIONS[mode], _EPILOGS[mode])
    compacts, writes = mode in (COMPACT, INSPECT), mode in (COMPACT, REPAIR)
    if compacts:
        _add_limits(parser, required=mode == COMPACT)
    parser.add_argument("--jsonl", action="store_true", help=_JSONL[mode])
    if compacts:
        parser.add_argument(
            "--no-count-media",
            dest="count_media",
            action="store_false",
            help="count with the specification's estimator everywhere: an image, PDF or"
            " recording as the length of its JSON, base64 included (default: each counts the"
            " tokens its provider bills for it, and every other message as the specification's"
            " estimate)",
        )
    if mode == REPAIR:
        parser.add_argument(
            "--answer-unanswered",
            action="store_true",
            help="answer a call without its result with a placeholder result instead of"
            " dropping the call",
        )
        parser.add_argument(
            "--placeholder",
            default=REPAIR_PLACEHOLDER,
            metavar="TEXT",
            help="with --answer-unanswered, the placeholder result's text"
            f" (default: {REPAIR_PLACEHOLDER!r})",
        )
    if writes:
        parser.add_argument(
            "--indent",
            type=_count,
            default=None,
            metavar="N",
            help="indent the JSON output by N spaces (default: 2); 0 writes a single compact"
            " line; not allowed with --jsonl, whose lines are always compact",
        )
        parser.add_argument(
            "-o",
            "--output",
            metavar="FILE",
            help="write to FILE instead of standard output; a regular file is replaced only"
            " when the run succeeds, so it may also be the input file; a device, FIFO or"
            " /dev/stdout is written directly",
        )
    if mode == COMPACT:
        parser.add_argument(
            "--stats",
            action="store_true",
            help="print a one-line summary (messages, tokens, dropped, fits) on standard error",
        )
    if writes:
        parser.add_argument("--explain", action="store_true", help=_EXPLAIN[mode])
    if compacts:
        _add_clearing_options(parser, strict=mode == COMPACT)
    if mode == INSPECT:
        _add_inspect_options(parser)
    else:
        _add_dataset_options(parser, mode)
    # check writes to standard output, and has no report.
    parser.set_defaults(output=None, report=None)
    return parser.done()


def _add_limits(parser: _Parser, required: bool) -> None:
    parser.add_argument(
        "--max-tokens",
        required=required,
        type=_budget,
        metavar="N",
        help="the token budget (required): a positive number"
        if required
        else "the token budget: the chart marks it and says what compaction would do",
    )
    parser.add_argument(
        "--target-tokens",
        type=_budget,
        default=None,
        metavar="N",
        help="keep the provider's prompt cache: cut (and, with --clear-tool-results, clear)"
        " down to about N, then the same cut until the conversation has grown by more than"
        " max-tokens minus N, where a live service with target_tokens=N cuts it; at most"
        " --max-tokens",
    )
    for end, which, default in (("head", "leading", KEEP_HEAD), ("tail", "trailing", KEEP_TAIL)):
        parser.add_argument(
            f"--keep-{end}",
            type=_count,
            default=default,
            metavar="N",
            help=f"{which} messages always kept, widened to whole groups (default: {default})",
        )


def _add_dataset_options(parser: _Parser, mode: str) -> None:
    batch = parser.group("datasets (with --jsonl)")
    shown = batch.add_mutually_exclusive_group()
    shown.add_argument(
        "--progress",
        action="store_true",
        default=None,
        help="write plain progress lines (conversations, share of the input, rate, time"
        " left) on standard error for logs: one as the run starts, one every ten seconds,"
        " one when it ends; by default a line is redrawn only when standard error is a"
        " terminal",
    )
    shown.add_argument(
        "--no-progress", dest="progress", action="store_false", help="show no progress"
    )
    batch.add_argument(
        "--skip-invalid",
        action="store_true",
        help=f"skip a line that cannot be used and go on (exit status {status.SKIPPED}); the"
        f" first {SHOWN_SKIPPED} are reported on standard error, --rejects keeps them all",
    )
    batch.add_argument(
        "--max-errors",
        type=_count,
        metavar="N",
        help="skip at most N bad lines; the next one stops the run (implies --skip-invalid)",
    )
    batch.add_argument(
        "--jobs",
        type=_count,
        default=1,
        metavar="N",
        help="work in N worker processes (0: one per CPU); the output is the same, in"
        " the same order (default: 1)",
    )
    batch.add_argument(
        "--rejects",
        metavar="FILE",
        help="write the skipped lines to FILE, verbatim, and why each was skipped to a"
        " sidecar beside it (bad.jsonl: bad.reasons.jsonl)",
    )
    if mode != CHECK:
        batch.add_argument("--report", metavar="FILE", help=_REPORT[mode])


def _add_inspect_options(parser: _Parser) -> None:
    parser.add_argument(
        "--line",
        type=_line,
        metavar="N",
        help="with --jsonl, the conversation on line N (counted from 1)",
    )
    parser.add_argument(
        "--json", action="store_true", help="print the breakdown as JSON instead of the chart"
    )
    parser.add_argument(
        "--html",
        metavar="FILE",
        help="also write a self-contained HTML page to FILE (of the dataset, with --jsonl"
        " and no --line)",
    )
    parser.add_argument(
        "--width",
        type=_line,
        metavar="N",
        help="the chart's width in characters (default: the terminal's, or 80)",
    )
    parser.add_argument(
        "--no-color", dest="color", action="store_false", default=None, help="no colours"
    )
    # inspect takes none of the dataset options and writes no conversation.
    parser.set_defaults(
        skip_invalid=False,
        max_errors=None,
        rejects=None,
        progress=False,
        jobs=1,
        indent=None,
        explain=False,
        strict=False,
    )


def _line(text: str) -> int:
    value = _count(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def _add_clearing_options(parser: _Parser, strict: bool = True) -> None:
    parser.add_argument(
        "--clear-tool-results",
        action="store_true",
        help="before dropping anything, replace the content of the oldest tool results with"
        " '[cleared]' until the conversation fits, keeping every message (see --keep-results,"
        " --exclude-tool)",
    )
    parser.add_argument(
        "--keep-results",
        type=_count,
        default=KEEP_RESULTS,
        metavar="N",
        help="with --clear-tool-results, the most recent tool results never cleared"
        f" (default: {KEEP_RESULTS})",
    )
    parser.add_argument(
        "--exclude-tool",
        action="append",
        default=[],
        metavar="NAME",
        help="a tool whose results are never cleared (--clear-tool-results) or cut"
        " (--max-result-tokens) (repeatable)",
    )
    parser.add_argument(
        "--max-result-tokens",
        action="append",
        default=[],
        type=_result_cap,
        metavar="N|TOOL=N",
        help="before dropping anything, cut every tool result over N tokens (TOOL=N: the"
        " results of TOOL) to its head and tail around a marker; repeatable, and with TOOL=N"
        " alone other tools' results are left whole",
    )
    parser.add_argument(
        "--pin-role",
        action="append",
        default=[],
        metavar="ROLE",
        help="never drop a message of ROLE (its whole group stays in place), nor clear or"
        " cut its results (repeatable)",
    )
    parser.add_argument(
        "--pin-first-user",
        action="store_true",
        help="never drop the first user message (the task) and its group",
    )
    if not strict:
        return
    parser.add_argument(
        "--strict",
        action="store_true",
        help="refuse a conversation whose tool pairing is already broken (status 2, or"
        " skipped with --skip-invalid) instead of warning and compacting it (status 5 when"
        " the result is still broken)",
    )


def _usage_error(parser: argparse.ArgumentParser, message: str) -> int:
    parser.print_usage(sys.stderr)
    sys.stderr.write(f"{parser.prog}: error: {message}\n")
    sys.stderr.flush()
    return status.USAGE


# What argparse reads as a value although it starts with "-", as it does.
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")
_MODE_NAMES = {COMPACT: "compaction", **{mode: f"{PROG} {mode}" for mode in MODES}}


def _unknown_option(parser: _Parser, arguments: Sequence[str]) -> Optional[str]:
    """The first argument that is written as an option but is none of ``parser``'s."""
    known = set(parser.option_names)
    for argument in arguments:
        if argument == "--":  # what follows are file names
            return None
        if not argument.startswith("-") or argument == "-" or _NEGATIVE_NUMBER.match(argument):
            continue
        long = argument.startswith("--")
        name = argument.split("=", 1)[0] if long else argument[:2]  # -oFILE is -o FILE
        if name not in known:
            return name if long else argument
    return None


def _unknown_message(option: str, mode: str, parser: _Parser) -> str:
    """``unrecognized option X``, with the option it may stand for or the mode it belongs to."""
    message = f"unrecognized option {option}"
    for other in _MODE_NAMES:
        if other != mode and option in _parser(other).option_names:
            return f"{message}: it is an option of {_MODE_NAMES[other]}, not of {_MODE_NAMES[mode]}"
    meant = _meant(option, parser.option_names)
    if not meant:
        return message
    listed = ", ".join(f"--{name}" for name in meant[:-1])
    either = f"{listed} or --{meant[-1]}" if listed else f"--{meant[-1]}"
    return f"{message} (did you mean {either}?)"


def _meant(option: str, options: List[str]) -> List[str]:
    """The long options (without their dashes) that ``option`` may stand for.

    An abbreviation (once accepted) names every option it begins; otherwise the closest
    name, only when close (--stat, --keep-tial), not when merely sharing a few letters.
    """
    given = option.lstrip("-")
    names = [name[2:] for name in options if name.startswith("--")]
    meant = [name for name in names if name.startswith(given)] if option.startswith("--") else []
    return meant or difflib.get_close_matches(given, names, n=1, cutoff=0.7)


def parse_arguments(arguments: List[str]) -> Union[Tuple[argparse.Namespace, str], int]:
    """``(arguments, mode)``, or the exit status when there is nothing to run.

    The mode is ``"check"``, ``"repair"`` or ``"inspect"`` when that word is the
    first argument (so that ``ctx-compact --max-tokens 9 check`` still compacts a
    file named check), else ``"compact"``.
    """
    mode = arguments[0] if arguments[:1] and arguments[0] in MODES else COMPACT
    parser = _parser(mode)
    given = arguments if mode == COMPACT else arguments[1:]
    # Before argparse, whose complaint about a misspelt option is often another one
    # (--max-tokns 9 FILE: "the following arguments are required: --max-tokens").
    unknown = _unknown_option(parser, given)
    if unknown is not None:
        return _usage_error(parser, _unknown_message(unknown, mode, parser))
    try:
        args = parser.parse_args(given)
    except SystemExit as exc:  # argparse has answered: --help, --version or a usage error
        return status.USAGE if isinstance(exc.code, str) else exc.code or status.OK
    problem = _conflict(args, mode)
    if problem:
        return _usage_error(parser, problem)
    return args, mode


def _conflict(args: argparse.Namespace, mode: str = COMPACT) -> Optional[str]:
    """What is wrong with this combination of options, if anything."""
    return _mode_conflict(args, mode) or _dataset_conflict(args, mode) or _shared_file(args)


_INDENT_WITH_JSONL = (
    "--indent cannot be used with --jsonl, whose output is one compact line per conversation"
)


def _mode_conflict(args: argparse.Namespace, mode: str) -> Optional[str]:
    if mode == CHECK:
        return None
    if mode == INSPECT:
        return _inspect_conflict(args)
    indent = _INDENT_WITH_JSONL if args.jsonl and args.indent is not None else None
    if mode == REPAIR:
        return _repair_conflict(args, indent)
    return _target_conflict(args) or indent


def _target_conflict(args: argparse.Namespace) -> Optional[str]:
    target, budget = args.target_tokens, args.max_tokens
    if target is None or target <= budget:
        return None
    return f"--target-tokens ({number(target)}) must not exceed --max-tokens ({number(budget)})"


def _inspect_conflict(args: argparse.Namespace) -> Optional[str]:
    if args.line is not None and not args.jsonl:
        return "--line needs --jsonl"
    if args.target_tokens is not None and args.max_tokens is None:
        return "--target-tokens needs --max-tokens"
    exceeds = _target_conflict(args)
    if exceeds:
        return exceeds
    if args.html is not None and file_identity(args.html, sys.stdout) == file_identity(
        args.input, sys.stdin
    ):
        return f"--html is the input file ({args.html}); it would be written over the input"
    return None


def _repair_conflict(args: argparse.Namespace, indent: Optional[str]) -> Optional[str]:
    if not args.placeholder:
        return "--placeholder must not be empty"
    if indent or args.answer_unanswered or args.placeholder == REPAIR_PLACEHOLDER:
        return indent
    return "--placeholder needs --answer-unanswered"


def _dataset_conflict(args: argparse.Namespace, mode: str) -> Optional[str]:
    batch = {
        "--skip-invalid": args.skip_invalid,
        "--max-errors": args.max_errors is not None,
        "--rejects": args.rejects is not None,
        "--report": args.report is not None,
        "--progress": args.progress is True,
        "--jobs": args.jobs != 1,
    }
    for option, given in batch.items():
        if given and not args.jsonl:
            return f"{option} needs --jsonl"
    for option, path in (("--report", args.report), ("--rejects", args.rejects)):
        if path == "-":
            carries = "the problems" if mode == CHECK else "the conversations"
            return f"{option} needs a file; standard output carries {carries}"
    return None


def _shared_file(args: argparse.Namespace) -> Optional[str]:
    """Two outputs, or an output besides ``--output`` and the input, that are one file.

    Each output is written whole and then put in place, so one of the two would be
    lost without a word. ``--output`` may be the input: it replaces it at the end.
    """
    output = args.output or "-"
    outputs = (
        ("standard output" if output == "-" else "--output", output),
        ("--report", args.report),
        ("--rejects", args.rejects),
        ("--rejects' reasons", reasons_path(args.rejects)),
    )
    source = file_identity(args.input, sys.stdin)
    found: Dict[object, str] = {}
    for option, path in outputs:
        identity = file_identity(path, sys.stdout)
        if identity is None:
            continue
        where = "" if path == "-" else f" ({path})"
        if identity in found:
            return (
                f"{found[identity]} and {option} name the same file{where}; one would be"
                " written over the other"
            )
        if identity == source and option != "--output":
            return f"{option} is the input file{where}; it would be written over the input"
        found[identity] = option
    return None
