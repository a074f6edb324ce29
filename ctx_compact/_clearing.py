"""Clearing instead of dropping: old tool results, and thinking the provider no longer needs.

Both keep every call with its result (ids, roles and block or item types stay), so the list's
groups and pairing are what they were. An edited message is a new object made of shallow copies
along the edited path; everything else is the caller's own (docs/clearing.md). The editor,
the result finder, the writer and ``apply_options`` serve ``_truncating`` too.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import accumulate
from typing import (
    Any,
    Dict,
    FrozenSet,
    Generic,
    Iterable,
    List,
    Optional,
    Sequence,
    Set,
    Tuple,
    TypeVar,
)

from ._checks import (
    check_callable,
    check_flag,
    check_keep,
    check_max_tokens,
    check_messages,
    check_placeholder,
    check_target_tokens,
    check_tool_names,
)
from ._compact import Pin, pinned_groups
from ._defaults import KEEP_RESULTS, KEEP_TURNS, PLACEHOLDER
from ._grouping import group_bounds
from ._option_docs import with_option_docs
from ._steps import step_size, steps
from ._tokens import CountTokens, count_all, count_one, prefix_sums
from ._views import message_views
from .formats import (
    CALLS,
    MODELS,
    OPENS_TURN,
    REPLIES,
    Thinking,
    ToolCall,
    ToolResult,
    recognise,
    step,
    thinking,
)
from .formats._shapes import blocks, hashable, is_list, sdk_dump

E = TypeVar("E")


@dataclass(frozen=True)
class ClearedToolResult:
    """One tool result that ``clear_tool_results`` replaced with the placeholder.

    Attributes:
        index: The position of the message (or Responses item) holding the result.
        call_id: The id pairing it with its call: a Chat ``tool_call_id``, an
            Anthropic ``tool_use_id`` or a Responses ``call_id``.
        tool: The tool's name, read from the matching call (``None`` when no call
            before the result has that id).
        call_index: The position of the message or item holding the call, or ``None``.
        input_cleared: Whether the call's arguments were cleared too (``clear_inputs``).
    """

    index: int
    call_id: Any
    tool: Optional[str]
    call_index: Optional[int]
    input_cleared: bool


@dataclass(frozen=True)
class ClearedThinking:
    """One thinking block, thought part or reasoning item that ``clear_thinking`` removed.

    Attributes:
        index: The position, in the input, of the message holding the block, or of
            the Responses ``reasoning`` item.
        kind: ``"thinking"``, ``"redacted_thinking"`` (Anthropic blocks),
            ``"reasoningContent"`` (a Bedrock Converse block), ``"thought"`` (a
            Gemini part) or ``"reasoning"`` (a Responses item).
        block: The block's position in the message's content (a Gemini content's
            ``parts``); ``None`` for a ``reasoning`` item, which is removed whole.
    """

    index: int
    kind: str
    block: Optional[int]


@dataclass(frozen=True)
class ClearResult(Generic[E]):
    """What ``clear_tool_results`` and ``clear_thinking`` return.

    Attributes:
        messages: The new list: edited messages are new objects, every other
            message is the caller's own object, in order.
        cleared: What was cleared, oldest first (``ClearedToolResult`` or
            ``ClearedThinking`` entries).
        tokens_before: Summed estimated tokens of the input list.
        tokens_after: Summed estimated tokens of ``messages``.
        fits: ``tokens_after <= max_tokens`` (``True`` when no budget was given).
    """

    messages: List[Any]
    cleared: List[E]
    tokens_before: int
    tokens_after: int
    fits: bool


# --- where the tool calls and results are ----------------------------------------


@dataclass(frozen=True)
class FoundResult:
    """A tool result with the call it answers, and what clearing it writes."""

    found: ToolResult
    call: Optional[ToolCall]
    clearable: bool  # has content, other than the placeholder, that may be replaced
    written: Any  # what the content becomes: a format's own shape, or the placeholder text

    @property
    def tool(self) -> Optional[str]:
        return None if self.call is None else self.call.name

    @property
    def call_index(self) -> Optional[int]:
        return None if self.call is None else self.call.index


def _written(result: ToolResult, placeholder: str) -> Tuple[Any, bool]:
    """What clearing ``result`` writes, and whether that takes anything off.

    Nothing is taken off a missing, empty or placeholder result, a string no longer than
    the placeholder, or one already in a format's own shape of it (a Gemini response
    object, a Converse block list, a shell call's output chunks).
    """
    value = result.value
    if result.wrap is None:
        if value is None:
            return placeholder, False
        if isinstance(value, str):
            return placeholder, len(value) > len(placeholder)
        return placeholder, not (is_list(value) and not value)
    written = result.wrap(placeholder)
    if value is None or value == written:
        return written, False
    try:
        return written, len(json.dumps(value, default=str)) > len(json.dumps(written))
    except (TypeError, ValueError, RecursionError):
        return written, True


def find_results(
    views: Sequence[Mapping[str, Any]], placeholder: Optional[str]
) -> List[FoundResult]:
    """Every tool result in order, each with the call it answers (the latest one with its id),
    read by the format that recognises its message (which refuses what none does). Without
    a ``placeholder``, what clearing would write is not worked out (``written`` is ``None``)."""
    calls: Dict[Any, ToolCall] = {}
    results: List[FoundResult] = []
    for i, view in enumerate(views):
        fmt = recognise(view, i)
        if fmt is None:
            continue
        for call in fmt.tool_calls(view, i):
            own, *others = call.ids
            own = hashable(own)
            if own is not None:
                calls[own] = call
            for other in others:  # another id it may be answered by
                calls.setdefault(hashable(other), call)
        for result in fmt.tool_results(view, i):
            written, clearable = (
                (None, False) if placeholder is None else _written(result, placeholder)
            )
            answered = calls.get(hashable(result.call_id))
            results.append(FoundResult(result, answered, clearable, written))
    return results


# --- editing, along the edited path only ----------------------------------------


class Editor:
    """New message objects for the edited messages; the caller's stay untouched.

    Every container reached through ``message``/``content``/``entry`` is a copy
    this object made, so it may be changed in place.
    """

    def __init__(self, messages: Sequence[Any], views: Sequence[Mapping[str, Any]]) -> None:
        self.messages = messages
        self.views = views
        self.edited: Dict[int, Dict[str, Any]] = {}
        self._copied: Set[Tuple[Any, ...]] = set()

    def message(self, i: int) -> Dict[str, Any]:
        message = self.edited.get(i)
        if message is None:
            # A mapping is copied as the caller wrote it, so that what is not
            # edited (an SDK block beside a cleared one) stays the caller's object.
            own = self.messages[i]
            message = self.edited[i] = dict(own if isinstance(own, Mapping) else self.views[i])
        return message

    def _copy(self, mark: Tuple[Any, ...], holder: Any, key: Any, make: Any) -> Any:
        """``holder[key]`` replaced by ``make(holder[key])`` once (``mark`` says it was)."""
        if mark not in self._copied:
            holder[key] = make(holder[key])
            self._copied.add(mark)
        return holder[key]

    def items(self, i: int, key: str) -> List[Any]:
        """The message's ``key`` list (content or tool_calls), copied once."""
        return self._copy((i, key), self.message(i), key, list)  # type: ignore[no-any-return]

    def held(self, i: int, key: str, k: Optional[int], inner: Optional[str]) -> Dict[str, Any]:
        """A copy of what holds a call or a result: message ``i`` itself (``k`` is ``None``),
        its block ``k`` in its ``key`` list (an SDK block, part or call as its JSON, as the
        message's view holds it or as the SDK sends it), or the object under ``inner`` in that
        block (a Converse ``toolResult``, a Gemini ``function_response``)."""
        if k is None:
            return self.message(i)

        def copied(view: Any) -> Dict[str, Any]:
            if not isinstance(view, Mapping):
                view = blocks(self.views[i])[k] if key == "content" else self.views[i][key][k]
                view = view if isinstance(view, Mapping) else sdk_dump(view)
            return dict(view)

        block: Dict[str, Any] = self._copy((i, key, k), self.items(i, key), k, copied)
        if inner is None:
            return block
        return self._copy((i, key, k, inner), block, inner, dict)  # type: ignore[no-any-return]


def write_result(editor: Editor, result: FoundResult) -> None:
    """Write ``result.written`` where the result's content is, in ``editor``'s copies."""
    found = result.found
    editor.held(found.index, found.items, found.block, found.inner)[found.field] = result.written


def _clear_input(editor: Editor, call: ToolCall, placeholder: str) -> bool:
    """Clear a call's arguments where its format gives them a place (``ToolCall.arguments``)."""
    if not call.arguments:
        return False  # the call is its own input: nothing may replace it
    position = None if call.where == "item" else call.position
    held = editor.held(call.index, call.where, position, call.inner)
    *path, last = call.arguments
    for key in path:
        inner = held.get(key)
        # An SDK object in the caller's dict (a Chat tool call's Function) is edited as
        # its JSON, as the format read it.
        inner = inner if isinstance(inner, Mapping) else sdk_dump(inner)
        if not isinstance(inner, Mapping):
            return False  # nothing to clear there
        held[key] = dict(inner)
        held = held[key]
    empty = call.no_arguments
    held[last] = (
        placeholder if empty is None else dict(empty) if isinstance(empty, Mapping) else empty
    )
    return True


def edited_list(messages: Sequence[Any], edited: Mapping[int, Any]) -> List[Any]:
    """``messages`` with the edited ones in their places, as a new list."""
    return [edited.get(i, message) for i, message in enumerate(messages)]


@dataclass(frozen=True)
class ToolResultClearing:
    """The checked options of ``clear_tool_results``, and the clearing itself.

    Build it with ``ToolResultClearing.checked(...)`` to validate user-given options
    once (for example when a decorator is applied), then call ``apply`` per call.
    """

    keep: int = KEEP_RESULTS
    exclude_tools: FrozenSet[str] = frozenset()
    placeholder: str = PLACEHOLDER
    clear_inputs: bool = False

    @classmethod
    def checked(
        cls,
        *,
        keep: object = KEEP_RESULTS,
        exclude_tools: object = (),
        placeholder: object = PLACEHOLDER,
        clear_inputs: object = False,
    ) -> ToolResultClearing:
        """Validate the options (as ``clear_tool_results`` does); errors name the option."""
        return cls(
            keep=check_keep(keep, "keep"),
            exclude_tools=check_tool_names(exclude_tools),
            placeholder=check_placeholder(placeholder),
            clear_inputs=check_flag(clear_inputs, "clear_inputs"),
        )

    def apply(
        self,
        messages: Sequence[Any],
        views: Sequence[Mapping[str, Any]],
        counts: Sequence[int],
        *,
        max_tokens: float,
        count_tokens: Optional[CountTokens],
        target_tokens: Optional[float] = None,
        protected: Iterable[int] = (),
    ) -> Tuple[ClearResult[ClearedToolResult], List[int]]:
        """Clear the oldest results until the total fits, from the messages' ``views`` and
        ``counts`` (edited messages are counted again with ``count_tokens``), with the checked
        ``max_tokens`` and ``target_tokens`` (see ``clear_tool_results``); the results of the
        ``protected`` messages (pinned ones) are never cleared.

        Returns:
            The result and the token count of each message of ``result.messages``.
            The group boundaries of the output are those of the input.
        """
        counts = list(counts)
        before = total = sum(counts)
        cleared: List[ClearedToolResult] = []
        editor = Editor(messages, views)
        results = find_results(views, self.placeholder)  # validates, even when it fits
        shielded = set(protected)
        results = [r for r in results if r.found.index not in shielded] if shielded else results
        if total > max_tokens:
            clearable, goal = self._clearable(results, counts, max_tokens, target_tokens)
            for result in clearable:
                if total <= goal:
                    break
                done, change = self._clear(editor, result, counts, count_tokens)
                cleared.append(done)
                total += change
        out = edited_list(messages, editor.edited)
        return ClearResult(out, cleared, before, total, total <= max_tokens), counts

    def _clear(
        self,
        editor: Editor,
        result: FoundResult,
        counts: List[int],
        count_tokens: Optional[CountTokens],
    ) -> Tuple[ClearedToolResult, int]:
        """Clear one result (and its call's input, with ``clear_inputs``); the change in tokens."""
        write_result(editor, result)
        call = result.call
        touched = [result.found.index]
        input_cleared = False
        if self.clear_inputs and call is not None:
            input_cleared = _clear_input(editor, call, self.placeholder)
            if input_cleared:
                touched.append(call.index)
        found = result.found
        cleared = ClearedToolResult(
            found.index, found.call_id, result.tool, result.call_index, input_cleared
        )
        return cleared, sum(_recount(editor, i, counts, count_tokens) for i in touched)

    def _clearable(
        self,
        results: List[FoundResult],
        counts: List[int],
        max_tokens: float,
        target_tokens: Optional[float],
    ) -> Tuple[List[FoundResult], float]:
        """The results that may be cleared, oldest first, and the total to clear down to."""
        goal = max_tokens
        step = step_size(max_tokens, target_tokens)
        if step:
            # The step rule's reduction, from the results of the prefix that
            # made it: the same ones on every call until the cut moves.
            taken, began = steps(prefix_sums(counts), max_tokens, step)
            goal = sum(counts) - taken
            results = [r for r in results if r.found.index < began]
        older = results[: max(len(results) - self.keep, 0)]
        return [r for r in older if r.clearable and r.tool not in self.exclude_tools], goal


def _recount(editor: Editor, i: int, counts: List[int], count_tokens: Optional[CountTokens]) -> int:
    """Count edited message ``i`` again, in ``counts``; the change in tokens."""
    new = count_one(editor.edited[i], count_tokens, i)
    change = new - counts[i]
    counts[i] = new
    return change


@with_option_docs(
    keep="How many of the most recent tool results are never cleared.",
    exclude_tools="Names of tools whose results are never cleared. A result's tool is named "
    "by the latest call before it with its id (a built-in tool's by the call's item type, "
    'such as ``"shell_call"``); a result with no such call is never excluded.',
    placeholder="The text a cleared result's content is replaced with.",
    clear_inputs="Also clear the arguments of the calls whose results are cleared (to "
    '``"{}"``, ``{}`` or ``placeholder``, as each format takes them).',
    target_tokens="``None`` (the default) to clear until the total fits; a number up to "
    "``max_tokens`` to clear in steps.",
    pin="``None``, or a predicate ``(message) -> bool``: the results in the group of a "
    "message it accepts are never cleared (as ``compact`` never drops them).",
)
def clear_tool_results(
    messages: Sequence[Any],
    *,
    max_tokens: float,
    keep: int = KEEP_RESULTS,
    exclude_tools: Iterable[str] = (),
    placeholder: str = PLACEHOLDER,
    clear_inputs: bool = False,
    count_tokens: Optional[CountTokens] = None,
    target_tokens: Optional[float] = None,
    pin: Optional[Pin] = None,
) -> ClearResult[ClearedToolResult]:
    """Replace the content of the oldest tool results with ``placeholder`` until it fits.

    Results are cleared oldest first while the total exceeds ``max_tokens``, in every format
    (docs/clearing.md lists what a result's content is in each, and the Responses outputs that
    are never cleared). The ``keep`` most recent results are never cleared, nor results of the
    tools in ``exclude_tools``, nor results with nothing to save (empty, or no longer than the
    placeholder: clearing twice changes nothing). Nothing is dropped: if clearing alone cannot
    reach the budget, ``fits`` is ``False`` and the caller may ``compact`` the result, whose
    grouping is the input's. With ``target_tokens``, clearing goes in steps, as ``compact``'s
    cut does, so that the same results are cleared on every call until the history has grown
    by more than ``max_tokens - target_tokens`` (docs/prompt-cache.md).

    Returns:
        A ``ClearResult`` whose ``cleared`` lists a ``ClearedToolResult`` per
        cleared result. Edited messages are new objects (an edited SDK object
        becomes its edited JSON mapping); every other message is the caller's own.

    Raises:
        TypeError: ``max_tokens`` is not a finite positive number, ``keep`` is not
            an int, ``exclude_tools`` is a string or holds a non-string,
            ``placeholder`` is not a string, ``clear_inputs`` is not a bool,
            ``count_tokens`` or ``pin`` is not callable, or ``messages`` is not a sequence.
        ValueError: ``keep`` is negative, ``placeholder`` is empty, or
            ``target_tokens`` is more than ``max_tokens``.
        InvalidMessageError: A message is malformed or cannot be counted; the
            error names its index.
    """
    budget = check_max_tokens(max_tokens)
    target = check_target_tokens(target_tokens, budget)
    check_callable(count_tokens, "count_tokens")
    options = ToolResultClearing.checked(
        keep=keep, exclude_tools=exclude_tools, placeholder=placeholder, clear_inputs=clear_inputs
    )
    return apply_options(
        options, messages, count_tokens, pin, max_tokens=budget, target_tokens=target
    )


def apply_options(
    options: Any, messages: object, count_tokens: Any, pin: Optional[Pin], **limits: Any
) -> ClearResult[Any]:
    """``options.apply`` to the checked messages, counted once: a ``clear_*`` or ``truncate_*``
    function's result (the results and thinking in a group ``pin`` holds are protected), ``pin``
    checked first."""
    check_callable(pin, "pin")
    msgs = check_messages(messages)
    views = message_views(msgs)
    counts = count_all(views, count_tokens)
    if pin is not None:
        limits["protected"] = pinned_groups(msgs, group_bounds(views), pin)
    result: ClearResult[Any] = options.apply(
        msgs, views, counts, count_tokens=count_tokens, **limits
    )[0]
    return result


# --- thinking -------------------------------------------------------------------


def _find_thinking(
    views: Sequence[Mapping[str, Any]], keep_turns: int
) -> List[Tuple[int, Thinking]]:
    """The thinking that may be cleared, oldest first, with the index of its message."""
    steps = [step(view) for view in views]
    turns = list(accumulate(int(kind == OPENS_TURN) for kind in steps))  # each message's turn
    held = [
        (i, item)
        for i, kind in enumerate(steps)
        if kind in MODELS and (item := thinking(views, i)) is not None
    ]
    kept = _kept_turns(steps, turns, held, keep_turns)
    return [
        (i, item)
        for i, item in held
        if (item.blocks or item.item is not None) and turns[i] not in kept
    ]


def _kept_turns(
    steps: Sequence[str], turns: Sequence[int], held: List[Tuple[int, Thinking]], keep_turns: int
) -> Set[int]:
    """The ``keep_turns`` latest turns holding thinking, and the last turn when it is a tool
    loop in progress: the model's last step in it calls tools (or is an output the model has
    yet to read), so the next request continues it."""
    with_thinking = sorted({turns[i] for i, _ in held})
    kept = set(with_thinking[len(with_thinking) - keep_turns :])
    for kind in reversed(steps):
        if kind in (CALLS, REPLIES, OPENS_TURN):
            if kind == CALLS:
                kept.add(turns[-1])
            break
    return kept


def _clear_one(
    editor: Editor,
    i: int,
    thought: Thinking,
    counts: List[int],
    count_tokens: Optional[CountTokens],
    removed: Set[int],
) -> Tuple[int, List[ClearedThinking]]:
    """Clear one message's thinking: the change in tokens, and what was cleared. A message
    that is thinking itself (a reasoning item) goes whole: its index joins ``removed``."""
    if thought.item is not None:
        removed.add(i)
        return -counts[i], [ClearedThinking(i, thought.item, None)]
    positions = {k for k, _ in thought.blocks}
    content = editor.items(i, thought.items)
    editor.message(i)[thought.items] = [b for k, b in enumerate(content) if k not in positions]
    change = _recount(editor, i, counts, count_tokens)
    return change, [ClearedThinking(i, kind, k) for k, kind in thought.blocks]


@dataclass(frozen=True)
class ThinkingClearing:
    """The checked options of ``clear_thinking``, and the clearing itself."""

    keep_turns: int = KEEP_TURNS

    @classmethod
    def checked(cls, *, keep_turns: object = KEEP_TURNS) -> ThinkingClearing:
        """Validate the options; errors name the option."""
        return cls(keep_turns=check_keep(keep_turns, "keep_turns"))

    def apply(
        self,
        messages: Sequence[Any],
        views: Sequence[Mapping[str, Any]],
        counts: Sequence[int],
        *,
        max_tokens: Optional[float],
        count_tokens: Optional[CountTokens],
        protected: Iterable[int] = (),
    ) -> Tuple[ClearResult[ClearedThinking], List[int]]:
        """Clear the thinking of earlier turns, as ``ToolResultClearing.apply`` clears results;
        ``max_tokens``: stop once the total fits (``None`` clears all that may be). The
        thinking of the ``protected`` messages (pinned ones) is never cleared.

        Returns:
            The result and the token count of each message of ``result.messages``
            (removed reasoning items are gone from both).
        """
        goal = -math.inf if max_tokens is None else max_tokens  # None: clear all that may be
        counts = list(counts)
        before = total = sum(counts)
        cleared: List[ClearedThinking] = []
        editor = Editor(messages, views)
        removed: Set[int] = set()
        shielded = set(protected)
        for i, item in _find_thinking(views, self.keep_turns) if total > goal else ():
            if total <= goal:
                break
            if i in shielded:  # still a turn with thinking for keep_turns; only not cleared
                continue
            change, done = _clear_one(editor, i, item, counts, count_tokens, removed)
            total += change
            cleared.extend(done)
        out = [m for i, m in enumerate(edited_list(messages, editor.edited)) if i not in removed]
        counts = [c for i, c in enumerate(counts) if i not in removed]
        fits = max_tokens is None or total <= max_tokens
        return ClearResult(out, cleared, before, total, fits), counts


@with_option_docs(
    keep_turns="How many of the most recent turns holding thinking keep it.",
    max_tokens="When given, clear oldest first only until the total fits it (nothing when it "
    "already fits: cleared thinking changes the prompt's prefix and so the provider's prompt "
    "cache). ``None``, the default, clears everything that may be cleared.",
    pin="``None``, or a predicate ``(message) -> bool``: the thinking in the group of a "
    "message it accepts is never cleared (as ``compact`` never drops it).",
)
def clear_thinking(
    messages: Sequence[Any],
    *,
    keep_turns: int = KEEP_TURNS,
    max_tokens: Optional[float] = None,
    count_tokens: Optional[CountTokens] = None,
    pin: Optional[Pin] = None,
) -> ClearResult[ClearedThinking]:
    """Remove the thinking of earlier turns, in every format that carries it.

    Thinking is Anthropic ``thinking`` and ``redacted_thinking`` blocks, Bedrock
    ``reasoningContent`` blocks, Gemini thought parts and Responses ``reasoning``
    items. A turn starts at a user's own message (one carrying no tool results) and
    holds everything the model did in answer to it. The thinking of the ``keep_turns``
    most recent turns that hold any is kept, and, whatever ``keep_turns`` says, what
    a provider requires back: the thinking of a tool loop in progress, a reasoning
    item followed by an item carrying its id, a Gemini part holding a
    ``thought_signature`` or a call, and thinking that is all its message holds
    (docs/clearing.md). Blocks and parts go from a new copy of their message; a
    ``reasoning`` item goes from the list, so ``messages`` may be shorter than the input.

    Returns:
        A ``ClearResult`` whose ``cleared`` lists a ``ClearedThinking`` per
        removed block or item (indices into the input).

    Raises:
        TypeError: ``keep_turns`` is not an int, ``max_tokens`` is given and is not
            a finite positive number, ``count_tokens`` or ``pin`` is not callable, or
            ``messages`` is not a sequence.
        ValueError: ``keep_turns`` is negative.
        InvalidMessageError: A message is malformed or cannot be counted; the
            error names its index.
    """
    budget = None if max_tokens is None else check_max_tokens(max_tokens)
    check_callable(count_tokens, "count_tokens")
    options = ThinkingClearing.checked(keep_turns=keep_turns)
    return apply_options(options, messages, count_tokens, pin, max_tokens=budget)
