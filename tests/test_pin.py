"""pin=: a message whose group is never dropped and stays in place between the head and the tail."""

from __future__ import annotations

from typing import Any, Dict, FrozenSet, List

import pytest
from helpers import assistant, budgets, conversations, keeps, system, tool, tool_call, user
from hypothesis import given, settings
from hypothesis import strategies as st

from ctx_compact import (
    InvalidMessageError,
    acompact_with_summary,
    check_pairing,
    compact,
    compact_with_summary,
    estimate_tokens,
)
from ctx_compact._contract import group_bounds, message_views, prepare

Message = Dict[str, Any]


def agent_history(turns: int = 10) -> List[Message]:
    messages = [system("Be careful."), user("TASK: keep the build green. " + "Context. " * 10)]
    for n in range(turns):
        messages.append(user(f"Step {n}: " + "details " * 12))
        messages.append(assistant(None, [tool_call(f"c{n}", "run")]))
        messages.append(tool(f"c{n}", "output " * 25))
        messages.append(assistant(f"Step {n} done."))
    return messages


def is_task(message: Any) -> bool:
    return str(message.get("content") or "").startswith("TASK")


def pinned_by_identity(chosen: FrozenSet[int]) -> Any:
    return lambda message: id(message) in chosen


# --- what pinning does ---------------------------------------------------------------


def test_a_pinned_message_stays_in_place_after_the_head() -> None:
    messages = agent_history()
    unpinned = compact(messages, max_tokens=500)
    assert messages[1] in unpinned.dropped

    result = compact(messages, max_tokens=500, pin=is_task)

    assert result.messages[:2] == messages[:2]
    assert result.messages[1] is messages[1]
    assert messages[1] not in result.dropped
    assert result.fits
    assert result.tokens_after == sum(estimate_tokens(m) for m in result.messages)
    assert result.tokens_after <= 500


def test_a_pinned_tool_result_keeps_its_whole_group() -> None:
    messages = agent_history()
    pin_result = lambda m: m.get("tool_call_id") == "c2"  # noqa: E731
    result = compact(messages, max_tokens=500, pin=pin_result)
    call, answer = messages[11], messages[12]  # the call of c2 and its result
    assert call in result.messages
    assert answer in result.messages
    assert result.messages.index(answer) == result.messages.index(call) + 1
    assert check_pairing(result.messages) == []


def test_the_summary_goes_after_the_head_before_the_pinned_messages() -> None:
    messages = agent_history()
    seen: List[List[Any]] = []

    def summarize(dropped: List[Any]) -> str:
        seen.append(dropped)
        return f"{len(dropped)} messages about earlier steps."

    result = compact_with_summary(messages, max_tokens=500, pin=is_task, summarize=summarize)

    assert result.messages[0] is messages[0]
    assert result.messages[1] == {"role": "user", "content": result.summary}
    assert result.messages[2] is messages[1]
    [dropped] = seen
    assert messages[1] not in dropped
    assert dropped == result.dropped
    assert result.tokens_after == sum(estimate_tokens(m) for m in result.messages)
    assert result.fits


@pytest.mark.anyio
async def test_the_async_form_takes_pin_too() -> None:
    messages = agent_history()
    result = await acompact_with_summary(
        messages, max_tokens=500, pin=is_task, summarize=lambda d: "earlier steps"
    )
    assert result.messages[2] is messages[1]


def test_pins_cannot_make_it_fit_but_everything_else_goes() -> None:
    messages = agent_history()
    result = compact(messages, max_tokens=300, pin=lambda m: m.get("role") == "user")
    users = [m for m in messages if m.get("role") == "user"]
    assert all(m in result.messages for m in users)
    assert not result.fits
    assert all(m.get("role") != "user" for m in result.dropped)


def test_the_rows_say_which_messages_are_pinned() -> None:
    plan = prepare(
        agent_history(),
        max_tokens=500,
        count_tokens=None,
        keep_head=1,
        keep_tail=4,
        pin=is_task,
    )
    rows = plan.rows(1, 4)
    assert (rows[1].status, rows[1].reason) == ("kept", "pinned (group kept whole)")
    assert rows[2].status == "dropped"
    kept = [i for start, stop in plan.kept_ranges() for i in range(start, stop)]
    assert kept == [row.index for row in rows if row.status == "kept"]


def test_nothing_is_pinned_when_it_already_fits() -> None:
    messages = agent_history(2)
    calls: List[Any] = []
    result = compact(messages, max_tokens=10**6, pin=lambda m: calls.append(m) or False)
    assert result.messages == messages
    assert len(calls) == len(messages)  # called once with each message, the caller's own
    assert all(a is b for a, b in zip(calls, messages))


# --- bad input -------------------------------------------------------------------


def test_pin_must_be_callable() -> None:
    with pytest.raises(TypeError, match="'pin' must be"):
        compact(agent_history(), max_tokens=500, pin="TASK")  # type: ignore[arg-type]


def test_what_pin_raises_reaches_the_caller() -> None:
    def pin(message: Any) -> bool:
        raise KeyError("content")

    with pytest.raises(KeyError):
        compact(agent_history(), max_tokens=500, pin=pin)


def test_a_malformed_message_is_still_named_by_its_index() -> None:
    messages = agent_history()
    messages[5] = "not a message"  # type: ignore[call-overload]
    with pytest.raises(InvalidMessageError, match="message 5"):
        compact(messages, max_tokens=500, pin=lambda m: False)


# --- what holds for any conversation and any pins ------------------------------------


@settings(deadline=None)
@given(conversations(), budgets(), keeps, keeps, st.data())
def test_pins_keep_their_groups_in_place_and_the_rest_as_compact_would(
    messages: List[Message], budget: float, head: int, tail: int, data: st.DataObject
) -> None:
    indices = st.sets(st.integers(0, len(messages) - 1)) if messages else st.just(set())
    chosen = data.draw(indices)
    pinned = frozenset(id(messages[i]) for i in chosen)
    pin = pinned_by_identity(pinned)

    result = compact(messages, max_tokens=budget, keep_head=head, keep_tail=tail, pin=pin)

    # Kept and dropped are the input, each in order.
    positions = {id(m): i for i, m in enumerate(messages)}
    kept = [positions[id(m)] for m in result.messages]
    dropped = [positions[id(m)] for m in result.dropped]
    assert kept == sorted(kept)
    assert dropped == sorted(dropped)
    assert sorted(kept + dropped) == list(range(len(messages)))
    # Every message of a pinned group is kept.
    bounds = group_bounds(message_views(messages))
    for i in chosen:
        group = max(b for b in bounds if b <= i)
        end = min(b for b in bounds if b > i)
        assert all(k in kept for k in range(group, end))
    assert result.tokens_after == sum(estimate_tokens(m) for m in result.messages)
    assert result.fits == (result.tokens_after <= budget)
    # Without pins it is the specification's result.
    if not chosen:
        plain = compact(messages, max_tokens=budget, keep_head=head, keep_tail=tail)
        assert result == plain


@settings(deadline=None)
@given(conversations(), budgets(), keeps, keeps)
def test_a_pin_that_accepts_nothing_changes_nothing(
    messages: List[Message], budget: float, head: int, tail: int
) -> None:
    options: Dict[str, Any] = {"max_tokens": budget, "keep_head": head, "keep_tail": tail}
    summarize = lambda dropped: f"{len(dropped)} dropped"  # noqa: E731
    assert compact(messages, **options, pin=lambda m: False) == compact(messages, **options)
    assert compact_with_summary(
        messages, **options, summarize=summarize, pin=lambda m: False
    ) == compact_with_summary(messages, **options, summarize=summarize)


# --- formats whose turns must alternate ------------------------------------------------


def bedrock_history() -> List[Message]:
    messages: List[Message] = [{"role": "user", "content": [{"text": "TASK: " + "x" * 40}]}]
    for n in range(8):
        use = {"toolUse": {"toolUseId": f"t{n}", "name": "run", "input": {}}}
        result = {"toolResult": {"toolUseId": f"t{n}", "content": [{"text": "r" * 200}]}}
        messages += [
            {"role": "assistant", "content": [use]},
            {"role": "user", "content": [result]},
            {"role": "assistant", "content": [{"text": f"Step {n} done."}]},
            {"role": "user", "content": [{"text": f"Step {n + 1}: " + "q" * 100}]},
        ]
    messages.append({"role": "assistant", "content": [{"text": "All done."}]})
    return messages


def gemini_history() -> List[Message]:
    messages: List[Message] = [{"role": "user", "parts": [{"text": "TASK: " + "x" * 40}]}]
    for n in range(8):
        call = {"function_call": {"name": "run", "args": {"n": n}}}
        answer = {"function_response": {"name": "run", "response": {"out": "r" * 200}}}
        messages += [
            {"role": "model", "parts": [call]},
            {"role": "user", "parts": [answer]},
            {"role": "model", "parts": [{"text": f"Step {n} done."}]},
            {"role": "user", "parts": [{"text": f"Step {n + 1}: " + "q" * 100}]},
        ]
    messages.append({"role": "model", "parts": [{"text": "All done."}]})
    return messages


TOOLS = {"tools": [{"toolSpec": {"name": "run", "inputSchema": {"json": {"type": "object"}}}}]}


@pytest.mark.parametrize("summarize", [None, lambda dropped: "Earlier steps ran."])
@pytest.mark.parametrize("kind", ["bedrock", "gemini"])
def test_any_pinned_message_leaves_a_conversation_the_provider_takes(
    kind: str, summarize: Any
) -> None:
    from ctx_compact.testing import bedrock, gemini

    messages = bedrock_history() if kind == "bedrock" else gemini_history()
    for chosen in range(len(messages)):
        result = compact_with_summary(
            messages,
            max_tokens=300,
            summarize=summarize,
            pin=lambda m, chosen=messages[chosen]: m is chosen,  # type: ignore[misc]
        )
        if chosen == 0:  # the head, to which the summary may be joined as one more part
            field = "content" if kind == "bedrock" else "parts"
            first = messages[0][field]
            assert result.messages[0][field][: len(first)] == first
        else:
            assert any(m is messages[chosen] for m in result.messages)
        if kind == "bedrock":
            bedrock.validate_request({"messages": result.messages, "toolConfig": TOOLS})
        else:
            gemini.validate_request({"contents": result.messages})
        assert result.tokens_after == sum(estimate_tokens(m) for m in result.messages)
