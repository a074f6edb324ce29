"""What a summary keeps: facts planted in a long agent history, checked in the compacted request.

``retention_check`` builds a Chat Completions history of an agent investigating an incident, with
facts an agent needs later planted in its first turns (identifiers, a path, a URL, numbers, a name,
a standing rule, a decision and its reason, an error and its fix, an open task) among long tool
outputs; it compacts the history as it grows, summarizing what is dropped with the summarizer
given (rolling through ``previous`` when it takes it), and reports which facts are still in the
last request: verbatim, or, given ``ask``, by asking the model about the ones a paraphrase may keep.

``literal_summary`` is the reply of a scripted model that follows a summarizing prompt literally
(every identifier, path, URL and number verbatim; the rules, decisions, errors and open tasks as
stated): give it to ``FakeProvider(reply=...)`` to test the check, or a summarizer, offline.
"""

from __future__ import annotations

import inspect
import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterator, List, Optional, Sequence, Set, Tuple

from .._compact import compact_with_summary
from .._contract import CountTokens, check_callable, check_keep, check_max_tokens

Json = Any
#: ``ask(messages, question) -> answer``: the model asked about the compacted request.
Ask = Callable[[List[Json], str], str]


@dataclass(frozen=True)
class Fact:
    """One planted fact.

    Attributes:
        name: What it is (``"incident id"``).
        kind: ``"identifier"``, ``"path"``, ``"url"``, ``"number"``, ``"name"``, ``"rule"``,
            ``"decision"``, ``"error"`` or ``"task"``.
        value: The text that must be in the request, verbatim.
        question: What ``ask`` is asked about it.
        answer: What the answer must contain (case ignored) for the fact to count as kept.
    """

    name: str
    kind: str
    value: str
    question: str
    answer: str


@dataclass(frozen=True)
class FactCheck:
    """Whether one fact is in the compacted request, and how that was found.

    Attributes:
        fact: The fact.
        kept: Whether it is there.
        how: ``"verbatim"`` (its value is in the request's text) or ``"asked"`` (``ask``
            answered its question with the expected text).
    """

    fact: Fact
    kept: bool
    how: str


@dataclass(frozen=True)
class RetentionReport:
    """What the last compacted request still holds of the planted facts.

    Attributes:
        checks: One ``FactCheck`` per fact, in the order they were planted.
        messages: The last request's messages (the summary included).
        summary: The summary in it, or ``None``.
        dropped: How many of the history's messages it left out.
        tokens_before: The history's tokens.
        tokens_after: The request's.
    """

    checks: Tuple[FactCheck, ...]
    messages: Tuple[Json, ...]
    summary: Optional[str]
    dropped: int
    tokens_before: int
    tokens_after: int

    @property
    def kept(self) -> int:
        """How many facts are still in the request."""
        return sum(check.kept for check in self.checks)

    @property
    def ratio(self) -> float:
        """``kept`` over the number of facts."""
        return self.kept / len(self.checks) if self.checks else 1.0

    @property
    def missing(self) -> List[Fact]:
        """The facts the request lost."""
        return [check.fact for check in self.checks if not check.kept]

    def __str__(self) -> str:
        lines = [
            f"{self.kept} of {len(self.checks)} facts kept ({self.ratio:.0%}); "
            f"{self.dropped} messages dropped, {self.tokens_before:,} -> "
            f"{self.tokens_after:,} tokens"
        ]
        for check in self.checks:
            mark = "kept" if check.kept else "LOST"
            lines.append(f"  {mark:4}  {check.fact.kind:10} {check.fact.name}: {check.fact.value}")
        return "\n".join(lines)


# The facts, the turn that states them, and how (a user's words, a tool's output, the agent's).
_PLANTED = (
    (
        0,
        "user",
        Fact(
            "incident id", "identifier", "INC-40917", "Which incident is this about?", "INC-40917"
        ),
    ),
    (
        0,
        "user",
        Fact(
            "standing rule",
            "rule",
            "Never restart the primary database; restart only replicas.",
            "Which database must never be restarted?",
            "primary",
        ),
    ),
    (
        1,
        "tool",
        Fact(
            "config path",
            "path",
            "/srv/billing/config/rates.yaml",
            "Which file holds the billing rates?",
            "rates.yaml",
        ),
    ),
    (
        1,
        "tool",
        Fact(
            "status page",
            "url",
            "https://status.example.com/incidents/40917",
            "Where is the status page of the incident?",
            "status.example.com",
        ),
    ),
    (
        2,
        "tool",
        Fact(
            "bad commit",
            "identifier",
            "c0ffee5a91",
            "Which commit introduced the fault?",
            "c0ffee5a91",
        ),
    ),
    (
        2,
        "agent",
        Fact(
            "rollback",
            "decision",
            "Roll back to v2.14.3 because v2.15.0 leaks connections.",
            "Which version was rolled back to, and why?",
            "v2.14.3",
        ),
    ),
    (
        3,
        "tool",
        Fact(
            "error",
            "error",
            "ECONNRESET from pgbouncer",
            "Which error did the service hit?",
            "ECONNRESET",
        ),
    ),
    (
        3,
        "agent",
        Fact(
            "fix",
            "error",
            "Fixed by raising pool_size to 48.",
            "How was the connection error fixed?",
            "48",
        ),
    ),
    (
        4,
        "user",
        Fact("on-call engineer", "name", "Amaka Obi", "Who is the on-call engineer?", "Amaka Obi"),
    ),
    (4, "tool", Fact("retry budget", "number", "1,750 ms", "What is the retry budget?", "1,750")),
    (
        5,
        "user",
        Fact(
            "open task",
            "task",
            "After the fix, rotate the billing API key.",
            "What is still to be done after the fix?",
            "rotate",
        ),
    ),
)


def _stated(fact: Fact) -> str:
    """The fact as the history states it: a sentence of its own."""
    return fact.value if fact.value.endswith(".") else f"{fact.name.capitalize()}: {fact.value}."


def planted_history(turns: int = 40) -> Tuple[List[Json], Tuple[Fact, ...]]:
    """The synthetic agent history (Chat Completions) and the facts planted in it.

    Each turn is a user message, the agent's tool call, the tool's output (about 300 tokens
    of log lines) and the agent's reply; the facts are stated in the first six turns, and
    the last user message asks for the postmortem.
    """
    check_keep(turns, "turns")
    if turns < 7:
        raise ValueError(f"turns must be at least 7, to plant every fact (got {turns!r})")
    messages: List[Json] = [
        {"role": "system", "content": "You are an on-call agent. Use the tools to investigate."}
    ]
    for turn in range(turns):
        said = {
            where: [_stated(f) for t, w, f in _PLANTED if t == turn and w == where]
            for where in ("user", "tool", "agent")
        }
        asked = " ".join(said["user"]) or f"Go on with step {turn}."
        if turn == turns - 1:
            asked = "Now write the postmortem of the incident in five bullet points."
        call_id = f"call_{turn}"
        log = "\n".join(
            f"2026-12-0{1 + turn % 5}T10:{turn % 60:02d}:{k:02d} worker-{k % 7} handled "
            f"request {turn * 100 + k} in {(k * 37) % 400} ms"
            for k in range(24)
        )
        output = "\n".join([*said["tool"], log])
        reply = " ".join(said["agent"]) or f"Step {turn} shows nothing unusual."
        messages += [
            {"role": "user", "content": asked},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "read_logs", "arguments": f'{{"step": {turn}}}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": call_id, "content": output},
            {"role": "assistant", "content": reply},
        ]
    return messages, tuple(fact for _, _, fact in _PLANTED)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


def _rolling(summarize: Callable[..., Any]) -> Callable[[List[Json]], str]:
    """``summarize`` as ``compact_with_summary`` calls it, rolling over the calls: given only
    the messages not summarized yet and the previous summary, when it takes ``previous``."""
    try:
        takes_previous = "previous" in inspect.signature(summarize).parameters
    except (TypeError, ValueError):
        takes_previous = False
    summarized: Set[int] = set()
    previous: Optional[str] = None

    def step(dropped: List[Json]) -> str:
        nonlocal previous
        new = [m for m in dropped if id(m) not in summarized]
        made = summarize(new, previous=previous) if takes_previous else summarize(dropped)
        if inspect.isawaitable(made):
            close = getattr(made, "close", None)
            if close is not None:
                close()
            raise TypeError(
                "retention_check takes a sync summarizer (an async one's coroutine was "
                "returned): give it the summarizer of a sync client"
            )
        summarized.update(id(m) for m in new)
        previous = made
        return made  # type: ignore[no-any-return]

    return step


def retention_check(
    summarize: Callable[..., Any],
    *,
    max_tokens: float = 3000,
    turns: int = 40,
    rounds: int = 4,
    keep_tail: int = 4,
    count_tokens: Optional[CountTokens] = None,
    ask: Optional[Ask] = None,
) -> RetentionReport:
    """Plant facts in a long agent history, compact it with ``summarize`` as it grows, and
    say which facts the last request still holds.

    Args:
        summarize: ``summarize(dropped)`` or ``summarize(dropped, previous=...)``, as
            ``summarize=`` takes it (sync): ``middleware.llm_summarizer(client)`` for your
            model.
        max_tokens: The budget each request is compacted to.
        turns: The history's turns (four messages each; at least 7).
        rounds: How many times the growing history is compacted (evenly spaced, the last at
            its end): a summarizer taking ``previous`` rolls over them.
        keep_tail: The messages kept at the end, as ``compact`` takes it.
        count_tokens: The counter, as ``compact`` takes it.
        ask: ``ask(messages, question) -> answer``: the model asked about the last request,
            for the facts a summary may paraphrase (rules, decisions, errors, tasks); without
            it, every fact is looked for verbatim.

    Returns:
        A ``RetentionReport``.

    Raises:
        TypeError, ValueError: An argument is invalid, or ``summarize`` is async.
    """
    check_callable(summarize, "summarize")
    check_callable(ask, "ask")
    check_max_tokens(max_tokens)
    check_keep(rounds, "rounds")
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1 (got {rounds!r})")
    history, facts = planted_history(turns)
    step = _rolling(summarize)
    stops = sorted({1 + len(history) * k // rounds for k in range(1, rounds + 1)})
    result = None
    for stop in stops:
        result = compact_with_summary(
            history[:stop],
            max_tokens=max_tokens,
            keep_tail=keep_tail,
            count_tokens=count_tokens,
            summarize=step,
        )
    assert result is not None
    text = "\n".join(_strings(result.messages))
    checks = []
    for fact in facts:
        if ask is not None and fact.kind in ("rule", "decision", "error", "task"):
            answer = ask(list(result.messages), fact.question)
            checks.append(FactCheck(fact, fact.answer.lower() in str(answer).lower(), "asked"))
        else:
            checks.append(FactCheck(fact, fact.value in text, "verbatim"))
    return RetentionReport(
        checks=tuple(checks),
        messages=tuple(result.messages),
        summary=result.summary,
        dropped=len(result.dropped),
        tokens_before=result.tokens_before,
        tokens_after=result.tokens_after,
    )


# What a literal reader of a summarizing prompt copies out of the messages it summarizes.
_VERBATIM = re.compile(
    r"https?://\S+|(?<![\w/])/(?:[\w.-]+/)+[\w.-]+|\b[A-Z]{2,}-\d+\b|\b[0-9a-f]{10,40}\b"
    r"|\bv\d+(?:\.\d+)+\b|\b\d{1,3}(?:,\d{3})+(?:\s?ms)?|\b[A-Z][a-z]+ [A-Z][a-z]+\b"
)
_INSTRUCTING = ("system", "developer")
_RULE = re.compile(r"\b(?:never|always|must|only)\b", re.IGNORECASE)
_DECISION = re.compile(r"\bbecause\b", re.IGNORECASE)
_ERROR = re.compile(r"\b(?:(?i:error|fixed|failed|resolved)|E[A-Z]{4,})\b")
_TASK = re.compile(r"\b(?:after the|todo|still to|remaining|open task)\b", re.IGNORECASE)


def _sentences(texts: Sequence[str], pattern: re.Pattern[str]) -> List[str]:
    found: List[str] = []
    for text in texts:
        for line in text.splitlines():
            if line.startswith("## "):  # a heading of an earlier summary
                continue
            for sentence in re.split(r"(?<=\.)\s+", line.removeprefix("- ").strip()):
                if pattern.search(sentence) and sentence not in found:
                    found.append(sentence)
    return found


# The task ending a cache-aligned request of llm_summarizer: its last message, or that
# message's last text block, holds the instructions and then this.
_ALIGNED_TASK = re.compile(
    r"(?:(Summarize)|update it with) the last (\d+) messages of the conversation(?: above)?\."
    r" Keep the summary under \d+ tokens\. Call no tool\.\Z"
)


def _asked(messages: List[Json]) -> List[Json]:
    """The messages a request asks to have summarized: all of them, or, when it ends with a
    cache-aligned task, the last N before the task (and, rolling, the summary so far, the
    message before them), the task's own text left out."""
    if not messages or not isinstance(messages[-1], dict):
        return messages
    *above, last = messages
    for key in ("content", "parts"):  # where each format keeps a message's text
        text: Any = last.get(key)
        others: List[Any] = []
        if isinstance(text, list) and text and isinstance(text[-1], dict):
            text, others = text[-1].get("text"), text[:-1]  # the task as the last block
        task = _ALIGNED_TASK.search(text) if isinstance(text, str) else None
        if task is not None:
            if others:  # the task joined the last message asked about
                above.append({**last, key: others})
            rolling = task.group(1) is None
            return above[-(int(task.group(2)) + rolling) :]
    return messages


def _decoded(value: Any) -> Any:
    """``value`` with each line of its strings that is a JSON object read as that object."""
    if isinstance(value, str):
        lines: List[Any] = []
        for line in value.splitlines():
            try:
                lines.append(json.loads(line) if line.startswith("{") else line)
            except ValueError:
                lines.append(line)
        return lines
    if isinstance(value, dict):
        return {key: _decoded(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_decoded(item) for item in value]
    return value


def literal_summary(messages: List[Json]) -> str:
    """The summary a model that follows a summarizing prompt literally would write of
    ``messages`` (a request in any format the kit serves): its standing rules, decisions,
    errors and open tasks as stated, and every identifier, path, URL, version and number
    verbatim, in sections. Give it as ``FakeProvider(reply=literal_summary)``. A request
    ending with ``llm_summarizer``'s cache-aligned task is summarized as that task asks:
    the last messages it names (and the summary so far, the message before them, when it
    rolls), the instructions left out.

    It is a stand-in, to test a summarizer's plumbing and the retention check offline;
    what a real model keeps must be measured with that model.
    """
    # What it summarizes: the messages, not the instructions it was given as a system prompt;
    # messages a summarizer wrote into its prompt as JSON lines are read as messages.
    asked = _asked(messages)
    said = [m for m in asked if not (isinstance(m, dict) and m.get("role") in _INSTRUCTING)]
    texts = [text for text in _strings(_decoded(said)) if text.strip()]
    every: List[str] = []
    for text in texts:
        for match in _VERBATIM.findall(text):
            match = match.rstrip(".,;:")  # a sentence's end, not the path's or the URL's
            if match not in every:
                every.append(match)
    sections = [
        ("Goal and standing instructions", _sentences(texts, _RULE)),
        ("Decisions and their reasons", _sentences(texts, _DECISION)),
        ("Identifiers, paths, URLs, numbers and names", every),
        ("Errors and how they were resolved", _sentences(texts, _ERROR)),
        ("Open tasks", _sentences(texts, _TASK)),
    ]
    return "\n".join(
        f"## {title}\n" + "\n".join(f"- {item}" for item in items)
        for title, items in sections
        if items
    )
