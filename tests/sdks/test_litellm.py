"""Compaction in front of LiteLLM's ``completion``, proved against the local provider.

LiteLLM is large and not a test dependency: this module runs only where it is
installed (``python -m pip install litellm``, then
``python -m pytest tests/sdks/test_litellm.py``). It talks to the local server's
OpenAI endpoint as ``openai/<model>`` with ``api_base``; the conversations and
the checks of what the server received are the OpenAI tests' own.
"""

from __future__ import annotations

import copy
from typing import Any, List, Tuple

import pytest

litellm = pytest.importorskip("litellm")

from ctx_compact import check_pairing, estimate_tokens  # noqa: E402
from ctx_compact.testing import FakeProvider  # noqa: E402
from middleware import CompactingSession, CompactionEvent, budgeted  # noqa: E402

from ._conversations import OPENAI_BUDGET as BUDGET  # noqa: E402
from ._conversations import (  # noqa: E402
    ORPHAN_TOOL,
    Message,
    naive_trim,
    openai_history,
)

MODEL = "openai/gpt-4o"

# LiteLLM builds pydantic schemas on its first call, from TypedDicts of its own
# that use ReadOnly items; pydantic warns about each.
pytestmark = pytest.mark.filterwarnings(
    r"ignore:Items? .* on TypedDict class .* using the `ReadOnly` qualifier:UserWarning"
)


def litellm_wire(message: Message) -> Message:
    """What LiteLLM sends for a message: it leaves out a ``content`` that is ``None``."""
    return {k: v for k, v in message.items() if not (k == "content" and v is None)}


def received(
    provider: FakeProvider,
    history: List[Message],
    snapshot: List[Message],
    events: List[CompactionEvent],
) -> Tuple[CompactionEvent, List[Message]]:
    """Check the one request the server received against the event; return both."""
    assert history == snapshot, "the caller's history was mutated"
    (event,) = events
    (request,) = provider.requests
    sent: List[Message] = request.body["messages"]
    assert event.tokens_before == sum(map(estimate_tokens, history)) > BUDGET
    assert event.compacted
    assert event.fits
    assert len(sent) == len(event.messages) < len(history)
    assert sent == [litellm_wire(m) for m in event.messages]
    assert check_pairing(sent) == []
    # LiteLLM sends a little less than it was given (no "content":null), so the
    # provider counts a little less than the estimate.
    assert sum(map(estimate_tokens, sent)) < event.tokens_after <= BUDGET
    return event, sent


@pytest.fixture
def anyio_backend() -> str:
    """LiteLLM's async path is built on asyncio: it cannot run on trio."""
    return "asyncio"


@pytest.fixture(autouse=True)
def _no_litellm_banner(monkeypatch: pytest.MonkeyPatch) -> None:
    # LiteLLM prints a "Give Feedback / Get Help" banner on every error otherwise.
    monkeypatch.setattr(litellm, "suppress_debug_info", True)


def test_a_decorated_completion_sends_the_history_compacted(provider: FakeProvider) -> None:
    history = openai_history()
    snapshot = copy.deepcopy(history)
    events: List[CompactionEvent] = []

    @budgeted(max_tokens=BUDGET, on_compact=events.append)
    def ask(messages: List[Any]) -> Any:
        return litellm.completion(
            model=MODEL, api_base=provider.base_url + "/v1", api_key="test", messages=messages
        )

    response = ask(history)

    event, sent = received(provider, history, snapshot, events)
    assert response.choices[0].message.content == f"Fake reply to {len(sent)} messages."
    assert event.provider_tokens == response.usage.prompt_tokens
    assert event.provider_tokens == sum(map(estimate_tokens, sent))


def test_budgeted_completion_itself(provider: FakeProvider) -> None:
    history = openai_history()
    snapshot = copy.deepcopy(history)
    events: List[CompactionEvent] = []
    completion = budgeted(max_tokens=BUDGET, on_compact=events.append)(litellm.completion)

    # completion(model, messages, ...): the messages are found by position too.
    response = completion(MODEL, history, api_base=provider.base_url + "/v1", api_key="test")

    event, sent = received(provider, history, snapshot, events)
    assert event.provider_tokens == response.usage.prompt_tokens
    assert event.provider_tokens == sum(map(estimate_tokens, sent))


def test_a_session_intercepting_completion_by_name(provider: FakeProvider) -> None:
    history = openai_history()
    snapshot = copy.deepcopy(history)
    events: List[CompactionEvent] = []

    with CompactingSession(
        max_tokens=BUDGET, intercept=["litellm.completion"], on_compact=events.append
    ):
        response = litellm.completion(
            model=MODEL, api_base=provider.base_url + "/v1", api_key="test", messages=history
        )

    event, sent = received(provider, history, snapshot, events)
    assert event.provider_tokens == response.usage.prompt_tokens
    assert event.provider_tokens == sum(map(estimate_tokens, sent))


@pytest.mark.anyio
async def test_budgeted_acompletion(provider: FakeProvider) -> None:
    history = openai_history()
    snapshot = copy.deepcopy(history)
    events: List[CompactionEvent] = []
    acompletion = budgeted(max_tokens=BUDGET, on_compact=events.append)(litellm.acompletion)

    response = await acompletion(
        model=MODEL, api_base=provider.base_url + "/v1", api_key="test", messages=history
    )

    event, sent = received(provider, history, snapshot, events)
    assert event.provider_tokens == response.usage.prompt_tokens
    assert event.provider_tokens == sum(map(estimate_tokens, sent))


def test_a_naive_trim_to_the_same_budget_is_rejected(provider: FakeProvider) -> None:
    naive = naive_trim(openai_history(), BUDGET)

    with pytest.raises(litellm.BadRequestError) as caught:
        litellm.completion(
            model=MODEL, api_base=provider.base_url + "/v1", api_key="test", messages=naive
        )

    assert caught.value.status_code == 400
    assert ORPHAN_TOOL in str(caught.value)
    assert len(provider.requests) == 1  # no retry hid the rejection
