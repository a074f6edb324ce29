"""The SDK facts an SDK-wide interception relies on, pinned against the real clients.

An SDK-wide session intercepts ``openai`` and ``anthropic`` at their base client's
``request`` method (``SyncAPIClient.request`` / ``AsyncAPIClient.request`` in
``openai._base_client`` and ``anthropic._base_client``), because every route
ends there, including methods bound before the patch (LangChain caches
``with_raw_response.create``, instructor stores the bound ``create``). These
tests patch that point with a recording wrapper and prove, per route: one call
per request, the body holds plain JSON dicts, a replaced body is what goes on
the wire, and a context-length error is raised there (before a stream is
returned). An SDK release that moves any of this fails here first.
"""

from __future__ import annotations

import copy
from typing import Any, Callable, Dict, Iterator, List, Tuple

import pytest
import wrapt

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

import anthropic._base_client as anthropic_base  # noqa: E402
import openai._base_client as openai_base  # noqa: E402

from ctx_compact.testing import FakeProvider  # noqa: E402

MESSAGES_KEY = {"/chat/completions": "messages", "/responses": "input", "/v1/messages": "messages"}
HISTORY = [
    {"role": "user", "content": "one"},
    {"role": "assistant", "content": "two"},
    {"role": "user", "content": "three"},
]

Seen = List[Tuple[str, Dict[str, Any]]]


@pytest.fixture
def clients(provider: FakeProvider) -> Iterator[Tuple[Any, Any]]:
    oc = openai.OpenAI(base_url=provider.base_url + "/v1", api_key="t", max_retries=0)
    ac = anthropic.Anthropic(base_url=provider.base_url, api_key="t", max_retries=0)
    with oc, ac:
        yield oc, ac


def last_message_only(options: Any) -> Any:
    """A copy of the request options whose messages are cut to the last one."""
    key = MESSAGES_KEY.get(options.url.split("?", 1)[0])
    if key is None or not isinstance(options.json_data, dict):
        return options
    trimmed = copy.copy(options)
    trimmed.json_data = {**options.json_data, key: options.json_data[key][-1:]}
    return trimmed


@pytest.fixture
def seen() -> Iterator[Seen]:
    """Patch the four ``request`` methods with a recorder that also trims the messages."""
    records: Seen = []

    def sync(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        cast_to, options = args[0], args[1]
        records.append((options.url, options.json_data))
        return wrapped(cast_to, last_message_only(options), *args[2:], **kwargs)

    async def asynchronous(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        cast_to, options = args[0], args[1]
        records.append((options.url, options.json_data))
        return await wrapped(cast_to, last_message_only(options), *args[2:], **kwargs)

    originals = []
    for module in (openai_base, anthropic_base):
        for name, wrapper in (("SyncAPIClient", sync), ("AsyncAPIClient", asynchronous)):
            owner = getattr(module, name)
            originals.append((owner, vars(owner)["request"]))
            wrapt.wrap_function_wrapper(module, f"{name}.request", wrapper)
    try:
        yield records
    finally:
        for owner, original in originals:
            owner.request = original


def chat_stream(oc: Any, ac: Any) -> Any:
    with oc.chat.completions.stream(model="m", messages=HISTORY) as stream:
        return stream.get_final_completion()


def responses_stream(oc: Any, ac: Any) -> Any:
    with oc.responses.stream(model="m", input=HISTORY) as stream:
        return stream.get_final_response()


def messages_stream(oc: Any, ac: Any) -> Any:
    with ac.messages.stream(model="c", max_tokens=8, messages=HISTORY) as stream:
        return stream.get_final_message()


def beta_messages_stream(oc: Any, ac: Any) -> Any:
    with ac.beta.messages.stream(model="c", max_tokens=8, messages=HISTORY) as stream:
        return stream.get_final_message()


def streaming_response(oc: Any, ac: Any) -> Any:
    with oc.chat.completions.with_streaming_response.create(model="m", messages=HISTORY) as r:
        return r.parse()


ROUTES: Dict[str, Callable[[Any, Any], Any]] = {
    "chat.completions.create": lambda oc, ac: oc.chat.completions.create(
        model="m", messages=HISTORY
    ),
    "chat.completions.create(stream=True)": lambda oc, ac: list(
        oc.chat.completions.create(model="m", messages=HISTORY, stream=True)
    ),
    "chat.completions.parse": lambda oc, ac: oc.chat.completions.parse(model="m", messages=HISTORY),
    "chat.completions.stream": chat_stream,
    "chat.completions.with_raw_response.create": lambda oc, ac: (
        oc.chat.completions.with_raw_response.create(model="m", messages=HISTORY).parse()
    ),
    "chat.completions.with_streaming_response.create": streaming_response,
    "responses.create": lambda oc, ac: oc.responses.create(model="m", input=HISTORY),
    "responses.parse": lambda oc, ac: oc.responses.parse(model="m", input=HISTORY),
    "responses.stream": responses_stream,
    "messages.create": lambda oc, ac: ac.messages.create(
        model="c", max_tokens=8, messages=HISTORY, system="Be terse."
    ),
    "messages.stream": messages_stream,
    "messages.with_raw_response.create": lambda oc, ac: ac.messages.with_raw_response.create(
        model="c", max_tokens=8, messages=HISTORY
    ).parse(),
    "beta.messages.create": lambda oc, ac: ac.beta.messages.create(
        model="c", max_tokens=8, messages=HISTORY
    ),
    "beta.messages.stream": beta_messages_stream,
}


@pytest.mark.parametrize("route", list(ROUTES))
def test_every_route_passes_once_through_request_with_a_plain_body(
    route: str, clients: Tuple[Any, Any], provider: FakeProvider, seen: Seen
) -> None:
    ROUTES[route](*clients)

    ((url, body),) = seen
    key = MESSAGES_KEY[url.split("?", 1)[0]]
    assert body[key] == HISTORY
    assert all(type(message) is dict for message in body[key])
    # The replaced body is the one sent.
    (request,) = provider.requests
    assert request.body[key] == HISTORY[-1:]


def test_methods_bound_before_the_patch_still_pass_through_request(
    provider: FakeProvider,
) -> None:
    oc = openai.OpenAI(base_url=provider.base_url + "/v1", api_key="t", max_retries=0)
    ac = anthropic.Anthropic(base_url=provider.base_url, api_key="t", max_retries=0)
    with oc, ac:
        raw_create = oc.chat.completions.with_raw_response.create  # as LangChain caches it
        bound_create = oc.chat.completions.create  # as instructor stores it
        raw_messages = ac.messages.with_raw_response.create
        records: List[str] = []

        def record(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
            records.append(args[1].url)
            return wrapped(*args, **kwargs)

        patched = [
            (owner, vars(owner)["request"])
            for owner in (openai_base.SyncAPIClient, anthropic_base.SyncAPIClient)
        ]
        wrapt.wrap_function_wrapper(openai_base, "SyncAPIClient.request", record)
        wrapt.wrap_function_wrapper(anthropic_base, "SyncAPIClient.request", record)
        try:
            raw_create(model="m", messages=HISTORY).parse()
            bound_create(model="m", messages=HISTORY)
            raw_messages(model="c", max_tokens=8, messages=HISTORY).parse()
        finally:
            for owner, original in patched:
                owner.request = original

    assert records == ["/chat/completions", "/chat/completions", "/v1/messages"]
    assert all(vars(owner)["request"] is original for owner, original in patched)


@pytest.mark.anyio
async def test_async_clients_pass_through_the_async_request(
    provider: FakeProvider, seen: Seen
) -> None:
    oc = openai.AsyncOpenAI(base_url=provider.base_url + "/v1", api_key="t", max_retries=0)
    ac = anthropic.AsyncAnthropic(base_url=provider.base_url, api_key="t", max_retries=0)
    async with oc, ac:
        await oc.chat.completions.create(model="m", messages=HISTORY)
        await oc.responses.create(model="m", input=HISTORY)
        await ac.messages.create(model="c", max_tokens=8, messages=HISTORY)
        await ac.beta.messages.create(model="c", max_tokens=8, messages=HISTORY)

    assert [url.split("?", 1)[0] for url, _ in seen] == [
        "/chat/completions",
        "/responses",
        "/v1/messages",
        "/v1/messages",
    ]
    assert [len(r.body.get("messages") or r.body["input"]) for r in provider.requests] == [1] * 4


STREAMING_ROUTES = [
    "chat.completions.create(stream=True)",
    "chat.completions.stream",
    "responses.stream",
    "messages.stream",
    "beta.messages.stream",
]


@pytest.mark.parametrize("route", ["chat.completions.create", *STREAMING_ROUTES])
def test_a_context_length_error_is_raised_by_request_itself(
    route: str, clients: Tuple[Any, Any], provider: FakeProvider
) -> None:
    # A retry wraps request in try/except: that needs the error before any stream is returned.
    provider.context_limit = 1
    errors: List[BaseException] = []

    def catch(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        try:
            return wrapped(*args, **kwargs)
        except Exception as exc:
            errors.append(exc)
            raise

    patched = [
        (owner, vars(owner)["request"])
        for owner in (openai_base.SyncAPIClient, anthropic_base.SyncAPIClient)
    ]
    wrapt.wrap_function_wrapper(openai_base, "SyncAPIClient.request", catch)
    wrapt.wrap_function_wrapper(anthropic_base, "SyncAPIClient.request", catch)
    try:
        with pytest.raises((openai.BadRequestError, anthropic.BadRequestError)):
            ROUTES[route](*clients)
    finally:
        for owner, original in patched:
            owner.request = original

    (error,) = errors
    assert error.status_code == 400  # type: ignore[attr-defined]
    assert "context" in str(error) or "prompt is too long" in str(error)
