"""large_tool_output: a tool output of an exact size, with recognisable first and last lines."""

from __future__ import annotations

import re
from typing import Any, Dict

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctx_compact.testing import count_tokens, large_tool_output

# --- the output -----------------------------------------------------------------------


@given(st.integers(30, 3000), st.sampled_from(["output", "build.log", "café 🎉", 'a "q" \\ b']))
def test_it_costs_exactly_the_tokens_asked(tokens: int, name: str) -> None:
    text = large_tool_output(tokens, name=name)
    assert count_tokens(text) == tokens
    lines = text.splitlines()
    assert lines[0] == f"{name}: first line of {tokens} tokens"
    assert lines[-1] == f"{name}: last line of {tokens} tokens"
    assert large_tool_output(tokens, name=name) == text


def test_its_lines_are_numbered_log_lines() -> None:
    text = large_tool_output(50_000, name="build.log")
    assert len(text) > 190_000  # about 4 characters a token
    lines = text.splitlines()
    assert lines[1] == "line 1: worker-1 served request 1 in 1 ms"
    assert lines[-2] == "line 4000: worker-3 served request 4000 in 23 ms"[: len(lines[-2])]
    assert len(set(lines[1:-1])) == len(lines) - 2


def test_two_names_give_two_outputs() -> None:
    assert large_tool_output(500, name="a.log") != large_tool_output(500, name="b.log")


@pytest.mark.parametrize(
    ("options", "error", "words"),
    [
        ({"tokens": 10.0}, TypeError, "'tokens' must be an int (got 10.0)"),
        ({"tokens": True}, TypeError, "'tokens' must be an int (got True)"),
        ({"tokens": 500, "name": None}, TypeError, "'name' must be a string (got None)"),
        ({"tokens": 500, "name": "a\nb"}, ValueError, "'name' must be one line"),
        ({"tokens": 500, "name": "a\r"}, ValueError, "'name' must be one line"),
        ({"tokens": 16}, ValueError, "'tokens' must be at least 17 (got 16)"),
        ({"tokens": 5}, ValueError, "'tokens' must be at least 17 (got 5)"),
        ({"tokens": -(10**12)}, ValueError, "'tokens' must be at least 17 (got -1000000000000)"),
    ],
)
def test_wrong_arguments_are_refused(options: Dict[str, Any], error: type, words: str) -> None:
    with pytest.raises(error, match=words.replace("(", r"\(").replace(")", r"\)")):
        large_tool_output(**options)


@pytest.mark.parametrize("name", ["output", "x" * 40, "café 🎉", "9"])
def test_the_least_it_asks_for_is_the_least_it_takes(name: str) -> None:
    with pytest.raises(ValueError, match="'tokens' must be at least") as error:
        large_tool_output(1, name=name)
    least = int(re.findall(r"at least (\d+)", str(error.value))[0])
    text = large_tool_output(least, name=name)
    assert count_tokens(text) == least
    assert text.splitlines()[-1] == f"{name}: last line of {least} tokens"
    with pytest.raises(ValueError, match=f"at least {least} \\(got {least - 1}\\)"):
        large_tool_output(least - 1, name=name)
