"""llm_summarizer's cache-aligned requests with the real ``openai`` and ``anthropic`` clients.

A summarization request repeats the prefix of the conversation's previous request
(its system prompt, tools and model, the head, the previous summary's message as
it was inserted, then the messages dropped since) and ends with one instruction
message, so a provider's prompt cache can serve all but that message. The tests
compare the request bodies the local provider received; where the alignment
cannot be made, the request is today's (instructions as the system prompt, the
dropped messages as JSON in one user message).

Async tests run on asyncio and trio through the ``anyio_backend`` fixture.
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

from ctx_compact.testing import (  # noqa: E402
    FakeProvider,
    RecordedRequest,
    count_tokens,
    literal_summary,
)
from middleware import CompactingSession, CompactionEvent, budgeted, llm_summarizer  # noqa: E402
from middleware.sdks import Alignment, summary_client  # noqa: E402

from ._conversations import (  # noqa: E402
    ANTHROPIC_BUDGET,
    TRIO_STREAM_WARNING,
    anthropic_history,
)
from .test_llm_summarizer import (  # noqa: E402
    ASKED,
    HEADINGS,
    MODEL,
    SDKS,
    SUMMARY_MODEL,
    Script,
    Sdk,
)

Message = Dict[str, Any]

pytestmark = pytest.mark.filterwarnings(TRIO_STREAM_WARNING)

TOOLS = {
    "openai": [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "The forecast for a city on a day.",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    ],
    "anthropic": [
        {
            "name": "get_weather",
            "description": "The forecast for a city on a day.",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
            "cache_control": {"type": "ephemeral"},
        }
    ],
}
# Anthropic's system prompt, with a breakpoint of the request's own.
SYSTEM = [
    {"type": "text", "text": "You are a travel assistant.", "cache_control": {"type": "ephemeral"}}
]
# How the summarization requests turn tool use off: OpenAI's tool_choice; Anthropic keeps
# the call's own (none given here), which its cached messages depend on.
TOOLS_OFF = {"openai": "none", "anthropic": None}
BREAKPOINT = {"type": "ephemeral"}
# An earlier state of the conversation, ending after one of the model's answers.
SHORTER = 61


@pytest.fixture(params=SDKS, ids=[s.name for s in SDKS])
def sdk(request: pytest.FixtureRequest) -> Sdk:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def server() -> Iterator[FakeProvider]:
    script = Script()
    with FakeProvider(reply=script) as provider:
        yield provider
        script.released.set()


def extra(sdk: Sdk) -> Dict[str, Any]:
    """What the user's calls send beside the messages: tools, and Anthropic's system."""
    sent: Dict[str, Any] = {"tools": TOOLS[sdk.name]}
    if sdk.name == "anthropic":
        sent["system"] = SYSTEM
    return sent


def blocks(message: Message) -> Message:
    """``message`` with its content as blocks (Anthropic takes a string as one text block)."""
    content = message["content"]
    if isinstance(content, str):
        return {**message, "content": [{"type": "text", "text": content}]}
    return message


def split(sdk: Sdk, request: RecordedRequest) -> Tuple[List[Message], str]:
    """An aligned request's repeated messages (Anthropic's added breakpoint taken off, its
    content as blocks) and the text of its one instruction, which ends it."""
    *repeated, last = request.body["messages"]
    if sdk.name == "openai":
        assert last["role"] == "user"
        assert isinstance(last["content"], str)
        return repeated, last["content"]
    *joined, instruction = last["content"]
    assert instruction["type"] == "text"
    if joined:  # the prefix ended with a user message: the instruction joined it
        repeated.append({**last, "content": joined})
    end = [blocks(m) for m in repeated]
    mark = end[-1]["content"][-1]
    assert mark.pop("cache_control") == BREAKPOINT  # the breakpoint ending the prefix
    return end, str(instruction["text"])


TASK = re.compile(r"(Summarize|update it with) the last (\d+) messages of the conversation")


def task_of(request: RecordedRequest) -> Optional[re.Match[str]]:
    """The task ending a summarizing request, if it is one."""
    content = request.body["messages"][-1]["content"]
    text = content if isinstance(content, str) else content[-1].get("text", "")
    return TASK.search(text)


def sent(sdk: Sdk, messages: List[Any]) -> List[Message]:
    """``messages`` as a request carries them (as JSON; for Anthropic, content as blocks)."""
    plain = json.loads(json.dumps(messages))
    return [blocks(m) for m in plain] if sdk.name == "anthropic" else plain


def is_old_shape(sdk: Sdk, request: RecordedRequest) -> bool:
    """Today's request: the instructions as the system prompt, the messages as JSON."""
    prompt = sdk.prompt(request)
    return (
        all(heading in sdk.system(request) for heading in HEADINGS)
        and "<messages>\n" in prompt
        and "tools" not in request.body
        and "tool_choice" not in request.body
    )


def assert_aligned(
    sdk: Sdk,
    requests: List[RecordedRequest],
    events: List[CompactionEvent],
    history: List[Message],
) -> None:
    """The two calls' summarization requests repeat what the conversation had sent."""
    first, main1, second, main2 = requests
    for summarizing in (first, second):
        assert summarizing.body["model"] == MODEL
        assert summarizing.body["tools"] == TOOLS[sdk.name]
        assert summarizing.body.get("tool_choice") == TOOLS_OFF[sdk.name]
        assert summarizing.body[sdk.max_tokens_key] == 2000
        if sdk.name == "anthropic":  # the system prompt and its own breakpoint, as sent
            assert summarizing.body["system"] == main1.body["system"] == SYSTEM
    # The first summary: the head and the dropped messages, as the history holds them.
    repeated, instruction = split(sdk, first)
    assert repeated == sent(sdk, history[: len(repeated)])
    head = list(events[0].messages).index({"role": "user", "content": "SUMMARY-1"})
    assert len(repeated) == head + len(events[0].dropped)
    assert all(heading in instruction for heading in HEADINGS)
    assert f"Summarize the last {len(events[0].dropped)} messages" in instruction
    # The second: the previous request's prefix exactly, up to the messages dropped since.
    repeated, instruction = split(sdk, second)
    assert repeated == sent(sdk, main1.body["messages"][: len(repeated)])
    note = main1.body["messages"].index({"role": "user", "content": "SUMMARY-1"})
    assert sent(sdk, main1.body["messages"][:note]) == repeated[:note]  # the head
    assert repeated[note] == sent(sdk, [{"role": "user", "content": "SUMMARY-1"}])[0]
    since = events[1].dropped[len(events[0].dropped) :]
    assert repeated[note + 1 :] == sent(sdk, list(since))
    assert "update it with the last" in instruction
    assert ASKED in instruction
    # The summary still lands, rolled on.
    assert [e.summary for e in events] == ["SUMMARY-1", "SUMMARY-2"]
    assert {"role": "user", "content": "SUMMARY-2"} in main2.body["messages"]


# --- the aligned requests ------------------------------------------------------------------


def two_calls(sdk: Sdk, server: FakeProvider, history: List[Message]) -> List[CompactionEvent]:
    """An earlier state of ``history`` sent, then all of it, through a session whose
    summarizer is ``llm_summarizer`` on the same client: the session's events."""
    events: List[CompactionEvent] = []
    with (
        sdk.sync(server.base_url) as client,
        CompactingSession(
            max_tokens=sdk.budget,
            intercept=sdk.name,
            summarize=llm_summarizer(client),
            on_compact=events.append,
        ),
    ):
        sdk.create(client, history[:SHORTER], **extra(sdk))
        sdk.create(client, history, **extra(sdk))
    return events


def test_a_sessions_summary_repeats_the_previous_requests_prefix(
    sdk: Sdk, server: FakeProvider
) -> None:
    history = sdk.history()
    events = two_calls(sdk, server, history)
    assert_aligned(sdk, list(server.requests), events, history)


def test_the_kits_literal_model_summarizes_what_an_aligned_request_asks_for(sdk: Sdk) -> None:
    # The request repeats the whole prefix and ends with the instructions and the task: a
    # model following it literally summarizes the messages dropped (and, rolling, the
    # summary so far), never the instructions nor the head.
    history = [  # a standing rule in each of the user's own words, for the summaries to keep
        {**m, "content": f"{m['content']} Always answer within {i} words."}
        if m["role"] == "user" and isinstance(m["content"], str)
        else m
        for i, m in enumerate(sdk.history())
    ]
    with FakeProvider(reply=literal_summary) as server:
        events = two_calls(sdk, server, history)
    asked = []  # each summarizing request, and the messages its task names
    for request in server.requests:
        summary = literal_summary(request.body["messages"])  # before split() takes a mark off
        task = task_of(request)
        if task is not None:
            rolling = task.group(1) != "Summarize"  # the summary so far comes before them
            count = int(task.group(2)) + rolling
            asked.append((summary, split(sdk, request)[0][-count:], rolling))
    assert any(rolling for _, _, rolling in asked)
    assert any(not rolling for _, _, rolling in asked)
    for summary, messages, _ in asked:
        assert summary == literal_summary(messages)
        assert summary
        assert "never paraphrase" not in summary  # nothing of the instructions
    assert {e.summary for e in events} <= {summary for summary, _, _ in asked}


@pytest.mark.anyio
async def test_an_async_clients_summary_repeats_it_too(sdk: Sdk, server: FakeProvider) -> None:
    events: List[CompactionEvent] = []
    history = sdk.history()
    async with sdk.async_(server.base_url) as client:
        method = client.chat.completions if sdk.name == "openai" else client.messages
        ask = budgeted(
            max_tokens=sdk.budget, summarize=llm_summarizer(client), on_compact=events.append
        )(method.create)
        more = {} if sdk.name == "openai" else {"max_tokens": 9}
        for messages in (history[:SHORTER], history):
            await ask(model=MODEL, messages=messages, **extra(sdk), **more)
    assert_aligned(sdk, list(server.requests), events, history)


# --- where it falls back to today's request ------------------------------------------------


@pytest.mark.parametrize(
    "case", ["decorated function", "another model", "cache_aligned=False", "over the bound"]
)
def test_where_it_cannot_align_the_request_is_todays(
    sdk: Sdk, server: FakeProvider, case: str
) -> None:
    events: List[CompactionEvent] = []
    options: Dict[str, Any] = {
        "decorated function": {"model": MODEL},
        "another model": {"model": SUMMARY_MODEL},
        "cache_aligned=False": {"cache_aligned": False},
        "over the bound": {"max_input_tokens": 1000},
    }[case]
    with sdk.sync(server.base_url) as client:
        summarize = llm_summarizer(client, **options)
        if case == "decorated function":
            # Its keyword arguments hold no SDK request: only the function knows its body.
            ask = budgeted(max_tokens=sdk.budget, summarize=summarize, on_compact=events.append)(
                lambda messages: sdk.create(client, messages, **extra(sdk))
            )
            ask(sdk.history())
        else:
            with CompactingSession(
                max_tokens=sdk.budget,
                intercept=sdk.name,
                summarize=summarize,
                on_compact=events.append,
            ):
                sdk.create(client, sdk.history(), **extra(sdk))

    summarizing = list(server.requests[:-1])
    assert summarizing
    assert len(summarizing) > 1 if case == "over the bound" else len(summarizing) == 1
    assert all(is_old_shape(sdk, r) for r in summarizing)
    (event,) = events
    assert event.summary == f"SUMMARY-{len(summarizing)}"


def test_a_plain_callable_is_sent_the_prompt_messages_as_before() -> None:
    prompts: List[Any] = []

    def model(prompt: List[Dict[str, str]]) -> str:
        prompts.append(prompt)
        return "summary"

    ask = budgeted(max_tokens=500, summarize=llm_summarizer(model))(lambda messages: messages)
    ask([{"role": "user", "content": f"message {i} " * 30} for i in range(20)])
    ((system, user),) = prompts
    assert system["role"] == "system"
    assert "<messages>\n" in user["content"]


# --- Anthropic's request, message by message -----------------------------------------------


def anthropic_aligned(body: Dict[str, Any], messages: List[Any], api: Any = None) -> Any:
    api_ = summary_client(anthropic.Anthropic(api_key="test")).apis[0]  # type: ignore[union-attr]
    # The call's own request holds its messages (sent_before's last ones among them).
    return api_.align(Alignment({"messages": messages, **body}, messages, "INSTRUCTION", 100), api)


def test_anthropic_after_an_assistant_message_the_instruction_is_a_user_message() -> None:
    messages = [
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Hi there."},
    ]
    made = anthropic_aligned({"model": MODEL}, messages)
    assert made["messages"] == [
        messages[0],
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "Hi there.", "cache_control": BREAKPOINT}],
        },
        {"role": "user", "content": "INSTRUCTION"},
    ]
    assert "tools" not in made
    assert "tool_choice" not in made  # no tools to turn off
    assert messages[1]["content"] == "Hi there."  # the caller's message is left alone


def test_anthropic_after_a_user_message_the_instruction_joins_it() -> None:
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "21 °C"}
    messages = [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "w"}]},
        {"role": "user", "content": [result]},
    ]
    made = anthropic_aligned({"model": MODEL, "tools": TOOLS["anthropic"]}, messages)
    assert made["messages"][:2] == messages[:2]
    assert made["messages"][2] == {
        "role": "user",
        "content": [
            {**result, "cache_control": BREAKPOINT},
            {"type": "text", "text": "INSTRUCTION"},
        ],
    }
    assert "tool_choice" not in made  # the call's own: none given
    assert "cache_control" not in result


@pytest.mark.parametrize(
    ("choice", "sent"),
    [
        ({"type": "auto"}, {"type": "auto"}),
        ({"type": "none"}, {"type": "none"}),
        ({"type": "any"}, {"type": "none"}),
        ({"type": "tool", "name": "get_weather"}, {"type": "none"}),
    ],
    ids=["auto", "none", "any", "tool"],
)
def test_anthropic_keeps_the_calls_tool_choice_unless_it_forces_a_tool(
    choice: Message, sent: Message
) -> None:
    body = {"model": MODEL, "tools": TOOLS["anthropic"], "tool_choice": choice}
    made = anthropic_aligned(body, [{"role": "user", "content": "Hello"}])
    assert made["tool_choice"] == sent


def test_anthropic_keeps_the_calls_thinking_with_room_for_the_summary() -> None:
    thinking = {"type": "enabled", "budget_tokens": 1024}
    made = anthropic_aligned(
        {"model": MODEL, "thinking": thinking}, [{"role": "user", "content": "Hello"}]
    )
    assert made["thinking"] == thinking
    assert made["max_tokens"] == 1024 + 100  # past the thinking budget, the summary's bound
    adaptive = anthropic_aligned(
        {"model": MODEL, "thinking": {"type": "adaptive"}}, [{"role": "user", "content": "Hi"}]
    )
    assert (adaptive["thinking"], adaptive["max_tokens"]) == ({"type": "adaptive"}, 100)


def test_anthropic_at_four_breakpoints_the_latest_of_the_messages_own_gives_way() -> None:
    marked = {"type": "text", "text": "Earlier.", "cache_control": BREAKPOINT}
    body = {"model": MODEL, "system": [dict(marked), dict(marked)], "tools": TOOLS["anthropic"]}
    messages = [
        {"role": "user", "content": [marked]},
        {"role": "assistant", "content": "Later."},
    ]
    made = anthropic_aligned(body, messages)
    text = json.dumps(made)
    assert text.count("cache_control") == 4
    assert made["messages"][0]["content"] == [{"type": "text", "text": "Earlier."}]
    assert made["messages"][1]["content"][0]["cache_control"] == BREAKPOINT
    assert made["system"] == body["system"]


def marked_last(messages: List[Message]) -> List[Message]:
    """``messages`` with a breakpoint on the last one, as a call caching its prefix sends them."""
    *earlier, last = messages
    block = {"type": "text", "text": last["content"], "cache_control": BREAKPOINT}
    return [*earlier, {**last, "content": [block]}]


@pytest.mark.parametrize("thinking", [None, {"type": "enabled", "budget_tokens": 1024}])
def test_an_anthropic_summary_reads_the_messages_the_calls_cached(
    server: FakeProvider, thinking: Any
) -> None:
    # Each call marks its last message (a moving breakpoint); the third is compacted, and
    # its summary's prefix runs past the end of the first call's, which the kit's cache
    # serves only under the calls' own tool_choice and thinking.
    turns = [
        {"role": "assistant" if i % 2 else "user", "content": f"turn {i}: " + "word " * 100}
        for i in range(29)
    ]
    more = {} if thinking is None else {"thinking": thinking}
    events: List[CompactionEvent] = []
    with (
        anthropic.Anthropic(base_url=server.base_url, api_key="test", max_retries=0) as client,
        CompactingSession(
            max_tokens=3200,
            target_tokens=1800,
            intercept="anthropic",
            summarize=llm_summarizer(client),
            on_compact=events.append,
        ),
    ):
        for length in (11, 21, 29):
            client.messages.create(
                model=MODEL,
                max_tokens=2048,
                system=SYSTEM,
                tools=TOOLS["anthropic"],
                messages=marked_last(turns[:length]),
                **more,
            )
    (event,) = [e for e in events if e.dropped]
    assert event.summary == "SUMMARY-1"
    first, _, summarizing, _ = server.billing
    request = server.requests[2]
    assert request.body.get("tool_choice") is None
    assert request.body.get("thinking") == thinking
    assert len(request.body["messages"]) > 11  # its prefix runs past the first call's
    # Read: the system prompt and the first call's messages (all that call wrote, but for
    # its breakpoint, which is not sent again), as the summary sends them.
    read = count_tokens(SYSTEM) + sum(map(count_tokens, request.body["messages"][:11]))
    assert summarizing.cache_read_tokens == read > first.cache_write_tokens - 20


def test_an_aligned_reply_without_text_is_asked_again_plainly(server: FakeProvider) -> None:
    # The call leaves tool use on (Anthropic's cached messages depend on it); a model that
    # calls a tool anyway gets today's request, which offers no tools.
    server.tool_calls = 10  # more than the results the aligned request ends with
    events: List[CompactionEvent] = []
    history = anthropic_history()
    with (
        anthropic.Anthropic(base_url=server.base_url, api_key="test", max_retries=0) as client,
        CompactingSession(
            max_tokens=ANTHROPIC_BUDGET,
            intercept="anthropic",
            summarize=llm_summarizer(client),
            on_compact=events.append,
        ),
    ):
        client.messages.create(
            model=MODEL, max_tokens=256, system=SYSTEM, tools=TOOLS["anthropic"], messages=history
        )
    aligned, plain, _ = server.requests
    assert aligned.body["tools"] == TOOLS["anthropic"]
    assert "tool_choice" not in aligned.body
    assert is_old_shape(SDKS[1], plain)
    (event,) = events
    assert event.summary == "SUMMARY-1"
    assert event.summary_usage is not None
    assert event.summary_usage.requests == 2


def test_another_apis_body_is_not_aligned() -> None:
    messages = [{"role": "user", "content": "Hello"}]
    assert anthropic_aligned({"model": MODEL}, messages, "openai /chat/completions") is None


def test_openai_keeps_the_requests_prompt_cache_key() -> None:
    api = summary_client(openai.OpenAI(api_key="test")).apis[0]  # type: ignore[union-attr]
    body = {"model": MODEL, "prompt_cache_key": "user-42"}
    made = api.align(
        Alignment(body, [{"role": "user", "content": "Hi"}], "I", 9), "openai /chat/completions"
    )
    assert made == {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Hi"}, {"role": "user", "content": "I"}],
        "max_completion_tokens": 9,
        "prompt_cache_key": "user-42",
    }
    assert api.align(Alignment(body, [], "I", 9), "openai /responses") is None
