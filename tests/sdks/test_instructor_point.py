"""instructor's patched clients still send through the SDK's base ``request``.

``instructor.from_openai``/``from_anthropic`` store the client's bound ``create``
when they are called, so patching ``create`` afterwards misses them; the base
client's ``request`` (see test_request_point.py) does not. instructor pins an
older openai than the rest of the suite, so this module runs in an environment
of its own and is skipped elsewhere.
"""

from __future__ import annotations

import json
from typing import Any, Iterator, List

import pytest

instructor = pytest.importorskip("instructor")
openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

import anthropic._base_client as anthropic_base  # noqa: E402
import openai._base_client as openai_base  # noqa: E402
import pydantic  # noqa: E402
import wrapt  # noqa: E402

from ctx_compact.testing import FakeProvider  # noqa: E402


class City(pydantic.BaseModel):
    name: str


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    # Not the suite's `provider`: a reply is set when a FakeProvider is made.
    with FakeProvider(reply=lambda messages: json.dumps({"name": "Paris"})) as running:
        yield running


def test_clients_patched_before_the_hook_still_pass_through_request(
    provider: FakeProvider,
) -> None:
    oc = openai.OpenAI(base_url=provider.base_url + "/v1", api_key="t", max_retries=0)
    ac = anthropic.Anthropic(base_url=provider.base_url, api_key="t", max_retries=0)
    with oc, ac:
        structured_openai = instructor.from_openai(oc, mode=instructor.Mode.JSON)
        structured_anthropic = instructor.from_anthropic(ac, mode=instructor.Mode.JSON)
        urls: List[str] = []

        def record(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
            urls.append(args[1].url)
            return wrapped(*args, **kwargs)

        patched = [
            (owner, vars(owner)["request"])
            for owner in (openai_base.SyncAPIClient, anthropic_base.SyncAPIClient)
        ]
        wrapt.wrap_function_wrapper(openai_base, "SyncAPIClient.request", record)
        wrapt.wrap_function_wrapper(anthropic_base, "SyncAPIClient.request", record)
        try:
            from_openai = structured_openai.chat.completions.create(
                model="gpt-4o", response_model=City, messages=[{"role": "user", "content": "?"}]
            )
            from_anthropic = structured_anthropic.messages.create(
                model="claude-sonnet-4-6",
                max_tokens=64,
                response_model=City,
                messages=[{"role": "user", "content": "?"}],
            )
        finally:
            for owner, original in patched:
                owner.request = original

    assert (from_openai.name, from_anthropic.name) == ("Paris", "Paris")
    assert urls == ["/chat/completions", "/v1/messages"]
    assert [r.path for r in provider.requests] == ["/v1/chat/completions", "/v1/messages"]
