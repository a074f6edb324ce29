"""What a format's repair changes in a message list: recorded by the formats, applied by
``_repair``.

A format's ``repair`` says per message what becomes of it (dropped, moved after another, rebuilt
from some of its parts, followed by new messages such as placeholder answers); ``Edits`` records
that and each step's change. ``_repair`` builds the new list from it, so no format copies a
message itself and the caller's objects are kept the same way in every format.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

from .._problems import PairingProblem, names
from ._shapes import Views, is_list

# The pairing problems a format reported on one pass's views (what its ``repair`` reads).
Problems = Sequence[PairingProblem]

# A part of a rebuilt message: the position of one of its own parts, or a new part.
Part = Union[int, Dict[str, Any]]
# Why a step was taken, as a change reports it: the ids, the provider, the problem's code.
Why = Tuple[Sequence[Any], str, str]


class Change(NamedTuple):
    """One step of a repair, as ``RepairChange`` reports it (``at``: in the pass's views)."""

    at: int
    action: str
    ids: Tuple[str, ...]
    provider: str
    problem: str
    into: Optional[int]  # the message it went after or into (a move, a merge)


class Rebuild(NamedTuple):
    """A message rebuilt: its ``field`` list made of ``parts``, ``unset`` keys removed."""

    field: Optional[str]
    parts: Tuple[Part, ...]
    unset: Tuple[str, ...]


class Edits:
    """The edits of one repair pass over ``views``, from every format.

    Attributes:
        views: The views the formats read (positions below index them).
        dropped: The messages that go, in no particular order.
        rebuilt: The messages rebuilt, by position.
        after: What is placed after a position: ``(source, message)``, where
            ``source`` is the position a moved message comes from, or the
            position of the call a new message answers.
        changes: Every step, in the order the formats made them.
    """

    def __init__(self, views: Views) -> None:
        self.views = views
        self.dropped: Dict[int, None] = {}
        self.rebuilt: Dict[int, Rebuild] = {}
        self.after: Dict[int, List[Tuple[int, Any]]] = {}
        self.changes: List[Change] = []

    def __bool__(self) -> bool:
        return bool(self.dropped or self.rebuilt or self.after)

    def note(
        self,
        index: int,
        action: str,
        ids: Sequence[Any],
        provider: str,
        problem: str,
        into: Optional[int] = None,
    ) -> None:
        """Record one step (what ``RepairChange`` reports); ``into`` is the message a moved
        one now follows, or the one a merged one went into."""
        self.changes.append(Change(index, action, names(ids), provider, problem, into))

    def drop(self, index: int) -> None:
        """The message at ``index`` goes."""
        self.dropped[index] = None
        self.rebuilt.pop(index, None)

    def place(self, index: int, target: Optional[int], problem: PairingProblem) -> None:
        """The result at ``index`` moved after ``target`` as it is, or dropped for ``None``."""
        why = (problem.ids, problem.provider, problem.code)
        self.drop(index)
        if target is None:
            self.note(index, "dropped_result", *why)
        else:
            self.after.setdefault(target, []).append((index, None))
            self.note(index, "moved_result", *why, target)

    def insert(self, target: int, message: Dict[str, Any]) -> None:
        """A new message after the one at ``target`` (which it answers)."""
        self.after.setdefault(target, []).append((target, message))

    def rebuild(
        self,
        index: int,
        field: Optional[str],
        parts: Sequence[Part] = (),
        unset: Sequence[str] = (),
    ) -> None:
        """The message at ``index`` with its ``field`` list made of ``parts`` and ``unset`` removed.

        ``parts`` holds positions in the message's own ``field`` list (its own
        objects are kept) and new parts. ``field`` ``None`` changes no list.
        """
        self.rebuilt[index] = Rebuild(field, tuple(parts), tuple(unset))

    def arrange(
        self,
        index: int,
        field: str,
        count: int,
        first: Sequence[Part] = (),
        gone: Sequence[int] = (),
        last: Sequence[Part] = (),
        *,
        why: Why,
    ) -> bool:
        """The message at ``index`` with its ``field`` list (``count`` long) made of ``first``,
        then its own parts in order but those in ``first`` or ``gone``, then ``last``; when
        that leaves nothing it goes (``dropped_empty``, for ``why``: ids, provider, problem)
        and the answer is ``False``."""
        taken = {*gone, *(k for k in first if isinstance(k, int))}
        parts = [*first, *(k for k in range(count) if k not in taken), *last]
        if not parts:
            self.drop(index)
            self.note(index, "dropped_empty", *why)
            return False
        if parts != list(range(count)):
            self.rebuild(index, field, parts)
        return True

    def remove(
        self,
        index: int,
        field: str,
        gone: Sequence[int],
        first: Sequence[Part] = (),
        *,
        action: Optional[str],
        why: Why,
        text: Optional[Callable[[str], Dict[str, Any]]] = None,
    ) -> bool:
        """``arrange`` for the message at ``index``, its ``field`` list read from its view:
        the parts ``gone`` dropped (``action`` noted, for ``why``, when some go; ``None``
        when the format noted them), ``first`` put first; ``False`` when it goes empty.

        A string ``field`` (a text message) stays as it is when nothing goes first;
        else it becomes the part ``text`` makes of it (if any), after ``first``.
        """
        if gone and action is not None:
            self.note(index, action, *why)
        own: Any = self.views[index].get(field)
        last: List[Dict[str, Any]] = []
        if isinstance(own, str):
            if not first:
                return True  # a text message: nothing in it to move or drop
            last = [text(own)] if own and text is not None else []
        count = len(own) if is_list(own) else 0
        return self.arrange(index, field, count, first, gone, last, why=why)

    def message(self, index: int, own: Any) -> Any:
        """The message to send for the one at ``index`` (``own``, the caller's): itself
        unless rebuilt, else a new dict.

        A mapping is copied as the caller wrote it, so that what is not edited (an
        SDK block beside a dropped one) stays the caller's object; any other
        message (an SDK or framework object) is rebuilt from its view.
        """
        rebuild = self.rebuilt.get(index)
        if rebuild is None:
            return own
        view = self.views[index]
        new = dict(own if isinstance(own, Mapping) else view)
        if rebuild.field is not None:
            seen = view.get(rebuild.field)
            seen_parts: Sequence[Any] = seen if isinstance(seen, (list, tuple)) else ()
            mine = new.get(rebuild.field)
            if not isinstance(mine, (list, tuple)) or len(mine) != len(seen_parts):
                mine = seen_parts
            new[rebuild.field] = [
                mine[part] if isinstance(part, int) else part for part in rebuild.parts
            ]
        for key in rebuild.unset:
            new.pop(key, None)
        return new
