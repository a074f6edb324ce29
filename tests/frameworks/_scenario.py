"""The scenario every framework test runs, and the table it adds a row to.

A local provider (``ctx_compact.testing``) enforces a context limit of
``LIMIT`` tokens and the providers' pairing rules, and plays a model that calls
the first tool offered once after each user prompt. A framework holds a
conversation of ``TURNS`` tool-using turns with it (two requests a turn) inside
``CompactingSession(max_tokens=LIMIT, intercept=...)``. The tool's report is
long enough that the history passes the limit after a few turns, so the later
requests only fit when the session compacts them.

``Run`` checks what the provider received against what the session recorded:
every request within the limit and accepted, one event per request (a retried
request is one event that made two requests), and every patched attribute the
original object again after the block. Each check adds a row to ``ROWS``, which
``conftest.py`` prints at the end of the run.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ctx_compact.testing import FakeProvider, RecordedRequest, bedrock, count_tokens, gemini, ollama
from ctx_compact.testing._api import Problem, RequestRejected
from ctx_compact.testing.anthropic import PATH as MESSAGES_PATH
from ctx_compact.testing.anthropic import validate_messages
from ctx_compact.testing.openai_chat import PATH as CHAT_COMPLETIONS_PATH
from ctx_compact.testing.openai_chat import validate_chat_completions
from ctx_compact.testing.responses import PATH as RESPONSES_PATH
from ctx_compact.testing.responses import validate_responses
from middleware import CompactingSession

LIMIT = 1500
TURNS = 14
OPENAI_MODEL = "gpt-4o"
CLAUDE_MODEL = "claude-sonnet-4-6"
API_PATHS = (CHAT_COMPLETIONS_PATH, RESPONSES_PATH, MESSAGES_PATH, ollama.PATH)
# The Gemini and Bedrock routes name the model in the path.
API_ENDINGS = (":generateContent", ":streamGenerateContent", "/converse", "/converse-stream")


def is_api(path: str) -> bool:
    """Whether ``path`` is a model call of one of the kit's provider APIs."""
    return path in API_PATHS or path.endswith(API_ENDINGS)


# Where the SDKs and LiteLLM can be intercepted: "module:Class" (every attribute of
# the class) or "module:name,name" (those module attributes; the rest of the litellm
# module is LiteLLM's own run-time state, which its calls change).
PATCHABLE_OWNERS = (
    "openai._base_client:SyncAPIClient",
    "openai._base_client:AsyncAPIClient",
    "openai.resources.chat.completions:Completions",
    "openai.resources.chat.completions:AsyncCompletions",
    "openai.resources.responses:Responses",
    "openai.resources.responses:AsyncResponses",
    "anthropic._base_client:SyncAPIClient",
    "anthropic._base_client:AsyncAPIClient",
    "anthropic.resources.messages:Messages",
    "anthropic.resources.messages:AsyncMessages",
    "anthropic.resources.beta.messages:Messages",
    "anthropic.resources.beta.messages:AsyncMessages",
    "litellm.chat_completions.dispatch:_PYTHON_COMPLETION,_PYTHON_ACOMPLETION",
    "litellm.chat_completions.dispatch:completion,acompletion",
    "litellm:completion,acompletion",
)


def get_report(city: str) -> str:
    """Get the detailed weather report for a city."""
    # About 170 tokens: with the call, the prompt and the answer, a turn adds ~230,
    # so 14 turns hold about twice the limit.
    hours = ", ".join(
        f"{hour:02d}h {12 + hour % 7}C wind {3 + hour % 5} km/h" for hour in range(24)
    )
    return f"Report for {city}: {hours}."


def prompts() -> List[str]:
    cities = ["Paris", "Rome", "Oslo", "Lima", "Cairo", "Quito", "Hanoi"]
    return [f"Turn {turn + 1}: what is the weather in {cities[turn % 7]}?" for turn in range(TURNS)]


def wire_tokens(request: RecordedRequest) -> int:
    """The input tokens the fake provider counted for ``request``, as it compares to its limit."""
    body = request.body
    if request.path in (CHAT_COMPLETIONS_PATH, ollama.PATH):
        return sum(count_tokens(message) for message in body["messages"])
    if request.path.endswith(API_ENDINGS[:2]):
        return gemini.prompt_tokens(body["contents"], gemini.field(body, "systemInstruction"))
    if request.path.endswith(API_ENDINGS[2:]):
        return bedrock.input_tokens(body["messages"], body.get("system"))
    if request.path == MESSAGES_PATH:
        system = body.get("system")
        total = sum(count_tokens(message) for message in body["messages"])
        return total + (count_tokens(system) if system is not None else 0)
    items = body["input"]
    total = count_tokens(items) if isinstance(items, str) else sum(map(count_tokens, items))
    instructions = body.get("instructions")
    return total + (count_tokens(instructions) if instructions is not None else 0)


def pairing_problem(request: RecordedRequest) -> Optional[str]:
    """The provider's 400 text for a request it refuses for its shape, or ``None``."""
    body = request.body
    validate = {
        CHAT_COMPLETIONS_PATH: validate_chat_completions,
        MESSAGES_PATH: validate_messages,
        RESPONSES_PATH: validate_responses,
    }.get(request.path)
    if validate is not None:
        try:
            validate(body)
        except RequestRejected as rejected:
            return str(rejected.body)
        return None
    found: List[Problem]
    if request.path == ollama.PATH:
        found = ollama.validate_messages(body["messages"])
    elif request.path.endswith(API_ENDINGS[:2]):
        found = gemini.validate_contents(body["contents"])
    else:
        found = bedrock.validate_messages(body["messages"])
    return "; ".join(problem.message for problem in found) or None


def snapshot() -> Dict[Tuple[str, str], Any]:
    """The patchable attributes as they are now, to compare after a session."""
    seen: Dict[Tuple[str, str], Any] = {}
    for spec in PATCHABLE_OWNERS:
        module_name, _, what = spec.partition(":")
        # Only what is imported already: importing LiteLLM for every test is slow, and
        # what no one imported is not what the framework under test calls.
        module = sys.modules.get(module_name)
        if module is None:
            continue
        if "," in what:
            owner, names = module, what.split(",")
        else:
            owner = getattr(module, what, None)
            names = list(vars(owner)) if owner is not None else []
        for name in names:
            if name in vars(owner):
                seen[(spec, name)] = vars(owner)[name]
    return seen


def changed_since(before: Dict[Tuple[str, str], Any]) -> List[str]:
    """The attributes that are not the very object they were in ``before``."""
    after = snapshot()
    return [
        f"{spec}.{name}"
        for (spec, name), value in before.items()
        if after.get((spec, name)) is not value
    ]


@dataclass
class Row:
    """One line of the framework x route table."""

    framework: str
    route: str
    requests: int
    events: int
    over_limit: int
    retries: int
    rejected: int
    with_usage: int
    max_wire_tokens: int


ROWS: List[Row] = []


class Run:
    """One framework x route run against ``provider`` inside a ``CompactingSession``.

    ``with Run(...) as run:`` notes the patchable attributes and the requests
    so far, then enters ``CompactingSession(max_tokens=LIMIT, **session_options)``
    (``run.session``); leaving the block leaves the session, and ``check``
    compares what the provider received with what the session recorded.

    Args:
        framework: The table's first column, e.g. ``"LangChain ChatOpenAI (sync)"``.
        route: The endpoint the framework sends to, for the table.
        provider: The running fake provider.
        session_options: Passed on to ``CompactingSession``, e.g. ``intercept="openai"``.
    """

    def __init__(
        self, framework: str, route: str, provider: FakeProvider, **session_options: Any
    ) -> None:
        self.framework = framework
        self.route = route
        self.provider = provider
        self.session = CompactingSession(max_tokens=LIMIT, **session_options)
        self.before: Dict[Tuple[str, str], Any] = {}
        self.first_request = 0

    def __enter__(self) -> Run:
        self.before = snapshot()
        self.first_request = len(self.provider.requests)
        self.session.__enter__()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.session.__exit__(*exc_info)

    def requests(self) -> List[RecordedRequest]:
        return [r for r in self.provider.requests[self.first_request :] if is_api(r.path)]

    def check(
        self,
        expected_requests: Optional[int] = None,
        usage_on_every_response: bool = False,
        limit: int = LIMIT,
    ) -> Row:
        """Assert the scenario's promises, add the run's row to the table and return it.

        Args:
            expected_requests: How many requests the framework sends without
                retries (``2 * TURNS`` for a tool loop), when it is fixed.
            usage_on_every_response: Every response carries the prompt size
                (no stream without usage), so every event must report it.
            limit: The provider's context limit, when a test lowered it below
                the session's budget to provoke retries. Then every request
                over it must be one the session retried.
        """
        requests = self.requests()
        events = self.session.events
        retries = sum(1 for event in events if getattr(event, "retried", False))
        tokens = [wire_tokens(request) for request in requests]
        over = [(i, t) for i, t in enumerate(tokens) if t > limit]
        problems = [(i, p) for i, r in enumerate(requests) if (p := pairing_problem(r))]
        row = Row(
            self.framework,
            self.route,
            len(requests),
            len(events),
            len(over),
            retries,
            len(over) + len(problems),
            sum(1 for event in events if event.provider_tokens is not None),
            max(tokens, default=0),
        )
        ROWS.append(row)
        changed = changed_since(self.before)
        assert changed == [], f"attributes not restored after the session: {changed}"
        assert problems == [], f"requests the provider refuses for their shape: {problems}"
        if limit == LIMIT:
            assert over == [], f"requests over the {limit}-token limit (index, tokens): {over}"
        else:
            assert len(over) == retries, f"over the limit: {over}; retried: {retries}"
            assert retries > 0, "the lowered limit provoked no retry"
            assert all(tokens[i + 1] <= limit for i, _ in over), "a retry went over the limit"
        assert len(events) + retries == len(requests), (
            f"{len(events)} events ({retries} retried) for {len(requests)} requests"
        )
        if expected_requests is not None:
            assert len(requests) - retries == expected_requests
        if usage_on_every_response:
            reported = [event.provider_tokens for event in events]
            accepted = [t for t in tokens if t <= limit]
            assert reported == accepted, "provider_tokens is not the prompt size the provider saw"
        # The scenario is only a proof if the limit was reached: compaction did drop messages.
        assert any(event.dropped for event in events), "no request needed compacting"
        return row


def markdown_table(rows: Sequence[Row]) -> str:
    header = (
        "| framework | route | requests | events | over limit | retries | rejected "
        "| events with provider_tokens | max wire tokens |"
    )
    lines = [header, "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(
            f"| {r.framework} | {r.route} | {r.requests} | {r.events} | {r.over_limit} | "
            f"{r.retries} | {r.rejected} | {r.with_usage} | {r.max_wire_tokens} |"
        )
    return "\n".join(lines)
