"""A tool output of a chosen size, for an agent loop whose tool returns more than the context holds.

``large_tool_output(tokens)`` is what a test's tool returns in place of a fetched page, a log
or a file: the same text for the same arguments, costing exactly ``tokens`` as the kit counts
a string, with a first and a last line that say which output they end, so a test can check
that both reached the provider after the middleware cut the middle.
"""

from __future__ import annotations

import json
from itertools import count
from typing import Tuple

__all__ = ["large_tool_output"]


def _units(text: str) -> int:
    """What ``text`` adds to a JSON string's count: its escaped UTF-16 units, quotes left out."""
    escaped = json.dumps(text, ensure_ascii=False)[1:-1]
    return len(escaped.encode("utf-16-le", "surrogatepass")) // 2


def _line(n: int) -> str:
    # ASCII needing no escape: a line costs its length, and one cut short its length too.
    return f"line {n}: worker-{n % 7} served request {n} in {n % 97} ms"


def _ends(name: str, tokens: int) -> Tuple[str, str]:
    return f"{name}: first line of {tokens} tokens", f"{name}: last line of {tokens} tokens"


def _cost(first: str, last: str) -> int:
    """The units of the two lines alone: the quotes, the lines and the break between them."""
    return 2 + _units(first) + 2 + _units(last)


def _least(name: str) -> int:
    """The fewest tokens an output named ``name`` may cost."""
    # The lines name the count, so a larger count costs a digit more: go up from what
    # the lines of a one-digit count need until a count pays for its own lines.
    least = -(-_cost(*_ends(name, 0)) // 4)
    while _cost(*_ends(name, least)) > 4 * least:
        least += 1
    return least


def large_tool_output(tokens: int, *, name: str = "output") -> str:
    """A deterministic tool output that costs ``tokens`` tokens, for testing an agent loop.

    Its first line is ``"{name}: first line of {tokens} tokens"``, its last
    ``"{name}: last line of {tokens} tokens"``; between them, numbered log lines
    (``"line 7: worker-0 served request 7 in 7 ms"``), the last of them cut short to
    make the count exact. ``count_tokens(text) == tokens``: a message holding it costs
    a few tokens more, its role and ids. About four characters make a token, so
    ``tokens=50_000`` is a 200 KB output.

    Args:
        tokens: What the text costs as the kit counts a JSON string.
        name: Names the output in its first and last lines (a file, a URL, a tool), so
            that two outputs in one conversation are told apart.

    Returns:
        The text, the same for the same arguments.

    Raises:
        TypeError: ``tokens`` is not an int, or ``name`` is not a string.
        ValueError: ``name`` holds a line break, or ``tokens`` is fewer than the first
            and last lines alone cost.
    """
    if isinstance(tokens, bool) or not isinstance(tokens, int):
        raise TypeError(f"'tokens' must be an int (got {tokens!r})")
    if not isinstance(name, str):
        raise TypeError(f"'name' must be a string (got {name!r})")
    if len(f"{name}.".splitlines()) > 1:  # the "." catches a break at its end
        raise ValueError(f"'name' must be one line (got {name!r})")
    first, last = _ends(name, tokens)
    # count_tokens is ceil((units + 2 quotes) / 4): aim at the most units that still
    # round to `tokens`, less one or two where no line (its "\n" costs 2) fits the rest.
    room = 4 * tokens - _cost(first, last)
    if room < 0:
        raise ValueError(f"'tokens' must be at least {_least(name)} (got {tokens})")
    lines = [first]
    for n in count(1):
        line = _line(n)
        if len(line) + 2 > room:
            if room > 2:  # a line cut short fills the rest exactly
                lines.append(line[: room - 2])
            break  # 1 or 2 left: within what rounds up to `tokens`
        lines.append(line)
        room -= len(line) + 2
    lines.append(last)
    return "\n".join(lines)
