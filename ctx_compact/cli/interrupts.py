"""How a run is interrupted: SIGTERM raised as Ctrl-C is, and the steps neither may split.

``held`` holds both across a step that must not be cut in two (a temporary file
created but not yet known, workers started but not yet ignoring Ctrl-C).
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
    """SIGTERM raises ``Terminated`` inside the block (from another thread, it ends the process)."""
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

    A handler notes them (whichever thread receives them); they are also blocked in
    this thread, so that a worker started in the block starts with them blocked until
    it has set its own (``unblock``). Outside the main thread the block runs as it is.
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
