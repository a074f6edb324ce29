"""Summaries over a conversation: reused while the cut stands, rolled on, failures lose nothing."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Set, Tuple

import anyio
import pytest
from summary_workers import chat

from middleware import CallRequest, CompactingSession, CompactionEvent, SQLiteStore, budgeted
from middleware._summaries import takes_previous


def echo(messages: List[Any]) -> List[Any]:
    return messages


async def aecho(messages: List[Any]) -> List[Any]:
    await anyio.sleep(0)
    return messages


class Rolling:
    """A rolling summarizer that records what it was given."""

    def __init__(self) -> None:
        self.calls: List[Tuple[List[Any], Optional[str]]] = []

    def __call__(self, dropped: List[Any], *, previous: Optional[str] = None) -> str:
        self.calls.append((dropped, previous))
        return f"summary {len(self.calls)}"


def run_turns(send: Any, turns: int) -> None:
    for turn in range(1, turns + 1):
        send(chat(turn))


def test_a_rolling_summarizer_gets_the_previous_summary_and_only_what_was_dropped_since() -> None:
    summarize = Rolling()
    events: List[CompactionEvent] = []
    send = budgeted(
        max_tokens=2000, target_tokens=1200, summarize=summarize, on_compact=events.append
    )(echo)
    run_turns(send, 80)

    assert len(summarize.calls) >= 3
    assert summarize.calls[0][1] is None
    for number, (_, previous) in enumerate(summarize.calls[1:], start=1):
        assert previous == f"summary {number}"
    fed = [m for dropped, _ in summarize.calls for m in dropped]
    last = events[-1]
    # Each dropped message went to the summarizer once, in order: together they are the cut.
    assert fed == list(last.dropped)[: len(fed)]
    assert len(fed) >= len(last.dropped) - 2  # the summary's own room may drop a group more


@pytest.mark.anyio
async def test_an_async_rolling_summarizer_rolls_the_same_way() -> None:
    calls: List[Tuple[int, Optional[str]]] = []

    async def summarize(dropped: List[Any], *, previous: Optional[str] = None) -> str:
        await anyio.sleep(0)
        calls.append((len(dropped), previous))
        return f"summary {len(calls)}"

    sync = Rolling()
    send = budgeted(max_tokens=2000, target_tokens=1200, summarize=summarize)(aecho)
    for turn in range(1, 81):
        await send(chat(turn))
    run_turns(budgeted(max_tokens=2000, target_tokens=1200, summarize=sync)(echo), 80)
    assert calls == [(len(dropped), previous) for dropped, previous in sync.calls]


def test_the_summary_of_a_cut_is_reused_while_the_cut_stands() -> None:
    calls: List[int] = []

    def summarize(dropped: List[Any]) -> str:
        calls.append(len(dropped))
        return f"summary {len(calls)}"

    events: List[CompactionEvent] = []
    send = budgeted(max_tokens=2000, summarize=summarize, on_compact=events.append)(echo)
    history = chat(60)
    for _ in range(3):
        send(history)
    assert len(calls) == 1
    assert [e.summary for e in events] == ["summary 1"] * 3


def test_summaries_are_kept_apart_by_summarizer_and_role(tmp_path: Any) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    history = chat(60)
    sent = []
    for text, role in [("one", "user"), ("two", "user"), ("one", "system")]:

        def summarize(dropped: List[Any], text: str = text) -> str:
            return text

        summarize.__qualname__ = f"summarize_{text}"
        sent.append(
            budgeted(max_tokens=2000, summarize=summarize, summary_role=role, store=store)(echo)(
                history
            )[1]
        )
    assert sent == [
        {"role": "user", "content": "one"},
        {"role": "user", "content": "two"},
        {"role": "system", "content": "one"},
    ]


def test_previous_is_read_from_the_signature() -> None:
    def plain(dropped: List[Any]) -> str:
        return ""

    def keyword(dropped: List[Any], *, previous: Optional[str] = None) -> str:
        return ""

    def positional(dropped: List[Any], previous: Optional[str] = None) -> str:
        return ""

    def anything(dropped: List[Any], **kwargs: Any) -> str:
        return ""

    async def coroutine(dropped: List[Any], *, previous: Optional[str] = None) -> str:
        return ""

    assert [takes_previous(f) for f in (plain, keyword, positional, anything, coroutine)] == [
        False,
        True,
        True,
        False,
        True,
    ]
    assert takes_previous(Rolling())
    assert takes_previous(Rolling().__call__)


# --- a failing summarizer ------------------------------------------------------------


class Flaky:
    """Fails on its first ``failures`` calls, then summarises."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0

    def __call__(self, dropped: List[Any]) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise TimeoutError("the summary model timed out")
        return "gist"


def test_a_failing_summarizer_loses_nothing_and_the_next_call_tries_again() -> None:
    summarize = Flaky(failures=1)
    events: List[CompactionEvent] = []
    sent: List[List[Any]] = []

    def send(messages: List[Any]) -> None:
        sent.append(messages)

    decorated = budgeted(max_tokens=2000, summarize=summarize, on_compact=events.append)(send)
    history = chat(60)
    decorated(history)
    decorated(history)

    failed, retried = events
    assert failed.summary is None
    assert failed.summary_error == "TimeoutError: the summary model timed out"
    assert failed.fits
    assert failed.dropped
    assert sent[0] == list(failed.messages)
    assert all(m["content"] != "gist" for m in sent[0])
    assert retried.summary == "gist"
    assert retried.summary_error is None
    assert summarize.calls == 2  # nothing failed was stored


@pytest.mark.anyio
async def test_a_failing_async_summarizer_loses_nothing_either() -> None:
    calls: List[int] = []

    async def summarize(dropped: List[Any]) -> str:
        calls.append(len(dropped))
        if len(calls) == 1:
            raise ConnectionError("no route to the model")
        return "gist"

    with CompactingSession(max_tokens=2000, summarize=summarize) as session:
        send = session.wrap(aecho)
        first = await send(chat(60))
        second = await send(chat(60))
    failed, retried = session.events
    assert failed.summary_error == "ConnectionError: no route to the model"
    assert first == list(failed.messages)
    assert retried.summary == "gist"
    assert second[1]["content"] == "gist"


def test_a_summarizer_returning_a_non_string_still_fails_the_call() -> None:
    import ctx_compact

    decorated = budgeted(max_tokens=2000, summarize=lambda dropped: 42)(echo)
    with pytest.raises(ctx_compact.InvalidMessageError, match="string"):
        decorated(chat(60))


class Wordy(Rolling):
    """A rolling summarizer whose summaries are big enough to push the cut a group further.

    ``covered`` maps each summary it made to the messages it stands for: those it
    was given, after those its ``previous`` stood for.
    """

    def __init__(self) -> None:
        super().__init__()
        self.covered: Dict[str, List[Any]] = {}

    def __call__(self, dropped: List[Any], *, previous: Optional[str] = None) -> str:
        super().__call__(dropped, previous=previous)
        text = f"summary {len(self.calls)}: " + "all that was said before, " * 40
        self.covered[text] = [*(self.covered[previous] if previous else []), *dropped]
        return text


@pytest.mark.parametrize("target", [1200, None], ids=["target_tokens", "no target"])
def test_a_cut_always_goes_out_with_the_summary_of_that_cut(target: Optional[int]) -> None:
    summarize = Wordy()
    events: List[CompactionEvent] = []
    send = budgeted(
        max_tokens=2000, target_tokens=target, summarize=summarize, on_compact=events.append
    )(echo)
    run_turns(send, 80)

    summarized = [e for e in events if e.summary is not None]
    assert len(summarized) > 20
    texts: Dict[int, Set[str]] = {}
    for event in summarized:
        assert event.summary is not None
        # The summary sent stands for exactly what the call drops: the summary's own
        # tokens may push the cut further, and then the further cut's summary is sent.
        assert summarize.covered[event.summary] == list(event.dropped)
        assert event.tokens_after <= 2000
        texts.setdefault(len(event.dropped), set()).add(event.summary)
    # One text per cut: a cut that stands is sent with the same summary on every call.
    assert all(len(sent) == 1 for sent in texts.values())


# --- what the summarizer sees of the call --------------------------------------------------


def test_a_summarizer_taking_request_sees_the_calls_other_arguments_read_only() -> None:
    seen: List[Any] = []

    def summarize(
        dropped: List[Any], *, previous: Optional[str] = None, request: Any = None
    ) -> str:
        seen.append(request)
        return "summary"

    def create(*, model: str, messages: List[Any], temperature: float = 1.0) -> List[Any]:
        return messages

    budgeted(max_tokens=2000, summarize=summarize)(create)(
        model="m1", messages=chat(40), temperature=0.5
    )
    (request,) = seen
    assert request["model"] == "m1"
    assert request["temperature"] == 0.5
    with pytest.raises(TypeError):
        request["model"] = "m2"


@pytest.mark.anyio
async def test_an_async_summarizer_taking_request_sees_them_too() -> None:
    seen: List[Any] = []

    async def summarize(dropped: List[Any], *, request: Any = None) -> str:
        seen.append(request)
        return "summary"

    async def create(*, model: str, messages: List[Any]) -> List[Any]:
        return messages

    await budgeted(max_tokens=2000, summarize=summarize)(create)(model="m1", messages=chat(40))
    assert [r["model"] for r in seen] == ["m1"]


def test_request_shows_what_the_conversations_request_sent_before_the_dropped_messages() -> None:
    seen: List[Any] = []

    def summarize(
        dropped: List[Any], *, previous: Optional[str] = None, request: Any = None
    ) -> str:
        seen.append((list(dropped), previous, request))
        return f"summary {len(seen)}"

    def create(*, model: str, messages: List[Any]) -> List[Any]:
        return messages

    ask = budgeted(max_tokens=800, summarize=summarize)(create)
    history = chat(32)
    first = ask(model="m1", messages=history[:60])
    ask(model="m1", messages=history[:64])

    (_, none, request1), (dropped2, previous, request2) = seen
    assert none is None
    assert previous == "summary 1"
    assert isinstance(request1, CallRequest)
    assert request1.api is None  # a call's keyword arguments, not an SDK request's body
    assert request1["model"] == "m1"
    # The head, then (rolling) the previous summary's message as the first call inserted it.
    assert request1.sent_before == (history[0],)
    assert request2.sent_before == (history[0], first[1])
    assert first[1] == {"role": "user", "content": "summary 1"}
    # What the first call kept after the summary starts with what the second one drops.
    assert first[2 : 2 + len(dropped2)] == dropped2


def test_a_pinned_message_kept_after_the_previous_summary_is_in_sent_before() -> None:
    seen: List[Any] = []

    def summarize(
        dropped: List[Any], *, previous: Optional[str] = None, request: Any = None
    ) -> str:
        seen.append(request)
        return f"summary {len(seen)}"

    def create(*, model: str, messages: List[Any]) -> List[Any]:
        return messages

    history = chat(32)
    rule = history[9]  # a question early in the conversation, pinned in place
    ask = budgeted(max_tokens=800, summarize=summarize, pin=lambda m: m is rule)(create)
    first = ask(model="m1", messages=history[:60])
    ask(model="m1", messages=history[:64])

    # The first call sent the head, its summary, then the pinned question: so the second
    # call's summarizer is shown all three before the messages dropped since.
    assert first[:3] == [history[0], {"role": "user", "content": "summary 1"}, rule]
    assert seen[1].sent_before == tuple(first[:3])
