"""The ``ctx-compact`` command line: a thin shell over the public functions.

It parses (``args``), reads (``io``, ``json``), calls ``compact`` or
``check_pairing`` on each conversation (``work``, in this process or in
``--jobs`` workers, ``jobs``) and writes what comes back, reporting progress
(``progress``); ``run`` is the loop over a run and the exit status it ends with.
"""

from __future__ import annotations

from .run import main

__all__ = ["main"]
