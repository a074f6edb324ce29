"""The options are declared once: ``Options`` as given, ``CompactionOptions`` checked.

``budgeted``, ``CompactingSession`` and ``CompactingSession.wrap`` take them as
``**options: Unpack[Options]`` and show them, with their defaults, in their
signatures; a new option added to one declaration and not the other fails here.
tests/typing/options.py is the static side: mypy (strict, in CI) fails when a
misspelt option type-checks.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Dict, List

import pytest

from middleware import CompactingSession, budgeted
from middleware._options import INHERIT, CompactionOptions, Options

FIELDS = {f.name: f.default for f in dataclasses.fields(CompactionOptions)}
REQUIRED = inspect.Parameter.empty


def keyword_defaults(function: Any) -> Dict[str, Any]:
    return {
        name: p.default
        for name, p in inspect.signature(function).parameters.items()
        if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and name not in ("self", "fn")
    }


def test_the_given_and_the_checked_options_have_the_same_names() -> None:
    assert set(Options.__annotations__) == set(FIELDS) - {"max_tokens"}


def test_budgeted_takes_every_option_with_its_default() -> None:
    params = keyword_defaults(budgeted)
    assert params.pop("on_compact") is None
    assert params == {**FIELDS, "max_tokens": REQUIRED}


def test_the_session_takes_every_option_with_its_default() -> None:
    params = keyword_defaults(CompactingSession.__init__)
    for own in ("on_compact", "intercept", "calibrate", "max_events"):
        params.pop(own)
    assert params == {**FIELDS, "max_tokens": None}


def test_wrap_takes_every_option_defaulting_to_the_sessions() -> None:
    params = keyword_defaults(CompactingSession.wrap)
    assert params == dict.fromkeys(FIELDS, INHERIT)


def test_every_parameter_is_annotated() -> None:
    for function in (budgeted, CompactingSession.__init__, CompactingSession.wrap):
        for name, p in inspect.signature(function).parameters.items():
            assert name == "self" or p.annotation is not p.empty, (function, name)


def test_budgeted_without_parentheses_says_how_to_use_it() -> None:
    with pytest.raises(TypeError, match=r"with parentheses: @budgeted\(max_tokens=...\)"):
        budgeted(lambda messages: messages)  # type: ignore[arg-type]


def test_wrap_overrides_the_sessions_options_for_one_callable() -> None:
    history = [{"role": "user", "content": f"question {i} " * 10} for i in range(12)]
    sent: List[Any] = []

    def send(messages: List[Any]) -> None:
        sent.append(messages)

    with CompactingSession(max_tokens=200, keep_tail=1) as session:
        session.wrap(send)(history)
        session.wrap(send, keep_tail=3)(history)
        session.wrap(send, max_tokens=10**6)(history)
    inherited, overridden, unbounded = sent
    assert inherited[-1:] == history[-1:]
    assert overridden[-3:] == history[-3:]
    assert unbounded == history
    assert [e.tokens_after <= 200 for e in session.events] == [True, True, False]
    assert session.options is not None
    assert session.options.keep_tail == 1  # the session's own options are unchanged


def test_wrap_checks_its_overrides_and_needs_a_budget_from_somewhere() -> None:
    def send(messages: List[Any]) -> None:
        pass

    with CompactingSession(max_tokens=100) as session:
        with pytest.raises(ValueError, match="keep_tail"):
            session.wrap(send, keep_tail=-1)
        with pytest.raises(ValueError, match="on_overflow"):
            session.wrap(send, on_overflow="retyr")  # type: ignore[arg-type]
    with CompactingSession() as observer:
        with pytest.raises(TypeError, match="max_tokens is required"):
            observer.wrap(send, keep_tail=2)
        assert observer.wrap(send, max_tokens=50, keep_tail=2) is not None


# --- bad options fail at construction, naming the option ------------------------------------


def test_budgeted_without_max_tokens_names_it() -> None:
    with pytest.raises(TypeError, match="max_tokens"):
        budgeted()


def test_an_unknown_option_is_named() -> None:
    with pytest.raises(TypeError, match="'keep_tial'"):
        budgeted(max_tokens=10, keep_tial=2)
    with pytest.raises(TypeError, match="'keep_tial'"):
        CompactingSession(keep_tial=2)


async def _acount(message: Any) -> int:
    return 1


def test_an_async_count_tokens_is_refused_at_decoration() -> None:
    with pytest.raises(TypeError, match=r"'count_tokens' must be a plain \(not async\) function"):
        budgeted(max_tokens=10, count_tokens=_acount)
    with pytest.raises(TypeError, match=r"'count_tokens' must be a plain \(not async\) function"):
        CompactingSession(max_tokens=10, count_tokens=_acount)


@pytest.mark.parametrize("max_events", [1.5, "10", True])
def test_a_max_events_of_the_wrong_type_is_a_type_error(max_events: Any) -> None:
    with pytest.raises(TypeError, match="max_events"):
        CompactingSession(max_events=max_events)


def test_a_negative_max_events_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="max_events"):
        CompactingSession(max_events=-1)


def test_messages_arg_is_a_type_error_unless_a_string_and_a_value_error_unless_a_name() -> None:
    with pytest.raises(TypeError, match="messages_arg"):
        budgeted(max_tokens=10, messages_arg=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="messages_arg"):
        budgeted(max_tokens=10, messages_arg="not a name")
    with pytest.raises(ValueError, match="messages_arg"):
        CompactingSession(max_tokens=10, messages_arg="")


def test_the_signatures_show_every_option_with_its_default() -> None:
    params = inspect.signature(budgeted).parameters
    assert params["keep_tail"].default == 4
    assert params["summary_role"].default == "user"
    assert params["max_tokens"].default is inspect.Parameter.empty
    session_params = inspect.signature(CompactingSession).parameters
    assert session_params["keep_tail"].default == 4
    assert session_params["max_tokens"].default is None
    assert session_params["max_events"].default == 10_000
