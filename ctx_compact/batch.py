"""Compacting many conversations: ``compact_many``, a lazy iterator, and ``compact_indices``,
a decision as kept index ranges that pickle small (docs/batch.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, TypeVar

from ._checks import check_messages, check_options, must
from ._compact import Compaction, decide
from ._defaults import KEEP_HEAD, KEEP_TAIL
from ._errors import InvalidMessageError
from ._option_docs import with_option_docs
from ._tokens import CountTokens

T = TypeVar("T")


@dataclass(frozen=True)
class KeptIndices:
    """Which messages ``compact`` keeps, as index ranges instead of message objects.

    Only the figures and the ranges: a few hundred bytes when pickled, even for a
    conversation of a million messages.

    Attributes:
        kept: The kept messages as ``(start, stop)`` ranges of input indices,
            in order and without empty ranges: the head and the tail when
            something was dropped, one range when nothing was, none for an
            empty conversation. ``ranges`` is the same tuple under the name that
            says what it holds; ``kept`` stays for compatibility (and pickles).
        messages_before: The number of messages in the input.
        tokens_before: Summed estimated tokens of the input.
        tokens_after: Summed estimated tokens of the kept messages.
        fits: ``tokens_after <= max_tokens``.
    """

    kept: Tuple[Tuple[int, int], ...]
    messages_before: int
    tokens_before: int
    tokens_after: int
    fits: bool

    @property
    def ranges(self) -> Tuple[Tuple[int, int], ...]:
        """The kept messages as ``(start, stop)`` ranges of input indices (``kept``)."""
        return self.kept

    @property
    def messages_after(self) -> int:
        """The number of messages kept."""
        return sum(stop - start for start, stop in self.kept)

    @property
    def dropped_count(self) -> int:
        """The number of messages dropped."""
        return self.messages_before - self.messages_after

    def apply(self, messages: Sequence[T]) -> List[T]:
        """The kept messages of ``messages``, the conversation this decision was made for.

        Args:
            messages: The same conversation that was compacted (or an equal
                copy of it, such as the one a driver process holds). Never mutated.

        Returns:
            A new list of the kept messages: the objects of ``messages``, in order,
            equal to ``compact(messages, ...).messages``.

        Raises:
            ValueError: ``messages`` does not have ``messages_before`` items, so
                it cannot be the conversation this decision was made for.
        """
        if len(messages) != self.messages_before:
            raise ValueError(
                f"these indices are for a conversation of {self.messages_before} messages, "
                f"got {len(messages)}"
            )
        return [message for start, stop in self.kept for message in messages[start:stop]]


@dataclass(frozen=True)
class CompactedConversation:
    """One conversation out of ``compact_many``.

    Attributes:
        position: Where the conversation came in the input, counting from 0.
        conversation: The result in the shape of the input: the list of kept
            messages for a list; for a mapping with a ``"messages"`` key (a
            JSONL line object), a new dict with the same keys, in the same
            order, whose ``"messages"`` is the list of kept messages.
        messages: The kept messages: the caller's own objects, in order.
        indices: The figures and kept ranges, as ``compact_indices`` gives them.
    """

    position: int
    conversation: Any
    messages: List[Any]
    indices: KeptIndices


class InvalidConversationError(InvalidMessageError):
    """A conversation given to ``compact_many`` cannot be compacted.

    An ``InvalidMessageError`` (so also a ``TypeError`` and a ``ValueError``)
    that says which conversation of the input is at fault, as well as which
    message when one message is.

    Attributes:
        position: The conversation's position in the input, counting from 0.
        index: The position of the offending message in that conversation, or
            ``None`` when the conversation as a whole is at fault.
        reason: What is wrong, without the position and index prefix.
    """

    def __init__(self, position: int, reason: str, index: Optional[int] = None) -> None:
        super().__init__(reason, index)
        self.position = position
        self.args = (f"conversation {position}: {self.args[0]}",)

    def __reduce__(self) -> Tuple[Any, ...]:
        # Rebuilt from its fields, so it crosses a process boundary (a Pool
        # worker's error reaching the parent) with all of them intact.
        return (type(self), (self.position, self.reason, self.index))


def _kept_indices(plan: Compaction) -> KeptIndices:
    return KeptIndices(
        kept=plan.kept_ranges(),
        messages_before=len(plan.messages),
        tokens_before=plan.tokens_before,
        tokens_after=plan.tokens_after,
        fits=plan.tokens_after <= plan.max_tokens,
    )


@with_option_docs()
def compact_indices(
    messages: Sequence[Any],
    *,
    max_tokens: float,
    count_tokens: Optional[CountTokens] = None,
    keep_head: int = KEEP_HEAD,
    keep_tail: int = KEEP_TAIL,
    target_tokens: Optional[float] = None,
) -> KeptIndices:
    """``compact``, returning the kept index ranges instead of the messages.

    The same decision as ``compact`` with the same arguments: ``apply(messages)``
    on the result gives ``compact(messages, ...).messages``, and the token
    figures and ``fits`` are the same. Meant for a worker process whose result
    travels back to the process that holds the conversation.

    Returns:
        A ``KeptIndices``.

    Raises:
        TypeError, ValueError, InvalidMessageError: As for ``compact``.
    """
    return _kept_indices(decide(messages, check_options(locals())))


@with_option_docs(
    conversations="An iterable of conversations, each either a list (or other sequence) of "
    'messages or a mapping with a ``"messages"`` key holding one, as a JSONL line object of the '
    "command line; the mapping's other keys are carried over to the result."
)
def compact_many(
    conversations: Iterable[Any],
    *,
    max_tokens: float,
    count_tokens: Optional[CountTokens] = None,
    keep_head: int = KEEP_HEAD,
    keep_tail: int = KEEP_TAIL,
    target_tokens: Optional[float] = None,
) -> Iterator[CompactedConversation]:
    """Compact each conversation of ``conversations``, lazily and in order.

    One conversation is read only when the previous result has been taken, and
    nothing is kept once it is yielded, so a generator over a dataset of any size
    passes through in constant memory. The options, the same for every
    conversation, are checked when ``compact_many`` is called, before any
    conversation is read.

    Returns:
        An iterator of ``CompactedConversation``, one per input conversation, in
        input order. Each one's ``messages`` equal ``compact``'s for the same
        conversation.

    Raises:
        TypeError: An option is invalid (as for ``compact``), or
            ``conversations`` is not an iterable of conversations; raised by
            the call itself.
        ValueError: ``keep_head`` or ``keep_tail`` is negative, or
            ``target_tokens`` is more than ``max_tokens``; raised by the call.
        InvalidConversationError: While iterating: a conversation is neither a
            sequence nor a mapping with a ``"messages"`` sequence, or one of its
            messages is malformed; the error names the conversation's position
            and the message's index. Iteration stops there (call
            ``compact_indices`` in your own loop to skip bad conversations).
    """
    options = check_options(locals())
    try:
        if isinstance(conversations, (str, bytes, bytearray, Mapping)):
            raise TypeError  # one conversation, or text: not an iterable of conversations
        items = iter(conversations)
    except TypeError:
        raise must("conversations", "an iterable of conversations", conversations) from None
    return _compact_each(items, options)


def _compact_each(items: Iterator[Any], options: Dict[str, Any]) -> Iterator[CompactedConversation]:
    for position, conversation in enumerate(items):
        messages, holder = _messages_of(conversation, position)
        try:
            plan = decide(messages, options)
        except InvalidMessageError as exc:
            raise InvalidConversationError(position, exc.reason, exc.index) from exc
        indices = _kept_indices(plan)
        kept = indices.apply(plan.messages)
        yield CompactedConversation(
            position=position,
            conversation=kept if holder is None else dict(holder, messages=kept),
            messages=kept,
            indices=indices,
        )


def _messages_of(conversation: object, position: int) -> Tuple[Sequence[Any], Any]:
    """The messages of one conversation, and the mapping holding them (``None`` for a list)."""
    if not isinstance(conversation, Mapping):
        return _checked(conversation, position, "a conversation"), None
    if "messages" not in conversation:
        keys = ", ".join(repr(key) for key in list(conversation)[:5])
        raise InvalidConversationError(
            position,
            f'a mapping must hold its messages under a "messages" key, got keys {keys}'
            " (pass an iterable of conversations, not one conversation)",
        )
    return _checked(conversation["messages"], position, '"messages"'), conversation


def _checked(messages: object, position: int, what: str) -> Sequence[Any]:
    try:
        return check_messages(messages)
    except TypeError:
        raise InvalidConversationError(
            position,
            f"{what} must be a list (or other sequence) of message mappings, "
            f"not {type(messages).__name__}",
        ) from None
