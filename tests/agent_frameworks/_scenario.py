"""The long tool-using run every agent framework test holds, and the table it adds a row to.

The testing kit (``ctx_compact.testing``) enforces a context limit of ``LIMIT``
tokens and each provider's pairing rules, and plays a model that calls the
first tool offered once after each user prompt. An agent holds ``TURNS``
tool-using turns with it (two model calls a turn). The tool's report (about
170 tokens) makes the history pass the limit after a few turns, so the later
requests fit only when compaction works: through a ``CompactingSession``
intercepting the SDK underneath the framework (``test_<framework>_run.py``) or
through the framework's own hook in ``middleware.integrations``
(``test_integration_<name>.py``).

``check`` compares what the kit received with the events: no request over the
limit or refused for its shape, one event per request, something dropped.
Each check adds a row to ``ROWS``, which ``conftest.py`` prints at the end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ctx_compact.testing import FakeProvider, RecordedRequest, bedrock, count_tokens, gemini
from ctx_compact.testing._api import RequestRejected
from ctx_compact.testing.openai_chat import PATH as CHAT_COMPLETIONS_PATH
from ctx_compact.testing.openai_chat import validate_chat_completions
from middleware import CompactionEvent

LIMIT = 1500
TURNS = 14
SYSTEM_PROMPT = "Be terse."
CITIES = ["Paris", "Rome", "Oslo", "Lima", "Cairo", "Quito", "Hanoi"]


def get_report(city: str) -> str:
    """Get the detailed weather report for a city.

    Args:
        city: The city.
    """
    hours = ", ".join(
        f"{hour:02d}h {12 + hour % 7}C wind {3 + hour % 5} km/h" for hour in range(24)
    )
    return f"Report for {city}: {hours}."


def prompts(turns: int = TURNS) -> List[str]:
    return [f"Turn {turn + 1}: what is the weather in {CITIES[turn % 7]}?" for turn in range(turns)]


def tool_calls_on(turn: int) -> int:
    """The mixed run's ``provider.tool_calls`` for a turn: a tool call every third turn.

    The other turns are answered in text, so the history holds many short
    messages, where a form counted in place of another drifts furthest.
    """
    return 1 if turn % 3 == 0 else 0


def _chat_tokens(body: Any, with_tools: bool) -> int:
    total = sum(count_tokens(message) for message in body["messages"])
    if with_tools:
        total += sum(count_tokens(tool) for tool in body.get("tools") or ())
    return total


def _chat_problem(body: Any) -> Optional[str]:
    try:
        validate_chat_completions(body)
    except RequestRejected as rejected:
        return str(rejected.body)
    return None


def _gemini_tokens(body: Any, with_tools: bool) -> int:
    total = gemini.prompt_tokens(body["contents"], gemini.field(body, "systemInstruction"))
    if with_tools:
        total += sum(count_tokens(tool) for tool in body.get("tools") or ())
    return total


def _gemini_problem(body: Any) -> Optional[str]:
    problems = gemini.validate_contents(body["contents"])
    return "; ".join(p.message for p in problems) or None


def _bedrock_tokens(body: Any, with_tools: bool) -> int:
    total = bedrock.input_tokens(body["messages"], body.get("system"))
    if with_tools:
        tools = (body.get("toolConfig") or {}).get("tools") or ()
        total += sum(count_tokens(tool) for tool in tools)
    return total


def _bedrock_problem(body: Any) -> Optional[str]:
    problems = bedrock.validate_messages(body["messages"])
    return "; ".join(p.message for p in problems) or None


class Api:
    """How one provider route's requests are counted and judged, as the kit does."""

    def __init__(
        self,
        path: Callable[[str], bool],
        tokens: Callable[[Any, bool], int],
        problem: Callable[[Any], Optional[str]],
    ) -> None:
        self.path = path
        self.tokens = tokens
        self.problem = problem


APIS: Dict[str, Api] = {
    "chat": Api(lambda path: path == CHAT_COMPLETIONS_PATH, _chat_tokens, _chat_problem),
    "gemini": Api(
        lambda path: path.endswith((":generateContent", ":streamGenerateContent")),
        _gemini_tokens,
        _gemini_problem,
    ),
    "bedrock": Api(
        lambda path: path.endswith(("/converse", "/converse-stream")),
        _bedrock_tokens,
        _bedrock_problem,
    ),
}


def counted_and_sent(
    provider: FakeProvider, events: Sequence[CompactionEvent], tools: int, api: str = "chat"
) -> List[Tuple[int, int]]:
    """Each request's tokens as its event counted them and as the kit counted them.

    Both without the tools' definitions (which the kit does not count):
    ``tools``, what the integration counts for them, is taken from the event's
    figure, whether or not the request carried them (AutoGen's reflection on a
    tool's result carries none).
    """
    route = APIS[api]
    requests = [r for r in provider.requests if route.path(r.path)]
    return [
        (event.tokens_after - tools, route.tokens(request.body, False))
        for event, request in zip(events, requests)
    ]


@dataclass
class Row:
    """One line of the table: a framework's run against one route."""

    framework: str
    version: str
    route: str
    requests: int
    events: int
    over_limit: int
    retries: int
    rejected: int
    max_wire_tokens: int


ROWS: List[Row] = []


def check(
    framework: str,
    version: str,
    api: str,
    provider: FakeProvider,
    events: Sequence[CompactionEvent],
    *,
    first_request: int = 0,
    expected_requests: Optional[int] = None,
    tools_counted: bool = False,
    dropping: bool = True,
    retry_limit: Optional[int] = None,
) -> Row:
    """Assert what the kit received against ``events``; add the run's row to ``ROWS``.

    Args:
        framework: The table's first column.
        version: The framework's version.
        api: A key of ``APIS``: the route the framework sends to.
        provider: The kit's provider the run used.
        events: What the session (or the integration's hook) recorded.
        first_request: How many of ``provider.requests`` came before the run.
        expected_requests: How many requests the run makes, when it is fixed.
        tools_counted: The tools' schemas count against the budget too (an
            integration counts them; an SDK interception counts the messages).
        dropping: The run must have dropped messages (not when clearing alone
            keeps it in budget).
        retry_limit: The kit's limit, when a test lowered it below the budget
            to provoke ``on_overflow="retry"``: then every request over it must
            be one the session retried, and its retry within it.
    """
    route = APIS[api]
    requests: List[RecordedRequest] = [
        r for r in provider.requests[first_request:] if route.path(r.path)
    ]
    tokens = [route.tokens(r.body, tools_counted) for r in requests]
    limit = LIMIT if retry_limit is None else retry_limit
    over = [(i, t) for i, t in enumerate(tokens) if t > limit]
    problems = [(i, p) for i, r in enumerate(requests) if (p := route.problem(r.body))]
    retries = sum(1 for event in events if event.retried)
    row = Row(
        framework,
        version,
        requests[0].path if requests else api,
        len(requests),
        len(events),
        len(over),
        retries,
        len(problems),
        max(tokens, default=0),
    )
    ROWS.append(row)
    assert problems == [], f"requests the provider refuses for their shape: {problems}"
    if retry_limit is None:
        assert over == [], f"requests over the {limit}-token limit (index, tokens): {over}"
    else:
        assert len(over) == retries > 0, f"over the limit: {over}; retried: {retries}"
        assert all(tokens[i + 1] <= limit for i, _ in over), "a retry went over the limit"
    assert len(events) == len(requests) - retries, f"{len(events)} events, {len(requests)} requests"
    if expected_requests is not None:
        assert len(requests) - retries == expected_requests
    if retry_limit is None:  # a retry's budget is the provider's figure less a margin
        assert all(event.fits for event in events), "an event does not fit its budget"
    if dropping:
        assert any(event.dropped for event in events), "no request needed compacting"
    return row


def markdown_table(rows: Sequence[Row]) -> str:
    lines = [
        "| framework | version | route | requests | events | over limit | retries | rejected "
        "| max wire tokens |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r.framework} | {r.version} | {r.route} | {r.requests} | {r.events} | "
            f"{r.over_limit} | {r.retries} | {r.rejected} | {r.max_wire_tokens} |"
        )
    return "\n".join(lines)
