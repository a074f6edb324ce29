"""What the tests of middleware.integrations share beside ``_scenario``'s run and table.

The integration under test compacts; the ``Run``'s session (``CompactingSession``
with a budget but nothing to intercept) only observes, so its events are the
integration's. ``sent_tokens`` counts a request as the provider counts it and,
on top, the tool definitions it carried (which the local provider does not
count, but a real one bills): an integration must keep both inside the budget.
"""

from __future__ import annotations

from typing import Any, List

from ctx_compact.testing import RecordedRequest, count_tokens
from middleware import CompactionEvent

from ._scenario import LIMIT, Run, wire_tokens


def sent_tokens(request: RecordedRequest) -> int:
    """The request's input tokens as the provider counts them, plus its tools' definitions."""
    tools = request.body.get("tools") or []
    return wire_tokens(request) + sum(count_tokens(tool) for tool in tools)


def check_integration(
    run: Run, hooked: List[CompactionEvent], expected_requests: int, usage: bool = True
) -> None:
    """The scenario's checks, and the integration's own: tools inside the budget, one event
    per request given to the hook and the session alike, with the provider's figure."""
    run.check(expected_requests=expected_requests)
    requests = run.requests()
    over = [(i, t) for i, t in enumerate(map(sent_tokens, requests)) if t > LIMIT]
    assert over == [], f"requests over {LIMIT} counting their tools (index, tokens): {over}"
    assert all(request.body.get("tools") for request in requests), "a request without its tools"
    events = run.session.events
    assert len(hooked) == len(events)
    assert all(a is b for a, b in zip(hooked, events))
    assert all(event.fits for event in events)
    if usage:
        reported = [event.provider_tokens for event in events]
        assert reported == [wire_tokens(request) for request in requests]


def first_system(request: RecordedRequest) -> Any:
    """The system prompt a request carried (Chat Completions' first message), or ``None``."""
    messages = request.body.get("messages") or []
    if messages and messages[0].get("role") == "system":
        return messages[0]["content"]
    return request.body.get("instructions")
