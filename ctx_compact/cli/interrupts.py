"""How a run is interrupted: SIGTERM raised as Ctrl-C is, and the steps a signal must not split.

Ctrl-C raises ``KeyboardInterrupt`` and, while ``sigterm_raises`` is in force,
SIGTERM raises ``Terminated``, so every ``finally`` and ``with`` cleans up. A
few steps must not be cut in two by either: a temporary file created but not
yet known to the code that removes it, worker processes forked but not yet
ignoring Ctrl-C. ``held`` holds both signals across such a step and delivers
them as soon as it is over.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Any, Dict, Iterator, List

# The signals that end a run; the command turns both into exceptions.
ENDING = (signal.SIGINT, signal.SIGTERM)


class Terminated(BaseException):
    """SIGTERM, raised like KeyboardInterrupt so that every ``finally`` and ``with`` cleans up."""


def _on_sigterm(signum: int, frame: Any) -> None:
    raise Terminated


def _in_main_thread() -> bool:
    # Handlers can only be set, and Python only runs them, in the main thread.
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def sigterm_raises() -> Iterator[None]:
    """SIGTERM raises ``Terminated`` inside the block (main thread only).

    From another thread the default stays: the process ends at once.
    """
    if not _in_main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    try:
        # Inside the try: a Ctrl-C landing just after the swap, before signal.signal
        # returns, must still put the old handler back.
        signal.signal(signal.SIGTERM, _on_sigterm)
        yield
    finally:
        _restore({signal.SIGTERM.value: previous})


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Ctrl-C and SIGTERM wait until the block is over, then are delivered as they came.

    Their handlers are swapped for one that notes them, which covers a signal
    that any thread of the process receives; where the system has signal masks,
    they are also blocked in this thread, so that a worker process forked or
    spawned in the block starts with them blocked until it has set its own
    dispositions (``unblock``). Outside the main thread, where no handler runs,
    the block runs as it is.
    """
    if not _in_main_thread():
        yield
        return
    noted: List[int] = []

    def note(signum: int, frame: Any) -> None:
        if signum not in noted:
            noted.append(signum)

    # Read first, swapped inside the try: a signal landing between a swap and
    # signal.signal returning must not leave ``note`` in place.
    previous: Dict[int, Any] = {signum: signal.getsignal(signum) for signum in ENDING}
    mask = None
    try:
        for signum in ENDING:
            signal.signal(signum, note)
        if hasattr(signal, "pthread_sigmask"):
            mask = signal.pthread_sigmask(signal.SIG_BLOCK, ENDING)
        yield
    finally:
        _restore(previous)
        if mask is not None:
            # A signal that arrived while blocked is delivered here, to its own handler.
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        for caught in noted:
            signal.raise_signal(caught)


def _restore(handlers: Dict[int, Any]) -> None:
    for signum, handler in handlers.items():
        if handler is not None:  # None: a handler not set from Python, left as it is
            signal.signal(signum, handler)


def unblock() -> None:
    """Let Ctrl-C and SIGTERM in again in a worker process started inside ``held``."""
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, ENDING)
