"""``CompactingSession(intercept="gemini")``: every request google-genai sends, every way in.

The real ``google-genai`` client talks to the testing kit's Gemini routes
(``generateContent``, ``streamGenerateContent``), which count tokens as the
default estimator does, reject broken function-calling turns with Gemini's own
400 and, with ``context_limit``, refuse long prompts with Gemini's
context-length error. Each way a caller sends contents (``models``, its
stream, ``client.aio``, chats, clients made before the block) must give one
event per request, a compacted request the provider accepts, and the
provider's ``usage_metadata.prompt_token_count`` on the event. Runs in the
``providers`` extra's venv.
"""

from __future__ import annotations

import copy
import inspect
import json
from typing import Any, Dict, Iterator, List

import pytest
from google import genai
from google.genai import errors, models, types

from ctx_compact import estimate_tokens
from ctx_compact.testing import FakeProvider
from middleware import CompactingSession, CompactionEvent

from ._conversations import CITIES, forecast

Content = Dict[str, Any]

BUDGET = 1200
MODEL = "gemini-2.5-flash"
SYSTEM = "You are a travel assistant. Answer briefly."
POINTS = [
    (models.Models, "_generate_content"),
    (models.Models, "_generate_content_stream"),
    (models.AsyncModels, "_generate_content"),
    (models.AsyncModels, "_generate_content_stream"),
]
WEATHER_TOOL = {
    "function_declarations": [
        {
            "name": "get_weather",
            "description": "The forecast for a city on a day.",
            "parameters_json_schema": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "day": {"type": "integer"}},
                "required": ["city", "day"],
            },
        }
    ]
}


def gemini_history(turns: int = 16) -> List[Content]:
    """Each turn asks for 1 to 3 cities, answered by parallel function calls.

    Contents as the REST API spells them (camelCase), so the estimate of each is
    what the kit counts for it on the wire; every other turn's responses come
    back out of order; some text is non-ASCII.
    """
    contents: List[Content] = []
    n = 0
    for turn in range(turns):
        cities = [CITIES[(turn + k * 3) % len(CITIES)] for k in range(1 + turn % 3)]
        ask = f"Turn {turn}: the weather in {' and '.join(cities)}?"
        contents.append({"role": "user", "parts": [{"text": ask}]})
        ids = []
        for _ in cities:
            n += 1
            ids.append(f"call_{n:03d}")
        contents.append(
            {
                "role": "model",
                "parts": [
                    {"functionCall": {"id": i, "name": "get_weather", "args": {"city": c}}}
                    for i, c in zip(ids, cities)
                ],
            }
        )
        results = [
            {
                "functionResponse": {
                    "id": i,
                    "name": "get_weather",
                    "response": json.loads(forecast(c, turn)),
                }
            }
            for i, c in zip(ids, cities)
        ]
        if turn % 2:
            results.reverse()
        contents.append({"role": "user", "parts": results})
        reply = f"Forecasts for {', '.join(cities)}. ☀️"
        contents.append({"role": "model", "parts": [{"text": reply}]})
    contents.append({"role": "user", "parts": [{"text": "Which city should I visit first? 🙂"}]})
    return contents


def as_objects(contents: List[Content]) -> List[types.Content]:
    return [types.Content.model_validate(c) for c in contents]


def new_client(provider: FakeProvider) -> genai.Client:
    options = types.HttpOptions(base_url=provider.base_url, api_version="v1beta")
    return genai.Client(api_key="test", http_options=options)


@pytest.fixture
def client(provider: FakeProvider) -> Iterator[genai.Client]:
    with new_client(provider) as made:
        yield made


def wire_tokens(body: Dict[str, Any]) -> int:
    """What the kit counts for a recorded body: its contents and system instruction."""
    total = sum(estimate_tokens(c) for c in body["contents"])
    if body.get("systemInstruction") is not None:
        total += estimate_tokens(body["systemInstruction"])
    return total


def check_one(provider: FakeProvider, event: CompactionEvent, seen: int) -> None:
    """One compacted request the provider accepted, with its figure on the event."""
    (request,) = provider.requests
    assert event.tokens_before > BUDGET >= event.tokens_after
    assert event.compacted
    assert event.fits
    assert not event.retried
    assert event.provider_tokens == seen == wire_tokens(request.body)
    assert event.tokens_after == seen  # the estimate of the wire spelling is exact
    assert request.body["contents"] == [json.loads(json.dumps(c)) for c in event.messages]


# --- the models API, sync --------------------------------------------------------------


def test_generate_content_is_compacted_with_the_system_instruction_counted(
    provider: FakeProvider, client: genai.Client
) -> None:
    history = gemini_history()
    snapshot = copy.deepcopy(history)
    config = {"system_instruction": SYSTEM}
    with CompactingSession(max_tokens=BUDGET, intercept="gemini") as session:
        response = client.models.generate_content(model=MODEL, contents=history, config=config)
    assert history == snapshot  # the caller's list and contents are untouched
    (event,) = session.events
    assert event.function == "gemini generateContent"
    seen = response.usage_metadata.prompt_token_count
    check_one(provider, event, seen)
    body = provider.requests[0].body
    assert body["systemInstruction"] == {"parts": [{"text": SYSTEM}], "role": "user"}
    # The messages kept are the caller's own dicts.
    assert all(any(m is c for c in history) for m in event.messages)


def test_generate_content_stream_reports_once_the_stream_ends(
    provider: FakeProvider, client: genai.Client
) -> None:
    with CompactingSession(max_tokens=BUDGET, intercept="gemini") as session:
        stream = client.models.generate_content_stream(model=MODEL, contents=gemini_history())
        assert session.events == []  # the figure has not arrived yet
        chunks = list(stream)
    (event,) = session.events
    assert event.function == "gemini streamGenerateContent"
    assert provider.requests[0].path == f"/v1beta/models/{MODEL}:streamGenerateContent"
    check_one(provider, event, chunks[-1].usage_metadata.prompt_token_count)
    assert "".join(c.text or "" for c in chunks).startswith("Fake reply")


def test_content_objects_are_compacted_and_sent_as_the_sdk_spells_them(
    provider: FakeProvider, client: genai.Client
) -> None:
    history = as_objects(gemini_history())
    with CompactingSession(max_tokens=BUDGET, intercept="gemini") as session:
        response = client.models.generate_content(model=MODEL, contents=history)
    (event,) = session.events
    assert event.compacted
    assert all(any(m is c for c in history) for m in event.messages)
    seen = response.usage_metadata.prompt_token_count
    assert event.provider_tokens == seen <= BUDGET
    # snake_case (function_call) is a little longer than the wire's camelCase.
    assert seen <= event.tokens_after <= BUDGET


@pytest.mark.parametrize(
    "contents",
    [
        "one question",
        types.Content(role="user", parts=[types.Part(text="one content")]),
        {"role": "user", "parts": [{"text": "one content as a dict"}]},
        types.Part(text="one part"),
        ["a list of parts", types.Part(text="is one user turn")],
    ],
    ids=["str", "Content", "dict", "Part", "parts"],
)
def test_contents_that_are_not_a_list_of_contents_pass_through(
    contents: Any, provider: FakeProvider, client: genai.Client
) -> None:
    with CompactingSession(max_tokens=1, intercept="gemini") as session:
        client.models.generate_content(model=MODEL, contents=contents)
    assert session.events == []
    (request,) = provider.requests
    assert len(request.body["contents"]) == 1


def test_tools_in_the_config_are_counted_against_the_budget(
    provider: FakeProvider, client: genai.Client
) -> None:
    with CompactingSession(max_tokens=BUDGET, intercept="gemini") as session:
        client.models.generate_content(model=MODEL, contents=gemini_history())
        client.models.generate_content(
            model=MODEL, contents=gemini_history(), config={"tools": [WEATHER_TOOL]}
        )
    plain, with_tools = session.events
    # The kit does not bill tool declarations; the session counts them, so it keeps less.
    assert with_tools.tokens_after <= BUDGET
    assert len(with_tools.messages) < len(plain.messages)
    assert with_tools.provider_tokens is not None
    assert with_tools.provider_tokens < with_tools.tokens_after


# --- clients made before and inside the block; restore exactness --------------------------


def _originals() -> List[Any]:
    return [vars(owner)[name] for owner, name in POINTS]


def test_clients_made_before_and_inside_the_block_are_covered(provider: FakeProvider) -> None:
    before = new_client(provider)
    generate = before.models.generate_content  # a bound method kept, as frameworks do
    with CompactingSession(max_tokens=BUDGET, intercept="gemini") as session:
        inside = new_client(provider)
        seen = [
            generate(model=MODEL, contents=gemini_history()).usage_metadata.prompt_token_count,
            inside.models.generate_content(
                model=MODEL, contents=gemini_history()
            ).usage_metadata.prompt_token_count,
        ]
    assert [e.provider_tokens for e in session.events] == seen
    assert all(e.compacted and figure <= BUDGET for e, figure in zip(session.events, seen))
    before.close()
    inside.close()


def test_every_patched_method_is_the_original_object_after_the_block() -> None:
    before = _originals()
    session = CompactingSession(max_tokens=BUDGET, intercept="gemini")
    with session:
        assert all(now is not then for now, then in zip(_originals(), before))
    assert all(now is then for now, then in zip(_originals(), before))
    with pytest.raises(KeyError), session:
        raise KeyError("boom")
    assert all(now is then for now, then in zip(_originals(), before))


def test_outside_the_block_requests_are_sent_untouched(
    provider: FakeProvider, client: genai.Client
) -> None:
    with CompactingSession(max_tokens=BUDGET, intercept="gemini") as session:
        pass
    client.models.generate_content(model=MODEL, contents=gemini_history())
    assert len(provider.requests[0].body["contents"]) == len(gemini_history())
    assert session.events == []


@pytest.mark.parametrize(("owner", "name"), POINTS)
def test_the_points_are_where_every_request_goes(owner: Any, name: str) -> None:
    # Pinned: an upgrade that renames them or stops sending through them fails here.
    function = vars(owner)[name]
    assert list(inspect.signature(function).parameters) == ["self", "model", "contents", "config"]
    assert inspect.iscoroutinefunction(function) == owner.__name__.startswith("Async")
    # The public method reaches it, through the continuation loop.
    continuation = inspect.getsource(vars(owner)[f"{name}_with_continuation"])
    assert f"self.{name}(" in continuation
    assert f"self.{name}_with_continuation(" in inspect.getsource(vars(owner)[name[1:]])


# --- chats -----------------------------------------------------------------------------


def test_a_chat_sends_its_history_compacted_and_keeps_all_of_it(
    provider: FakeProvider, client: genai.Client
) -> None:
    history = as_objects(gemini_history()[:-1])
    chat = client.chats.create(model=MODEL, history=history)
    with CompactingSession(max_tokens=BUDGET, intercept="gemini") as session:
        first = chat.send_message("Which city should I visit first?")
        streamed = list(chat.send_message_stream("And then?"))
    # Nothing lost from the chat: its history, then each question and its answer (the
    # SDK records a streamed answer chunk by chunk).
    kept = chat.get_history()
    assert len(kept) == len(history) + 3 + len(streamed)
    assert all(a is b for a, b in zip(kept, history))
    assert [c.role for c in kept[len(history) : len(history) + 3]] == ["user", "model", "user"]
    plain, stream = session.events
    assert plain.compacted
    assert stream.compacted
    assert plain.provider_tokens == first.usage_metadata.prompt_token_count <= BUDGET
    assert stream.provider_tokens == streamed[-1].usage_metadata.prompt_token_count <= BUDGET
    assert [len(r.body["contents"]) for r in provider.requests] == [
        len(plain.messages),
        len(stream.messages),
    ]


# --- async: google-genai's async client runs on asyncio only ----------------------------


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_the_async_models_and_chats_are_compacted(provider: FakeProvider) -> None:
    history = gemini_history()
    with new_client(provider) as client:
        async with (
            client.aio as aio,
            CompactingSession(max_tokens=BUDGET, intercept="gemini") as session,
        ):
            response = await aio.models.generate_content(model=MODEL, contents=history)
            stream = await aio.models.generate_content_stream(model=MODEL, contents=history)
            chunks = [chunk async for chunk in stream]
            chat = aio.chats.create(model=MODEL, history=as_objects(history[:-1]))
            answered = await chat.send_message("Which city first?")
    assert [e.function for e in session.events] == [
        "gemini generateContent",
        "gemini streamGenerateContent",
        "gemini generateContent",
    ]
    figures = [
        response.usage_metadata.prompt_token_count,
        chunks[-1].usage_metadata.prompt_token_count,
        answered.usage_metadata.prompt_token_count,
    ]
    assert [e.provider_tokens for e in session.events] == figures
    assert all(e.compacted and f <= BUDGET for e, f in zip(session.events, figures))


# --- on_overflow="retry" on Gemini's context-length error -------------------------------


def undercount(content: Any) -> int:
    """A tokenizer that counts 30% low: the prompt over the limit is sent, and refused."""
    return int(estimate_tokens(content) * 0.7)


@pytest.mark.parametrize("route", ["generate_content", "generate_content_stream"])
def test_a_request_refused_for_length_is_recompacted_and_retried_once(
    route: str, provider: FakeProvider, client: genai.Client
) -> None:
    provider.context_limit = BUDGET
    with CompactingSession(
        max_tokens=BUDGET, intercept="gemini", count_tokens=undercount, on_overflow="retry"
    ) as session:
        if route == "generate_content":
            seen = client.models.generate_content(
                model=MODEL, contents=gemini_history()
            ).usage_metadata.prompt_token_count
        else:
            chunks = list(
                client.models.generate_content_stream(model=MODEL, contents=gemini_history())
            )
            seen = chunks[-1].usage_metadata.prompt_token_count
    refused, accepted = provider.requests
    assert wire_tokens(refused.body) > BUDGET
    assert seen == wire_tokens(accepted.body) <= BUDGET
    (event,) = session.events
    assert event.retried
    assert event.provider_tokens == seen
    # The error's figures taught the session the ratio.
    assert session.calibration > 1.3


def test_without_retry_the_refusal_reaches_the_caller(
    provider: FakeProvider, client: genai.Client
) -> None:
    provider.context_limit = BUDGET
    with (
        CompactingSession(max_tokens=BUDGET, intercept="gemini", count_tokens=undercount) as s,
        pytest.raises(errors.ClientError, match="exceeds the maximum number of tokens allowed"),
    ):
        client.models.generate_content(model=MODEL, contents=gemini_history())
    (event,) = s.events
    assert not event.retried
    assert event.provider_tokens is None
    assert len(provider.requests) == 1


# --- a long tool-using run under the provider's context limit ----------------------------


def test_a_long_function_calling_run_under_the_limit_is_never_refused(
    provider: FakeProvider, client: genai.Client
) -> None:
    limit = 900
    provider.context_limit = limit
    provider.tool_calls = 3  # three calls after each question, then an answer
    config = types.GenerateContentConfig(
        system_instruction=SYSTEM,
        tools=[types.Tool.model_validate(WEATHER_TOOL)],
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
    )
    contents: List[Any] = []
    calls = 0
    with CompactingSession(max_tokens=limit, intercept="gemini", validate="raise") as session:
        for question in range(12):
            city = CITIES[question % len(CITIES)]
            contents.append(
                types.Content(
                    role="user", parts=[types.Part(text=f"Plan day {question} in {city}.")]
                )
            )
            while True:
                response = client.models.generate_content(
                    model=MODEL, contents=contents, config=config
                )
                turn = response.candidates[0].content
                contents.append(turn)
                called = [p.function_call for p in turn.parts if p.function_call]
                if not called:
                    break
                calls += len(called)
                contents.append(
                    types.Content(
                        role="user",
                        parts=[
                            types.Part(
                                function_response=types.FunctionResponse(
                                    id=call.id,
                                    name=call.name,
                                    response=json.loads(forecast(city, question)),
                                )
                            )
                            for call in called
                        ],
                    )
                )
    assert calls == 36
    assert len(provider.requests) == len(session.events) == 48
    assert sum(e.compacted for e in session.events) >= 20
    assert all(e.provider_tokens is not None and e.provider_tokens <= limit for e in session.events)


def get_weather(city: str, day: int) -> Dict[str, Any]:
    """The forecast for a city on a day."""
    result: Dict[str, Any] = json.loads(forecast(city, day))
    return result


def test_automatic_function_calling_compacts_each_request_it_sends(
    provider: FakeProvider, client: genai.Client
) -> None:
    limit = 900
    provider.context_limit = limit
    provider.tool_calls = 3
    config = types.GenerateContentConfig(system_instruction=SYSTEM, tools=[get_weather])
    chat = client.chats.create(model=MODEL, config=config)
    with CompactingSession(max_tokens=limit, intercept="gemini", validate="raise") as session:
        # The chat's own loop: three calls of get_weather, then the answer, per message.
        for question in range(10):
            chat.send_message(f"Plan day {question} in {CITIES[question % len(CITIES)]}.")
        # The models API's loop, inside one generate_content call.
        again = types.Content(role="user", parts=[types.Part(text="And the week after?")])
        answer = client.models.generate_content(
            model=MODEL, contents=[*chat.get_history(), again], config=config
        )
    assert len(provider.requests) == len(session.events) == 44
    assert sum(e.compacted for e in session.events) >= 20
    assert all(e.provider_tokens is not None and e.provider_tokens <= limit for e in session.events)
    assert answer.text.startswith("Fake reply")
    # The chat holds every turn: per message, the question, 3 calls and results, the answer.
    assert len(chat.get_history()) == 10 * 8


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_async_requests_refused_for_length_are_retried_once(provider: FakeProvider) -> None:
    provider.context_limit = BUDGET
    history = gemini_history()
    with new_client(provider) as client:
        async with (
            client.aio as aio,
            CompactingSession(
                max_tokens=BUDGET,
                intercept="gemini",
                count_tokens=undercount,
                on_overflow="retry",
                calibrate=True,
            ) as session,
        ):
            response = await aio.models.generate_content(model=MODEL, contents=history)
            stream = await aio.models.generate_content_stream(model=MODEL, contents=history)
            chunks = [chunk async for chunk in stream]
    figures = [
        response.usage_metadata.prompt_token_count,
        chunks[-1].usage_metadata.prompt_token_count,
    ]
    assert [e.retried for e in session.events] == [True, False]  # calibrated after the first
    assert [e.provider_tokens for e in session.events] == figures
    assert all(figure <= BUDGET for figure in figures)
    assert len(provider.requests) == 3
