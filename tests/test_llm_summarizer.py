"""llm_summarizer with a plain callable client: the prompt, rolling, chunks, the timeout, its kind.

The SDK clients are proved against the local provider in tests/sdks/test_llm_summarizer.py.
"""

from __future__ import annotations

import base64
import inspect
import json
import threading
import time
from typing import Any, Dict, List

import anyio
import pytest

from ctx_compact import estimate_tokens
from middleware import CompactingSession, CompactionEvent, budgeted, llm_summarizer
from middleware._summaries import takes_previous
from middleware._summarizer import DEFAULT_INSTRUCTIONS

Prompt = List[Dict[str, str]]
HEADINGS = (
    "## Goal and standing instructions",
    "## Decisions",
    "## Identifiers, paths, URLs, numbers and names",
    "## Tool results",
    "## Errors and resolutions",
    "## Open tasks and the latest request",
)


class Model:
    """A plain callable client: records each prompt, answers ``summary N``."""

    def __init__(self) -> None:
        self.prompts: List[Prompt] = []

    def __call__(self, prompt: Prompt) -> str:
        self.prompts.append(prompt)
        return f"summary {len(self.prompts)}"


class AsyncModel(Model):
    async def __call__(self, prompt: Prompt) -> str:  # type: ignore[override]
        await anyio.sleep(0)
        return super().__call__(prompt)


def history(count: int = 30, words: int = 50) -> List[Dict[str, str]]:
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i} " * words}
        for i in range(count)
    ]


def echo(messages: List[Any]) -> List[Any]:
    return messages


def prompt_tokens(prompt: Prompt) -> int:
    # The summarizer's bound is in the library's estimate of the prompt messages.
    return sum(map(estimate_tokens, prompt))


def test_the_summary_is_the_models_text_and_the_prompt_has_the_default_sections() -> None:
    model = Model()
    events: List[CompactionEvent] = []
    send = budgeted(max_tokens=500, summarize=llm_summarizer(model), on_compact=events.append)(echo)
    sent = send(history())

    (event,) = events
    (prompt,) = model.prompts
    assert event.summary == "summary 1"
    assert event.summary_error is None
    assert event.summary_usage is None  # a plain callable reports none
    assert sent[1] == {"role": "user", "content": "summary 1"}
    system, user = prompt
    assert system == {"role": "system", "content": DEFAULT_INSTRUCTIONS}
    assert all(heading in system["content"] for heading in HEADINGS)
    assert user["role"] == "user"
    assert "<previous_summary>" not in user["content"]
    # Every dropped message is in the prompt, verbatim, in order.
    texts = [json.dumps(m, separators=(",", ":")) for m in event.dropped]
    where = [user["content"].index(text) for text in texts]
    assert where == sorted(where)


def test_instructions_replace_the_system_prompt() -> None:
    model = Model()
    send = budgeted(max_tokens=500, summarize=llm_summarizer(model, instructions="Be brief."))(echo)
    send(history())
    assert model.prompts[0][0] == {"role": "system", "content": "Be brief."}


def test_it_rolls_the_previous_summary_on_with_only_what_was_dropped_since() -> None:
    model = Model()
    events: List[CompactionEvent] = []
    summarize = llm_summarizer(model)
    assert takes_previous(summarize)
    send = budgeted(max_tokens=500, summarize=summarize, on_compact=events.append)(echo)
    long = history(40)
    send(long[:30])
    send(long)

    _first, second = model.prompts
    user = second[1]["content"]
    assert user.startswith("<previous_summary>\nsummary 1\n</previous_summary>")
    assert "Update the previous summary" in user
    # What the first summary covered is not sent again.
    assert json.dumps(events[0].dropped[-1], separators=(",", ":")) not in user
    assert json.dumps(events[1].dropped[-1], separators=(",", ":")) in user
    assert events[1].summary == "summary 2"


def test_an_input_over_the_bound_is_summarized_in_chunks_rolled_over_the_chunks() -> None:
    model = Model()
    events: List[CompactionEvent] = []
    bound = 1200
    summarize = llm_summarizer(model, max_input_tokens=bound, max_summary_tokens=100)
    send = budgeted(max_tokens=500, summarize=summarize, on_compact=events.append)(echo)
    send(history(60, 100))

    (event,) = events
    assert sum(map(estimate_tokens, event.dropped)) > 3 * bound
    assert len(model.prompts) >= 3
    assert all(prompt_tokens(p) <= bound for p in model.prompts)
    assert "<previous_summary>" not in model.prompts[0][1]["content"]
    for number, prompt in enumerate(model.prompts[1:], start=1):
        assert prompt[1]["content"].startswith(
            f"<previous_summary>\nsummary {number}\n</previous_summary>"
        )
    assert event.summary == f"summary {len(model.prompts)}"
    # Every dropped message went into exactly one chunk, in order.
    fed = "".join(p[1]["content"] for p in model.prompts)
    texts = [json.dumps(m, separators=(",", ":")) for m in event.dropped]
    where = [fed.index(text) for text in texts]
    assert where == sorted(where)
    assert all(fed.count(text) == 1 for text in texts)


def test_one_message_over_the_bound_is_cut_to_fit() -> None:
    model = Model()
    summarize = llm_summarizer(model, max_input_tokens=1000)
    huge = {"role": "tool", "content": "x" * 40_000}
    assert summarize([huge]) == "summary 1"
    (prompt,) = model.prompts
    assert prompt_tokens(prompt) <= 1000
    assert "characters cut to fit the summarizer's input" in prompt[1]["content"]


def test_media_in_the_dropped_messages_is_named_not_sent() -> None:
    model = Model()
    payload = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(30_000)).decode()
    photo = {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is in photo-17.png?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64," + payload}},
        ],
    }
    llm_summarizer(model)([photo, {"role": "assistant", "content": "A cat."}])
    (prompt,) = model.prompts
    user = prompt[1]["content"]
    assert payload[:100] not in user
    assert '{"type":"text","text":"What is in photo-17.png?"},{"omitted":"image/png image"}' in user
    assert photo["content"][1]["image_url"]["url"].endswith(payload)  # the caller's, untouched


def test_a_long_previous_summary_is_cut_so_the_request_stays_in_bound() -> None:
    model = Model()
    summarize = llm_summarizer(model, max_input_tokens=1000)
    summarize(history(2), previous="p " * 5000)
    assert prompt_tokens(model.prompts[0]) <= 1000


def test_a_failing_client_costs_the_summary_only() -> None:
    def broken(prompt: Prompt) -> str:
        raise ConnectionError("model unreachable")

    events: List[CompactionEvent] = []
    send = budgeted(max_tokens=500, summarize=llm_summarizer(broken), on_compact=events.append)(
        echo
    )
    sent = send(history())
    (event,) = events
    assert event.summary is None
    assert event.summary_error == "ConnectionError: model unreachable"
    assert sent == list(event.messages)
    assert event.fits


def test_a_client_returning_no_text_costs_the_summary_only() -> None:
    events: List[CompactionEvent] = []
    send = budgeted(
        max_tokens=500, summarize=llm_summarizer(lambda prompt: None), on_compact=events.append
    )(echo)
    send(history())
    assert events[0].summary is None
    assert (events[0].summary_error or "").startswith("TypeError: ")


def test_a_slow_sync_client_costs_the_summary_after_the_timeout() -> None:
    release = threading.Event()

    def slow(prompt: Prompt) -> str:
        release.wait(10)
        return "too late"

    events: List[CompactionEvent] = []
    send = budgeted(
        max_tokens=500, summarize=llm_summarizer(slow, timeout=0.2), on_compact=events.append
    )(echo)
    started = time.monotonic()
    send(history())
    took = time.monotonic() - started
    release.set()
    assert took < 5
    assert events[0].summary is None
    assert events[0].summary_error == (
        "TimeoutError: the summarizer took longer than its timeout of 0.2 s"
    )


@pytest.mark.anyio
async def test_an_async_client_makes_an_async_summarizer() -> None:
    model = AsyncModel()
    summarize = llm_summarizer(model, max_input_tokens=1200)
    assert inspect.iscoroutinefunction(summarize)
    assert not inspect.iscoroutinefunction(llm_summarizer(Model()))
    events: List[CompactionEvent] = []

    @budgeted(max_tokens=500, summarize=summarize, on_compact=events.append)
    async def send(messages: List[Any]) -> List[Any]:
        return messages

    sent = await send(history(60))
    assert len(model.prompts) >= 2  # chunked, and rolled over the chunks
    assert sent[1]["content"] == events[0].summary == f"summary {len(model.prompts)}"


@pytest.mark.anyio
async def test_a_slow_async_client_is_cancelled_at_the_timeout() -> None:
    async def slow(prompt: Prompt) -> str:
        await anyio.sleep(10)
        return "too late"

    events: List[CompactionEvent] = []

    @budgeted(max_tokens=500, summarize=llm_summarizer(slow, timeout=0.2), on_compact=events.append)
    async def send(messages: List[Any]) -> List[Any]:
        return messages

    with anyio.fail_after(5):
        await send(history())
    assert events[0].summary is None
    assert (events[0].summary_error or "").startswith("TimeoutError")


class Client:
    """A third-party client whose ``create`` a session intercepts by name."""

    def __init__(self) -> None:
        self.sent: List[List[Any]] = []

    def create(self, messages: List[Any]) -> str:
        self.sent.append(messages)
        return "reply"


def test_a_summarizers_call_through_an_intercepted_client_is_neither_compacted_nor_reported() -> (
    None
):
    client = Client()

    def model(prompt: Prompt) -> str:
        client.create(prompt + history(20))  # over the session's budget, if it were compacted
        return "the summary"

    with CompactingSession(
        max_tokens=400, intercept=[(Client, "create")], summarize=llm_summarizer(model)
    ) as session:
        client.create(history())

    *summarizer_calls, user_call = client.sent
    # The prompt and the padding, whole (the summary's own room may cut once more).
    assert summarizer_calls
    assert all(len(call) == 22 for call in summarizer_calls)
    (event,) = session.events  # the user's call only
    assert event.summary == "the summary"
    assert user_call == list(event.messages)
    assert session.stats.calls == 1


def test_summarizers_with_other_settings_keep_their_summaries_apart() -> None:
    model = Model()
    names = {
        llm_summarizer(model).__qualname__,
        llm_summarizer(model, instructions="Be brief.").__qualname__,
        llm_summarizer(model, max_summary_tokens=10).__qualname__,
        llm_summarizer(Model()).__qualname__,
    }
    assert len(names) == 3  # two equal Models are one client by name
    assert llm_summarizer(model).__qualname__ == llm_summarizer(model).__qualname__


@pytest.mark.parametrize(
    ("kwargs", "error", "text"),
    [
        ({"client": 42}, TypeError, "'client' must be a client ("),
        ({"model": "m"}, ValueError, "'model' must be None with a plain callable"),
        ({"instructions": 3}, TypeError, "'instructions' must be a str or None"),
        ({"max_summary_tokens": 0}, ValueError, "'max_summary_tokens' must be positive"),
        ({"max_summary_tokens": 1.5}, TypeError, "'max_summary_tokens' must be an int"),
        ({"max_input_tokens": True}, TypeError, "'max_input_tokens' must be an int"),
        ({"max_input_tokens": 300}, ValueError, "'max_input_tokens' must be at least"),
        ({"timeout": 0}, ValueError, "'timeout' must be positive"),
        ({"timeout": "1"}, TypeError, "'timeout' must be a number of seconds or None"),
        ({"cache_aligned": "yes"}, TypeError, "'cache_aligned' must be a bool"),
    ],
)
def test_bad_options_are_refused_when_it_is_made(
    kwargs: Dict[str, Any], error: type, text: str
) -> None:
    given: Dict[str, Any] = {"client": Model(), **kwargs}
    with pytest.raises(error) as raised:
        llm_summarizer(**given)
    assert str(raised.value).startswith(text)
