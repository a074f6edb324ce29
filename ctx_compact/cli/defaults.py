"""The options' defaults, read from the public functions that take them, so they are said once."""

from __future__ import annotations

import inspect
from typing import Any, Callable

from .. import clear_tool_results, compact


def _default(function: Callable[..., Any], name: str) -> Any:
    return inspect.signature(function).parameters[name].default


KEEP_HEAD: int = _default(compact, "keep_head")
KEEP_TAIL: int = _default(compact, "keep_tail")
# --keep-results: the most recent tool results clear_tool_results never clears.
KEEP_RESULTS: int = _default(clear_tool_results, "keep")
