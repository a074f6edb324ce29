"""A breakdown drawn: a chart for the terminal and a self-contained HTML page.

Both are plain functions of a ``Breakdown`` (and, for a dataset, of each conversation's
figures); the command line and ``Breakdown``'s own methods call them (docs/breakdown.md).
"""

from __future__ import annotations

import html
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, List, Optional, Sequence, Tuple

if TYPE_CHECKING:
    from ._breakdown import Breakdown

# Per category: its mark in a chart without colour, its ANSI colour and its colour on a page.
_TABLE = """
system S 245 #8a8f98    tools T 141 #a98be0       user u 39 #3b8fe0      assistant a 42 #2bb673
tool_calls c 214 #f0a020   tool_results r 208 #e8671c   images i 205 #e0489a
documents d 170 #b0409e   audio A 176 #c27bc0   thinking t 110 #7aa6c8
compaction C 250 #b8bcc4   summary s 190 #c8c81e
"""
_WORDS = _TABLE.split()
_MARKS = {
    _WORDS[k]: (_WORDS[k + 1], f"38;5;{_WORDS[k + 2]}", _WORDS[k + 3])
    for k in range(0, len(_WORDS), 4)
}
_STATUS_ORDER = ("kept", "pinned", "awaiting", "cleared", "truncated", "dropped", "summarized")


def _paint(text: str, code: str, color: bool) -> str:
    return f"\x1b[{code}m{text}\x1b[0m" if color and text else text


def _shares(figures: Sequence[int], cells: int, scale: float) -> List[int]:
    """Cells for each figure, ``figure / scale`` of ``cells``, summing to the rounded total
    (largest remainders first)."""
    if scale <= 0:
        return [0] * len(figures)
    exact = [f * cells / scale for f in figures]
    shares = [int(x) for x in exact]
    total = round(sum(exact))
    order = sorted(range(len(figures)), key=lambda k: exact[k] - shares[k], reverse=True)
    for k in order[: max(total - sum(shares), 0)]:
        shares[k] += 1
    return shares


def _fit(line: str, width: int) -> str:
    return line if len(line) <= width else line[: max(width - 3, 0)] + "..."


def chart(result: Breakdown, *, width: int = 80, color: bool = False, largest: int = 5) -> str:
    """The breakdown as lines of at most ``width`` characters: a bar of the categories
    against the window (the budget marked ``|``), one line per category, the largest
    messages and what compaction would do. ``color``: ANSI colours and block characters;
    without, plain characters only."""
    width = max(width, 20)
    first, *rest = _headline(result).split("; ")
    used = [(c, t) for c, t in result.categories.items() if t]
    lines = [
        *_wrapped(first, rest, width, ";"),
        *_bar(result, used, width, color),
        *_categories(result, used, width, color),
        *_largest(result, largest, width),
    ]
    if result.max_tokens is not None:
        counts = Counter(row.status or "kept" for row in result.rows)
        said = [f"{counts[s]} {s}" for s in _STATUS_ORDER if counts[s]]
        lines.extend(_wrapped(f"at {result.max_tokens:,.0f}:", said, width))
    return "\n".join(lines) + "\n"


def _bar(result: Breakdown, used: List[Tuple[str, int]], width: int, color: bool) -> List[str]:
    """The categories as one bar against the window, and the budget's mark under it when the
    history is over it."""
    budget = result.max_tokens
    scale = max(result.tokens, budget or 0)
    cells = width - 2
    shares = _shares([t for _, t in used], cells, scale)
    bar = [
        _paint(("█" if color else _MARKS[category][0]) * share, _MARKS[category][1], color)
        for (category, _), share in zip(used, shares)
    ]
    filled = sum(shares)
    free = "." * (cells - filled)
    # The budget's cell: the last one it reaches (the bar's last when the history fits; past
    # the bar, so no mark, without a budget).
    at = cells if budget is None else min(max(round(budget * cells / scale) - 1, 0), cells - 1)
    if filled <= at < cells:
        free = free[: at - filled] + "|" + free[at - filled + 1 :]
    line = "[" + "".join(bar) + free + "]"
    if at >= filled:
        return [line]
    label = f"^ budget {budget:,.0f}"
    if at + 1 + len(label) <= width:
        return [line, " " * (at + 1) + label]
    label = f"budget {budget:,.0f} ^"  # the mark near the end: the label to its left
    return [line, _fit(" " * max(at + 2 - len(label), 0) + label, width)]


def _categories(
    result: Breakdown, used: List[Tuple[str, int]], width: int, color: bool
) -> List[str]:
    """A line per category: its tokens, its share and a bar against the largest."""
    name_width = max((len(c) for c, _ in used), default=6)
    figure_width = max((len(f"{t:,}") for _, t in used), default=1)
    bar_cells = max(width - name_width - figure_width - 10, 0)
    top = max((t for _, t in used), default=1)
    lines = []
    for category, tokens in used:
        mark, code, _ = _MARKS[category]
        percent = f"{100 * tokens / result.tokens:5.1f}%" if result.tokens else "  0.0%"
        line = f"{category:<{name_width}} {tokens:>{figure_width},} {percent} "
        bar = ("█" if color else mark) * round(tokens * bar_cells / top)
        lines.append(_fit(line, width) + _paint(bar, code, color))
    return lines


def _largest(result: Breakdown, count: int, width: int) -> List[str]:
    """The ``count`` largest messages, one line each."""
    if not result.rows or count <= 0:
        return []
    lines = [_fit("largest messages:", width)]
    for row in result.largest(count):
        tool = f" {row.tool}" if row.tool else ""
        status = f" [{row.status}]" if row.status else ""
        what = f"  #{row.index} {row.role or '-'} {row.category} {row.tokens:,}{tool}{status}"
        lines.append(_fit(what, width))
    return lines


def _wrapped(head: str, words: List[str], width: int, mark: str = ",") -> List[str]:
    """``head`` and ``words`` joined by ``mark`` over as many lines of ``width`` as it takes."""
    lines, line = [], head + (mark if mark == ";" and words else "")
    for k, word in enumerate(words):
        piece = word + (mark if k < len(words) - 1 else "")
        if len(line) + 1 + len(piece) > width and line.strip():
            lines.append(line)
            line = "  " + piece
        else:
            line += " " + piece
    lines.append(line)
    return [_fit(text, width) for text in lines]


def _headline(result: Breakdown) -> str:
    line = f"{result.tokens:,} tokens in {len(result.rows):,} messages"
    if result.max_tokens is not None:
        share = 100 * result.tokens / result.max_tokens
        line += f"; budget {result.max_tokens:,.0f} ({share:.0f}% used)"
        if result.tokens_after is not None:
            fits = "fits" if result.fits else "still over"
            line += f"; after compaction {result.tokens_after:,} ({fits})"
    return line


# --- the page ----------------------------------------------------------------------

_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;background:#fff}
h1{font-size:20px;margin:0 0 8px}
#strip{position:relative;display:flex;height:64px;border:1px solid #999;margin:28px 0 4px}
.block{min-width:0;height:100%;box-sizing:border-box;cursor:pointer;
 box-shadow:inset -1px 0 rgba(255,255,255,.5)}
.free{background:repeating-linear-gradient(45deg,#f4f4f4,#f4f4f4 6px,#e8e8e8 6px,#e8e8e8 12px)}
.st-dropped,.st-summarized{opacity:.28}
.st-cleared{background-image:repeating-linear-gradient(0deg,transparent,transparent 4px,
 rgba(255,255,255,.6) 4px,rgba(255,255,255,.6) 6px)}
.st-truncated{border-top:6px solid #000}
.st-pinned{border-bottom:6px solid #000}
.st-summarized{outline:2px dashed #000;outline-offset:-2px}
#budget{position:absolute;top:-6px;bottom:-6px;width:0;border-left:2px solid #d00}
#budget span{position:absolute;top:-18px;left:4px;font-size:12px;color:#d00;white-space:nowrap}
table{border-collapse:collapse;margin-top:16px}
td,th{padding:2px 10px;text-align:right}td:first-child,th:first-child{text-align:left}
.swatch{display:inline-block;width:12px;height:12px;margin-right:6px;vertical-align:middle}
#detail{white-space:pre-wrap;border:1px solid #ccc;padding:8px;margin-top:12px;min-height:2em;
 max-width:100ch}
.legend span{margin-right:14px}
"""

_SCRIPT = """
(function(){
  var blocks=document.querySelectorAll('#strip .block');
  var seen=[];
  for(var k=0;k<blocks.length;k++){
    var b=blocks[k];var w=b.getBoundingClientRect().width;
    b.setAttribute('data-px',w.toFixed(3));
    seen.push({index:b.getAttribute('data-index'),category:b.getAttribute('data-category'),
               tokens:+b.getAttribute('data-tokens'),px:w});
    b.addEventListener('click',function(e){
      document.getElementById('detail').textContent=e.currentTarget.getAttribute('title');});
  }
  var strip=document.getElementById('strip');
  strip.setAttribute('data-px',strip.getBoundingClientRect().width.toFixed(3));
  strip.setAttribute('data-drawn-ms',performance.now().toFixed(1));
  document.getElementById('measured').textContent=JSON.stringify(seen);
})();
"""


def _block(index: str, category: str, status: str, tokens: int, title: str, extra: str = "") -> str:
    return (
        f'<div class="block {extra}cat-{category} st-{status}" style="flex:{tokens} 0 0" '
        f'data-index="{index}" data-category="{category}" data-status="{status}" '
        f'data-tokens="{tokens}" title="{html.escape(title)}"></div>'
    )


def page(result: Breakdown, *, title: str = "Where the tokens go") -> str:
    """One self-contained HTML page (no network): the conversation as a strip of blocks
    sized by their tokens and coloured by category, the budget line, each message's status
    marked, its text on hover or click, and the table of categories."""
    budget = result.max_tokens
    scale = max(result.tokens, budget or 0) or 1
    blocks: List[str] = []
    colours = "".join(f".cat-{c}{{background-color:{m[2]}}}" for c, m in _MARKS.items())
    for category in ("system", "tools"):
        beside = result.categories[category] - sum(r.parts.get(category, 0) for r in result.rows)
        if beside > 0:
            label = "system prompt" if category == "system" else "tool schemas"
            blocks.append(_block(category, category, "kept", beside, f"{label}: {beside:,} tokens"))
    for row in result.rows:
        status = row.status or "kept"
        parts = ", ".join(f"{c} {t:,}" for c, t in row.parts.items())
        tip = (
            f"#{row.index} {row.role or row.category} - {row.tokens:,} tokens ({parts})"
            + (f" - tool {row.tool}" if row.tool else "")
            + (f" - {status}: {row.reason}" if row.status else "")
            + f"\n{result.preview(row.index)}"
        )
        blocks.append(_block(str(row.index), row.category, status, row.tokens, tip))
    if budget is not None and budget > result.tokens:
        free = int(budget - result.tokens)
        blocks.append(
            f'<div class="block free" style="flex:{free} 0 0" data-index="free" '
            f'data-category="free" data-tokens="{free}" title="free: {free:,} tokens"></div>'
        )
    line = ""
    if budget is not None:
        at = 100 * budget / scale
        line = f'<div id="budget" style="left:{at:.4f}%"><span>budget {budget:,.0f}</span></div>'
    rows = "".join(
        f'<tr><td><span class="swatch cat-{c}"></span>{c}</td><td>{t:,}</td>'
        f"<td>{100 * t / result.tokens:.1f}%</td></tr>"
        for c, t in result.categories.items()
        if t and result.tokens
    )
    legend = (
        "<p class='legend'><span>faded: dropped</span><span>striped: cleared</span>"
        "<span>bar above: truncated</span><span>bar below: pinned</span>"
        "<span>dashed: summarized</span></p>"
    )
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>{_STYLE}{colours}</style></head><body>"
        f"<h1>{html.escape(title)}</h1><p id='headline'>{html.escape(_headline(result))}</p>"
        f"<div id='strip' data-tokens='{result.tokens}' data-scale='{scale}'>"
        f"{''.join(blocks)}{line}</div>{legend}"
        f"<table id='categories'><tr><th>category</th><th>tokens</th><th>share</th></tr>{rows}"
        f"</table><div id='detail'>Click a block to read its message.</div>"
        f"<pre id='measured' hidden></pre><script>{_SCRIPT}</script></body></html>"
    )


@dataclass(frozen=True)
class ConversationFigures:
    """One conversation of a dataset, as a dataset page shows it."""

    line: int
    tokens: int
    tokens_after: Optional[int]
    fits: Optional[bool]


def dataset_page(
    figures: Sequence[ConversationFigures],
    *,
    max_tokens: Optional[float] = None,
    title: str = "Where the tokens go: a dataset",
) -> str:
    """A page for a JSONL dataset: the distribution of the conversations' tokens before and
    after compaction, and how many fit."""
    top = max([f.tokens for f in figures] + [int(max_tokens or 0), 1])
    bins = 20
    width = top / bins

    def histogram(values: List[int]) -> List[int]:
        counts = [0] * bins
        for value in values:
            counts[min(int(value / width), bins - 1)] += 1
        return counts

    before = histogram([f.tokens for f in figures])
    after = histogram([f.tokens_after for f in figures if f.tokens_after is not None])
    most = max(before + after + [1])
    bars: List[str] = []
    for k in range(bins):
        low, high = int(k * width), int((k + 1) * width)
        for name, counts, colour in (("before", before, "#e8671c"), ("after", after, "#2bb673")):
            height = 100 * counts[k] / most
            bars.append(
                f'<div class="bar" data-series="{name}" data-bin="{k}" data-count="{counts[k]}" '
                f'title="{name}: {counts[k]} conversations of {low:,}-{high:,} tokens" '
                f'style="height:{height:.2f}%;background:{colour}"></div>'
            )
    fitting = sum(1 for f in figures if f.fits)
    said = f"{len(figures):,} conversations"
    if max_tokens is not None:
        said += f"; budget {max_tokens:,.0f}: {fitting:,} fit after compaction"
        over = sum(1 for f in figures if f.tokens > max_tokens)
        said += f", {over:,} were over it before"
    style = (
        "body{font:14px system-ui,sans-serif;margin:24px}"
        "#histogram{display:flex;align-items:flex-end;height:240px;gap:1px;"
        "border-bottom:1px solid #999}"
        ".bar{flex:1 0 0;min-width:0}"
    )
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>{style}</style></head><body>"
        f"<h1>{html.escape(title)}</h1><p id='headline'>{html.escape(said)}</p>"
        f"<div id='histogram'>{''.join(bars)}</div>"
        f"<p>0 to {top:,} tokens in {bins} bins; orange: before, green: after compaction.</p>"
        "</body></html>"
    )
