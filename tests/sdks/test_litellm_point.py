"""The LiteLLM facts an interception of ``completion``/``acompletion`` relies on.

``from litellm import completion`` binds ``litellm.chat_completions.dispatch.completion``,
which calls the module global ``_PYTHON_COMPLETION`` (``litellm.main.completion``)
at every call; patching that global reaches callers who imported ``completion``
before the patch. These tests pin that, the argument shapes the patch sees,
the usage on results and streams, and the error a context-length 400 becomes.
Run only where LiteLLM is installed (the optional framework environment).
"""

from __future__ import annotations

import asyncio
import gc
import inspect
from typing import Any, Dict, Iterator, List

import pytest

litellm = pytest.importorskip("litellm")
dispatch = pytest.importorskip(
    "litellm.chat_completions.dispatch", reason="this LiteLLM has no dispatch module"
)

import wrapt  # noqa: E402
from litellm import acompletion, completion  # noqa: E402  # bound before any patch

from ctx_compact.testing import FakeProvider, count_tokens  # noqa: E402

pytestmark = [
    pytest.mark.filterwarnings(
        r"ignore:Items? .* on TypedDict class .* using the `ReadOnly` qualifier:UserWarning"
    ),
    # LiteLLM's stream wrapper reads model_fields and model_computed_fields on an instance.
    pytest.mark.filterwarnings(
        r"ignore:Accessing the 'model_(computed_)?fields' attribute:DeprecationWarning"
    ),
]

HISTORY = [
    {"role": "user", "content": "one"},
    {"role": "assistant", "content": "two"},
    {"role": "user", "content": "three"},
]
ROUTES = {"openai/gpt-4o": "/v1", "anthropic/claude-sonnet-4-6": ""}


@pytest.fixture
def calls() -> Iterator[List[Dict[str, Any]]]:
    """Patch the dispatch globals; the recorder cuts the messages to the last one."""
    records: List[Dict[str, Any]] = []
    signature = inspect.signature(litellm.main.completion)

    def trimmed(args: Any, kwargs: Any) -> Any:
        bound = signature.bind_partial(*args, **kwargs)
        records.append(dict(bound.arguments))
        bound.arguments["messages"] = bound.arguments["messages"][-1:]
        return bound.args, bound.kwargs

    def sync(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        args, kwargs = trimmed(args, kwargs)
        return wrapped(*args, **kwargs)

    async def asynchronous(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        args, kwargs = trimmed(args, kwargs)
        return await wrapped(*args, **kwargs)

    originals = dispatch._PYTHON_COMPLETION, dispatch._PYTHON_ACOMPLETION
    dispatch._PYTHON_COMPLETION = wrapt.FunctionWrapper(originals[0], sync)
    dispatch._PYTHON_ACOMPLETION = wrapt.FunctionWrapper(originals[1], asynchronous)
    try:
        yield records
    finally:
        dispatch._PYTHON_COMPLETION, dispatch._PYTHON_ACOMPLETION = originals


def test_the_public_names_are_the_dispatch_functions() -> None:
    assert completion is litellm.completion is dispatch.completion
    assert acompletion is litellm.acompletion is dispatch.acompletion


# LiteLLM caches an async HTTP client (and a helper event loop) per loop and
# never closes them; they are collected below, inside this test, where the
# warnings about them are expected.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("model", list(ROUTES))
def test_completion_bound_before_the_patch_goes_through_it(
    model: str, provider: FakeProvider, calls: List[Dict[str, Any]]
) -> None:
    base = provider.base_url + ROUTES[model]

    by_keyword = completion(model=model, messages=HISTORY, api_base=base, api_key="t", max_tokens=9)
    positional = completion(model, HISTORY, api_base=base, api_key="t", max_tokens=9)
    flagged = asyncio.run(
        completion(model=model, messages=HISTORY, api_base=base, api_key="t", acompletion=True)
    )
    awaited = asyncio.run(acompletion(model=model, messages=HISTORY, api_base=base, api_key="t"))
    gc.collect()

    assert [call["messages"] for call in calls] == [HISTORY] * 4
    assert all(call["messages"] is HISTORY for call in calls)  # the caller's own list
    assert [len(r.body["messages"]) for r in provider.requests] == [1] * 4
    for response in (by_keyword, positional, flagged, awaited):
        assert response.usage.prompt_tokens > 0


def test_the_anthropic_route_sends_blocks_so_it_costs_more_than_the_openai_form(
    provider: FakeProvider,
) -> None:
    response = completion(
        model="anthropic/claude-sonnet-4-6",
        messages=HISTORY,
        api_base=provider.base_url,
        api_key="t",
        max_tokens=9,
    )

    sent = provider.requests[-1].body["messages"]
    assert sent[0] == {"role": "user", "content": [{"type": "text", "text": "one"}]}
    assert response.usage.prompt_tokens == sum(count_tokens(m) for m in sent)
    assert response.usage.prompt_tokens > sum(count_tokens(m) for m in HISTORY)


@pytest.mark.parametrize("model", list(ROUTES))
def test_a_stream_reports_usage_on_its_last_chunk(model: str, provider: FakeProvider) -> None:
    stream = completion(
        model=model,
        messages=HISTORY,
        api_base=provider.base_url + ROUTES[model],
        api_key="t",
        max_tokens=9,
        stream=True,
        stream_options={"include_usage": True},
    )

    chunks = list(stream)

    assert chunks[-1].usage.prompt_tokens == provider_input_tokens(provider)


def provider_input_tokens(provider: FakeProvider) -> int:
    return sum(count_tokens(m) for m in provider.requests[-1].body["messages"])


@pytest.mark.parametrize(
    ("model", "text"),
    [
        ("openai/gpt-4o", "This model's maximum context length is 5 tokens."),
        ("anthropic/claude-sonnet-4-6", "prompt is too long: "),
    ],
)
def test_a_context_length_400_is_a_context_window_exceeded_error(
    model: str, text: str, provider: FakeProvider
) -> None:
    provider.context_limit = 5

    with pytest.raises(litellm.ContextWindowExceededError) as caught:
        completion(
            model=model,
            messages=HISTORY,
            api_base=provider.base_url + ROUTES[model],
            api_key="t",
            max_tokens=9,
        )

    assert text in str(caught.value)
    assert caught.value.status_code == 400
