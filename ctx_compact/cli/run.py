"""The run: each mode's loop over its input, what it writes, and the exit status it ends with."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import os
import sys
from dataclasses import dataclass, field
from typing import IO, Any, Callable, Dict, Iterator, List, NamedTuple, Optional, Sequence

from . import status
from .args import CHECK, COMPACT, INSPECT, REPAIR, parse_arguments
from .inspect import run_inspect
from .interrupts import Terminated, held, sigterm_raises
from .io import (
    Failure,
    Source,
    Temporaries,
    UnwritableStdout,
    open_input,
    output,
    read_array,
    read_jsonl,
    reasons_path,
)
from .progress import Progress
from .words import PROG, SHOWN_SKIPPED, figures, number, out_of_memory, plural
from .work import Done, Outcome, Rejected, Settings, run_one, serial

# Conversations named in the closing "do not fit" note; the count covers the rest.
_NAMED = 10
# Pairing warnings shown in full; the closing warning counts them all.
_WARNINGS = 20


@dataclass
class _Totals:
    """The figures summed over a run; the runner words them."""

    conversations: int = 0
    messages_before: int = 0
    messages_after: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    not_fitting: int = 0
    named_not_fitting: List[str] = field(default_factory=list)
    broken: int = 0
    rejected: int = 0
    problems: int = 0
    skipped: int = 0
    changes: int = 0

    def add(self, outcome: Outcome) -> None:
        self.conversations += 1
        self.messages_before += outcome.messages_before
        self.messages_after += outcome.messages_after
        self.tokens_before += outcome.tokens_before
        self.tokens_after += outcome.tokens_after
        if not outcome.fits:
            self.not_fitting += 1
            if len(self.named_not_fitting) < _NAMED:
                self.named_not_fitting.append(outcome.where)
        if outcome.problems:
            self.broken += 1
            self.problems += len(outcome.problems)
        self.rejected += outcome.rejected
        self.changes += len(outcome.changes)


def _settings(args: argparse.Namespace, mode: str) -> Settings:
    """The mode and the parsed options that are ``Settings`` fields, under their names."""
    fields = {field.name for field in dataclasses.fields(Settings)}
    given = {name: value for name, value in vars(args).items() if name in fields}
    # --jsonl lines are always compact; the --indent check keeps the two apart.
    indent = 0 if mode == CHECK or args.jsonl else 2 if args.indent is None else args.indent
    given.update(
        indent=indent,
        exclude_tools=tuple(getattr(args, "exclude_tool", ())),
        max_result_tokens=tuple(getattr(args, "max_result_tokens", ())),
        pin_roles=tuple(getattr(args, "pin_role", ())),
    )
    return Settings(check=mode == CHECK, repair=mode == REPAIR, **given)


_FIGURES = ("messages_before", "messages_after", "tokens_before", "tokens_after", "dropped", "fits")


def _report_line(line: int, outcome: Outcome, mode: str) -> bytes:
    record: Dict[str, Any] = {"line": line}
    if mode == REPAIR:
        changes = [dataclasses.asdict(change) for change in outcome.changes]
        record.update(problems=len(outcome.problems), changes=changes)
    else:
        record.update((name, getattr(outcome, name)) for name in _FIGURES)
    # ensure_ascii: ids come from the input, and the report stays one valid line.
    return (json.dumps(record, separators=(",", ":")) + "\n").encode("ascii")


class _Sinks(NamedTuple):
    """Where a run writes; ``reasons``, the --rejects sidecar, keeps the rejects verbatim."""

    out: IO[bytes]
    report: Optional[IO[bytes]] = None
    rejects: Optional[IO[bytes]] = None
    reasons: Optional[IO[bytes]] = None


class _Runner:
    """One run over the input: each conversation done, written, counted and reported."""

    def __init__(self, args: argparse.Namespace, mode: str) -> None:
        self.args = args
        self.mode = mode
        self.settings = _settings(args, mode)
        self.progress = Progress("off")
        # Standard output while it is being written, flushed before anything goes to
        # standard error: when both reach one terminal or log, lines never interleave.
        self.stdout: Optional[IO[bytes]] = None
        self.totals = _Totals()
        # What an interrupted run removes when it ends, whatever ended it.
        self.temporaries = Temporaries()
        # --max-errors alone allows that many; --skip-invalid alone allows any number.
        self.max_errors: Optional[int] = args.max_errors
        self.skip = self.max_errors is not None or args.skip_invalid

    def run(self) -> _Totals:
        args = self.args
        output_path = args.output
        if not args.jsonl:
            name, messages, holder = read_array(args.input)
            outcome = run_one(self.settings, messages, holder, name)
            with output(output_path, self.temporaries) as out:
                self._write(_Sinks(out), outcome, None)
            return self.totals
        with contextlib.ExitStack() as files:
            # Output outermost: the input is closed before the output replaces it, which
            # Windows requires when both are the same file.
            out = files.enter_context(output(output_path, self.temporaries))
            if output_path in (None, "-"):
                self.stdout = out
            rejects = args.rejects
            sinks = _Sinks(
                out,
                self._optional(files, args.report),
                self._optional(files, rejects),
                self._optional(files, reasons_path(rejects)),
            )
            source = files.enter_context(open_input(args.input))
            self.progress = self._progress(source)
            self.progress.start(source.name)
            for lineno, result in self._done(files, source):
                if isinstance(result, Rejected):
                    self._reject(sinks, result)
                else:
                    self._write(sinks, result, lineno)
                if source.live:
                    # As jq does: from a pipe or a terminal (tail -f), each result is out
                    # as soon as it is done; from a file, the buffer fills first.
                    out.flush()
                self.progress.update(self.totals.conversations)
            self.progress.finish(self.totals.conversations)
        self.stdout = None
        return self.totals

    def _progress(self, source: Source) -> Progress:
        wanted: Optional[bool] = self.args.progress
        if wanted is False or (wanted is None and self.mode == CHECK):
            return Progress("off")
        if wanted:
            style = "plain"
        else:
            # A line redrawn in place, only where someone watches it and where it cannot
            # land in the middle of the output.
            to_terminal = self.args.output in (None, "-") and _isatty(sys.stdout)
            style = "terminal" if _isatty(sys.stderr) and not to_terminal else "off"
        return Progress(style, source.size, source.position, self.flush_stdout)

    def say(self, text: str) -> None:
        """Write ``text`` on standard error, on a line of its own."""
        self.progress.clear()
        self.flush_stdout()
        sys.stderr.write(text)
        sys.stderr.flush()

    def flush_stdout(self) -> None:
        if self.stdout is not None:
            self.stdout.flush()

    def _optional(self, files: contextlib.ExitStack, path: Optional[str]) -> Optional[IO[bytes]]:
        return None if path is None else files.enter_context(output(path, self.temporaries))

    def _done(self, files: contextlib.ExitStack, source: Source) -> Iterator[Done]:
        """Each line of ``source`` done, in order: in this process, or in --jobs workers."""
        jobs = self.args.jobs or os.cpu_count() or 1
        if jobs == 1:
            return serial(self.settings, source.name, read_jsonl(source.stream, source.name))
        # multiprocessing is a fifth of the start-up time; only --jobs needs it.
        from .jobs import Workers

        workers = files.enter_context(Workers(self.settings, source.name, jobs))
        return workers.run(workers.chunks(source), source)

    def _write(self, sinks: _Sinks, outcome: Outcome, line: Optional[int]) -> None:
        sinks.out.write(outcome.output)
        totals = self.totals
        shown = totals.problems
        totals.add(outcome)
        if sinks.report is not None and line is not None:
            sinks.report.write(_report_line(line, outcome, self.mode))
        if self.mode == COMPACT:
            for text in outcome.problems[: max(_WARNINGS - shown, 0)]:
                self.say(f"{PROG}: warning: {outcome.where}: {text}\n")
        if outcome.explain:
            self.say(outcome.explain)

    def _reject(self, sinks: _Sinks, rejected: Rejected) -> None:
        totals = self.totals
        if not self.skip:
            raise Failure(
                f"{rejected.reason}\n{PROG}: stopped at line {rejected.line}; --skip-invalid"
                " skips such lines and goes on (--rejects FILE keeps them)"
            )
        if self.max_errors is not None and totals.skipped >= self.max_errors:
            raise Failure(
                f"{rejected.reason} (a bad line beyond --max-errors {self.max_errors}: stopped)"
            )
        totals.skipped += 1
        if totals.skipped <= SHOWN_SKIPPED:  # as the pairing warnings: the ending counts them all
            self.say(f"{PROG}: skipped {rejected.reason}\n")
        if sinks.rejects is not None:
            raw = rejected.raw
            sinks.rejects.write(raw if raw.endswith(b"\n") else raw + b"\n")
        if sinks.reasons is not None:
            record = {"line": rejected.line, "reason": rejected.reason}
            sinks.reasons.write((json.dumps(record) + "\n").encode("ascii"))


def _skipped(args: argparse.Namespace, totals: _Totals) -> str:
    """``skipped N bad lines``, with how many were not shown and where they all are."""
    text = f"skipped {plural(totals.skipped, 'bad line')}"
    hidden = totals.skipped - SHOWN_SKIPPED
    rejects: Optional[str] = args.rejects
    if rejects is not None:
        where = f"{rejects} has them, {reasons_path(rejects)} why each was skipped"
    else:
        where = "--rejects FILE keeps them all, with why each was skipped"
    if hidden > 0:
        return f"{text} ({hidden} not shown; {where})"
    return f"{text} ({where})" if rejects is not None else text


def _pairing_warning(args: argparse.Namespace, totals: _Totals) -> str:
    """The closing warning about inputs whose tool pairing was already broken."""
    hidden = max(totals.problems - _WARNINGS, 0)
    listed = f" ({hidden} not shown; ctx-compact check lists them)" if hidden else ""
    found = (
        f"{plural(totals.problems, 'problem')} in {totals.broken} of"
        f" {plural(totals.conversations, 'conversation')}{listed}"
    )
    if not totals.rejected:
        outcome = "the messages concerned were dropped, so the output has no pairing problems"
    else:
        whom = f"{totals.rejected} of the conversations written" if args.jsonl else "the output"
        outcome = (
            f"compaction does not repair pairing, and the provider would reject {whom}"
            f" (status {status.REJECTED}): run {PROG} repair on the input first"
            " (--strict refuses such conversations)"
        )
    return f"{PROG}: warning: the input's tool pairing was already broken: {found}; {outcome}\n"


def _stats(args: argparse.Namespace, totals: _Totals, budget: str) -> str:
    summary = figures(
        totals.messages_before, totals.messages_after, totals.tokens_before, totals.tokens_after
    )
    misfits = totals.not_fitting
    if not args.jsonl:
        fits = "does not fit" if misfits else "fits"
        return f"{PROG}: {summary}, {fits} within {budget}\n"
    fits = f"{misfits} did not fit" if misfits else "all fit"
    return f"{PROG}: conversations {totals.conversations}, {summary}, {fits} within {budget}\n"


def _misfits(args: argparse.Namespace, totals: _Totals, budget: str) -> str:
    if not args.jsonl:
        return (
            f"{PROG}: {totals.named_not_fitting[0]}: does not fit: {totals.tokens_after}"
            f" tokens with every droppable message dropped, budget {budget}\n"
        )
    names = ", ".join(totals.named_not_fitting)
    rest = totals.not_fitting - len(totals.named_not_fitting)
    return (
        f"{PROG}: {totals.not_fitting} of {totals.conversations} conversations do not fit "
        f"within {budget}: {names}{f' and {rest} more' if rest else ''}\n"
    )


def _compaction_ending(
    args: argparse.Namespace, totals: _Totals, say: Callable[[str], None]
) -> int:
    budget = number(args.max_tokens)
    misfits = totals.not_fitting
    if totals.broken:
        say(_pairing_warning(args, totals))
    if args.stats:
        say(_stats(args, totals, budget))
    if misfits:
        say(_misfits(args, totals, budget))
    # One status can say one thing: output the provider would reject (5) outranks
    # skipped lines (4), which outrank misfits (3); the messages say each.
    code = status.DOES_NOT_FIT if misfits else status.OK
    if totals.skipped:  # with --jsonl only
        # The last line says both, when the skipped lines decide the status.
        also = (
            f"; {misfits} of {totals.conversations} conversations do not fit within {budget}"
            f" (status {status.SKIPPED} outranks {status.DOES_NOT_FIT})"
            if misfits and not totals.rejected
            else ""
        )
        say(f"{PROG}: {_skipped(args, totals)}{also}\n")
        code = status.SKIPPED
    return status.REJECTED if totals.rejected else code


def _pairing_ending(
    args: argparse.Namespace, totals: _Totals, say: Callable[[str], None], mode: str
) -> int:
    """``check``'s and ``repair``'s last line: what was found, and the skipped lines."""
    found = f"no pairing problems in {plural(totals.conversations, 'conversation')}"
    code = status.OK
    if totals.broken and mode == REPAIR:
        found = (
            f"repaired {totals.broken} of {plural(totals.conversations, 'conversation')}"
            f" ({plural(totals.changes, 'change')} for {plural(totals.problems, 'problem')})"
        )
    elif totals.broken:
        found = (
            f"{plural(totals.problems, 'problem')} in {totals.broken} of "
            f"{totals.conversations} conversations"
        )
        code = status.CLOSED_OR_PROBLEMS
    if not totals.skipped:
        say(f"{PROG}: {found}\n")
        return code
    outranks = f" (status {status.SKIPPED} outranks {code})" if code else ""
    say(f"{PROG}: {found}; {_skipped(args, totals)}{outranks}\n")
    return status.SKIPPED


def _discard_stdout() -> None:
    # Point stdout at devnull so the interpreter's final flush does not fail again
    # and print a traceback after we have already decided how to exit.
    with contextlib.suppress(OSError, ValueError, AttributeError, io.UnsupportedOperation):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def _announce_terminal_input(args: argparse.Namespace, say: Callable[[str], None]) -> None:
    if args.input == "-" and _isatty(sys.stdin):
        say(
            f"{PROG}: reading standard input (end it with Ctrl-D, Ctrl-Z on Windows;"
            f" see {PROG} --help)\n"
        )


def _run(args: argparse.Namespace, mode: str) -> int:
    """Run any mode, turning every way the run can end into its exit status."""
    runner = _Runner(args, mode)
    say = runner.say
    # SIGTERM raises for the whole run, the removal of its temporary files included.
    with sigterm_raises():
        try:
            _announce_terminal_input(args, say)
            totals = runner.run()
            if mode == COMPACT:
                return _compaction_ending(args, totals, say)
            return _pairing_ending(args, totals, say, mode)
        except Failure as exc:
            runner.stdout = None  # a failing output cannot be flushed before the message
            if isinstance(exc, UnwritableStdout):
                _discard_stdout()  # what it still buffers would fail again at exit (status 120)
            say(f"{PROG}: {exc}\n")
            return exc.status
        except MemoryError:
            # A value past the memory limit where no line could be named (in array mode).
            say(out_of_memory("compact"))
            return status.USAGE
        except BrokenPipeError:
            # In check mode only problem lines are ever written, so this is still status 1.
            _discard_stdout()
            return status.CLOSED_OR_PROBLEMS
        finally:
            runner.progress.clear()
            # Whatever ended the run (a Ctrl-C or SIGTERM goes on to main()); one landing
            # now waits until the files are gone.
            with held():
                runner.temporaries.remove()


def _isatty(stream: Any) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the ``ctx-compact`` command (``check``, ``repair`` or ``inspect`` when that word
    comes first).

    Args:
        argv: The arguments without the program name; ``sys.argv[1:]`` when ``None``.

    Returns:
        The exit status, one of ``status.TABLE`` (docs/command-line-reference.md lists them).
    """
    try:
        parsed = parse_arguments(list(sys.argv[1:] if argv is None else argv))
        if isinstance(parsed, int):
            return parsed
        args, mode = parsed
        if mode == INSPECT:
            return run_inspect(args, _settings(args, mode))
        return _run(args, mode)
    except KeyboardInterrupt:  # no traceback, whenever it lands
        return status.INTERRUPTED
    except Terminated:
        return status.TERMINATED
