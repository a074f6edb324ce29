"""Progress of a long ``--jsonl`` run on standard error: a line redrawn on a terminal, or plain
lines for logs (``--progress``), with the share done and the time left when the size is known."""

from __future__ import annotations

import sys
import time
from typing import Callable, Optional

from .words import PROG

# Seconds between redraws on a terminal; redrawing per line would cost more than the work.
TERMINAL_INTERVAL = 0.1
# Seconds between plain lines: often enough to see a job is alive, rare enough for a log.
PLAIN_INTERVAL = 10.0


def _size(count: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if count < 1000:
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1000
    return f"{count:.1f} TB"


def _duration(seconds: float) -> str:
    whole = int(seconds + 0.5)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class Progress:
    """Progress lines for one run.

    Args:
        style: ``"terminal"`` (redrawn in place), ``"plain"`` (periodic lines) or
            ``"off"``.
        total: The input's size in bytes, when known.
        position: Bytes of the input read so far (of the compressed file, for gzip).
        before: Called before each line is written (to flush output that shares its file).
    """

    def __init__(
        self,
        style: str,
        total: Optional[int] = None,
        position: Callable[[], int] = lambda: 0,
        before: Callable[[], None] = lambda: None,
    ) -> None:
        self.style = style
        self.total = total
        self.position = position
        self.before = before
        self._started = time.monotonic()
        self._last = self._started
        self._width = 0

    def start(self, name: str) -> None:
        """For logs, a first line as the run starts: a run shorter than the interval shows too."""
        if self.style != "plain":
            return
        self._started = self._last = time.monotonic()
        size = f" ({_size(self.total)})" if self.total else ""
        self._plain(f"{PROG}: started: {name}{size}")

    def finish(self, conversations: int) -> None:
        """For logs, a last line once the whole input is done: the total and the time it took."""
        if self.style != "plain":
            return
        elapsed = time.monotonic() - self._started
        rate = conversations / elapsed if elapsed > 0 else 0.0
        share = f"100% of {_size(self.total)}" if self.total else "100%"
        self._plain(
            f"{PROG}: done: {conversations} conversations, {share}, {rate:.0f}/s,"
            f" {_duration(elapsed)} elapsed"
        )

    def update(self, conversations: int) -> None:
        if self.style == "off":
            return
        now = time.monotonic()
        interval = TERMINAL_INTERVAL if self.style == "terminal" else PLAIN_INTERVAL
        if now - self._last < interval:
            return
        self._last = now
        text = self.text(conversations, now - self._started)
        if self.style == "terminal":
            self.before()
            # Pad over the previous text: plain spaces work on every terminal, escape codes do not.
            sys.stderr.write("\r" + text.ljust(self._width))
            sys.stderr.flush()
            self._width = len(text)
        else:
            self._plain(text)

    def _plain(self, text: str) -> None:
        self.before()
        sys.stderr.write(text + "\n")
        sys.stderr.flush()

    def text(self, conversations: int, elapsed: float) -> str:
        rate = conversations / elapsed if elapsed > 0 else 0.0
        parts = [f"{PROG}: {conversations} conversations", f"{rate:.0f}/s"]
        if self.total:
            done = min(self.position(), self.total)
            share = done / self.total
            parts.insert(1, f"{share:.0%} of {_size(self.total)}")
            if 0 < share < 1:
                parts.append(f"ETA {_duration(elapsed * (1 - share) / share)}")
        return ", ".join(parts)

    def clear(self) -> None:
        """Remove a redrawn line, so the next text starts on a clean line."""
        if self._width:
            sys.stderr.write("\r" + " " * self._width + "\r")
            sys.stderr.flush()
            self._width = 0
