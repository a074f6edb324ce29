"""The testing kit's Gemini API: its validator, and its routes spoken to over plain HTTP.

The real google-genai SDK against these routes is tests/sdks/test_kit_gemini_sdk.py.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any, Dict, List, Optional, Tuple

import pytest

from ctx_compact.testing import FakeProvider, Problem, count_tokens
from ctx_compact.testing.gemini import (
    CALL_NOT_AFTER_USER,
    CONTENTS_NOT_SPECIFIED,
    INVALID_ROLE,
    MIXED_TURN,
    RESPONSE_COUNT,
    RESPONSE_NOT_AFTER_CALL,
    prompt_tokens,
    validate_contents,
)

pytest_plugins = ["pytester"]

Content = Dict[str, Any]


def user(text: str = "Weather in Paris and Rome?") -> Content:
    return {"role": "user", "parts": [{"text": text}]}


def model_text(text: str = "Sunny in both.") -> Content:
    return {"role": "model", "parts": [{"text": text}]}


def calls(*cities: str, snake: bool = False) -> Content:
    key = "function_call" if snake else "functionCall"
    found = [{key: {"name": "get_weather", "args": {"city": c}}} for c in cities]
    return {"role": "model", "parts": found}


def responses(*cities: str, snake: bool = False, role: str = "user") -> Content:
    key = "function_response" if snake else "functionResponse"
    found = [
        {key: {"name": "get_weather", "response": {"city": c, "sky": "sunny"}}} for c in cities
    ]
    return {"role": role, "parts": found}


def tool_conversation() -> List[Content]:
    """Two parallel calls answered together, one more call, then the model's answer."""
    return [
        user(),
        calls("Paris", "Rome"),
        responses("Paris", "Rome"),
        calls("Oslo"),
        responses("Oslo", role="tool"),
        model_text(),
        user("Thanks"),
    ]


# --- the validator -----------------------------------------------------------------


def test_a_paired_conversation_has_no_problems() -> None:
    assert validate_contents(tool_conversation()) == []


def test_snake_case_parts_are_read_as_camel_case_ones() -> None:
    contents = [user(), calls("Paris", snake=True), responses("Paris", snake=True), model_text()]

    assert validate_contents(contents) == []


def test_a_response_turn_without_its_call_turn() -> None:
    contents = tool_conversation()
    del contents[3]  # the call for Oslo: its response now follows a response turn

    assert validate_contents(contents) == [Problem(3, RESPONSE_NOT_AFTER_CALL)]


def test_a_conversation_that_starts_with_a_response_turn() -> None:
    assert validate_contents(tool_conversation()[2:]) == [Problem(0, RESPONSE_NOT_AFTER_CALL)]


def test_a_call_turn_at_the_start_or_after_a_model_turn() -> None:
    assert validate_contents(tool_conversation()[1:]) == [Problem(0, CALL_NOT_AFTER_USER)]
    after_model = [user(), model_text(), calls("Paris"), responses("Paris")]
    assert validate_contents(after_model) == [Problem(2, CALL_NOT_AFTER_USER)]


def test_fewer_or_more_responses_than_calls() -> None:
    fewer = [user(), calls("Paris", "Rome"), responses("Paris")]
    more = [user(), calls("Paris"), responses("Paris", "Rome")]

    assert validate_contents(fewer) == [Problem(2, RESPONSE_COUNT)]
    assert validate_contents(more) == [Problem(2, RESPONSE_COUNT)]


def test_responses_split_over_two_contents_are_refused() -> None:
    split = [user(), calls("Paris", "Rome"), responses("Paris"), responses("Rome")]

    assert validate_contents(split) == [
        Problem(2, RESPONSE_COUNT),
        Problem(3, RESPONSE_NOT_AFTER_CALL),
    ]


def test_a_call_awaiting_its_response_at_the_end_is_accepted() -> None:
    assert validate_contents([user(), calls("Paris")]) == []


def test_calls_and_responses_mixed_in_one_content() -> None:
    mixed = {"role": "user", "parts": [*calls("Paris")["parts"], *responses("Paris")["parts"]]}

    assert validate_contents([user(), mixed]) == [Problem(1, MIXED_TURN)]


@pytest.mark.parametrize("contents", [[], None, "hi", {"role": "user"}])
def test_no_contents(contents: Any) -> None:
    assert validate_contents(contents) == [Problem(None, CONTENTS_NOT_SPECIFIED)]


def test_empty_parts_empty_parts_lists_and_unknown_roles() -> None:
    contents = [
        user(),
        {"role": "model", "parts": []},
        {"role": "system", "parts": [{"text": "x"}]},
    ]
    contents.append({"parts": [{"text": "ok"}, {"thoughtSignature": "c2ln"}]})

    assert validate_contents(contents) == [
        Problem(
            1, "* GenerateContentRequest.contents[1].parts: contents.parts must not be empty.\n"
        ),
        Problem(2, INVALID_ROLE),
        Problem(
            3,
            "* GenerateContentRequest.contents[3].parts[1].data: required oneof field 'data' must "
            "have one initialized field\n",
        ),
    ]


def test_a_field_set_to_null_is_not_set() -> None:
    # As an SDK's dump of a part sends it: every field, the unset ones as null.
    dumped = {"text": None, "function_call": None, "function_response": None, "thought": None}

    assert validate_contents([{"role": "user", "parts": [{**dumped, "text": "hi"}]}]) == []
    assert validate_contents([{"role": None, "parts": [dumped]}]) == [
        Problem(
            0,
            "* GenerateContentRequest.contents[0].parts[0].data: required oneof field 'data' must "
            "have one initialized field\n",
        )
    ]


def test_the_callers_contents_are_not_changed() -> None:
    contents = tool_conversation()[1:]
    before = repr(contents)

    validate_contents(contents)

    assert repr(contents) == before


# --- the routes, over plain HTTP ---------------------------------------------------

MODEL = "gemini-2.5-flash"
GENERATE = f"/v1beta/models/{MODEL}:generateContent"
STREAM = f"/v1beta/models/{MODEL}:streamGenerateContent"
WEATHER_TOOL = {
    "functionDeclarations": [
        {
            "name": "get_weather",
            "description": "The weather in a city.",
            # Gemini's own schema names its types in capitals.
            "parameters": {
                "type": "OBJECT",
                "properties": {"city": {"type": "STRING"}, "days": {"type": "INTEGER"}},
                "required": ["city", "days"],
            },
        }
    ]
}


def post(
    provider: FakeProvider, path: str, body: Any, headers: Optional[Dict[str, str]] = None
) -> Tuple[int, Dict[str, str], bytes]:
    """POST ``body`` as JSON; the status, the headers (names lower-cased) and the raw body."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    sent = {"Content-Type": "application/json", "x-goog-api-key": "test", **(headers or {})}
    request = urllib.request.Request(provider.base_url + path, data, sent, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            answer = response.status, dict(response.headers.items()), response.read()
    except urllib.error.HTTPError as error:
        with error:
            answer = error.code, dict(error.headers.items()), error.read()
    status, found, raw = answer
    return status, {k.lower(): v for k, v in found.items()}, raw


def generate(provider: FakeProvider, body: Any, path: str = GENERATE) -> Tuple[int, Any]:
    status, _, raw = post(provider, path, body)
    return status, json.loads(raw)


def rejection(message: str) -> Dict[str, Any]:
    return {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}


def test_generate_content_answers_with_a_candidate_and_its_usage(provider: FakeProvider) -> None:
    contents = tool_conversation()
    system = {"parts": [{"text": "Be brief."}]}

    status, body = generate(provider, {"contents": contents, "systemInstruction": system})

    assert status == 200
    (candidate,) = body["candidates"]
    assert candidate["content"] == {
        "role": "model",
        "parts": [{"text": "Fake reply to 7 messages."}],
    }
    assert candidate["finishReason"] == "STOP"
    prompt = sum(count_tokens(c) for c in contents) + count_tokens(system)
    assert prompt == prompt_tokens(contents, system)
    answer = count_tokens("Fake reply to 7 messages.")
    assert body["usageMetadata"] == {
        "promptTokenCount": prompt,
        "candidatesTokenCount": answer,
        "totalTokenCount": prompt + answer,
    }
    assert body["modelVersion"] == MODEL
    (request,) = provider.requests
    assert (request.path, request.body["contents"]) == (GENERATE, contents)
    assert request.headers["x-goog-api-key"] == "test"


def test_v1_is_served_as_v1beta_is(provider: FakeProvider) -> None:
    status, body = generate(provider, {"contents": [user()]}, f"/v1/models/{MODEL}:generateContent")

    assert status == 200
    assert body["candidates"][0]["content"]["parts"] == [{"text": "Fake reply to 1 messages."}]


def test_a_broken_conversation_gets_geminis_400(provider: FakeProvider) -> None:
    contents = tool_conversation()
    del contents[1]  # the call turn for Paris and Rome

    status, body = generate(provider, {"contents": contents})

    assert (status, body) == (400, rejection(RESPONSE_NOT_AFTER_CALL))


def test_no_contents_gets_geminis_400(provider: FakeProvider) -> None:
    assert generate(provider, {"contents": []}) == (400, rejection(CONTENTS_NOT_SPECIFIED))
    assert generate(provider, {}) == (400, rejection(CONTENTS_NOT_SPECIFIED))


def test_a_prompt_over_the_context_limit_names_both_figures(provider: FakeProvider) -> None:
    contents = tool_conversation()
    prompt = prompt_tokens(contents)
    provider.context_limit = prompt - 1

    status, body = generate(provider, {"contents": contents})

    message = (
        f"The input token count ({prompt}) exceeds the maximum number of tokens allowed "
        f"({prompt - 1})."
    )
    assert (status, body) == (400, rejection(message))
    provider.context_limit = prompt
    assert generate(provider, {"contents": contents})[0] == 200


def sse_responses(raw: bytes) -> List[Any]:
    events = raw.split(b"\r\n\r\n")
    assert events[-1] == b""  # every event ends with a blank line
    assert all(event.startswith(b"data: ") for event in events[:-1])
    return [json.loads(event[len(b"data: ") :]) for event in events[:-1]]


def streamed_text(responses: List[Any]) -> str:
    return "".join(r["candidates"][0]["content"]["parts"][0]["text"] for r in responses)


def test_a_stream_with_alt_sse_sends_data_events(provider: FakeProvider) -> None:
    contents = [user("Tell me about Paris")]

    status, headers, raw = post(provider, STREAM + "?alt=sse", {"contents": contents})

    assert status == 200
    assert headers["content-type"] == "text/event-stream"
    responses = sse_responses(raw)
    assert len(responses) == 5  # "Fake", " reply", " to", " 1", " messages."
    assert streamed_text(responses) == "Fake reply to 1 messages."
    prompt = prompt_tokens(contents)
    assert all(
        r["usageMetadata"] == {"promptTokenCount": prompt, "totalTokenCount": prompt}
        for r in responses[:-1]
    )
    assert all("finishReason" not in r["candidates"][0] for r in responses[:-1])
    last = responses[-1]
    assert last["candidates"][0]["finishReason"] == "STOP"
    answer = count_tokens("Fake reply to 1 messages.")
    assert last["usageMetadata"]["candidatesTokenCount"] == answer
    assert last["usageMetadata"]["totalTokenCount"] == prompt + answer
    assert provider.requests[-1].query == "alt=sse"


def test_a_stream_without_alt_is_one_json_array(provider: FakeProvider) -> None:
    status, headers, raw = post(provider, STREAM, {"contents": [user()]})

    assert status == 200
    assert headers["content-type"].startswith("application/json")
    responses = json.loads(raw)
    assert streamed_text(responses) == "Fake reply to 1 messages."
    assert responses[-1]["candidates"][0]["finishReason"] == "STOP"


def test_a_stream_over_the_limit_is_refused_before_any_event(provider: FakeProvider) -> None:
    provider.context_limit = 1

    status, headers, raw = post(provider, STREAM + "?alt=sse", {"contents": [user()]})

    assert status == 400
    assert headers["content-type"] == "application/json"
    assert json.loads(raw)["error"]["status"] == "INVALID_ARGUMENT"


def test_the_scripted_model_calls_the_declared_function_then_answers(
    provider: FakeProvider,
) -> None:
    provider.tool_calls = 2
    contents = [user()]

    for _ in range(2):
        status, body = generate(provider, {"contents": contents, "tools": [WEATHER_TOOL]})
        assert status == 200
        turn = body["candidates"][0]["content"]
        # A value for each required argument, of its type; no id, as Gemini sends none.
        assert turn["parts"] == [
            {"functionCall": {"name": "get_weather", "args": {"city": "fake", "days": 1}}}
        ]
        assert body["usageMetadata"]["candidatesTokenCount"] == count_tokens(
            json.dumps({"city": "fake", "days": 1})
        )
        contents = [*contents, turn, responses("fake")]

    status, body = generate(provider, {"contents": contents, "tools": [WEATHER_TOOL]})
    assert body["candidates"][0]["content"]["parts"] == [{"text": "Fake reply to 5 messages."}]


def test_a_shared_prefix_is_read_from_the_implicit_cache(provider: FakeProvider) -> None:
    system = {"parts": [{"text": "You plan trips. " * 100}]}
    earlier = [user(f"Day {day}: " + "museum " * 120) for day in range(4)]
    later = [*earlier, model_text(), user("And the last day?")]
    shared = prompt_tokens(earlier, system)
    assert shared >= 1024

    _, first = generate(provider, {"contents": earlier, "systemInstruction": system})
    _, second = generate(provider, {"contents": later, "systemInstruction": system})
    _, other = generate(provider, {"contents": later, "systemInstruction": user("Be brief.")})

    assert "cachedContentTokenCount" not in first["usageMetadata"]
    assert second["usageMetadata"]["cachedContentTokenCount"] == shared
    assert second["usageMetadata"]["promptTokenCount"] == prompt_tokens(later, system)
    assert "cachedContentTokenCount" not in other["usageMetadata"]  # another system: no prefix
    assert [bill.cache_read_tokens for bill in provider.billing] == [0, shared, 0]


def test_a_shared_prefix_under_1024_tokens_is_not_reported(provider: FakeProvider) -> None:
    contents = [user(), model_text(), user("And tomorrow?")]
    generate(provider, {"contents": contents[:1]})
    _, body = generate(provider, {"contents": contents})
    assert "cachedContentTokenCount" not in body["usageMetadata"]


def test_function_calling_mode_none_is_answered_with_text(provider: FakeProvider) -> None:
    provider.tool_calls = 1
    config = {"functionCallingConfig": {"mode": "NONE"}}
    body = {"contents": [user()], "tools": [WEATHER_TOOL], "toolConfig": config}

    status, answer = generate(provider, body)

    assert status == 200
    assert answer["candidates"][0]["content"]["parts"] == [{"text": "Fake reply to 1 messages."}]


def test_a_declaration_with_a_json_schema_is_called_too(provider: FakeProvider) -> None:
    provider.tool_calls = 1
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    for key in ("parametersJsonSchema", "parameters_json_schema"):
        tool = {"functionDeclarations": [{"name": "get_weather", key: schema}]}

        _, body = generate(provider, {"contents": [user()], "tools": [tool]})

        call = body["candidates"][0]["content"]["parts"][0]["functionCall"]
        assert call == {"name": "get_weather", "args": {"city": "fake"}}


def test_a_streamed_function_call_comes_whole_in_one_response(provider: FakeProvider) -> None:
    provider.tool_calls = 1

    _, _, raw = post(provider, STREAM + "?alt=sse", {"contents": [user()], "tools": [WEATHER_TOOL]})

    (response,) = sse_responses(raw)
    assert response["candidates"][0]["content"]["parts"][0]["functionCall"]["name"] == "get_weather"
    assert response["candidates"][0]["finishReason"] == "STOP"


def test_count_tokens_answers_the_prompt_figure(provider: FakeProvider) -> None:
    contents = tool_conversation()
    system = {"parts": [{"text": "Be brief."}]}
    path = f"/v1beta/models/{MODEL}:countTokens"

    status, _, raw = post(provider, path, {"contents": contents})
    assert (status, json.loads(raw)) == (200, {"totalTokens": prompt_tokens(contents)})

    whole = {
        "generateContentRequest": {
            "model": f"models/{MODEL}",
            "contents": contents,
            "systemInstruction": system,
        }
    }
    _, _, raw = post(provider, path, whole)
    assert json.loads(raw) == {"totalTokens": prompt_tokens(contents, system)}


def test_unknown_paths_and_bodies_that_are_not_json_get_googles_envelope(
    provider: FakeProvider,
) -> None:
    status, _, raw = post(
        provider, f"/v1beta/models/{MODEL}:embedText", {}, {"x-goog-api-client": "x"}
    )
    assert status == 404
    assert json.loads(raw)["error"]["status"] == "NOT_FOUND"

    status, _, raw = post(provider, GENERATE, b"{not json")
    assert status == 400
    assert json.loads(raw) == rejection("Invalid JSON payload received. Unexpected token.")


# --- the plugin's fixtures -------------------------------------------------------

WITHOUT_GOOGLE_GENAI = """
import sys

import pytest

sys.modules["google.genai"] = None


@pytest.fixture
def anyio_backend():
    return "asyncio"
"""


def test_the_gemini_fixtures_without_the_sdk_fail_naming_the_package(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(WITHOUT_GOOGLE_GENAI)
    pytester.makepyfile(
        test_agent="""
        import pytest

        def test_sync(fake_gemini):
            pass

        @pytest.mark.anyio
        async def test_async(fake_async_gemini):
            pass

        @pytest.mark.skip_without_sdk
        def test_marked(fake_gemini):
            pass
        """
    )

    result = pytester.runpytest("-p", "no:cacheprovider", "-rs")

    result.assert_outcomes(errors=2, skipped=1)
    output = result.stdout.str()
    assert "fake_gemini needs the google-genai SDK" in output
    assert "fake_async_gemini needs the google-genai SDK" in output
    assert "Install it with: pip install google-genai" in output


def test_a_reply_callable_is_given_the_contents() -> None:
    def reply(contents: List[Content]) -> str:
        return f"{len(contents)} contents, the last {contents[-1]['role']}'s"

    with FakeProvider(reply=reply) as provider:
        _, body = generate(provider, {"contents": tool_conversation()})

    assert body["candidates"][0]["content"]["parts"] == [{"text": "7 contents, the last user's"}]
