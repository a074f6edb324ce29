"""``CompactingSession(intercept="litellm")``: LiteLLM's completion functions, wherever imported.

Runs only where LiteLLM is installed. ``completion`` and ``acompletion`` are
imported here at module level, before any session, as applications do: the
interception must still reach them. Both LiteLLM routes go to the local
provider: ``openai/`` (through the openai SDK) and ``anthropic/`` (LiteLLM's own
HTTP client, in Anthropic's format, which counts more than the OpenAI-format
messages the session measures: the case ``on_overflow="retry"`` and
calibration are for). LiteLLM runs on asyncio only, so its async test does too.
"""

from __future__ import annotations

import copy
from typing import Any, Dict, List

import pytest

litellm = pytest.importorskip("litellm")
dispatch = pytest.importorskip("litellm.chat_completions.dispatch")

from litellm import acompletion, completion  # noqa: E402

from ctx_compact import estimate_tokens  # noqa: E402
from ctx_compact.testing import FakeProvider  # noqa: E402
from middleware import CompactingSession  # noqa: E402

from ._conversations import OPENAI_BUDGET as BUDGET  # noqa: E402
from ._conversations import Message, openai_history  # noqa: E402

pytestmark = [
    pytest.mark.filterwarnings(
        r"ignore:Items? .* on TypedDict class .* using the `ReadOnly` qualifier:UserWarning"
    ),
    # LiteLLM's own stream handler reads a deprecated pydantic attribute off its
    # chunks (without any session too); under -W error that ends the stream.
    pytest.mark.filterwarnings(r"ignore:Accessing the 'model_(computed_)?fields' attribute"),
    # An event loop LiteLLM leaves unclosed (with its AF_UNIX self-pipe) may be
    # collected during any later test; the HTTP sockets (AF_INET) stay checked.
    pytest.mark.filterwarnings(
        r"ignore:Exception ignored in. <(socket\.socket fd=\d+, family=1,|function BaseEventLoop)"
        r":pytest.PytestUnraisableExceptionWarning"
    ),
]

GLOBALS = ("_PYTHON_COMPLETION", "_PYTHON_ACOMPLETION")


def chatter(turns: int = 80) -> List[Message]:
    """Short turns: LiteLLM's Anthropic translation makes each a block list, half as long again."""
    messages: List[Message] = [{"role": "system", "content": "Be brief."}]
    for turn in range(turns):
        messages.append({"role": "user", "content": f"Question {turn}?"})
        messages.append({"role": "assistant", "content": f"Answer {turn}."})
    messages.append({"role": "user", "content": "And now?"})
    return messages


def openai_route(provider: FakeProvider) -> Dict[str, Any]:
    return {"model": "openai/gpt-4o", "api_base": provider.base_url + "/v1", "api_key": "test"}


def anthropic_route(provider: FakeProvider) -> Dict[str, Any]:
    return {"model": "anthropic/claude-sonnet-4-6", "api_base": provider.base_url, "api_key": "t"}


def test_completion_imported_before_the_block_is_compacted_once_per_request(
    provider: FakeProvider,
) -> None:
    history = openai_history()
    snapshot = copy.deepcopy(history)
    route = openai_route(provider)
    # LiteLLM's openai/ route goes through the openai SDK: intercepting both is
    # still one compaction and one event per request.
    with CompactingSession(max_tokens=BUDGET, intercept=["litellm", "openai"]) as session:
        response = completion(messages=history, **route)
        stream = completion(
            messages=history, stream=True, stream_options={"include_usage": True}, **route
        )
        chunks = list(stream)
    assert history == snapshot
    assert len(provider.requests) == 2
    plain, streamed = session.events
    assert plain.function == streamed.function == "litellm.completion"
    assert plain.tokens_before > BUDGET >= plain.tokens_after
    assert plain.provider_tokens == response.usage.prompt_tokens
    assert streamed.provider_tokens == chunks[-1].usage.prompt_tokens <= BUDGET
    assert [len(r.body["messages"]) for r in provider.requests] == [len(plain.messages)] * 2


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_acompletion_imported_before_the_block(provider: FakeProvider) -> None:
    async with CompactingSession(max_tokens=BUDGET, intercept="litellm") as session:
        response = await acompletion(messages=openai_history(), **openai_route(provider))
    (event,) = session.events
    assert event.compacted
    assert event.provider_tokens == response.usage.prompt_tokens <= BUDGET


def test_the_anthropic_route_over_the_limit_is_retried_with_the_providers_figures(
    provider: FakeProvider,
) -> None:
    # The budget is counted on the OpenAI-format messages; LiteLLM sends block
    # lists to Anthropic, which count more: at the limit the first try is refused.
    assert sum(map(estimate_tokens, chatter())) > BUDGET
    provider.context_limit = BUDGET
    with CompactingSession(
        max_tokens=BUDGET, intercept="litellm", on_overflow="retry", calibrate=True
    ) as session:
        response = completion(messages=chatter(), **anthropic_route(provider))
        again = completion(messages=chatter(), **anthropic_route(provider))
    first, second = session.events
    assert first.retried
    assert response.usage.prompt_tokens <= BUDGET
    # The error's figures calibrated the session: the next request fits the first time.
    assert session.calibration > 1.0
    assert not second.retried
    assert again.usage.prompt_tokens <= BUDGET
    assert len(provider.requests) == 3


def test_the_module_globals_are_the_original_objects_after_the_block() -> None:
    before = [vars(dispatch)[name] for name in GLOBALS]
    with CompactingSession(max_tokens=BUDGET, intercept="litellm"):
        assert all(vars(dispatch)[n] is not b for n, b in zip(GLOBALS, before))
    assert all(vars(dispatch)[n] is b for n, b in zip(GLOBALS, before))


def test_the_dispatch_reads_the_globals_at_call_time() -> None:
    # Pinned: an upgrade that stops routing through them (or moves chat
    # completions to the native path) must fail here, not pass silently.
    assert litellm.completion is dispatch.completion
    assert litellm.acompletion is dispatch.acompletion
    for name, function in (
        ("_PYTHON_COMPLETION", dispatch.completion),
        ("_PYTHON_ACOMPLETION", dispatch.acompletion),
    ):
        assert name in function.__code__.co_names
