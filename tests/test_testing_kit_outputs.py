"""large_tool_output, and an agent loop whose tool returns more than the kit's context limit.

The loops run through the real ``openai``, ``anthropic``, ``google-genai`` and ``boto3`` SDKs
against the kit (a format whose SDK is not installed is skipped): with the middleware's last
resort off, the request holding the output is refused with the provider's context-length 400;
with the default, every request fits and the run ends with its answer.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Dict, List

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctx_compact import check_pairing
from ctx_compact.testing import FakeProvider, count_tokens, large_tool_output
from middleware import CompactingSession

Message = Dict[str, Any]
LIMIT = 4000  # the kit's context limit, and the session's budget
SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
TASK = "TASK: why did the build fail?"


# --- the output -----------------------------------------------------------------------


@given(st.integers(30, 3000), st.sampled_from(["output", "build.log", "café 🎉", 'a "q" \\ b']))
def test_it_costs_exactly_the_tokens_asked(tokens: int, name: str) -> None:
    text = large_tool_output(tokens, name=name)
    assert count_tokens(text) == tokens
    lines = text.splitlines()
    assert lines[0] == f"{name}: first line of {tokens} tokens"
    assert lines[-1] == f"{name}: last line of {tokens} tokens"
    assert large_tool_output(tokens, name=name) == text


def test_its_lines_are_numbered_log_lines() -> None:
    text = large_tool_output(50_000, name="build.log")
    assert len(text) > 190_000  # about 4 characters a token
    lines = text.splitlines()
    assert lines[1] == "line 1: worker-1 served request 1 in 1 ms"
    assert lines[-2] == "line 4000: worker-3 served request 4000 in 23 ms"[: len(lines[-2])]
    assert len(set(lines[1:-1])) == len(lines) - 2


def test_two_names_give_two_outputs() -> None:
    assert large_tool_output(500, name="a.log") != large_tool_output(500, name="b.log")


@pytest.mark.parametrize(
    ("options", "error", "words"),
    [
        ({"tokens": 10.0}, TypeError, "'tokens' must be an int (got 10.0)"),
        ({"tokens": True}, TypeError, "'tokens' must be an int (got True)"),
        ({"tokens": 500, "name": None}, TypeError, "'name' must be a string (got None)"),
        ({"tokens": 500, "name": "a\nb"}, ValueError, "'name' must be one line"),
        ({"tokens": 500, "name": "a\r"}, ValueError, "'name' must be one line"),
        ({"tokens": 16}, ValueError, "'tokens' must be at least 17 (got 16)"),
        ({"tokens": 5}, ValueError, "'tokens' must be at least 17 (got 5)"),
        ({"tokens": -(10**12)}, ValueError, "'tokens' must be at least 17 (got -1000000000000)"),
    ],
)
def test_wrong_arguments_are_refused(options: Dict[str, Any], error: type, words: str) -> None:
    with pytest.raises(error, match=words.replace("(", r"\(").replace(")", r"\)")):
        large_tool_output(**options)


@pytest.mark.parametrize("name", ["output", "x" * 40, "café 🎉", "9"])
def test_the_least_it_asks_for_is_the_least_it_takes(name: str) -> None:
    with pytest.raises(ValueError, match="'tokens' must be at least") as error:
        large_tool_output(1, name=name)
    least = int(re.findall(r"at least (\d+)", str(error.value))[0])
    text = large_tool_output(least, name=name)
    assert count_tokens(text) == least
    assert text.splitlines()[-1] == f"{name}: last line of {least} tokens"
    with pytest.raises(ValueError, match=f"at least {least} \\(got {least - 1}\\)"):
        large_tool_output(least - 1, name=name)


# --- an agent loop against the kit ------------------------------------------------------


def read_log(calls: List[str]) -> Callable[[str], str]:
    """The agent's tool: each call returns a 10,000-token log, named by its turn."""

    def tool(path: str) -> str:
        calls.append(path)
        return large_tool_output(10_000, name=f"{path} #{len(calls)}")

    return tool


def chat_loop(client: Any, tool: Callable[[str], str]) -> str:
    messages: List[Message] = [
        {"role": "system", "content": "You read logs."},
        {"role": "user", "content": TASK},
    ]
    tools = [{"type": "function", "function": {"name": "read_log", "parameters": SCHEMA}}]
    while True:
        reply = client.chat.completions.create(model="gpt-4o", messages=messages, tools=tools)
        message = reply.choices[0].message
        if not message.tool_calls:
            return str(message.content)
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            output = tool(**json.loads(call.function.arguments))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": output})


def responses_loop(client: Any, tool: Callable[[str], str]) -> str:
    items: List[Any] = [{"role": "user", "content": TASK}]
    tools = [{"type": "function", "name": "read_log", "parameters": SCHEMA}]
    while True:
        reply = client.responses.create(model="gpt-4o", input=items, tools=tools)
        calls = [item for item in reply.output if item.type == "function_call"]
        if not calls:
            return str(reply.output_text)
        for call in calls:
            output = tool(**json.loads(call.arguments))
            items.append(call.model_dump(exclude_none=True))
            items.append(
                {"type": "function_call_output", "call_id": call.call_id, "output": output}
            )


def anthropic_loop(client: Any, tool: Callable[[str], str]) -> str:
    messages: List[Message] = [{"role": "user", "content": TASK}]
    tools = [{"name": "read_log", "input_schema": SCHEMA}]
    while True:
        reply = client.messages.create(
            model="claude-x", max_tokens=100, messages=messages, tools=tools
        )
        uses = [block for block in reply.content if block.type == "tool_use"]
        if not uses:
            return str(reply.content[0].text)
        messages.append({"role": "assistant", "content": [b.model_dump() for b in reply.content]})
        results = [
            {"type": "tool_result", "tool_use_id": use.id, "content": tool(**use.input)}
            for use in uses
        ]
        messages.append({"role": "user", "content": results})


def gemini_loop(client: Any, tool: Callable[[str], str]) -> str:
    contents: List[Any] = [{"role": "user", "parts": [{"text": TASK}]}]
    declaration = {"name": "read_log", "parameters": SCHEMA}
    config = {
        "tools": [{"function_declarations": [declaration]}],
        "automatic_function_calling": {"disable": True},
    }
    while True:
        reply = client.models.generate_content(model="gemini-x", contents=contents, config=config)
        turn = reply.candidates[0].content
        calls = [part.function_call for part in turn.parts if part.function_call]
        if not calls:
            return str(reply.text)
        contents.append(turn.model_dump(exclude_none=True))
        responses = [
            {"function_response": {"name": c.name, "response": {"output": tool(**c.args)}}}
            for c in calls
        ]
        contents.append({"role": "user", "parts": responses})


def bedrock_loop(client: Any, tool: Callable[[str], str]) -> str:
    messages: List[Message] = [{"role": "user", "content": [{"text": TASK}]}]
    tools = {"tools": [{"toolSpec": {"name": "read_log", "inputSchema": {"json": SCHEMA}}}]}
    while True:
        reply = client.converse(modelId="claude-x", messages=messages, toolConfig=tools)
        message = reply["output"]["message"]
        uses = [block["toolUse"] for block in message["content"] if "toolUse" in block]
        if not uses:
            return str(message["content"][0]["text"])
        messages.append(message)
        results = [
            {
                "toolResult": {
                    "toolUseId": use["toolUseId"],
                    "content": [{"text": tool(**use["input"])}],
                }
            }
            for use in uses
        ]
        messages.append({"role": "user", "content": results})


def openai_client(provider: FakeProvider) -> Any:
    openai = pytest.importorskip("openai")
    return openai.OpenAI(base_url=provider.openai_url, api_key="test", max_retries=0)


def anthropic_client(provider: FakeProvider) -> Any:
    anthropic = pytest.importorskip("anthropic")
    return anthropic.Anthropic(base_url=provider.anthropic_url, api_key="test", max_retries=0)


def is_task(message: Any) -> bool:
    """The pin: the task stays, whatever is dropped or cut."""
    return TASK in json.dumps(message)


def gemini_client(provider: FakeProvider) -> Any:
    genai = pytest.importorskip("google.genai")
    types = genai.types
    retries = types.HttpRetryOptions(attempts=1)
    options = types.HttpOptions(base_url=provider.gemini_url, retry_options=retries)
    return genai.Client(api_key="test", http_options=options)


def bedrock_client(provider: FakeProvider) -> Any:
    boto3 = pytest.importorskip("boto3")
    config = pytest.importorskip("botocore.config")
    return boto3.session.Session().client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=provider.bedrock_url,
        aws_access_key_id="test",
        aws_secret_access_key="test",
        config=config.Config(retries={"max_attempts": 1, "mode": "standard"}),
    )


def status(error: BaseException) -> Any:
    """The HTTP status of an SDK's error: openai's and anthropic's, google-genai's, botocore's."""
    if hasattr(error, "status_code"):
        return error.status_code
    if hasattr(error, "response") and isinstance(error.response, dict):
        return error.response["ResponseMetadata"]["HTTPStatusCode"]
    return getattr(error, "code", None)


# format: (its loop, the client, the SDK to intercept, the kit's words for a prompt too long)
LOOPS = {
    "chat": (chat_loop, openai_client, "openai", "maximum context length is 4000 tokens"),
    "responses": (responses_loop, openai_client, "openai", "exceeds the context window"),
    "anthropic": (anthropic_loop, anthropic_client, "anthropic", "prompt is too long"),
    "gemini": (gemini_loop, gemini_client, "gemini", "exceeds the maximum number of tokens"),
    "bedrock": (bedrock_loop, bedrock_client, "bedrock", "Input is too long"),
}


@pytest.mark.parametrize("fmt", list(LOOPS))
def test_the_request_that_was_refused_now_fits(provider: FakeProvider, fmt: str) -> None:
    loop, make_client, sdk, too_long = LOOPS[fmt]
    client = make_client(provider)
    provider.context_limit = LIMIT
    provider.tool_calls = 2

    # Without the last resort the second request, holding the first log, is refused.
    calls: List[str] = []
    off = CompactingSession(
        max_tokens=LIMIT, intercept=[sdk], pin=is_task, truncate_tool_results=False
    )
    with off, pytest.raises(Exception, match=too_long) as refused:
        loop(client, read_log(calls))
    assert status(refused.value) == 400
    assert len(calls) == 1
    assert len(provider.requests) == 2

    # With the default, the same run goes to its answer: every request fits.
    provider.clear()
    calls.clear()
    with CompactingSession(max_tokens=LIMIT, intercept=[sdk], pin=is_task) as session:
        answer = loop(client, read_log(calls))
    assert answer.startswith("Fake reply to")
    assert len(calls) == 2
    assert len(provider.requests) == 3
    assert all(event.fits for event in session.events)
    assert session.events[-1].truncated_results
    body = provider.requests[-1].body
    sent = body.get("messages", body.get("input", body.get("contents")))
    assert check_pairing(sent) == []
    assert sum(count_tokens(message) for message in sent) <= LIMIT
    # The newest log's first and last lines reach the model; its middle was cut.
    newest = large_tool_output(10_000, name="fake #2").splitlines()
    text = json.dumps(sent, ensure_ascii=False)
    assert newest[0] in text
    assert newest[-1] in text
    assert newest[len(newest) // 2] not in text
    assert TASK in text
