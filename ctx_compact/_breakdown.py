"""Where a request's tokens go: by category, by tool and by message, and what compaction would do.

Each message's count (the counter's own figure) is split among the categories of its parts:
tool calls, tool results, media and thinking are counted as parts and the rest of the message
goes to its role's category, so the categories always sum to the count (docs/breakdown.md).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import reduce
from operator import getitem
from typing import Any, Dict, Iterable, List, Optional, Sequence, Set, Tuple, Union

from ._checks import check_callable, check_messages, check_options
from ._clearing import ToolResultClearing
from ._compact import Compaction, Pin
from ._defaults import KEEP_HEAD, KEEP_TAIL
from ._grouping import group_bounds
from ._media import MediaAwareCounter, media_parts
from ._option_docs import with_option_docs
from ._render import chart, page
from ._tokens import (
    CountTokens,
    SpecCounter,
    compact_json,
    count_all,
    count_one,
    count_value,
    estimated,
    prefix_sums,
    tokens_of_units,
    utf16_length,
)
from ._truncating import ToolResultTruncation
from ._views import message_views
from .formats import Format, recognise, thinking
from .formats._base import Media
from .formats._shapes import View

#: The categories, in the order a chart shows them.
CATEGORIES = (
    "system",
    "tools",
    "user",
    "assistant",
    "tool_calls",
    "tool_results",
    "images",
    "documents",
    "audio",
    "thinking",
    "compaction",
    "summary",
)
_MEDIA = {"image": "images", "document": "documents", "audio": "audio", "video": "audio"}
# What compaction would do to a message, most telling first: a row shows the first that applies.
STATUSES = ("summarized", "dropped", "truncated", "cleared", "pinned", "awaiting", "kept")


@dataclass(frozen=True)
class BreakdownRow:
    """One message: its tokens, what they are, and what compaction would do with it.

    Attributes:
        index: The message's position in the input.
        role: Its ``"role"`` as given (``None`` for a Responses item without one).
        category: The category holding most of its tokens.
        tokens: Its count.
        parts: Its tokens by category (only the categories it holds); they sum to ``tokens``.
        group: The index of the first message of its group.
        tool: The tool it calls or answers (the first one), or ``None``.
        status: With ``max_tokens``: ``"kept"``, ``"dropped"``, ``"cleared"``,
            ``"truncated"``, ``"pinned"`` or ``"awaiting"`` (a call awaiting its result,
            kept with the tail); ``None`` without a budget. A middleware event's
            breakdown also says ``"summarized"`` (dropped, and in the summary).
        reason: Why compaction keeps or drops it (``MessageRow.reason``), or ``None``.
    """

    index: int
    role: Any
    category: str
    tokens: int
    parts: Mapping[str, int]
    group: int
    tool: Optional[str]
    status: Optional[str]
    reason: Optional[str]


@dataclass(frozen=True)
class Breakdown:
    """Where the tokens of a request go (``breakdown``'s result).

    Attributes:
        tokens: The request's count: the messages', the system prompt's and the tools'.
        categories: Tokens by category, every category of ``CATEGORIES`` in that
            order (zeros included); they sum to ``tokens``.
        tools: By tool name, ``{"calls": tokens, "results": tokens}`` (a result whose
            call is not in the list is in ``categories`` only).
        rows: One ``BreakdownRow`` per message, in order (none with ``per_message=False``).
        max_tokens: The budget given, or ``None``.
        tokens_after: What compaction would leave of ``tokens`` at ``max_tokens``, or ``None``.
        fits: Whether that fits the budget, or ``None`` without one.
        views: The messages as read (their JSON views), for ``preview``.
    """

    tokens: int
    categories: Mapping[str, int]
    tools: Mapping[str, Mapping[str, int]]
    rows: Tuple[BreakdownRow, ...]
    max_tokens: Optional[float]
    tokens_after: Optional[int]
    fits: Optional[bool]
    views: Sequence[Mapping[str, Any]] = field(default=(), repr=False, compare=False)

    def preview(self, index: int) -> str:
        """The start of message ``index``'s text: its strings in order (not its ids, types and
        payloads), at most ``PREVIEW`` characters."""
        found: List[str] = []
        size = 0
        stack = [self.views[index]]
        while stack and size < PREVIEW:
            held = stack.pop()
            if isinstance(held, str):
                found.append(held)
                size += len(held) + 1
            elif isinstance(held, Mapping):
                stack.extend(v for k, v in reversed(list(held.items())) if k not in _NOT_TEXT)
            elif isinstance(held, (list, tuple)):
                stack.extend(reversed(held))
        return " ".join(found)[:PREVIEW]

    def largest(self, count: int = 10) -> List[BreakdownRow]:
        """The ``count`` messages with the most tokens, largest first (earliest on ties)."""
        return sorted(self.rows, key=lambda row: (-row.tokens, row.index))[:count]

    def chart(self, *, width: int = 80, color: bool = False, largest: int = 5) -> str:
        """The terminal chart: lines of at most ``width`` characters (plain characters
        unless ``color``), as ``ctx-compact inspect`` prints it."""
        return chart(self, width=width, color=color, largest=largest)

    def html(self, *, title: str = "Where the tokens go") -> str:
        """One self-contained HTML page of this breakdown (no network, no CDN)."""
        return page(self, title=title)

    def _repr_html_(self) -> str:
        return self.html()


PREVIEW = 300  # characters of a message's text kept on its row
# Keys whose strings are no text a reader wants to see: ids, types, roles, payloads.
_NOT_TEXT = frozenset(
    {
        "role",
        "type",
        "id",
        "call_id",
        "tool_call_id",
        "tool_use_id",
        "toolUseId",
        "data",
        "bytes",
        "url",
        "image_url",
        "source",
        "signature",
        "encrypted_content",
        "format",
        "mime_type",
        "media_type",
        "status",
    }
)


# --- splitting one message ------------------------------------------------------------


def _own(view: Mapping[str, Any]) -> str:
    """The category of what a message holds beside its parts: its role's."""
    role = view.get("role")
    if role in ("system", "developer"):
        return "system"
    if role in ("assistant", "model"):
        return "assistant"
    if role == "tool":
        return "tool_results"
    return "assistant" if role is None else "user"  # an item without a role is the model's


class _Reader:
    """Splits each message's count among its parts' categories."""

    def __init__(
        self,
        views: Sequence[Mapping[str, Any]],
        count_tokens: Optional[CountTokens],
        formats: Optional[Sequence[Optional[Format]]],
        media: Optional[Sequence[List[Media]]],
    ) -> None:
        self.views = views
        self.count_tokens = count_tokens
        self.formats = formats  # each message's, when grouping gave them
        self.media = media  # each message's media parts, when counting found them
        self.calls: Dict[Any, Optional[str]] = {}  # call id -> tool name, as calls are met
        # Where the count is the estimator's arithmetic on a part's JSON (no counter, or the
        # specification's on a part without media), a part is measured once, not probed.
        self.spec = count_tokens is None or isinstance(count_tokens, SpecCounter)
        self.units: Dict[str, int] = {}  # field -> its empty user message's JSON, in units
        self.empty: Dict[str, int] = {}  # field -> its empty user message's count

    def figure(self, field: str, part: Any, media: bool) -> int:
        """What ``part`` (``media``: holding media) adds to a user message holding it alone
        in ``field``, as counted."""
        count = self.count_tokens
        if self.spec and not (media and count is not None):
            empty = self.units.get(field)
            if empty is None:
                empty = self.units[field] = utf16_length(compact_json({"role": "user", field: []}))
            units = utf16_length(compact_json(part))
            return tokens_of_units(empty + units) - tokens_of_units(empty)
        empty = self.empty.get(field)
        if empty is None:
            empty = self.empty[field] = count_one({"role": "user", field: []}, count, None)
        return max(count_one({"role": "user", field: [part]}, count, None) - empty, 0)

    def split(self, i: int, tokens: int, restart: bool) -> Tuple[Dict[str, int], Optional[str]]:
        """Message ``i``'s tokens by category, and the tool it calls or answers."""
        view = self.views[i]
        if restart:
            return {"compaction": tokens}, None
        found = media_parts(view) if self.media is None else self.media[i]
        holding = {media.path[:2] for media in found}  # the parts that are or hold media
        parts, inside = self._media(view, found)
        fmt = recognise(view, i) if self.formats is None else self.formats[i]
        whole, tool = (None, None)
        if fmt is not None:
            whole, tool = self._tools(view, i, fmt, holding, inside, parts)
        thought = thinking(self.views, i)
        if thought is not None:
            if thought.item is not None or view.get("type") == "reasoning":
                whole = "thinking"
            for k, _ in thought.blocks:
                block = view[thought.items][k]
                with_media = (thought.items, k) in holding
                parts.append(("thinking", self.figure(thought.items, block, with_media)))
        return _shared(tokens, whole or _own(view), parts), tool

    def _media(
        self, view: View, found: Sequence[Media]
    ) -> Tuple[List[Tuple[str, int]], Dict[Tuple[Any, Any], int]]:
        """The media parts' figures, and the media inside each block that holds some (a
        result's media is the media's, not the result's)."""
        parts: List[Tuple[str, int]] = []
        inside: Dict[Tuple[Any, Any], int] = {}
        for media in found:
            part = reduce(getitem, media.path, view)
            field = media.path[0] if len(media.path) == 2 else "content"
            figure = self.figure(field, part, True)
            parts.append((_MEDIA.get(media.kind, "images"), figure))
            if len(media.path) > 2:
                inside[media.path[0], media.path[1]] = inside.get(media.path[:2], 0) + figure
        return parts, inside

    def _tools(
        self,
        view: View,
        i: int,
        fmt: Format,
        holding: Set[Tuple[Any, ...]],
        inside: Dict[Tuple[Any, Any], int],
        parts: List[Tuple[str, int]],
    ) -> Tuple[Optional[str], Optional[str]]:
        """Add the tool calls' and results' figures to ``parts``; the category of a message
        that is itself one call or result, and the tool it calls or answers."""
        whole: Optional[str] = None
        tool: Optional[str] = None
        for call in fmt.tool_calls(view, i):
            tool = tool or call.name
            for own in call.ids:
                self.calls.setdefault(own, call.name)
            if call.where == "item":
                whole = "tool_calls"
            else:
                held = view[call.where][call.position]
                with_media = (call.where, call.position) in holding
                parts.append(("tool_calls", self.figure(call.where, held, with_media)))
        for result in fmt.tool_results(view, i):
            tool = tool or self.calls.get(result.call_id, None)
            if result.block is None:
                whole = "tool_results"
            else:
                held = view[result.items][result.block]
                with_media = (result.items, result.block) in holding
                figure = self.figure(result.items, held, with_media)
                nested = inside.get((result.items, result.block), 0)
                parts.append(("tool_results", max(figure - nested, 0)))
        return whole, tool


def _shared(tokens: int, own: str, parts: List[Tuple[str, int]]) -> Dict[str, int]:
    """``tokens`` split: each part its own figure while any is left, the rest to ``own``."""
    split: Dict[str, int] = {}
    left = tokens
    for category, figure in parts:
        taken = min(figure, left)
        if taken:
            split[category] = split.get(category, 0) + taken
            left -= taken
    if left or not split:
        split[own] = split.get(own, 0) + left
    return split


# --- what compaction would do ------------------------------------------------------------


def _statuses(
    messages: List[Any],
    views: Sequence[Mapping[str, Any]],
    counts: List[int],
    bounds: List[int],
    options: Dict[str, Any],
    clearing: Optional[ToolResultClearing],
    truncation: Optional[ToolResultTruncation],
    restarts: List[int],
    per_message: bool,
) -> Tuple[List[Tuple[str, str]], int]:
    """Each message's status and reason (none unless ``per_message``), and the messages'
    tokens left, as the steps would leave them: clear old results, truncate oversized ones,
    then drop (the groups stay the input's ``bounds``: results are edited, never removed)."""
    edited: Dict[int, str] = {}
    count_tokens, budget = options["count_tokens"], options["max_tokens"]
    current: List[Any] = messages
    if clearing is not None:
        cleared, counts = clearing.apply(
            current, views, counts, max_tokens=budget, count_tokens=count_tokens
        )
        current = cleared.messages
        edited.update((entry.index, "cleared") for entry in cleared.cleared)
    if truncation is not None:
        seen = views if current is messages else message_views(current)
        done, counts = truncation.apply(current, seen, counts, count_tokens=count_tokens)
        current = done.messages
        edited.update((cut.index, "truncated") for cut in done.cleared)
    pin = options.pop("pin", None)
    pinned = [] if pin is None else [i for i, m in enumerate(messages) if pin(m)]
    plan = Compaction(
        current,
        prefix_sums(counts),
        bounds,
        **options,
        restart=restarts[-1] if restarts else -1,
        pinned=pinned,
    )
    if not per_message:
        return [], plan.tokens_after
    statuses: List[Tuple[str, str]] = []
    for row in plan.rows(options["keep_head"], options["keep_tail"]):
        status = row.status
        if status == "kept":
            if row.reason.startswith("pinned"):
                status = "pinned"
            elif row.reason.endswith("awaiting their results)"):
                status = "awaiting"
            status = edited.get(row.index, status)
        statuses.append((status, row.reason))
    return statuses, plan.tokens_after


@with_option_docs(
    messages="A list (or other sequence) of messages in any format the library reads. "
    "Never mutated.",
    system="The system prompt sent beside the messages (Anthropic's ``system``, "
    "Gemini's ``system_instruction``, ...), counted as the ``system`` category; ``None`` "
    "for none.",
    tools="The tool schemas sent with the request, counted as the ``tools`` category.",
    max_tokens="``None`` (the default) for the figures alone; a budget to also say what "
    "compaction with the options below would do to each message.",
    clear_tool_results="Whether compaction would clear old tool results first: ``True`` "
    "with ``clear_tool_results``' defaults, or a dict of its options (``keep``, "
    "``placeholder``, ``clear_inputs``).",
    max_result_tokens="``None``, or ``truncate_tool_results``' ``max_result_tokens``: "
    "compaction would first cut every result over it.",
    exclude_tools="Names of tools whose results clearing and cutting leave whole.",
    summaries="The indices of messages that are summaries (an inserted summary), counted "
    "as the ``summary`` category.",
    per_message="``False`` for the totals alone: no ``rows`` (a dataset's figures, where no "
    "message is shown, cost less).",
)
def breakdown(
    messages: Sequence[Any],
    *,
    system: Any = None,
    tools: Any = None,
    count_tokens: Optional[CountTokens] = None,
    max_tokens: Optional[float] = None,
    keep_head: int = KEEP_HEAD,
    keep_tail: int = KEEP_TAIL,
    target_tokens: Optional[float] = None,
    pin: Optional[Pin] = None,
    clear_tool_results: Union[bool, Mapping[str, Any]] = False,
    max_result_tokens: Any = None,
    exclude_tools: Iterable[str] = (),
    summaries: Iterable[int] = (),
    per_message: bool = True,
) -> Breakdown:
    """Where a request's tokens go, and what compaction would do to each message.

    Every message is counted once with ``count_tokens`` (the default estimator
    otherwise) and its count split among the categories of ``CATEGORIES``: its tool
    calls, tool results, images, documents, audio and thinking are counted as parts,
    the rest goes to its role's category, and a message holding a provider's
    compaction item is ``compaction``. The categories sum to ``tokens`` exactly.

    Returns:
        A ``Breakdown``.

    Raises:
        TypeError, ValueError: An option is invalid, as for ``compact`` (and
            ``truncate_tool_results`` for ``max_result_tokens``).
        InvalidMessageError: A message is malformed or cannot be counted; the
            error names its index.
    """
    check_callable(count_tokens, "count_tokens")
    options = None if max_tokens is None else check_options(locals())
    clearing = None
    if clear_tool_results:
        given = clear_tool_results if isinstance(clear_tool_results, Mapping) else {}
        clearing = ToolResultClearing.checked(**given, exclude_tools=exclude_tools)
    truncation = None
    if max_result_tokens is not None:
        truncation = ToolResultTruncation.checked(
            max_result_tokens=max_result_tokens, exclude_tools=exclude_tools
        )
    msgs = list(check_messages(messages))
    views = message_views(msgs)
    counts, media = _counted(views, count_tokens)
    restarts: List[int] = []
    formats: List[Optional[Format]] = []
    bounds = group_bounds(views, 0, restarts, formats)
    beside = {
        category: count_value(value, count_tokens)
        for category, value in (("system", system), ("tools", tools))
        if value is not None
    }
    fixed = sum(beside.values())
    statuses: Optional[List[Tuple[str, str]]] = None
    budget: Optional[float] = None
    after: Optional[int] = None
    if options is not None:
        budget = options["max_tokens"]
        # What is sent beside the messages counts against the budget, as in the middleware.
        options["max_tokens"] = max(budget - fixed, 1)
        statuses, after = _statuses(
            msgs, views, counts, bounds, options, clearing, truncation, restarts, per_message
        )
        after += fixed
    return tally(
        views,
        counts,
        bounds,
        restarts,
        count_tokens,
        beside,
        statuses,
        summaries=summaries,
        per_message=per_message,
        formats=formats,
        media=media,
        max_tokens=budget,
        tokens_after=after,
        fits=None if after is None or budget is None else after <= budget,
    )


def _counted(
    views: Sequence[Mapping[str, Any]], count_tokens: Optional[CountTokens]
) -> Tuple[List[int], Optional[List[List[Media]]]]:
    """Each message's count (``count_all``) and, counted by the media-aware estimate, its
    media parts: that estimate counts from the parts found, so that each message is scanned
    for media once, not again when its count is split."""
    if not isinstance(count_tokens, MediaAwareCounter):
        return count_all(views, count_tokens), None
    counts: List[int] = []
    media: List[List[Media]] = []
    for i, view in enumerate(views):
        media.append(media_parts(view))
        counts.append(estimated(count_tokens.counted, i, view, media[-1]))
    return counts, media


def tally(
    views: Sequence[Mapping[str, Any]],
    counts: Sequence[int],
    bounds: Sequence[int],
    restarts: Sequence[int],
    count_tokens: Optional[CountTokens],
    beside: Mapping[str, int],
    statuses: Optional[Sequence[Tuple[str, str]]],
    *,
    summaries: Iterable[int] = (),
    per_message: bool = True,
    formats: Optional[Sequence[Optional[Format]]] = None,
    media: Optional[Sequence[List[Media]]] = None,
    max_tokens: Optional[float] = None,
    tokens_after: Optional[int] = None,
    fits: Optional[bool] = None,
) -> Breakdown:
    """The ``Breakdown`` of messages already counted and grouped, with what was (or would
    be) done to each: ``breakdown``'s, and a middleware event's for the call it reports.

    Args:
        views: The messages' JSON views.
        counts: Each message's count; the categories sum to these and ``beside``.
        bounds, restarts: Their group boundaries and the messages holding a provider's
            compaction item (``group_bounds``).
        count_tokens: The counter each message's parts are apportioned with.
        beside: Tokens sent beside the messages, by category (``system``, ``tools``).
        statuses: Each message's ``(status, reason)``, or ``None`` without a budget.
        summaries: The indices of messages that are summaries.
        per_message: ``False`` for the totals alone (no ``rows``).
        formats, media: Each message's format (``group_bounds``' ``formats``) and media
            parts (``media_parts``) when already found, else each is found again here.
        max_tokens, tokens_after, fits: The budget and what compaction leaves of it.
    """
    summary_at = set(summaries)
    reader = _Reader(views, count_tokens, formats, media)
    categories = dict.fromkeys(CATEGORIES, 0)
    by_tool: Dict[str, Dict[str, int]] = {}
    rows: List[BreakdownRow] = []
    restart_at = set(restarts)
    for i, tokens in enumerate(counts):
        if i in summary_at:
            parts, tool = {"summary": tokens}, None
        else:
            parts, tool = reader.split(i, tokens, i in restart_at)
        for category, figure in parts.items():
            categories[category] += figure
            if tool is not None and category in ("tool_calls", "tool_results"):
                entry = by_tool.setdefault(tool, {"calls": 0, "results": 0})
                entry["calls" if category == "tool_calls" else "results"] += figure
        if not per_message:
            continue
        status, reason = (None, None) if statuses is None else statuses[i]
        rows.append(
            BreakdownRow(
                index=i,
                role=views[i].get("role"),
                category=max(parts, key=lambda c: (parts[c], -CATEGORIES.index(c))),
                tokens=tokens,
                parts=parts,
                group=bounds[bisect_right(bounds, i) - 1],
                tool=tool,
                status=status,
                reason=reason,
            )
        )
    for category, figure in beside.items():
        categories[category] += figure
    return Breakdown(
        tokens=sum(counts) + sum(beside.values()),
        categories=categories,
        tools=by_tool,
        rows=tuple(rows),
        max_tokens=max_tokens,
        tokens_after=tokens_after,
        fits=fits,
        views=views,
    )
