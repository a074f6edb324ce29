"""The testing kit's prompt cache through the real SDKs: OpenAI's prefixes, Anthropic's breakpoints.

Every expected figure is worked out here from ``count_tokens`` per unit, apart
from the kit's own arithmetic: OpenAI's cached tokens are the shared prefix in
whole messages, from 1,024 tokens, rounded down to 128; Anthropic's are the
prefix through a ``cache_control`` block, read when an earlier request wrote it.
"""

from __future__ import annotations

import copy
from typing import Any, Dict, List

import pytest

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

from ctx_compact.testing import Billing, FakeProvider, count_tokens  # noqa: E402
from middleware import CompactingSession, budgeted  # noqa: E402

from ._conversations import TRIO_STREAM_WARNING  # noqa: E402

Message = Dict[str, Any]
MODEL = "gpt-4o"
CLAUDE = "claude-test"
CACHED = {"type": "ephemeral"}


def openai_rule(tokens: int) -> int:
    """OpenAI's documented rule: nothing under 1,024 tokens, else steps of 128."""
    return tokens // 128 * 128 if tokens >= 1024 else 0


def history(turns: int = 6, words: int = 120) -> List[Message]:
    """A conversation of about ``turns * words * 1.3`` tokens, each message distinct."""
    messages: List[Message] = [{"role": "system", "content": "Follow the house rules. " * 20}]
    for turn in range(turns):
        messages.append({"role": "user", "content": f"question {turn}: " + "detail " * words})
        messages.append({"role": "assistant", "content": f"answer {turn}: " + "finding " * words})
    messages.append({"role": "user", "content": "And now?"})
    return messages


def tokens(messages: List[Message]) -> int:
    return sum(count_tokens(message) for message in messages)


def chat(client: Any, messages: List[Message], **options: Any) -> Any:
    return client.chat.completions.create(
        model=options.pop("model", MODEL), messages=messages, **options
    )


def cached(response: Any) -> int:
    return int(response.usage.prompt_tokens_details.cached_tokens)


# --- OpenAI Chat Completions --------------------------------------------------------


def test_a_second_request_reads_the_prefix_it_shares(fake_openai: Any) -> None:
    first = history()
    second = [
        *first,
        {"role": "assistant", "content": "Soon."},
        {"role": "user", "content": "Now?"},
    ]
    assert tokens(first) >= 1024

    cold = chat(fake_openai, first)
    warm = chat(fake_openai, second)

    assert cached(cold) == 0
    assert cached(warm) == openai_rule(tokens(first))
    # prompt_tokens is unchanged: it includes the cached tokens.
    assert warm.usage.prompt_tokens == tokens(second)


def test_the_prefix_counts_in_whole_messages(fake_openai: Any) -> None:
    first = history()
    second = copy.deepcopy(first)
    second[-1]["content"] = "And then?"  # the last message differs: the rest is shared

    chat(fake_openai, first)

    assert cached(chat(fake_openai, second)) == openai_rule(tokens(first[:-1]))


def test_a_short_prefix_reports_nothing(fake_openai: Any) -> None:
    short = history(turns=2, words=40)
    assert tokens(short) < 1024

    chat(fake_openai, short)

    assert cached(chat(fake_openai, short)) == 0


def test_a_changed_early_message_breaks_the_cache(fake_openai: Any) -> None:
    first = history()
    changed = copy.deepcopy(first)
    changed[0]["content"] = "New house rules."
    later = copy.deepcopy(first)
    later[5]["content"] += " (edited)"

    chat(fake_openai, first)

    assert cached(chat(fake_openai, changed)) == 0
    assert cached(chat(fake_openai, later)) == openai_rule(tokens(first[:5]))


def test_the_cache_is_per_model_and_per_tools(fake_openai: Any) -> None:
    messages = history()
    tool = {"type": "function", "function": {"name": "look", "parameters": {"type": "object"}}}
    chat(fake_openai, messages)

    assert cached(chat(fake_openai, messages, model="gpt-4o-mini")) == 0
    assert cached(chat(fake_openai, messages, tools=[tool])) == 0
    assert cached(chat(fake_openai, messages, tools=[tool])) == openai_rule(tokens(messages))


def test_a_stream_reports_the_same_figure(fake_openai: Any) -> None:
    first = history()
    chat(fake_openai, first)

    chunks = list(chat(fake_openai, first, stream=True, stream_options={"include_usage": True}))

    usage = chunks[-1].usage
    assert usage.prompt_tokens == tokens(first)
    assert usage.prompt_tokens_details.cached_tokens == openai_rule(tokens(first))


def test_caching_can_be_turned_off() -> None:
    with FakeProvider(prompt_cache=False) as provider:
        client = openai.OpenAI(base_url=provider.openai_url, api_key="test", max_retries=0)
        with client:
            chat(client, history())
            assert cached(chat(client, history())) == 0
        assert [b.cache_read_tokens for b in provider.billing] == [0, 0]


def test_the_provider_records_what_it_billed(fake_provider: FakeProvider, fake_openai: Any) -> None:
    first = history()
    second = [
        *first,
        {"role": "assistant", "content": "Soon."},
        {"role": "user", "content": "Now?"},
    ]
    replies = [chat(fake_openai, first), chat(fake_openai, second)]

    assert fake_provider.billing == [
        Billing(
            "/v1/chat/completions",
            MODEL,
            reply.usage.prompt_tokens,
            reply.usage.completion_tokens,
            cached(reply),
        )
        for reply in replies
    ]
    bill = fake_provider.billing[1]
    assert bill.uncached_tokens == tokens(second) - openai_rule(tokens(first))
    fake_provider.clear()
    assert fake_provider.billing == []


def test_a_cleared_cache_is_cold(fake_provider: FakeProvider, fake_openai: Any) -> None:
    chat(fake_openai, history())
    fake_provider.clear_cache()

    assert cached(chat(fake_openai, history())) == 0


# --- OpenAI Responses ---------------------------------------------------------------


def test_responses_reads_the_shared_prefix_instructions_first(fake_openai: Any) -> None:
    items = history()[1:]
    rules = "Follow the house rules. " * 20
    fake_openai.responses.create(model=MODEL, instructions=rules, input=items)

    more = [*items, {"role": "user", "content": "Go on."}]
    warm = fake_openai.responses.create(model=MODEL, instructions=rules, input=more)
    other = fake_openai.responses.create(model=MODEL, instructions="Other rules.", input=more)

    assert warm.usage.input_tokens == count_tokens(rules) + tokens(more)
    assert warm.usage.input_tokens_details.cached_tokens == openai_rule(
        count_tokens(rules) + tokens(items)
    )
    assert other.usage.input_tokens_details.cached_tokens == 0


def test_a_responses_stream_reports_the_same_figure(fake_openai: Any) -> None:
    items = history()
    fake_openai.responses.create(model=MODEL, input=items)

    events = list(fake_openai.responses.create(model=MODEL, input=items, stream=True))

    completed = next(e for e in events if e.type == "response.completed")
    assert completed.response.usage.input_tokens_details.cached_tokens == openai_rule(tokens(items))


# --- Anthropic Messages -------------------------------------------------------------

SYSTEM = "You review pull requests for the payments team. " * 100


def system_blocks(marked: bool = True) -> List[Message]:
    block: Message = {"type": "text", "text": SYSTEM}
    return [{**block, "cache_control": CACHED}] if marked else [block]


def conversation(turns: int = 4, words: int = 60) -> List[Message]:
    messages: List[Message] = []
    for turn in range(turns):
        messages.append({"role": "user", "content": f"diff {turn}: " + "line " * words})
        messages.append({"role": "assistant", "content": f"review {turn}: " + "note " * words})
    messages.append({"role": "user", "content": "Summarize."})
    return messages


def marked_last(messages: List[Message], at: int = -1) -> List[Message]:
    """``messages`` with a breakpoint on the content block of ``messages[at]``."""
    copied = copy.deepcopy(messages)
    content = copied[at]["content"]
    copied[at]["content"] = [{"type": "text", "text": content, "cache_control": CACHED}]
    return copied


def ask(client: Any, messages: List[Message], system: Any = None, **options: Any) -> Any:
    if system is not None:
        options["system"] = system
    return client.messages.create(model=CLAUDE, max_tokens=64, messages=messages, **options)


def split(response: Any) -> List[int]:
    usage = response.usage
    return [usage.cache_read_input_tokens, usage.cache_creation_input_tokens, usage.input_tokens]


def test_a_system_breakpoint_is_written_then_read(fake_anthropic: Any) -> None:
    messages = conversation()
    system = system_blocks()
    prefix = count_tokens(system)
    total = prefix + tokens(messages)
    assert prefix >= 1024

    longer = [*messages, {"role": "assistant", "content": "Done."}]
    first = ask(fake_anthropic, messages, system)
    second = ask(fake_anthropic, longer, system)

    # Anthropic's split: input_tokens is what is neither read nor written.
    assert split(first) == [0, prefix, total - prefix]
    assert split(second) == [prefix, 0, tokens(longer)]


def test_a_moving_breakpoint_reads_what_the_last_request_wrote(fake_anthropic: Any) -> None:
    # The usual pattern: each turn marks its last message; the earlier mark is gone.
    system = system_blocks(marked=False)
    earlier = conversation()
    later = [
        *earlier,
        {"role": "assistant", "content": "Summary."},
        {"role": "user", "content": "Next."},
    ]
    first_request = marked_last(earlier)
    second_request = marked_last(later)

    first = ask(fake_anthropic, first_request, system)
    second = ask(fake_anthropic, second_request, system)

    first_total = count_tokens(system) + tokens(first_request)
    assert split(first) == [0, first_total, 0]
    # Read: the same prefix as this request sends it (without the earlier mark).
    read = count_tokens(system) + tokens(second_request[: len(earlier)])
    second_total = count_tokens(system) + tokens(second_request)
    assert split(second) == [read, second_total - read, 0]


def test_a_breakpoint_inside_a_message_caches_through_its_block(fake_anthropic: Any) -> None:
    messages = conversation()
    messages[-1] = {
        "role": "user",
        "content": [
            {
                "type": "text",
                "text": "Here is the spec. " + "clause " * 200,
                "cache_control": CACHED,
            },
            {"type": "text", "text": "Does the last diff meet it?"},
        ],
    }
    system = system_blocks(marked=False)
    through_block = {**messages[-1], "content": messages[-1]["content"][:1]}
    prefix = count_tokens(system) + tokens(messages[:-1]) + count_tokens(through_block)
    total = count_tokens(system) + tokens(messages)

    first = ask(fake_anthropic, messages, system)
    second = ask(fake_anthropic, messages, system)

    assert split(first) == [0, prefix, total - prefix]
    assert split(second) == [prefix, 0, total - prefix]


def test_a_prefix_under_1024_tokens_is_not_cached(fake_anthropic: Any) -> None:
    messages = marked_last(conversation(turns=1, words=20))
    total = tokens(messages)
    assert total < 1024

    ask(fake_anthropic, messages)

    assert split(ask(fake_anthropic, messages)) == [0, 0, total]


def test_without_a_breakpoint_nothing_is_cached(fake_anthropic: Any) -> None:
    messages = conversation()
    system = system_blocks(marked=False)
    total = count_tokens(system) + tokens(messages)

    ask(fake_anthropic, messages, system)

    assert split(ask(fake_anthropic, messages, system)) == [0, 0, total]


def test_a_changed_early_message_breaks_the_breakpoint(fake_anthropic: Any) -> None:
    messages = marked_last(conversation(words=150))
    changed = copy.deepcopy(messages)
    changed[0]["content"] = "diff 0: rewritten"
    total = tokens(changed)
    assert total >= 1024

    ask(fake_anthropic, messages)

    assert split(ask(fake_anthropic, changed)) == [0, total, 0]


def test_an_earlier_breakpoint_is_read_and_the_rest_written(fake_anthropic: Any) -> None:
    # The system is written by the first request; the second adds a breakpoint further on.
    system = system_blocks()
    messages = marked_last(conversation())
    ask(fake_anthropic, conversation(), system)

    second = ask(fake_anthropic, messages, system)

    total = count_tokens(system) + tokens(messages)
    assert split(second) == [count_tokens(system), total - count_tokens(system), 0]


def test_a_breakpoint_on_the_tools_alone_caches_nothing(fake_anthropic: Any) -> None:
    # Tool definitions are not billed by the kit, so their prefix is empty.
    tool = {"name": "look", "input_schema": {"type": "object"}, "cache_control": CACHED}
    messages = conversation()

    ask(fake_anthropic, messages, tools=[tool])

    assert split(ask(fake_anthropic, messages, tools=[tool])) == [0, 0, tokens(messages)]


@pytest.mark.parametrize(
    "changed",
    [{"tool_choice": {"type": "none"}}, {"thinking": {"type": "enabled", "budget_tokens": 1024}}],
    ids=["tool_choice", "thinking"],
)
def test_a_changed_tool_choice_or_thinking_reads_only_the_system_prompt(
    fake_anthropic: Any, changed: Dict[str, Any]
) -> None:
    # Anthropic: either change invalidates the cached messages, not the tools and system.
    tool = {"name": "look", "input_schema": {"type": "object"}}
    system = system_blocks()
    messages = marked_last(conversation())
    total = count_tokens(system) + tokens(messages)
    ask(fake_anthropic, messages, system, tools=[tool])

    same = ask(fake_anthropic, messages, system, tools=[tool])
    other = ask(fake_anthropic, messages, system, tools=[tool], **changed)

    assert split(same) == [total, 0, 0]
    assert split(other) == [count_tokens(system), total - count_tokens(system), 0]


def test_an_anthropic_stream_reports_the_same_split(fake_anthropic: Any) -> None:
    system = system_blocks()
    messages = conversation()
    plain = split(ask(fake_anthropic, messages, system))

    events = list(ask(fake_anthropic, messages, system, stream=True))

    start = events[0].message.usage
    delta = next(e for e in events if e.type == "message_delta").usage
    expected = [plain[0] + plain[1], 0, plain[2]]  # what the first call wrote is now read
    assert [
        start.cache_read_input_tokens,
        start.cache_creation_input_tokens,
        start.input_tokens,
    ] == expected
    assert [
        delta.cache_read_input_tokens,
        delta.cache_creation_input_tokens,
        delta.input_tokens,
    ] == expected
    with fake_anthropic.messages.stream(
        model=CLAUDE, max_tokens=64, system=system, messages=messages
    ) as stream:
        assert split(stream.get_final_message()) == expected


# --- what the middleware reads ------------------------------------------------------


def test_provider_tokens_is_the_prompts_total_with_caching_on(
    fake_provider: FakeProvider, fake_openai: Any, fake_anthropic: Any
) -> None:
    system = system_blocks()

    @budgeted(max_tokens=2500, keep_tail=2)
    def ask_openai(messages: List[Message]) -> Any:
        return chat(fake_openai, messages)

    @budgeted(max_tokens=1200, keep_tail=2)
    def ask_claude(messages: List[Message]) -> Any:
        return ask(fake_anthropic, messages, system)

    with CompactingSession() as session:
        replies = [ask_openai(history(turns=12)) for _ in range(2)]
        replies += [ask_claude(conversation(turns=12)) for _ in range(2)]

    assert cached(replies[1]) > 0
    assert replies[3].usage.cache_read_input_tokens == count_tokens(system)
    sent = [request.body for request in fake_provider.requests]
    # The prompt's total: OpenAI's prompt_tokens; Anthropic's three figures added up.
    totals = [tokens(body["messages"]) for body in sent[:2]]
    totals += [count_tokens(system) + tokens(body["messages"]) for body in sent[2:]]
    assert [event.provider_tokens for event in session.events] == totals
    assert [bill.input_tokens for bill in fake_provider.billing] == totals


@pytest.mark.filterwarnings(TRIO_STREAM_WARNING)
@pytest.mark.anyio
async def test_async_clients_see_the_same_cache(
    fake_async_openai: Any, fake_async_anthropic: Any
) -> None:
    messages = history()
    await fake_async_openai.chat.completions.create(model=MODEL, messages=messages)
    stream = await fake_async_openai.chat.completions.create(
        model=MODEL, messages=messages, stream=True, stream_options={"include_usage": True}
    )
    chunks = [chunk async for chunk in stream]
    assert chunks[-1].usage.prompt_tokens_details.cached_tokens == openai_rule(tokens(messages))

    system = system_blocks()
    claude = conversation()
    await fake_async_anthropic.messages.create(
        model=CLAUDE, max_tokens=64, system=system, messages=claude
    )
    async with fake_async_anthropic.messages.stream(
        model=CLAUDE, max_tokens=64, system=system, messages=claude
    ) as reading:
        final = await reading.get_final_message()
    assert split(final) == [count_tokens(system), 0, tokens(claude)]
