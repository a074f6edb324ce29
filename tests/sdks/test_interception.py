"""``CompactingSession(intercept="openai"/"anthropic")``: every request an SDK sends, every route.

The real ``openai`` and ``anthropic`` clients talk to the local provider
(ctx_compact.testing), which counts tokens exactly as the default estimator
does and rejects broken tool pairing with each provider's own 400. Each route a
framework may take (create, parse, the stream helpers, ``stream=True``, the
Responses API, Anthropic's ``beta`` namespace, ``with_raw_response`` and
``with_streaming_response``, clients and bound methods captured before the
block) must give one event per request, a compacted body the provider accepts,
and the provider's own prompt size on the event. On exit every patched
attribute is the original object again. With ``context_limit`` the provider
refuses long prompts, and ``on_overflow="retry"`` retries them once.

Async tests run on asyncio and trio through the ``anyio_backend`` fixture.
"""

from __future__ import annotations

import copy
import inspect
import json
from typing import Any, Callable, Dict, Iterator, List

import pytest

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")
openai_base = pytest.importorskip("openai._base_client")
anthropic_base = pytest.importorskip("anthropic._base_client")
openai_models = pytest.importorskip("openai._models")
anthropic_models = pytest.importorskip("anthropic._models")

from ctx_compact import check_pairing, estimate_tokens  # noqa: E402
from ctx_compact.testing import FakeProvider  # noqa: E402
from middleware import CompactingSession, CompactionEvent, budgeted  # noqa: E402

from ._conversations import (  # noqa: E402
    TRIO_STREAM_WARNING,
    Message,
    anthropic_history,
    openai_history,
)

BUDGET = 1200
MODEL = "gpt-4o"
CLAUDE = "claude-sonnet-4-6"
SYSTEM = "You are a travel assistant. Answer briefly, in the user's language."
INSTRUCTIONS = "Answer in one sentence."
POINTS = [
    (openai_base.SyncAPIClient, "request"),
    (openai_base.AsyncAPIClient, "request"),
    (anthropic_base.SyncAPIClient, "request"),
    (anthropic_base.AsyncAPIClient, "request"),
]
INCLUDE_USAGE = {"stream_options": {"include_usage": True}}
# The optional fields counted beside the messages, as the routes send them. The
# `optional_fields` fixture runs a test with them given and left out: a left-out
# field reaches the request options as the SDK's sentinel (NOT_GIVEN, omit).
OPTIONAL: Dict[str, Dict[str, str]] = {
    "system": {"system": SYSTEM},
    "instructions": {"instructions": INSTRUCTIONS},
}


@pytest.fixture(params=["given", "left out"])
def optional_fields(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "left out":
        for key in OPTIONAL:
            monkeypatch.setitem(OPTIONAL, key, {})
    return str(request.param)


def chat() -> List[Message]:
    return openai_history()


def responses_input() -> List[Message]:
    """``openai_history`` as Responses items: function_call / function_call_output pairs."""
    items: List[Message] = []
    for message in openai_history()[1:]:
        if message.get("tool_calls"):
            for call in message["tool_calls"]:
                items.append(
                    {
                        "type": "function_call",
                        "call_id": call["id"],
                        "name": call["function"]["name"],
                        "arguments": call["function"]["arguments"],
                    }
                )
        elif message["role"] == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message["tool_call_id"],
                    "output": message["content"],
                }
            )
        else:
            items.append({"role": message["role"], "content": message["content"]})
    return items


def claude_messages() -> List[Message]:
    return anthropic_history()


# --- the routes: each sends one request, consumes its result as a framework would, and
# returns the prompt size the caller saw and the path it went to ------------------------


def _chat_stream_last(stream: Any) -> int:
    chunks = list(stream)
    return int(chunks[-1].usage.prompt_tokens)


def _chat_helper(c: Any, a: Any) -> int:
    with c.chat.completions.stream(model=MODEL, messages=chat(), **INCLUDE_USAGE) as stream:
        for _ in stream:
            pass
        return int(stream.get_final_completion().usage.prompt_tokens)


def _responses_helper(c: Any, a: Any) -> int:
    with c.responses.stream(model=MODEL, input=responses_input(), **OPTIONAL["instructions"]) as s:
        for _ in s:
            pass
        return int(s.get_final_response().usage.input_tokens)


def _claude_helper(messages: Any) -> int:
    with messages.stream(
        model=CLAUDE, max_tokens=64, **OPTIONAL["system"], messages=claude_messages()
    ) as stream:
        for _ in stream:
            pass
        return int(stream.get_final_message().usage.input_tokens)


def _streaming_response(c: Any, a: Any) -> int:
    with c.chat.completions.with_streaming_response.create(model=MODEL, messages=chat()) as raw:
        return int(raw.parse().usage.prompt_tokens)


def _claude_streaming_response(c: Any, a: Any) -> int:
    with a.messages.with_streaming_response.create(
        model=CLAUDE, max_tokens=64, **OPTIONAL["system"], messages=claude_messages()
    ) as raw:
        return int(raw.parse().usage.input_tokens)


def _claude(create: Callable[..., Any]) -> int:
    kwargs = {"model": CLAUDE, "max_tokens": 64, "messages": claude_messages()}
    kwargs.update(OPTIONAL["system"])
    return int(create(**kwargs).usage.input_tokens)


SYNC_ROUTES: Dict[str, Callable[[Any, Any], int]] = {
    "chat.create": lambda c, a: (
        c.chat.completions.create(model=MODEL, messages=chat()).usage.prompt_tokens
    ),
    "chat.parse": lambda c, a: (
        c.chat.completions.parse(model=MODEL, messages=chat()).usage.prompt_tokens
    ),
    "chat.create(stream=True)": lambda c, a: _chat_stream_last(
        c.chat.completions.create(model=MODEL, messages=chat(), stream=True, **INCLUDE_USAGE)
    ),
    "chat.stream": _chat_helper,
    "chat.with_raw_response": lambda c, a: (
        c.chat.completions.with_raw_response.create(model=MODEL, messages=chat())
        .parse()
        .usage.prompt_tokens
    ),
    "chat.with_raw_response(stream=True)": lambda c, a: _chat_stream_last(
        c.chat.completions.with_raw_response.create(
            model=MODEL, messages=chat(), stream=True, **INCLUDE_USAGE
        ).parse()
    ),
    "chat.with_streaming_response": _streaming_response,
    "responses.create": lambda c, a: (
        c.responses.create(
            model=MODEL, input=responses_input(), **OPTIONAL["instructions"]
        ).usage.input_tokens
    ),
    "responses.parse": lambda c, a: (
        c.responses.parse(
            model=MODEL, input=responses_input(), **OPTIONAL["instructions"]
        ).usage.input_tokens
    ),
    "responses.stream": _responses_helper,
    "responses.with_raw_response": lambda c, a: (
        c.responses.with_raw_response.create(
            model=MODEL, input=responses_input(), **OPTIONAL["instructions"]
        )
        .parse()
        .usage.input_tokens
    ),
    "messages.create": lambda c, a: _claude(a.messages.create),
    "messages.stream": lambda c, a: _claude_helper(a.messages),
    "messages.with_raw_response": lambda c, a: _claude(
        lambda **kw: a.messages.with_raw_response.create(**kw).parse()
    ),
    "messages.with_streaming_response": _claude_streaming_response,
    "beta.messages.create": lambda c, a: _claude(a.beta.messages.create),
    "beta.messages.stream": lambda c, a: _claude_helper(a.beta.messages),
}

PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses"}


def wire_path(route: str) -> str:
    return PATHS.get(route.split(".")[0], "/v1/messages")


@pytest.fixture
def clients(provider: FakeProvider) -> Iterator[Any]:
    with (
        openai.OpenAI(base_url=provider.base_url + "/v1", api_key="test", max_retries=0) as c,
        anthropic.Anthropic(base_url=provider.base_url, api_key="test", max_retries=0) as a,
    ):
        yield c, a


def body_tokens(path: str, body: Message) -> int:
    """What the provider counted for one recorded body (tool definitions aside)."""
    key = "input" if path == "/v1/responses" else "messages"
    total = sum(estimate_tokens(m) for m in body[key])
    for extra in ("system", "instructions"):
        if body.get(extra) is not None:
            total += -(-len(json.dumps(body[extra], separators=(",", ":"))) // 4)
    return total


def check_one_request(
    provider: FakeProvider, events: List[CompactionEvent], route: str, seen: int
) -> CompactionEvent:
    (request,) = provider.requests
    assert request.path == wire_path(route)
    (event,) = events
    # Compacted to the budget, the parts beside the messages counted, and the
    # provider's own figure, which the caller saw too, on the event.
    assert event.tokens_before > BUDGET >= event.tokens_after
    assert event.compacted
    assert event.fits
    assert not event.retried
    assert event.provider_tokens == seen == event.tokens_after
    assert body_tokens(request.path, request.body) == seen
    key = "input" if request.path == "/v1/responses" else "messages"
    assert request.body[key] == [json.loads(json.dumps(m)) for m in event.messages]
    assert check_pairing(list(event.messages)) == []
    return event


# --- every route, sync ------------------------------------------------------------


@pytest.mark.parametrize("route", list(SYNC_ROUTES))
def test_every_sync_route_gives_one_event_with_the_providers_figure(
    route: str, provider: FakeProvider, clients: Any, optional_fields: str
) -> None:
    c, a = clients
    with CompactingSession(max_tokens=BUDGET, intercept=["openai", "anthropic"]) as session:
        seen = SYNC_ROUTES[route](c, a)
    check_one_request(provider, session.events, route, seen)
    assert session.stats.calls == 1


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
def test_clients_and_methods_captured_before_the_block_are_covered(
    sdk: str, provider: FakeProvider, optional_fields: str
) -> None:
    # Warmed up before the session, as LangChain and instructor do: the cached
    # with_raw_response and a stored bound create.
    if sdk == "openai":
        client = openai.OpenAI(base_url=provider.base_url + "/v1", api_key="test", max_retries=0)
        raw = client.chat.completions.with_raw_response.create
        bound = client.chat.completions.create
        raw(model=MODEL, messages=chat()[:2]).parse()

        def sends() -> List[int]:
            return [
                raw(model=MODEL, messages=chat()).parse().usage.prompt_tokens,
                bound(model=MODEL, messages=chat()).usage.prompt_tokens,
            ]

    else:
        client = anthropic.Anthropic(base_url=provider.base_url, api_key="test", max_retries=0)
        raw = client.beta.messages.with_raw_response.create
        bound = client.messages.create
        kwargs = {"model": CLAUDE, "max_tokens": 64, **OPTIONAL["system"]}
        raw(messages=claude_messages()[:1], **kwargs).parse()

        def sends() -> List[int]:
            return [
                raw(messages=claude_messages(), **kwargs).parse().usage.input_tokens,
                bound(messages=claude_messages(), **kwargs).usage.input_tokens,
            ]

    with client, CompactingSession(max_tokens=BUDGET, intercept=sdk) as session:
        seen = sends()
    assert [e.provider_tokens for e in session.events] == seen
    assert all(e.compacted and e.tokens_after == s for e, s in zip(session.events, seen))
    assert all(figure <= BUDGET for figure in seen)


def test_one_session_covers_chat_and_responses_with_their_own_keys(
    provider: FakeProvider, clients: Any
) -> None:
    c, _ = clients
    with CompactingSession(max_tokens=BUDGET, intercept="openai") as session:
        c.chat.completions.create(model=MODEL, messages=chat())
        c.responses.create(model=MODEL, input=responses_input(), **OPTIONAL["instructions"])
        c.responses.create(model=MODEL, input="a string input has nothing to compact")
    chat_event, responses_event = session.events
    assert chat_event.function == "openai /chat/completions"
    assert responses_event.function == "openai /responses"
    # instructions are counted against the budget, never dropped
    sent = provider.requests[1].body
    assert sent["instructions"] == INSTRUCTIONS
    fixed = -(-len(json.dumps(INSTRUCTIONS)) // 4)
    assert responses_event.tokens_after == sum(map(estimate_tokens, sent["input"])) + fixed
    assert provider.requests[2].body["input"] == "a string input has nothing to compact"


def test_the_callers_objects_are_untouched(provider: FakeProvider, clients: Any) -> None:
    c, a = clients
    history, claude = chat(), claude_messages()
    snapshots = copy.deepcopy((history, claude))
    with CompactingSession(max_tokens=BUDGET, intercept=["openai", "anthropic"]):
        c.chat.completions.create(model=MODEL, messages=history)
        a.messages.create(model=CLAUDE, max_tokens=64, **OPTIONAL["system"], messages=claude)
    assert (history, claude) == snapshots
    assert len(provider.requests[0].body["messages"]) < len(history)


def test_other_endpoints_pass_through(provider: FakeProvider, clients: Any) -> None:
    c, _ = clients
    session = CompactingSession(max_tokens=BUDGET, intercept="openai")
    with session, pytest.raises(openai.NotFoundError):
        c.embeddings.create(model="text-embedding-3-small", input="hi")
    assert session.events == []
    assert provider.requests[0].body["input"] == "hi"


# --- restore exactness and the block's edges ------------------------------------------


def _originals() -> List[Any]:
    return [vars(owner)[name] for owner, name in POINTS]


def test_every_patched_attribute_is_the_original_object_after_the_block(clients: Any) -> None:
    before = _originals()
    with CompactingSession(max_tokens=BUDGET, intercept=["openai", "anthropic"]):
        inside = _originals()
        assert all(now is not then for now, then in zip(inside, before))
    assert all(now is then for now, then in zip(_originals(), before))


def test_nested_sessions_and_an_exception_restore_exactly() -> None:
    before = _originals()
    outer = CompactingSession(max_tokens=BUDGET, intercept="openai")
    inner = CompactingSession(max_tokens=BUDGET, intercept=["openai", "anthropic"])
    with pytest.raises(KeyError), outer, inner:
        raise KeyError("boom")
    assert all(now is then for now, then in zip(_originals(), before))


def test_outside_the_block_requests_are_sent_untouched(
    provider: FakeProvider, clients: Any
) -> None:
    c, _ = clients
    with CompactingSession(max_tokens=BUDGET, intercept="openai") as session:
        pass
    c.chat.completions.create(model=MODEL, messages=chat())
    assert provider.requests[0].body["messages"] == json.loads(json.dumps(chat()))
    assert session.events == []


def test_an_explicit_target_and_the_sdk_give_one_event_per_request(
    provider: FakeProvider, clients: Any
) -> None:
    c, _ = clients
    target = "openai.resources.chat.completions.Completions.create"
    with CompactingSession(max_tokens=BUDGET, intercept=[target, "openai"]) as session:
        c.chat.completions.create(model=MODEL, messages=chat())
    (event,) = session.events
    assert event.function.endswith("Completions.create")


def test_a_bad_intercept_name_is_refused_at_construction() -> None:
    with pytest.raises(TypeError, match="'openai', 'anthropic', 'litellm'"):
        CompactingSession(max_tokens=BUDGET, intercept=["openia"])


# --- the interception points, pinned ------------------------------------------------


@pytest.mark.parametrize(("owner", "name"), POINTS)
def test_the_interception_points_are_where_the_sdks_send_every_request(
    owner: Any, name: str
) -> None:
    # Moved or renamed in an SDK upgrade: this fails, and so does the session's entry.
    function = vars(owner)[name]
    parameters = list(inspect.signature(function).parameters)
    assert parameters[:3] == ["self", "cast_to", "options"]
    assert inspect.iscoroutinefunction(function) == owner.__name__.startswith("Async")
    # The resource methods reach it through post(); parse does not go through create.
    post = inspect.getsource(vars(owner)["post"])
    assert "self.request(" in post


def test_the_request_options_carry_the_body_as_json_data() -> None:
    for module in (openai_models, anthropic_models):
        fields = module.FinalRequestOptions.model_fields
        assert {"url", "json_data"} <= set(fields)


# --- async, on asyncio and trio -------------------------------------------------------


async def _achat_stream_last(stream: Any) -> int:
    chunks = [chunk async for chunk in stream]
    return int(chunks[-1].usage.prompt_tokens)


async def _aclaude_helper(messages: Any) -> int:
    async with messages.stream(
        model=CLAUDE, max_tokens=64, **OPTIONAL["system"], messages=claude_messages()
    ) as stream:
        async for _ in stream:
            pass
        return int((await stream.get_final_message()).usage.input_tokens)


async def _aroute(route: str, c: Any, a: Any) -> int:
    if route == "chat.create":
        return (await c.chat.completions.create(model=MODEL, messages=chat())).usage.prompt_tokens
    if route == "chat.parse":
        return (await c.chat.completions.parse(model=MODEL, messages=chat())).usage.prompt_tokens
    if route == "chat.create(stream=True)":
        return await _achat_stream_last(
            await c.chat.completions.create(
                model=MODEL, messages=chat(), stream=True, **INCLUDE_USAGE
            )
        )
    if route == "chat.stream":
        async with c.chat.completions.stream(
            model=MODEL, messages=chat(), **INCLUDE_USAGE
        ) as stream:
            async for _ in stream:
                pass
            return (await stream.get_final_completion()).usage.prompt_tokens
    if route == "chat.with_raw_response":
        raw = await c.chat.completions.with_raw_response.create(model=MODEL, messages=chat())
        return raw.parse().usage.prompt_tokens
    if route == "chat.with_streaming_response":
        async with c.chat.completions.with_streaming_response.create(
            model=MODEL, messages=chat()
        ) as raw:
            return (await raw.parse()).usage.prompt_tokens
    if route == "responses.create":
        response = await c.responses.create(
            model=MODEL, input=responses_input(), **OPTIONAL["instructions"]
        )
        return response.usage.input_tokens
    if route == "responses.stream":
        async with c.responses.stream(
            model=MODEL, input=responses_input(), **OPTIONAL["instructions"]
        ) as stream:
            async for _ in stream:
                pass
            return (await stream.get_final_response()).usage.input_tokens
    if route == "messages.create":
        kwargs = {"model": CLAUDE, "max_tokens": 64, **OPTIONAL["system"]}
        return (await a.messages.create(messages=claude_messages(), **kwargs)).usage.input_tokens
    if route == "messages.stream":
        return await _aclaude_helper(a.messages)
    if route == "beta.messages.create":
        kwargs = {"model": CLAUDE, "max_tokens": 64, **OPTIONAL["system"]}
        created = await a.beta.messages.create(messages=claude_messages(), **kwargs)
        return created.usage.input_tokens
    assert route == "beta.messages.stream"
    return await _aclaude_helper(a.beta.messages)


ASYNC_ROUTES = [
    "chat.create",
    "chat.parse",
    "chat.create(stream=True)",
    "chat.stream",
    "chat.with_raw_response",
    "chat.with_streaming_response",
    "responses.create",
    "responses.stream",
    "messages.create",
    "messages.stream",
    "beta.messages.create",
    "beta.messages.stream",
]


@pytest.mark.filterwarnings(TRIO_STREAM_WARNING)
@pytest.mark.filterwarnings(r"ignore:Async generator 'anthropic\.:ResourceWarning")
@pytest.mark.anyio
@pytest.mark.parametrize("route", ASYNC_ROUTES)
async def test_every_async_route_gives_one_event_with_the_providers_figure(
    route: str, provider: FakeProvider, optional_fields: str
) -> None:
    async with (
        openai.AsyncOpenAI(base_url=provider.base_url + "/v1", api_key="test", max_retries=0) as c,
        anthropic.AsyncAnthropic(base_url=provider.base_url, api_key="test", max_retries=0) as a,
        CompactingSession(max_tokens=BUDGET, intercept=["openai", "anthropic"]) as session,
    ):
        seen = await _aroute(route, c, a)
    check_one_request(provider, session.events, route, seen)


# --- on_overflow="retry" against the provider's context limit -------------------------


def undercount(message: Any) -> int:
    """A tokenizer that counts 30% low: the prompt over the limit is sent, and refused."""
    return int(estimate_tokens(message) * 0.7)


def undercount_a_fifth(message: Any) -> int:
    """20% low: within what the figureless retry (a quarter off) makes up for."""
    return int(estimate_tokens(message) * 0.8)


RETRY_ROUTES = ["chat.create", "chat.stream", "responses.create", "messages.create"]


@pytest.mark.parametrize("route", RETRY_ROUTES)
def test_a_request_refused_for_length_is_recompacted_and_retried_once(
    route: str, clients: Any, provider: FakeProvider, optional_fields: str
) -> None:
    c, a = clients
    provider.context_limit = BUDGET
    # The Responses API names no figures: the retry takes a quarter off the estimate.
    counter = undercount_a_fifth if route.startswith("responses") else undercount
    with CompactingSession(
        max_tokens=BUDGET,
        intercept=["openai", "anthropic"],
        count_tokens=counter,
        on_overflow="retry",
    ) as session:
        seen = SYNC_ROUTES[route](c, a)
    refused, accepted = provider.requests
    assert body_tokens(refused.path, refused.body) > BUDGET
    assert seen == body_tokens(accepted.path, accepted.body) <= BUDGET
    (event,) = session.events
    assert event.retried
    assert event.provider_tokens == seen
    if route != "responses.create":
        # The error's figures taught the session the ratio (the Responses API gives none).
        assert session.calibration > 1.3


def test_a_retry_refused_again_reaches_the_caller_with_the_retried_event(
    clients: Any, provider: FakeProvider
) -> None:
    c, _ = clients
    provider.context_limit = BUDGET
    # 30% low, and no figures in the error: a quarter off is not enough.
    with (
        CompactingSession(
            max_tokens=BUDGET, intercept="openai", count_tokens=undercount, on_overflow="retry"
        ) as session,
        pytest.raises(openai.BadRequestError, match="exceeds the context window"),
    ):
        c.responses.create(model=MODEL, input=responses_input())
    (event,) = session.events
    assert event.retried
    assert event.provider_tokens is None
    assert len(provider.requests) == 2  # retried once, never more


def test_without_retry_the_refusal_reaches_the_caller_with_its_event(
    clients: Any, provider: FakeProvider
) -> None:
    c, _ = clients
    provider.context_limit = BUDGET
    with (
        CompactingSession(
            max_tokens=BUDGET, intercept="openai", count_tokens=undercount
        ) as session,
        pytest.raises(openai.BadRequestError, match="maximum context length"),
    ):
        c.chat.completions.create(model=MODEL, messages=chat())
    (event,) = session.events
    assert not event.retried
    assert event.provider_tokens is None
    assert len(provider.requests) == 1


def test_a_budgeted_function_around_the_sdk_retries_too(
    clients: Any, provider: FakeProvider
) -> None:
    _c, a = clients
    provider.context_limit = BUDGET
    events: List[CompactionEvent] = []

    @budgeted(
        max_tokens=BUDGET, count_tokens=undercount, on_overflow="retry", on_compact=events.append
    )
    def ask(messages: List[Message]) -> Any:
        return a.messages.create(model=CLAUDE, max_tokens=64, messages=messages)

    response = ask(claude_messages())
    assert response.usage.input_tokens <= BUDGET
    (event,) = events
    assert event.retried
    assert event.provider_tokens == response.usage.input_tokens
    assert len(provider.requests) == 2


@pytest.mark.anyio
async def test_async_retry_on_overflow(provider: FakeProvider) -> None:
    provider.context_limit = BUDGET
    events: List[CompactionEvent] = []
    async with openai.AsyncOpenAI(
        base_url=provider.base_url + "/v1", api_key="test", max_retries=0
    ) as c:

        @budgeted(
            max_tokens=BUDGET,
            count_tokens=undercount,
            on_overflow="retry",
            on_compact=events.append,
        )
        async def ask(messages: List[Message]) -> Any:
            return await c.chat.completions.create(model=MODEL, messages=messages)

        response = await ask(chat())
        async with CompactingSession(
            max_tokens=BUDGET,
            intercept="openai",
            count_tokens=undercount_a_fifth,
            on_overflow="retry",
        ) as session:
            intercepted = await c.responses.create(model=MODEL, input=responses_input())
    assert response.usage.prompt_tokens <= BUDGET
    assert intercepted.usage.input_tokens <= BUDGET
    assert [e.retried for e in events + session.events] == [True, True]
    assert len(provider.requests) == 4


# --- when a stream's event is reported --------------------------------------------------


def test_a_streams_event_waits_for_its_usage_and_a_dropped_stream_is_still_counted(
    provider: FakeProvider, clients: Any
) -> None:
    c, _ = clients
    with CompactingSession(max_tokens=BUDGET, intercept="openai") as session:
        stream = c.chat.completions.create(
            model=MODEL, messages=chat(), stream=True, **INCLUDE_USAGE
        )
        assert isinstance(stream, openai.Stream)
        assert session.events == []  # the figure has not arrived yet
        first = next(iter(stream))
        assert first.choices
        stream.close()  # closed early: reported now, without a figure
        (closed,) = session.events
        assert closed.provider_tokens is None
        abandoned = c.chat.completions.create(
            model=MODEL, messages=chat(), stream=True, **INCLUDE_USAGE
        )
        abandoned.response.close()
        del abandoned  # never iterated nor closed: the finalizer reports it
    assert session.stats.calls == 2
    assert len(provider.requests) == 2
