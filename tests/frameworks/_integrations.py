"""What the tests of middleware.integrations share beside ``_scenario``'s run and table.

The integration under test compacts; the ``Run``'s session (``CompactingSession``
with a budget but nothing to intercept) only observes, so its events are the
integration's. ``sent_tokens`` counts a request as the provider counts it and,
on top, the tool definitions it carried (which the local provider does not
count, but a real one bills): an integration must keep both inside the budget.
"""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

from ctx_compact.testing import RecordedRequest, count_tokens
from middleware import CompactionEvent

from ._scenario import LIMIT, Run, wire_tokens


def tools_of(request: RecordedRequest) -> List[Any]:
    """The tool definitions a request carried (Bedrock's are in ``toolConfig``)."""
    body = request.body
    return body.get("tools") or (body.get("toolConfig") or {}).get("tools") or []


def sent_tokens(request: RecordedRequest) -> int:
    """The request's input tokens as the provider counts them, plus its tools' definitions."""
    return wire_tokens(request) + sum(count_tokens(tool) for tool in tools_of(request))


# How far each integration's count was from what was sent, run by run: (label, the least
# and the most counted - sent over the run's requests, the most tokens a request sent).
GAPS: List[Tuple[str, int, int, int]] = []


def check_integration(
    run: Run,
    hooked: List[CompactionEvent],
    expected_requests: int,
    usage: bool = True,
    label: Optional[str] = None,
    under: int = 0,
    over: int = 0,
) -> None:
    """The scenario's checks, and the integration's own: tools inside the budget, one event
    per request given to the hook and the session alike, with the provider's figure.

    Given a ``label`` for the table of gaps, each event's count (``tokens_after``) is
    also compared with what its request sent, tools included: at most ``under`` tokens
    less and ``over`` more (a client whose wire form is not the view's sends the same
    messages in more or fewer tokens; such a run's budget is ``LIMIT - under``).
    """
    run.check(expected_requests=expected_requests)
    requests = run.requests()
    if label is not None:
        sent = [sent_tokens(request) for request in requests]
        gaps = [event.tokens_after - tokens for event, tokens in zip(hooked, sent)]
        GAPS.append((label, min(gaps), max(gaps), max(sent)))
        wide = [(i, gap) for i, gap in enumerate(gaps) if not -under <= gap <= over]
        assert wide == [], f"counts off what was sent by more than -{under}/+{over}: {wide}"
    over_limit = [(i, t) for i, t in enumerate(map(sent_tokens, requests)) if t > LIMIT]
    assert over_limit == [], f"requests over {LIMIT} counting their tools: {over_limit}"
    assert all(tools_of(request) for request in requests), "a request without its tools"
    events = run.session.events
    assert len(hooked) == len(events)
    assert all(a is b for a, b in zip(hooked, events))
    assert all(event.fits for event in events)
    if usage:
        reported = [event.provider_tokens for event in events]
        assert reported == [wire_tokens(request) for request in requests]


def first_system(request: RecordedRequest) -> Any:
    """The system prompt a request carried (Chat Completions' and Ollama's first message,
    Responses' instructions, Anthropic's, Gemini's and Bedrock's system), as its text."""
    body = request.body
    messages = body.get("messages") or []
    if messages and messages[0].get("role") == "system":
        return messages[0]["content"]
    system = body.get("system", body.get("systemInstruction", body.get("instructions")))
    if isinstance(system, dict):  # Gemini's content
        system = system.get("parts")
    if isinstance(system, list):  # blocks or parts
        return "".join(part.get("text", "") for part in system)
    return system
