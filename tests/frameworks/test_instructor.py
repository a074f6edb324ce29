"""instructor against the local provider, in its own environment.

instructor 1.17 pins ``jiter<0.15``, which makes pip downgrade openai, so it is
not in the ``frameworks`` extra: ``.ci/run`` installs it in a venv of its own.
``instructor.from_openai`` / ``from_anthropic`` store the SDK's bound ``create``
when they are called: the clients here are made before the session.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, List

import pytest

instructor = pytest.importorskip("instructor")
openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

from pydantic import BaseModel  # noqa: E402

from ctx_compact.testing import FakeProvider  # noqa: E402

from ._scenario import CLAUDE_MODEL, LIMIT, OPENAI_MODEL, TURNS, Run, get_report, prompts  # noqa: E402

Message = Dict[str, Any]


class Answer(BaseModel):
    text: str


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    # instructor asks for JSON in text (Mode.JSON): the fake's reply
    # must parse, and no tool is offered, so each turn is one request.
    with FakeProvider(reply='{"text": "Sunny."}', context_limit=LIMIT) as running:
        yield running


def history(turn: int) -> List[Message]:
    """What an application sends at ``turn``: earlier turns with their answers, then the prompt.

    Each prompt carries its city's report, so the history passes the limit.
    """
    messages: List[Message] = []
    for prompt in prompts()[:turn]:
        city = prompt.rsplit(" ", 1)[-1].rstrip("?")
        messages += [
            {"role": "user", "content": f"{prompt}\n{get_report(city)}"},
            {"role": "assistant", "content": '{"text": "Sunny."}'},
        ]
    return messages[:-1]  # the last answer is the one being asked for


def test_from_openai_stays_within_the_limit(provider: FakeProvider) -> None:
    with openai.OpenAI(base_url=provider.base_url + "/v1", api_key="t", max_retries=0) as sdk:
        client = instructor.from_openai(sdk, mode=instructor.Mode.JSON)
        with Run(
            "instructor from_openai", "/v1/chat/completions", provider, intercept="openai"
        ) as run:
            for turn in range(1, TURNS + 1):
                answer = client.chat.completions.create(
                    model=OPENAI_MODEL,
                    response_model=Answer,
                    messages=[{"role": "system", "content": "Be terse."}, *history(turn)],
                    max_retries=0,
                )
                assert answer.text == "Sunny."

    run.check(expected_requests=TURNS, usage_on_every_response=True)


def test_from_anthropic_stays_within_the_limit(provider: FakeProvider) -> None:
    with anthropic.Anthropic(base_url=provider.base_url, api_key="t", max_retries=0) as sdk:
        client = instructor.from_anthropic(sdk, mode=instructor.Mode.JSON)
        with Run(
            "instructor from_anthropic", "/v1/messages", provider, intercept="anthropic"
        ) as run:
            for turn in range(1, TURNS + 1):
                answer = client.messages.create(
                    model=CLAUDE_MODEL,
                    max_tokens=256,
                    response_model=Answer,
                    system="Be terse.",
                    messages=history(turn),
                    max_retries=0,
                )
                assert answer.text == "Sunny."

    run.check(expected_requests=TURNS, usage_on_every_response=True)
