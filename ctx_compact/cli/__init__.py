"""The ``ctx-compact`` command line: a thin shell over the public functions."""

from __future__ import annotations

from .run import main

__all__ = ["main"]
