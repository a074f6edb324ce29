"""One intercepted call's compaction: decided when the call starts, finished into an event.

Nothing here waits on anything, so the sync and async call paths share it; they
differ only in how they obtain the summary and call the hooks.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any, Dict, Optional, Tuple

from ctx_compact import check_pairing
from ctx_compact._engine import Compaction, check_messages, measure

from ._callables import replace
from ._events import BudgetExceededError, CompactionEvent, UnpairedMessagesError
from ._options import CompactionOptions
from ._state import calibration_factor, innermost_cache


class CallRun:
    """The compaction of one call's messages.

    Args:
        options: The checked options.
        function: The called function's qualified name, for the event.
        value: The messages as the caller passed them.
        index: Their position in ``args``, or ``None`` when passed by keyword.
        args, kwargs: The call's arguments as wrapt presents them.

    Raises:
        TypeError: ``value`` is not a list of messages.
        InvalidMessageError: A message is malformed, naming its index.
    """

    __slots__ = ("args", "calibration", "function", "index", "kwargs", "options", "plan", "started")

    def __init__(
        self,
        options: CompactionOptions,
        function: str,
        value: Any,
        index: Optional[int],
        args: Tuple[Any, ...],
        kwargs: Dict[str, Any],
    ) -> None:
        self.started = time.perf_counter()
        self.options = options
        self.function = function
        self.index = index
        self.args = args
        self.kwargs = kwargs
        # A lone message (a mapping) is iterable too, but iterating it would yield its keys.
        if isinstance(value, (str, bytes, bytearray, Mapping)) or not isinstance(value, Iterable):
            check_messages(value)  # raises the core's TypeError
        messages = list(value)
        cache = innermost_cache(options.count_tokens)
        if cache is not None:
            pre, bounds = cache.arrays(messages)
        else:
            pre, bounds = measure(messages, options.count_tokens)
        self.calibration = calibration_factor()
        self.plan = Compaction(
            messages,
            pre,
            bounds,
            # Calibrated: the estimate times the factor is what the provider will count.
            max_tokens=options.max_tokens / self.calibration,
            keep_head=options.keep_head,
            keep_tail=options.keep_tail,
            count_tokens=options.count_tokens,
        )

    @property
    def needs_summary(self) -> bool:
        """Whether something was dropped and a summarizer waits for it."""
        return self.options.summarize is not None and self.plan.cut > self.plan.head_end

    def event(self, summary: Optional[str]) -> CompactionEvent:
        """The call's event, with ``summary`` (or none) inserted."""
        options = self.options
        result = self.plan.result_with_summary(summary, options.summary_role)
        problems = tuple(check_pairing(result.messages)) if options.validate else ()
        return CompactionEvent(
            function=self.function,
            max_tokens=options.max_tokens,
            tokens_before=result.tokens_before,
            tokens_after=result.tokens_after,
            fits=result.fits,
            messages=tuple(result.messages),
            dropped=tuple(result.dropped),
            summary=result.summary,
            elapsed=time.perf_counter() - self.started,
            messages_before=len(self.plan.messages),
            problems=problems,
            calibration=self.calibration,
        )

    def arguments(self, event: CompactionEvent) -> Tuple[Tuple[Any, ...], Dict[str, Any]]:
        """The call's arguments with the compacted list, or the overflow or pairing error."""
        options = self.options
        if not event.fits and options.on_overflow == "raise":
            raise BudgetExceededError(event)
        if event.problems and options.validate == "raise":
            raise UnpairedMessagesError(event)
        # The callee gets its own list, so it cannot change the event's.
        return replace(
            self.args, self.kwargs, options.messages_arg, self.index, list(event.messages)
        )
