"""target_tokens: a cut (and clearing) that is a function of the history alone, moving in steps."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, List, Optional, Tuple

import pytest
from helpers import (
    assistant,
    budgets,
    conversations,
    examples,
    keeps,
    system,
    tool,
    tool_call,
    user,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctx_compact import (
    check_pairing,
    clear_tool_results,
    compact,
    compact_with_summary,
    estimate_tokens,
)
from ctx_compact._contract import prefix_sums, prepare
from ctx_compact._steps import step_size, steps
from ctx_compact.batch import compact_indices, compact_many
from ctx_compact.cli import main
from middleware import CompactionEvent, budgeted

PROPERTY = settings(
    max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
shares = st.floats(0.05, 1.0)
Message = Any


def agent_turns(turns: int, result_size: int = 240) -> List[List[Message]]:
    """The history a tool-using agent sends on each call: after each question and each result."""
    history: List[Message] = [system("You are a careful agent.")]
    calls = []
    for i in range(turns):
        history.append(user(f"question {i} " + "q" * 40))
        calls.append(list(history))
        history.append(assistant(None, [tool_call(f"call_{i}", "search")]))
        history.append(tool(f"call_{i}", f"result {i} " + "r" * result_size))
        calls.append(list(history))
        history.append(assistant(f"answer {i} " + "a" * 80))
    return calls


def recording(sent: List[List[Any]]) -> Any:
    def call(messages: List[Any]) -> None:
        sent.append(messages)

    return call


def stated_reduction(history: List[Message], max_tokens: float, target_tokens: float) -> float:
    """The step rule as docs/prompt-cache.md states it, walked message by message: the
    reduction one process would make if it were called after every message."""
    taken: float = 0
    total = 0
    for message in history:
        total += estimate_tokens(message)
        if total - taken > max_tokens:
            taken = total - target_tokens
    return taken


def cut_of(messages: List[Message], **options: Any) -> Tuple[Tuple[int, int], ...]:
    return compact_indices(messages, **options).kept


# --- the specification's figures hold without a target ------------------------------


@PROPERTY
@given(conversations(), budgets(), keeps, keeps)
def test_without_a_target_or_with_one_at_max_tokens_the_cut_is_the_specifications(
    messages: List[Message], max_tokens: float, keep_head: int, keep_tail: int
) -> None:
    options = {"max_tokens": max_tokens, "keep_head": keep_head, "keep_tail": keep_tail}
    spec = compact(messages, **options)
    for target in (None, max_tokens):
        result = compact(messages, target_tokens=target, **options)
        assert [id(m) for m in result.messages] == [id(m) for m in spec.messages]
        assert (result.tokens_before, result.tokens_after, result.fits) == (
            spec.tokens_before,
            spec.tokens_after,
            spec.fits,
        )


# --- what the step rule promises --------------------------------------------------


@PROPERTY
@given(st.lists(st.integers(0, 400), max_size=80), st.floats(1, 3000), shares)
def test_the_bisecting_walk_is_the_walk_message_by_message(
    counts: List[int], max_tokens: float, share: float
) -> None:
    pre = prefix_sums(counts)
    step = step_size(max_tokens, max_tokens * share)
    assert step is not None
    taken: float = 0
    began = len(counts)
    for end in range(1, len(pre)):
        if pre[end] - taken > max_tokens:
            taken, began = pre[end] - (max_tokens - step), end
    if step == 0:
        taken = max(pre[-1] - max_tokens, 0)
    walked = steps(pre, max_tokens, step)
    assert walked.reduction == pytest.approx(taken)
    assert walked.reduction >= pre[-1] - max_tokens
    if step > 0:
        assert walked.began == began


@PROPERTY
@given(conversations(), budgets(), shares, keeps, keeps)
def test_the_step_cut_fits_whenever_the_specifications_does_and_keeps_pairing(
    messages: List[Message], max_tokens: float, share: float, keep_head: int, keep_tail: int
) -> None:
    options = {"max_tokens": max_tokens, "keep_head": keep_head, "keep_tail": keep_tail}
    spec = compact(messages, **options)
    result = compact(messages, target_tokens=max_tokens * share, **options)
    if spec.fits:
        assert result.fits
        assert result.tokens_after <= max_tokens
    # The caller's objects, in order, kept + dropped = input; nothing kept that the spec drops.
    positions = [next(i for i, m in enumerate(messages) if m is k) for k in result.messages]
    assert positions == sorted(positions)
    assert len(result.messages) + len(result.dropped) == len(messages)
    assert len(result.dropped) >= len(spec.dropped)
    assert result.tokens_after == sum(estimate_tokens(m) for m in result.messages)
    if not check_pairing(messages):
        assert check_pairing(result.messages) == []


@PROPERTY
@given(conversations(), budgets(), shares, keeps, keeps)
def test_what_is_kept_is_just_over_the_target(
    messages: List[Message], max_tokens: float, share: float, keep_head: int, keep_tail: int
) -> None:
    target = max_tokens * share
    plan = prepare(
        messages,
        max_tokens=max_tokens,
        count_tokens=None,
        keep_head=keep_head,
        keep_tail=keep_tail,
        target_tokens=target,
    )
    if plan.cut == plan.head_end or plan.cut == plan.tail_start or target == max_tokens:
        return
    # Keeping the last dropped group again would leave more than the target: the cut
    # takes off whole steps, never a step more than the history's excess needs.
    last_group = max(b for b in plan.bounds if b < plan.cut)
    assert plan.tokens_after + (plan.pre[plan.cut] - plan.pre[last_group]) > target


@PROPERTY
@given(conversations(), budgets(), shares, keeps, keeps)
def test_the_cut_survives_a_json_round_trip(
    messages: List[Message], max_tokens: float, share: float, keep_head: int, keep_tail: int
) -> None:
    options = {
        "max_tokens": max_tokens, "target_tokens": max_tokens * share, "keep_head": keep_head,
        "keep_tail": keep_tail,
    }  # fmt: skip
    again = json.loads(json.dumps(messages))
    assert cut_of(again, **options) == cut_of(messages, **options)


def test_a_fresh_interpreter_makes_the_same_cut(tmp_path: Path) -> None:
    history = agent_turns(120)[-1]
    path = tmp_path / "history.json"
    path.write_text(json.dumps(history), encoding="utf-8")
    options = {"max_tokens": 6000, "target_tokens": 3600, "keep_tail": 2}
    script = (
        "import json, sys\n"
        "from ctx_compact.batch import compact_indices\n"
        "messages = json.load(open(sys.argv[1], encoding='utf-8'))\n"
        f"print(json.dumps(compact_indices(messages, **{options!r}).kept))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, text=True, check=True
    )
    here = cut_of(history, **options)
    assert here != ((0, len(history)),)  # something is cut
    assert tuple(tuple(r) for r in json.loads(out.stdout)) == here


def moves(cuts: List[Any]) -> int:
    return sum(1 for before, now in zip(cuts, cuts[1:]) if before != now)


@functools.cache
def spec_cuts(budget: int) -> Tuple[int, ...]:
    """How many messages the specification's cut drops from each call of ``agent_turns(200)``
    (the same for every target: computed once)."""
    return tuple(len(compact(h, max_tokens=budget, keep_tail=2).dropped) for h in agent_turns(200))


@pytest.mark.parametrize("share", [0.5, 0.6, 0.8])
def test_over_200_turns_the_cut_moves_once_per_step_of_growth(share: float) -> None:
    budget = 6000
    target = budget * share
    calls = agent_turns(200)
    cuts = []
    for history in calls:
        result = compact(history, max_tokens=budget, keep_tail=2, target_tokens=target)
        assert result.fits
        assert check_pairing(result.messages) == []
        cuts.append(len(result.dropped))
    grown = sum(estimate_tokens(m) for m in calls[-1]) - budget
    assert moves(cuts) <= grown / (budget - target) + 1
    assert moves(cuts) < moves(list(spec_cuts(budget))) / 4
    # The cut only ever moves forward: a message once dropped is never sent again.
    assert cuts == sorted(cuts)


@pytest.mark.parametrize(("budget", "share"), [(3000, 0.5), (6000, 0.6), (6000, 0.8), (9000, 0.9)])
def test_the_cut_drops_what_the_stated_rule_takes_off_and_moves_after_a_step(
    budget: int, share: float
) -> None:
    target = budget * share
    moved_at: List[int] = []
    last = None
    for history in agent_turns(200, result_size=400):
        plan = prepare(
            history,
            max_tokens=budget,
            count_tokens=None,
            keep_head=1,
            keep_tail=2,
            target_tokens=target,
        )
        taken = stated_reduction(history, budget, target)
        dropped = plan.pre[plan.cut] - plan.pre[plan.head_end]
        if plan.cut < plan.tail_start:
            # The smallest group boundary that takes off the stated reduction.
            assert dropped >= taken
            if plan.cut > plan.head_end:
                last_group = max(b for b in plan.bounds if b < plan.cut)
                assert plan.pre[last_group] - plan.pre[plan.head_end] < taken
        assert plan.tokens_after <= budget
        if plan.cut != last:
            moved_at.append(plan.pre[-1])
            last = plan.cut
    assert len(moved_at) > 3
    # After the first cut, each move comes after a step of growth at least (more
    # than one between the prefixes that made them; seen here at the calls).
    growth = [later - earlier for earlier, later in zip(moved_at[1:], moved_at[2:])]
    assert min(growth) >= budget - target


def test_the_summary_is_counted_and_the_prompt_moves_in_steps() -> None:
    def summarize(dropped: List[Message]) -> str:
        return f"{len(dropped)} earlier messages " + "s" * 200

    prompts = []
    for history in agent_turns(100):
        result = compact_with_summary(
            history, max_tokens=5000, target_tokens=3000, keep_tail=2, summarize=summarize
        )
        assert result.fits
        assert check_pairing(result.messages) == []
        prompts.append(len(result.dropped))
    grown = sum(estimate_tokens(m) for m in agent_turns(100)[-1]) - 5000
    assert 0 < moves(prompts) <= grown / 2000 + 1


def test_a_group_bigger_than_a_step_holds_the_cut_until_the_reduction_passes_it() -> None:
    huge = [assistant(None, [tool_call("big", "fetch")]), tool("big", "x" * 8000)]
    history = [system("s"), user("go"), *huge]
    cuts = []
    for i in range(60):
        history = [*history, user(f"q{i} " + "q" * 200), assistant("a" * 200)]
        result = compact(history, max_tokens=3000, target_tokens=2500, keep_tail=2)
        assert result.fits
        assert check_pairing(result.messages) == []
        cuts.append(len(result.dropped))
    assert cuts == sorted(cuts)


def test_a_tail_bigger_than_the_budget_is_kept_as_the_specification_keeps_it() -> None:
    history = [system("s"), *[user("x" * 400) for _ in range(10)]]
    spec = compact(history, max_tokens=500, keep_tail=5)
    result = compact(history, max_tokens=500, keep_tail=5, target_tokens=300)
    assert result.messages == spec.messages
    assert not result.fits


def test_a_target_over_max_tokens_or_not_a_number_is_refused() -> None:
    with pytest.raises(ValueError, match=r"'target_tokens' must be at most max_tokens"):
        compact([], max_tokens=100, target_tokens=200)
    with pytest.raises(TypeError, match="'target_tokens' must be a finite positive number"):
        compact([], max_tokens=100, target_tokens="50")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="target_tokens"):
        list(compact_many([], max_tokens=100, target_tokens=0))


def test_batch_functions_make_compacts_cut() -> None:
    calls = agent_turns(60)[::7]
    options = {"max_tokens": 3000, "target_tokens": 1800, "keep_tail": 2}
    for done, history in zip(compact_many(calls, **options), calls):
        expected = compact(history, **options)
        assert done.messages == expected.messages
        assert compact_indices(history, **options).apply(history) == expected.messages


# --- clearing in steps ------------------------------------------------------------


def cleared_ids(result: Any) -> Tuple[Any, ...]:
    return tuple(c.call_id for c in result.cleared)


def test_clearing_in_steps_changes_what_is_cleared_only_when_the_reduction_does() -> None:
    budget, target = 8000, 5000
    sets, reductions = [], []
    for history in agent_turns(120):
        result = clear_tool_results(history, max_tokens=budget, target_tokens=target)
        sets.append(cleared_ids(result))
        reductions.append(stated_reduction(history, budget, target))
    changes = [i for i in range(1, len(sets)) if sets[i] != sets[i - 1]]
    assert changes
    assert all(reductions[i] != reductions[i - 1] for i in changes)
    # Only ever more: a result once cleared stays cleared.
    assert all(set(a) <= set(b) for a, b in zip(sets, sets[1:]))
    plain = [cleared_ids(clear_tool_results(h, max_tokens=budget)) for h in agent_turns(120)]
    assert len(changes) < moves(plain) / 3


def test_clearing_in_steps_clears_down_to_about_the_target() -> None:
    history = agent_turns(40)[-1]
    result = clear_tool_results(history, max_tokens=8000, target_tokens=5000, keep=2)
    assert result.fits
    assert result.tokens_after <= 8000 - 3000 * (-(-(result.tokens_before - 8000) // 3000)) + 300
    again = clear_tool_results(
        json.loads(json.dumps(history)), max_tokens=8000, target_tokens=5000, keep=2
    )
    assert cleared_ids(again) == cleared_ids(result)


@pytest.fixture(scope="module")
def requests() -> List[str]:
    """Each call of ``agent_turns(200)`` as the JSON a stateless worker receives (encoded once
    for the module's replays)."""
    return [json.dumps(history) for history in agent_turns(200)]


def replay(requests: List[str], **options: Any) -> Tuple[List[List[Any]], List[CompactionEvent]]:
    sent: List[List[Any]] = []
    events: List[CompactionEvent] = []

    @budgeted(on_compact=events.append, **options)
    def call(messages: List[Any]) -> None:
        sent.append(messages)

    for request in requests:
        call(json.loads(request))  # rebuilt per request, as a stateless worker does
    return sent, events


def prefix_changes(sent: List[List[Any]]) -> int:
    return sum(1 for before, now in zip(sent, sent[1:]) if now[: len(before)] != before)


@pytest.mark.parametrize("clearing", [False, True])
def test_over_200_turns_the_middleware_prompt_changes_once_per_step(
    clearing: bool, requests: List[str]
) -> None:
    budget, target = 8000, 4800
    options = {"max_tokens": budget, "target_tokens": target, "keep_tail": 2}
    if clearing:
        options["clear_tool_results"] = {"keep": 2}
    sent, events = replay(requests, **options)
    assert all(e.fits for e in events)
    assert all(check_pairing(prompt) == [] for prompt in sent)
    grown = sum(estimate_tokens(m) for m in agent_turns(200)[-1]) - budget
    changes = prefix_changes(sent)
    assert changes <= grown / (budget - target) + 2
    plain, _ = replay(requests, **{k: v for k, v in options.items() if k != "target_tokens"})
    assert changes < prefix_changes(plain) / 4
    # cut_reused: the prompt kept the previous one as its prefix.
    for before, now, event in zip(sent, sent[1:], events[1:]):
        if event.cut_reused:
            assert now[: len(before)] == before


def test_two_workers_send_the_same_prompts_as_one(requests: List[str]) -> None:
    options: dict = {
        "max_tokens": 8000,
        "target_tokens": 4800,
        "keep_tail": 2,
        "clear_tool_results": True,
    }
    one, _ = replay(requests, **options)
    workers: List[List[List[Any]]] = [[], []]
    fns = [budgeted(**options)(recording(sent)) for sent in workers]
    for i, request in enumerate(requests):
        fns[i % 2](json.loads(request))
    merged = [workers[i % 2][i // 2] for i in range(len(one))]
    assert merged == one


# --- the command line -------------------------------------------------------------


@pytest.mark.parametrize("clearing", [[], ["--clear-tool-results", "--keep-results", "2"]])
def test_the_command_line_cuts_where_a_live_service_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], clearing: List[str]
) -> None:
    calls = agent_turns(80)[::9]
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(h) + "\n" for h in calls), encoding="utf-8")
    args = ["--max-tokens", "6000", "--target-tokens", "3600", "--keep-tail", "2", "--jsonl"]
    assert main([*args, *clearing, str(path)]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    options: dict = {"max_tokens": 6000, "target_tokens": 3600, "keep_tail": 2}
    if clearing:
        options["clear_tool_results"] = {"keep": 2}
    live, _ = replay_these(calls, **options)
    assert lines == live


def replay_these(calls: List[List[Any]], **options: Any) -> Tuple[List[Any], Optional[Any]]:
    sent: List[List[Any]] = []
    fn = budgeted(**options)(recording(sent))
    for history in calls:
        fn(history)
    return sent, None


def test_the_command_line_refuses_a_target_over_the_budget(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "in.json"
    path.write_text("[]", encoding="utf-8")
    assert main(["--max-tokens", "100", "--target-tokens", "200", str(path)]) == 2
    assert "--target-tokens (200) must not exceed --max-tokens (100)" in capsys.readouterr().err
