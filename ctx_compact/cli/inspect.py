"""``ctx-compact inspect``: where a conversation's tokens go, as a chart, JSON or a page."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
from array import array
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union, overload

from .. import Breakdown, breakdown
from .._render import ConversationFigures, dataset_page
from . import status
from .interrupts import sigterm_raises
from .io import (
    Failure,
    Temporaries,
    jsonl_conversation,
    open_input,
    output,
    read_array,
    read_jsonl,
)
from .words import PROG, out_of_memory
from .work import Settings


def run_inspect(args: argparse.Namespace, settings: Settings) -> int:
    """Inspect one conversation (or, with ``--jsonl`` and no ``--line``, a dataset)."""
    temporaries = Temporaries()
    with sigterm_raises():
        try:
            if args.jsonl and args.line is None:
                return _dataset(args, settings, temporaries)
            name, messages = _one(args)
            result = _breakdown(settings, messages, name)
            _write(None, _json(result) if args.json else result.chart(**_looks(args)), temporaries)
            if args.html is not None:
                _write(args.html, result.html(title=f"Where the tokens go: {name}"), temporaries)
            return status.OK
        except Failure as exc:
            sys.stderr.write(f"{PROG}: {exc}\n")
            return exc.status
        except MemoryError:  # a value past the memory limit, in a file or one line of it
            sys.stderr.write(out_of_memory("inspect"))
            return status.USAGE
        except BrokenPipeError:
            return status.CLOSED_OR_PROBLEMS
        finally:
            temporaries.remove()


def _one(args: argparse.Namespace) -> Tuple[str, List[Any]]:
    """The conversation to inspect, and how to name it: the file, or ``FILE:LINE``."""
    if not args.jsonl:
        name, messages, _ = read_array(args.input)
        return name, messages
    lines = 0
    with open_input(args.input) as source:
        for lineno, raw in read_jsonl(source.stream, source.name):
            lines = lineno
            if lineno == args.line:
                found = jsonl_conversation(raw, source.name, lineno)
                if found is None:
                    raise Failure(f"{source.name}:{lineno}: the line is blank")
                return f"{source.name}:{lineno}", found[0]
        raise Failure(f"{source.name}: there is no line {args.line} (it has {lines})")


def _breakdown(
    settings: Settings, messages: List[Any], where: str, per_message: bool = True
) -> Breakdown:
    clearing: Any = {"keep": settings.keep_results} if settings.clear_tool_results else False
    try:
        return breakdown(
            messages,
            count_tokens=settings.counter,
            pin=settings.pin(messages),
            clear_tool_results=clearing,
            max_result_tokens=settings.caps,
            exclude_tools=settings.exclude_tools,
            per_message=per_message,
            **settings.limits(),
        )
    except (TypeError, ValueError) as exc:  # InvalidMessageError is a ValueError
        raise Failure(f"{where}: {exc}") from None


def _dataset(args: argparse.Namespace, settings: Settings, temporaries: Temporaries) -> int:
    """The dataset's figures: one breakdown at a time, only its totals kept."""
    figures = _Figures()
    totals: Dict[str, int] = {}
    with open_input(args.input) as source:
        for lineno, raw in read_jsonl(source.stream, source.name):
            found = jsonl_conversation(raw, source.name, lineno)
            if found is None:
                continue
            result = _breakdown(settings, found[0], f"{source.name}:{lineno}", per_message=False)
            for category, tokens in result.categories.items():
                totals[category] = totals.get(category, 0) + tokens
            figures.append(lineno, result.tokens, result.tokens_after, result.fits)
    if args.json:
        text = json.dumps({"conversations": len(figures), "categories": totals}, indent=2) + "\n"
    else:
        text = _dataset_lines(figures, totals, settings.max_tokens)
    _write(None, text, temporaries)
    if args.html is not None:
        _write(args.html, dataset_page(figures, max_tokens=settings.max_tokens), temporaries)
    return status.OK


class _Figures(Sequence[ConversationFigures]):
    """The conversations' figures as ``dataset_page`` reads them, held in arrays: 25 bytes a
    line, not an object, beside the one conversation being read."""

    def __init__(self) -> None:
        self.lines = array("q")
        self.tokens = array("q")
        self.after = array("q")  # -1: no budget
        self.fits = array("b")  # -1: no budget

    def append(self, line: int, tokens: int, after: Optional[int], fits: Optional[bool]) -> None:
        self.lines.append(line)
        self.tokens.append(tokens)
        self.after.append(-1 if after is None else after)
        self.fits.append(-1 if fits is None else fits)

    def __len__(self) -> int:
        return len(self.lines)

    @overload
    def __getitem__(self, k: int) -> ConversationFigures: ...

    @overload
    def __getitem__(self, k: slice) -> Sequence[ConversationFigures]: ...

    def __getitem__(self, k: Union[int, slice]) -> Any:
        if isinstance(k, slice):
            return [self[j] for j in range(*k.indices(len(self)))]
        after, fits = self.after[k], self.fits[k]
        return ConversationFigures(
            self.lines[k],
            self.tokens[k],
            None if after < 0 else after,
            None if fits < 0 else bool(fits),
        )


def _dataset_lines(figures: _Figures, totals: Dict[str, int], budget: Optional[float]) -> str:
    tokens = sorted(figures.tokens)
    if not tokens:
        return "0 conversations\n"

    def share(q: float) -> int:
        return tokens[min(int(q * len(tokens)), len(tokens) - 1)]

    lines = [
        f"{len(tokens):,} conversations, {sum(tokens):,} tokens: median {share(0.5):,},"
        f" 90% under {share(0.9):,}, largest {tokens[-1]:,}"
    ]
    if budget is not None:
        over = sum(1 for t in tokens if t > budget)
        fit = figures.fits.count(1)
        lines.append(f"budget {budget:,.0f}: {over:,} over it, {fit:,} fit after compaction")
    whole = sum(totals.values()) or 1
    lines += [f"  {c:<13} {t:>12,} {100 * t / whole:5.1f}%" for c, t in totals.items() if t]
    return "\n".join(lines) + "\n"


def _json(result: Breakdown) -> str:
    record = {
        "tokens": result.tokens,
        "max_tokens": result.max_tokens,
        "tokens_after": result.tokens_after,
        "fits": result.fits,
        "categories": result.categories,
        "tools": result.tools,
        "rows": [dataclasses.asdict(row) for row in result.rows],
    }
    return json.dumps(record, indent=2, ensure_ascii=False) + "\n"


def _looks(args: argparse.Namespace) -> Dict[str, Any]:
    """The chart's width and colours: asked for, else the terminal's (plain when piped or
    ``NO_COLOR`` is set)."""
    terminal = sys.stdout is not None and sys.stdout.isatty()
    width = args.width or (shutil.get_terminal_size().columns if terminal else 80)
    color = terminal and not os.environ.get("NO_COLOR") if args.color is None else args.color
    return {"width": width, "color": bool(color)}


def _write(path: Optional[str], text: str, temporaries: Temporaries) -> None:
    """``text`` to standard output (``None``) or ``path``, a regular file replaced only once it
    is whole, as compaction writes its output."""
    with output(path, temporaries) as stream:
        stream.write(text.encode("utf-8"))
