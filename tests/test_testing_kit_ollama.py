"""The kit's Ollama route (``POST /api/chat``), spoken to with the standard library.

What Ollama answers, as its client reads it: one reply, or newline-delimited JSON
objects ending with the ``done`` one, with ``prompt_eval_count``; a call to the
first tool offered, without an id; and the kit's own 400s for what Ollama would
not refuse but a test must see (a result without its call, a prompt over the limit).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any, Dict, List, Tuple

import pytest

from ctx_compact.testing import FakeProvider, count_tokens

TOOL = {
    "type": "function",
    "function": {
        "name": "get_report",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
PROMPT = {"role": "user", "content": "Weather in Paris?"}


def post(provider: FakeProvider, body: Dict[str, Any]) -> Tuple[int, str, bytes]:
    request = urllib.request.Request(
        provider.base_url + "/api/chat",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, response.headers["Content-Type"], response.read()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, error.headers["Content-Type"], error.read()


def lines(data: bytes) -> List[Dict[str, Any]]:
    return [json.loads(line) for line in data.splitlines()]


def test_a_reply_counts_the_prompt_and_calls_the_first_tool_without_an_id() -> None:
    with FakeProvider(tool_calls=1) as provider:
        status, kind, data = post(
            provider, {"model": "llama3.2", "messages": [PROMPT], "tools": [TOOL], "stream": False}
        )
        answered = [
            PROMPT,
            json.loads(data)["message"],
            {"role": "tool", "content": "sunny"},
        ]
        _, _, text = post(provider, {"model": "llama3.2", "messages": answered, "stream": False})

    reply = json.loads(data)
    assert (status, kind) == (200, "application/json")
    assert reply["done"] is True
    assert reply["prompt_eval_count"] == count_tokens(PROMPT)
    assert reply["message"]["tool_calls"] == [{"function": {"name": "get_report", "arguments": {}}}]
    assert json.loads(text)["message"]["content"] == "Fake reply to 3 messages."


def test_a_stream_is_json_lines_ending_with_the_done_one() -> None:
    with FakeProvider(reply="It is sunny in Paris.") as provider:
        status, kind, data = post(provider, {"model": "llama3.2", "messages": [PROMPT]})

    chunks = lines(data)
    assert (status, kind) == (200, "application/x-ndjson")
    assert "".join(c["message"]["content"] for c in chunks) == "It is sunny in Paris."
    assert [c["done"] for c in chunks] == [False] * (len(chunks) - 1) + [True]
    assert chunks[-1]["prompt_eval_count"] == count_tokens(PROMPT)


@pytest.mark.parametrize(
    ("messages", "error"),
    [
        ([PROMPT, {"role": "tool", "content": "sunny"}], "answers no tool call"),
        ([{"role": "user", "content": "x" * 400}], "more than the context limit of 50"),
    ],
    ids=["result without its call", "over the limit"],
)
def test_what_ollama_would_take_wrongly_is_refused_in_the_kits_words(
    messages: List[Any], error: str
) -> None:
    with FakeProvider(context_limit=50) as provider:
        status, _, data = post(provider, {"model": "llama3.2", "messages": messages})

    assert status == 400
    assert error in json.loads(data)["error"]
