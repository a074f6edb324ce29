"""Pickling: results, events, errors, stats and decorated functions survive a round trip.

A budgeted function pickles as a reference to itself; a bound one with its
instance; cloudpickle ships a ``__main__`` one with its budget. Results, events,
stats and every error keep their fields, so an error raised in a pool worker
reaches the parent instead of hanging it.
"""

from __future__ import annotations

import copy
import multiprocessing
import pickle
import subprocess
import sys
import textwrap
from typing import Any, Dict, List

import pytest
from helpers import system, user, weather_messages

from ctx_compact import InvalidMessageError, PairingError, check_pairing, compact
from middleware import (
    BudgetExceededError,
    CompactingSession,
    UnpairedMessagesError,
    budgeted,
)

WEATHER: Dict[str, Any] = {"max_tokens": 150, "keep_head": 1, "keep_tail": 2}


@budgeted(**WEATHER)
def ask(messages: List[Any]) -> List[Any]:
    return messages


@budgeted(max_tokens=10, keep_tail=1, on_overflow="raise")
def strict(messages: List[Any]) -> int:
    return len(messages)


class Chat:
    @budgeted(**WEATHER)
    def ask(self, messages: List[Any]) -> List[Any]:
        return messages


def roundtrip(value: Any) -> Any:
    return pickle.loads(pickle.dumps(value))


def test_a_module_level_budgeted_function_pickles_and_copies_as_itself() -> None:
    assert roundtrip(ask) is ask
    assert copy.deepcopy(ask) is ask
    assert copy.copy(ask) is ask
    assert roundtrip(Chat.ask) is Chat.__dict__["ask"]


def test_a_bound_budgeted_method_pickles_with_its_instance() -> None:
    restored = roundtrip(Chat().ask)
    assert len(restored(weather_messages())) == 7


def test_results_events_stats_and_errors_survive_a_pickle_round_trip() -> None:
    result = compact(weather_messages(), **WEATHER)
    assert roundtrip(result) == result
    with CompactingSession() as session:
        ask(weather_messages())
    (event,) = session.events
    assert roundtrip(event) == event
    assert copy.deepcopy(event) == event
    assert roundtrip(session.stats) == session.stats

    with pytest.raises(BudgetExceededError) as raised:
        strict([user("x" * 400), user("y" * 400)])
    error = roundtrip(raised.value)
    assert type(error) is BudgetExceededError
    assert error.event == raised.value.event
    assert str(error) == str(raised.value)

    with pytest.raises(InvalidMessageError) as invalid:
        compact([system(), 42], max_tokens=10)
    again = roundtrip(invalid.value)
    assert (again.index, again.reason, str(again)) == (1, invalid.value.reason, str(invalid.value))

    problems = check_pairing([user(), {"role": "tool", "tool_call_id": "c", "content": "x"}])
    pairing = roundtrip(PairingError(problems))
    assert pairing.problems == tuple(problems)

    checked = budgeted(max_tokens=1000, validate="raise")(lambda messages: messages)
    with pytest.raises(UnpairedMessagesError) as unpaired:
        checked([user(), {"role": "tool", "tool_call_id": "c", "content": "x"}])
    restored = roundtrip(unpaired.value)
    assert restored.event == unpaired.value.event
    assert restored.problems == unpaired.value.problems


def _strict_in_worker(size: int) -> int:
    return strict([user("x" * size), user("y" * size)])  # type: ignore[no-any-return]


def test_a_budget_error_raised_in_a_pool_worker_reaches_the_parent() -> None:
    # Before errors could be unpickled in the parent, Pool.map hung forever here.
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        pending = pool.map_async(_strict_in_worker, [400])
        with pytest.raises(BudgetExceededError) as raised:
            pending.get(timeout=120)
    assert raised.value.event.tokens_after > 10


@pytest.mark.skipif(
    sys.version_info < (3, 10),
    reason="on Python 3.9 a budgeted function keeps wrapt's class, which cloudpickle takes "
    "for the bare function (a documented limitation)",
)
def test_cloudpickle_ships_a_main_module_budgeted_function_with_its_budget(tmp_path: Any) -> None:
    pytest.importorskip("cloudpickle")
    driver = tmp_path / "driver.py"
    driver.write_text(
        textwrap.dedent(
            """
            import sys, cloudpickle
            from middleware import budgeted

            @budgeted(max_tokens=60, keep_head=1, keep_tail=2)
            def send(messages):
                return len(messages)

            history = [{"role": "user", "content": f"message {i} " * 5} for i in range(51)]
            print("driver", send(history))
            sys.stdout.flush()
            sys.stdout.buffer.write(cloudpickle.dumps((send, history)))
            """
        )
    )
    shipped = subprocess.run(
        [sys.executable, str(driver)], capture_output=True, check=True, timeout=120
    ).stdout
    first_line, payload = shipped.split(b"\n", 1)
    worker = (
        "import pickle, sys; send, history = pickle.loads(sys.stdin.buffer.read()); "
        "print(send(history))"
    )
    received = subprocess.run(
        [sys.executable, "-c", worker], input=payload, capture_output=True, check=True, timeout=120
    ).stdout
    assert first_line.decode() == "driver 3"
    assert received.decode().strip() == "3"  # not 51: the budget came along
