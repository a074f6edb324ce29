"""Compaction and ``check_pairing`` agree, in every wire format and mixes of them.

The histories below mix OpenAI Chat Completions (``tool_calls``, and the legacy
``function_call`` / ``function`` pair), Anthropic Messages (``tool_use`` /
``tool_result`` with thinking blocks), OpenAI Responses items (every ``*_call``
kind, outputs arriving many items after their call, reasoning items before
anything, MCP approvals). Whenever ``check_pairing`` accepts a history it
accepts every compaction of it; on a broken history, compaction never makes a
message problematic that was not already.
"""

from __future__ import annotations

import itertools
from typing import Any, Dict, List, Set

from helpers import (
    RESPONSES_CALLS,
    Message,
    budgets,
    call_item,
    calling,
    claude,
    examples,
    keeps,
    message_item,
    reasoning_item,
    redacted_thinking_block,
    text_block,
    texts,
    thinking_block,
    tool,
    tool_result_block,
    tool_use_block,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctx_compact import (
    CompactResult,
    check_pairing,
    compact,
    compact_with_summary,
    estimate_tokens,
)
from ctx_compact._contract import message_views, pairing_problems

PROPERTY = settings(
    max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def output_for(kind: str, call_id: str, text: str) -> Message:
    if kind == "local_shell_call":  # it names its call in an ``id`` field
        return {"type": "local_shell_call_output", "id": call_id, "output": text}
    return {"type": RESPONSES_CALLS[kind], "call_id": call_id, "output": text}


def a_call(kind: str, call_id: str) -> Message:
    if kind in ("tool_search_call", "program"):
        return {"type": kind, "id": f"item_{call_id}", "call_id": call_id}
    return call_item(kind, call_id)


@st.composite
def histories(draw: st.DrawFn, max_steps: int = 14, corrupt: bool = False) -> List[Message]:
    """Histories in every format; well formed unless ``corrupt``.

    Responses outputs and MCP approval responses wait in a pool and are given
    at random later steps, so they often arrive many items after their call.
    """
    counter = itertools.count()

    def new_id(prefix: str) -> str:
        return f"{prefix}_{next(counter)}"

    out: List[Message] = []
    waiting: List[Message] = []  # answers not given yet
    steps = ["plain", "chat", "legacy", "anthropic", "calls", "answer", "answer", "approval"]
    for _ in range(draw(st.integers(0, max_steps))):
        step = draw(st.sampled_from([*steps, "message_item"]))
        if step in ("chat", "legacy", "anthropic", "calls", "message_item") and draw(st.booleans()):
            out.append(reasoning_item(new_id("rs")))  # reasoning leads any kind of turn
        if step == "plain":
            role = draw(st.sampled_from(["system", "developer", "user", "assistant"]))
            out.append({"role": role, "content": draw(texts)})
        elif step == "chat":
            ids = [new_id("call") for _ in range(draw(st.integers(1, 3)))]
            out.append(calling(*ids))
            answers = draw(st.permutations(ids))
            if draw(st.booleans()):
                answers = [*answers, draw(st.sampled_from(ids))]  # a repeated answer
            out.extend(tool(call_id, draw(texts)) for call_id in answers)
        elif step == "legacy":
            name = draw(st.sampled_from(["get_weather", "search"]))
            out.append(
                {"role": "assistant", "content": None, "function_call": {"name": name}},
            )
            out.append({"role": "function", "name": name, "content": draw(texts)})
        elif step == "anthropic":
            ids = [new_id("toolu") for _ in range(draw(st.integers(1, 3)))]
            blocks: List[Message] = []
            if draw(st.booleans()):
                blocks.append(thinking_block(draw(texts)))
            if draw(st.booleans()):
                blocks.append(redacted_thinking_block())
            blocks.extend(tool_use_block(use_id) for use_id in ids)
            results = [tool_result_block(u, draw(texts)) for u in draw(st.permutations(ids))]
            if draw(st.booleans()):
                results.append(text_block("and more"))
            out.extend([claude("assistant", *blocks), claude("user", *results)])
        elif step == "calls":
            for _ in range(draw(st.integers(1, 3))):
                kind, call_id = draw(st.sampled_from(sorted(RESPONSES_CALLS))), new_id("call")
                out.append(a_call(kind, call_id))
                waiting.append(output_for(kind, call_id, draw(texts)))
        elif step == "answer" and waiting:
            out.append(waiting.pop(draw(st.integers(0, len(waiting) - 1))))
        elif step == "approval":
            request = new_id("mcpr")
            out.append({"type": "mcp_approval_request", "id": request, "name": "ask"})
            waiting.append(
                {"type": "mcp_approval_response", "approval_request_id": request, "approve": True}
            )
        elif step == "message_item":
            out.append(message_item(draw(texts), new_id("msg")))
    out.extend(draw(st.permutations(waiting)))
    if corrupt:
        out = _corrupt(draw, out)
    return out


def _corrupt(draw: st.DrawFn, messages: List[Message]) -> List[Message]:
    strays = [
        tool("nowhere"),
        {"role": "function", "name": "f", "content": "{}"},
        claude("user", tool_result_block("toolu_nowhere")),
        output_for("function_call", "call_nowhere", "{}"),
        a_call("function_call", "call_unanswered"),
        claude("assistant", tool_use_block("toolu_unanswered")),
        calling("call_unanswered_chat"),
        reasoning_item("rs_stray"),
        {"type": "mcp_approval_response", "approval_request_id": "mcpr_nowhere"},
    ]
    out = list(messages)
    for _ in range(draw(st.integers(1, 3))):
        action = draw(st.sampled_from(["delete", "insert", "move"]))
        if action == "insert" or not out:
            out.insert(draw(st.integers(0, len(out))), dict(draw(st.sampled_from(strays))))
        elif action == "delete":
            del out[draw(st.integers(0, len(out) - 1))]
        else:
            moved = out.pop(draw(st.integers(0, len(out) - 1)))
            out.insert(draw(st.integers(0, len(out))), moved)
    return out


def named(messages: List[Any]) -> Set[int]:
    """The ids of the message objects ``check_pairing`` reports a problem at."""
    return {id(messages[p.index]) for p in check_pairing(messages)}


def compactions(
    messages: List[Any], max_tokens: float, keep_head: int, keep_tail: int, role: str
) -> List[CompactResult]:
    def summarize(dropped: List[Any]) -> str:
        return f"{len(dropped)} messages removed."

    options: Dict[str, Any] = {
        "max_tokens": max_tokens,
        "keep_head": keep_head,
        "keep_tail": keep_tail,
    }
    return [
        compact(messages, **options),
        compact_with_summary(messages, summarize=summarize, summary_role=role, **options),
    ]


roles = st.sampled_from(["user", "system", "assistant"])


@PROPERTY
@given(histories(), budgets(), keeps, keeps, roles)
def test_an_accepted_history_stays_accepted_whatever_is_dropped(
    messages, max_tokens, keep_head, keep_tail, role
):
    assert check_pairing(messages) == []

    for result in compactions(messages, max_tokens, keep_head, keep_tail, role):
        assert check_pairing(result.messages) == []


@PROPERTY
@given(histories(corrupt=True), budgets(), keeps, keeps, roles)
def test_compaction_never_breaks_a_message_that_was_not_broken(
    messages, max_tokens, keep_head, keep_tail, role
):
    before = named(messages)

    for result in compactions(messages, max_tokens, keep_head, keep_tail, role):
        assert named(result.messages) <= before
        if not before:
            assert check_pairing(result.messages) == []


@PROPERTY
@given(histories(corrupt=True), budgets(), keeps, keeps, roles)
def test_order_partition_and_token_figures_hold_in_every_format(
    messages, max_tokens, keep_head, keep_tail, role
):
    counts = {id(m): estimate_tokens(m) for m in messages}
    plain, summarised = compactions(messages, max_tokens, keep_head, keep_tail, role)

    # The dropped messages are one contiguous run of the input, kept ones are the rest.
    start = next((i for i, m in enumerate(messages) if plain.dropped[:1] == [m]), 0)
    while plain.dropped and messages[start] is not plain.dropped[0]:
        start += 1  # equal messages: find the very object
    end = start + len(plain.dropped)
    assert all(a is b for a, b in zip(plain.dropped, messages[start:end]))
    expected = messages[:start] + messages[end:]
    assert len(plain.messages) == len(expected)
    assert all(a is b for a, b in zip(plain.messages, expected))
    assert plain.tokens_before == sum(counts.values())
    assert plain.tokens_after == sum(counts[id(m)] for m in plain.messages)
    kept = [m for m in summarised.messages if id(m) in counts]
    assert len(kept) + len(summarised.dropped) == len(messages)
    extra = [m for m in summarised.messages if id(m) not in counts]
    assert summarised.tokens_after == sum(counts[id(m)] for m in kept) + sum(
        estimate_tokens(m) for m in extra
    )


@PROPERTY
@given(histories(corrupt=True))
def test_pairing_problems_of_grouped_views_are_check_pairings(messages: List[Message]):
    # The command line compacts first and checks the compaction's validated views.
    assert pairing_problems(message_views(messages)) == check_pairing(messages)
