"""Cutting an oversized tool result down to a head and a tail around one marker.

A text result keeps its start and its end; a structured one (a Gemini response object, a
Bedrock or Anthropic block list, Responses shell chunks) has its longest strings cut, so it
keeps the shape its provider requires, and the media in it is only counted. Ids, roles and
types stay, so grouping and pairing are the input's (docs/truncation.md).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import (
    Any,
    Callable,
    Dict,
    FrozenSet,
    Iterable,
    List,
    Optional,
    Sequence,
    Tuple,
    Union,
)

from ._checks import check_callable, check_keep, check_tool_names, must
from ._clearing import (
    ClearResult,
    Editor,
    FoundResult,
    apply_options,
    edited_list,
    find_results,
    write_result,
)
from ._compact import Pin
from ._defaults import KEEP_RATIO, TRUNCATION_MARKER
from ._media import part_media
from ._option_docs import with_option_docs
from ._tokens import CountTokens, count_one
from ._views import message_views
from .formats._shapes import replace_paths

Offload = Callable[[str, Optional[str], Any], str]
Path = Tuple[Any, ...]

# Strings no longer than this (plus the marker) are never cut: ids, types and short
# fields, where a cut saves nothing and could break what a provider reads.
SHORT = 64
# Rounds of recounting before a result is left as cut as it may be; each round cuts at
# least what the last one found over the cap, so two are usual.
ROUNDS = 24


@dataclass(frozen=True)
class TruncatedToolResult:
    """One tool result that ``truncate_tool_results`` cut.

    Attributes:
        index: The position of the message (or Responses item) holding the result.
        call_id: The id pairing it with its call.
        tool: The tool's name, read from the matching call (``None`` when no call
            before the result has that id).
        call_index: The position of the message or item holding the call, or ``None``.
        tokens_before: What the result's content added to its message's count before.
        tokens_after: The same, after the cut (the marker included).
        chars_cut: How many characters were cut, in all of its strings.
        offloaded: What ``offload`` returned for it (a path, a URL, a key), or ``None``.
    """

    index: int
    call_id: Any
    tool: Optional[str]
    call_index: Optional[int]
    tokens_before: int
    tokens_after: int
    chars_cut: int
    offloaded: Optional[str]


def _check_caps(value: object) -> Union[int, Dict[str, int]]:
    if not isinstance(value, Mapping):
        if isinstance(value, bool) or not isinstance(value, int):
            raise must(
                "max_result_tokens",
                'a positive int, or a mapping of tool names (and "*") to ints',
                value,
            )
        return check_keep(value, "max_result_tokens", positive=True)
    caps: Dict[str, int] = {}
    for tool, tokens in value.items():
        if not isinstance(tool, str):
            raise must("max_result_tokens", 'a mapping of tool names (and "*") to ints', tool)
        caps[tool] = check_keep(tokens, f"max_result_tokens[{tool}]", positive=True)
    return caps


def _check_ratio(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise must("keep_ratio", "a number from 0 to 1", value)
    if not 0 <= value <= 1:
        raise must("keep_ratio", "a number from 0 to 1", value, ValueError)
    return float(value)


def _check_marker(value: object) -> str:
    if not isinstance(value, str):
        raise must("marker", "a string", value)
    try:
        written = value.format(chars=0, tokens=0, where="")
    except (KeyError, IndexError, ValueError) as exc:
        raise must(
            "marker", "a template using only {chars}, {tokens} and {where}", value, ValueError
        ) from exc
    if not written.strip():
        raise must("marker", "a template that writes some text", value, ValueError)
    return value


# --- the strings a cut may shorten ----------------------------------------------


def _strings(value: Any, shortest: int) -> List[Tuple[Path, str]]:
    """Every string of ``value`` longer than ``shortest``, in order, with its path; media
    parts (an image or a document a format reads in the result) are passed over whole."""
    found: List[Tuple[Path, str]] = []
    stack: List[Tuple[Path, Any]] = [((), value)]
    while stack:
        path, held = stack.pop()
        if isinstance(held, str):
            if len(held) > shortest:
                found.append((path, held))
        elif isinstance(held, Mapping):
            if path and part_media(held) is not None:
                continue
            stack.extend(((*path, k), v) for k, v in reversed(list(held.items())))
        elif isinstance(held, (list, tuple)):
            stack.extend(((*path, k), v) for k, v in reversed(list(enumerate(held))))
    return found


def _level(lengths: Sequence[int], keep: float) -> int:
    """The longest length every string may keep so that together they keep at most ``keep``
    characters, the shorter ones whole (cutting the longest first)."""
    remaining, left = keep, len(lengths)
    for length in sorted(lengths):
        if length * left <= remaining:
            remaining -= length
            left -= 1
        else:
            return int(remaining // left)
    return max(lengths, default=0)


# --- the cut ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Cut:
    """How one result's strings are cut to keep a number of characters."""

    value: Any
    strings: List[Tuple[Path, str]]
    ratio: float
    marker: str
    where: str
    per_char: float  # the result's tokens per character of its strings, for the marker

    def at(self, keep: int) -> Tuple[Any, int]:
        """The value keeping about ``keep`` characters of its strings, and the characters cut."""
        level = _level([len(s) for _, s in self.strings], keep)
        new: Dict[Path, str] = {}
        cut = 0
        for path, text in self.strings:
            if len(text) > level:
                gone = len(text) - level
                head = round(level * self.ratio)
                tokens = math.ceil(gone * self.per_char)
                mark = self.marker.format(chars=gone, tokens=tokens, where=self.where)
                new[path] = text[:head] + mark + text[len(text) - (level - head) :]
                cut += gone
        return (replace_paths(self.value, new) if new else self.value), cut


def _full_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def _empty(value: Any) -> Any:
    """What stands for a result's content when its own tokens are measured."""
    if isinstance(value, str):
        return ""
    return {} if isinstance(value, Mapping) else []


@dataclass(frozen=True)
class ToolResultTruncation:
    """The checked options of ``truncate_tool_results``, and the cutting itself.

    Build it with ``ToolResultTruncation.checked(...)`` to validate user-given options
    once, then call ``apply`` per call.
    """

    max_result_tokens: Union[int, Mapping[str, int]]
    exclude_tools: FrozenSet[str] = frozenset()
    keep_ratio: float = KEEP_RATIO
    marker: str = TRUNCATION_MARKER
    offload: Optional[Offload] = None

    @classmethod
    def checked(
        cls,
        *,
        max_result_tokens: object,
        exclude_tools: object = (),
        keep_ratio: object = KEEP_RATIO,
        marker: object = TRUNCATION_MARKER,
        offload: object = None,
    ) -> ToolResultTruncation:
        """Validate the options (as ``truncate_tool_results`` does); errors name the option."""
        check_callable(offload, "offload")
        return cls(
            max_result_tokens=_check_caps(max_result_tokens),
            exclude_tools=check_tool_names(exclude_tools),
            keep_ratio=_check_ratio(keep_ratio),
            marker=_check_marker(marker),
            offload=offload,  # type: ignore[arg-type]
        )

    def cap(self, tool: Optional[str]) -> Optional[int]:
        """The most tokens a result of ``tool`` may take, or ``None`` for no cap."""
        caps = self.max_result_tokens
        if not isinstance(caps, Mapping):
            return caps
        return caps.get(tool, caps.get("*")) if tool is not None else caps.get("*")

    def apply(
        self,
        messages: Sequence[Any],
        views: Sequence[Mapping[str, Any]],
        counts: Sequence[int],
        *,
        count_tokens: Optional[CountTokens],
        protected: Iterable[int] = (),
    ) -> Tuple[ClearResult[TruncatedToolResult], List[int]]:
        """Cut every result over its cap, from already-computed counts.

        Args:
            messages: The caller's list.
            views: Their mapping views (``message_views(messages)``).
            counts: Each message's token count, in order.
            count_tokens: The counter the counts came from (edited messages are
                counted again with it).
            protected: Indices of messages whose results are never cut (pinned ones).

        Returns:
            The result (``fits``: every capped result is now within its cap) and
            the token count of each message of ``result.messages``.
        """
        counts = list(counts)
        before = sum(counts)
        editor = Editor(messages, views)
        done: List[TruncatedToolResult] = []
        fits = True
        for result in self._cuttable(views, protected):
            cap = self.cap(result.tool)
            if cap is None:
                continue
            cut, tokens = self._truncate(editor, result, cap, counts, count_tokens)
            if cut is not None:
                done.append(cut)
            fits = fits and tokens <= cap
        outcome = ClearResult(edited_list(messages, editor.edited), done, before, sum(counts), fits)
        return outcome, counts

    def _cuttable(
        self, views: Sequence[Mapping[str, Any]], protected: Iterable[int]
    ) -> List[FoundResult]:
        """The results with content, but those of ``exclude_tools`` and of ``protected``."""
        shielded = set(protected)
        return [
            result
            for result in find_results(views, None)
            if result.found.value
            and result.found.index not in shielded
            and result.tool not in self.exclude_tools
        ]

    def _truncate(
        self,
        editor: Editor,
        result: FoundResult,
        cap: int,
        counts: List[int],
        count_tokens: Optional[CountTokens],
        earlier: Optional[TruncatedToolResult] = None,
    ) -> Tuple[Optional[TruncatedToolResult], int]:
        """Cut one result to its cap if it is over it (``None`` if not or if nothing in it
        may be cut), recounting its message until the cut is enough or nothing more may
        go; and the result's tokens in the end. ``earlier``: this result's last cut, when
        it is cut again to a lower cap (from its whole content, offloaded once)."""
        found = result.found
        i = found.index
        base = _counted_as(editor, result, _empty(found.value), count_tokens)
        now = counts[i] - base
        own = now if earlier is None else earlier.tokens_before
        strings = _strings(found.value, SHORT + len(self.marker)) if now > cap else []
        chars = sum(len(s) for _, s in strings)
        if not chars:
            return None, now  # within its cap, or nothing a cut may shorten (media alone)
        offloaded = None if earlier is None else earlier.offloaded
        if earlier is None and self.offload is not None:
            offloaded = self.offload(_full_text(found.value), result.tool, found.call_id)
            if not isinstance(offloaded, str):
                raise must(
                    "offload", "a callable returning a string (a path, a URL, a key)", offloaded
                )
        where = "" if offloaded is None else f"; the whole output: {offloaded}"
        cutter = _Cut(found.value, strings, self.keep_ratio, self.marker, where, own / chars)
        keep = chars * cap // own
        for _ in range(ROUNDS):
            value, cut = cutter.at(keep)
            total = _counted_as(editor, result, value, count_tokens)
            over = total - base - cap
            if over <= 0 or keep == 0:
                break
            keep = max(0, keep - max(1, math.ceil(over / cutter.per_char)))
        write_result(editor, replace(result, written=value))
        counts[i] = total
        truncated = TruncatedToolResult(
            index=i,
            call_id=found.call_id,
            tool=result.tool,
            call_index=result.call_index,
            tokens_before=own,
            tokens_after=total - base,
            chars_cut=cut,
            offloaded=offloaded,
        )
        return truncated, truncated.tokens_after

    def fit(
        self,
        messages: Sequence[Any],
        counts: Sequence[int],
        max_tokens: float,
        count_tokens: Optional[CountTokens],
        protected: Iterable[int] = (),
    ) -> Tuple[ClearResult[TruncatedToolResult], List[int]]:
        """The last resort: cut the largest results just enough for the total to fit.

        The results (but those of ``exclude_tools`` and of the ``protected`` messages,
        such as pinned ones) are brought down to one common size, the largest first, as
        far as the total is over ``max_tokens``, and again while the markers keep it over;
        ``max_result_tokens`` is not read. ``fits``: the total fits ``max_tokens``.
        """
        views = message_views(messages)
        counts = list(counts)
        before = sum(counts)
        editor = Editor(messages, views)
        results = self._cuttable(views, protected)
        done: Dict[int, TruncatedToolResult] = {}
        sizes = [
            counts[r.found.index] - _counted_as(editor, r, _empty(r.found.value), count_tokens)
            for r in results
        ]
        for _ in range(ROUNDS):
            excess = sum(counts) - max_tokens
            if excess <= 0:
                break
            # The common size the larger ones come down to for ``excess`` to go (1 at least).
            level = max(1, _level(sizes, sum(sizes) - excess))
            moved = False
            for k, result in enumerate(results):
                if sizes[k] <= level:
                    continue
                cut, sizes[k] = self._truncate(
                    editor, result, level, counts, count_tokens, done.get(k)
                )
                if cut is not None:
                    done[k] = cut
                    moved = True
            if not moved:
                break
        total = sum(counts)
        cuts = [done[k] for k in sorted(done)]
        outcome = ClearResult(
            edited_list(messages, editor.edited), cuts, before, total, total <= max_tokens
        )
        return outcome, counts


def _counted_as(
    editor: Editor, result: FoundResult, value: Any, count_tokens: Optional[CountTokens]
) -> int:
    """The count of the result's message as edited so far, with ``value`` as its content."""
    i = result.found.index
    own = editor.edited.get(i, editor.messages[i])
    trial = Editor({i: own}, {i: editor.views[i]})  # type: ignore[arg-type]
    write_result(trial, replace(result, written=value))
    return count_one(trial.edited[i], count_tokens, i)


@with_option_docs(
    max_result_tokens="The most tokens a result may take: an int for every tool, or a mapping "
    'of tool names to ints in which ``"*"`` stands for the tools it does not name (without '
    '``"*"``, their results are not cut). A result\'s tokens are what its content adds to its '
    "message's count.",
    exclude_tools="Names of tools whose results are never cut. A result's tool is named by "
    "the latest call before it with its id; a result with no such call is never excluded.",
    keep_ratio="The share of the kept characters that goes to the head (the rest to the tail).",
    marker="The text that stands for the cut part: a template in which ``{chars}`` is the "
    "number of characters cut, ``{tokens}`` about how many tokens they held, and ``{where}`` "
    'empty, or ``"; the whole output: "`` and what ``offload`` returned.',
    offload="``None``, or ``(full_text, tool_name, call_id) -> str`` called once for each "
    "result that is cut, with its whole content as text (a structured result as JSON); what "
    "it returns (a path, a URL, a key) goes into the marker, so an agent can read the rest "
    "with a tool of its own. What it raises reaches the caller.",
    pin="``None``, or a predicate ``(message) -> bool``: the results in the group of a "
    "message it accepts are never cut (as ``compact`` never drops them).",
)
def truncate_tool_results(
    messages: Sequence[Any],
    *,
    max_result_tokens: Union[int, Mapping[str, int]],
    exclude_tools: Iterable[str] = (),
    keep_ratio: float = KEEP_RATIO,
    marker: str = TRUNCATION_MARKER,
    offload: Optional[Offload] = None,
    count_tokens: Optional[CountTokens] = None,
    pin: Optional[Pin] = None,
) -> ClearResult[TruncatedToolResult]:
    """Cut every tool result over ``max_result_tokens`` to a head and a tail around one marker.

    A text result (JSON text included) keeps its first and last characters, as many as
    keep it within its cap. A structured result (a Gemini ``response`` object, a Bedrock
    ``toolResult`` content list, an Anthropic block list, Responses shell chunks) has its
    longest strings cut, each around a marker of its own, so it keeps the shape its
    provider requires; images and documents in it are never cut, only counted, and a
    result that cannot be brought within its cap is cut as far as it may be (``fits`` is
    then ``False``). Ids, roles, types and pairing are untouched; the same input is always
    cut the same way, so a provider's prompt cache keeps hitting (docs/truncation.md).

    Returns:
        A ``ClearResult`` whose ``cleared`` lists a ``TruncatedToolResult`` per cut
        result, in order, and whose ``fits`` says whether every capped result is now
        within its cap. Edited messages are new objects (an edited SDK object becomes
        its edited JSON mapping); every other message is the caller's own.

    Raises:
        TypeError: ``max_result_tokens`` is not an int or a mapping of names to ints,
            ``exclude_tools`` is a string or holds a non-string, ``keep_ratio`` is not a
            number, ``marker`` is not a string, ``offload``, ``count_tokens`` or ``pin``
            is not callable, ``offload`` returned a non-string, or ``messages`` is not a
            sequence.
        ValueError: A cap is below 1, ``keep_ratio`` is outside 0 to 1, or ``marker``
            uses another field than ``{chars}``, ``{tokens}`` and ``{where}`` or writes
            nothing.
        InvalidMessageError: A message is malformed or cannot be counted; the
            error names its index.
    """
    check_callable(count_tokens, "count_tokens")
    options = ToolResultTruncation.checked(
        max_result_tokens=max_result_tokens,
        exclude_tools=exclude_tools,
        keep_ratio=keep_ratio,
        marker=marker,
        offload=offload,
    )
    return apply_options(options, messages, count_tokens, pin)
