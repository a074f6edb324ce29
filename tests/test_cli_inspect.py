"""ctx-compact inspect: the chart, --json, --html, one line of a dataset, or the whole dataset."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest
from helpers import assistant, closed_early, tool, tool_call, user, weather_messages

from ctx_compact import breakdown, media_aware_counter
from ctx_compact.cli import main

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def write(tmp_path: Path, name: str, value: Any) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(value))
    return path


def dataset(tmp_path: Path, count: int = 6) -> Path:
    path = tmp_path / "data.jsonl"
    lines = []
    for n in range(count):
        messages: List[Dict[str, Any]] = [user(f"Conversation {n}.")]
        for k in range(n + 1):
            messages.append(assistant(None, [tool_call(f"c{k}", "read")]))
            messages.append(tool(f"c{k}", "output " * (40 * (k + 1))))
        lines.append(json.dumps(messages))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_chart_of_one_conversation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = write(tmp_path, "weather.json", weather_messages())
    assert main(["inspect", "--max-tokens", "150", "--width", "60", str(source)]) == 0
    out = capsys.readouterr().out
    assert not ANSI.search(out)  # not a terminal: plain characters
    assert all(len(line) <= 60 for line in out.splitlines())
    assert out.startswith("195 tokens in 10 messages;")
    assert "after compaction 124 (fits)" in out
    assert "at 150: 7 kept, 3 dropped" in out


def test_json_is_the_breakdown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    messages = weather_messages()
    source = write(tmp_path, "weather.json", messages)
    assert main(["inspect", "--max-tokens", "150", "--json", str(source)]) == 0
    record = json.loads(capsys.readouterr().out)
    expected = breakdown(messages, max_tokens=150, count_tokens=media_aware_counter())
    assert record["tokens"] == expected.tokens == sum(record["categories"].values())
    assert record["categories"] == dict(expected.categories)
    assert [row["status"] for row in record["rows"]] == [r.status for r in expected.rows]
    assert record["fits"] is True


def test_html_writes_one_self_contained_page(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = write(tmp_path, "weather.json", weather_messages())
    page = tmp_path / "report.html"
    assert main(["inspect", "--max-tokens", "150", "--html", str(page), str(source)]) == 0
    text = page.read_text()
    assert text.startswith("<!doctype html>")
    assert text.count('class="block ') == 10
    assert "https://" not in text
    assert "195 tokens" in capsys.readouterr().out  # the chart is printed too


def test_one_line_of_a_dataset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = dataset(tmp_path)
    assert main(["inspect", "--jsonl", "--line", "3", "--json", str(source)]) == 0
    record = json.loads(capsys.readouterr().out)
    third = json.loads(source.read_text().splitlines()[2])
    assert record["tokens"] == breakdown(third, count_tokens=media_aware_counter()).tokens


def test_a_line_past_the_end_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = dataset(tmp_path)
    assert main(["inspect", "--jsonl", "--line", "40", str(source)]) == 2
    assert "there is no line 40 (it has 6)" in capsys.readouterr().err


def test_a_whole_dataset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = dataset(tmp_path)
    page = tmp_path / "dataset.html"
    args = ["inspect", "--jsonl", "--max-tokens", "300", "--html", str(page), str(source)]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert out.startswith("6 conversations, ")
    lines = [json.loads(line) for line in source.read_text().splitlines()]
    each = [breakdown(m, max_tokens=300, count_tokens=media_aware_counter()) for m in lines]
    over = sum(1 for one in each if one.tokens > 300)
    fit = sum(1 for one in each if one.fits)
    assert f"budget 300: {over} over it, {fit} fit after compaction" in out
    assert f"largest {max(one.tokens for one in each):,}" in out
    counts = re.findall(r'data-series="before" data-bin="\d+" data-count="(\d+)"', page.read_text())
    assert sum(map(int, counts)) == 6
    assert main(["inspect", "--jsonl", "--json", str(source)]) == 0
    totals = json.loads(capsys.readouterr().out)
    assert totals["conversations"] == 6
    expected = sum(
        breakdown(json.loads(line), count_tokens=media_aware_counter()).tokens
        for line in source.read_text().splitlines()
    )
    assert sum(totals["categories"].values()) == expected


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--line", "2"], "--line needs --jsonl"),
        (["--target-tokens", "10"], "--target-tokens needs --max-tokens"),
        (["--line", "0", "--jsonl"], "must be a positive integer"),
    ],
)
def test_usage_errors(
    args: List[str], words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = write(tmp_path, "weather.json", weather_messages())
    assert main(["inspect", *args, str(source)]) == 2
    assert words in capsys.readouterr().err


def test_the_page_never_overwrites_the_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = write(tmp_path, "weather.json", weather_messages())
    before = source.read_text()
    assert main(["inspect", "--html", str(source), str(source)]) == 2
    assert "it would be written over the input" in capsys.readouterr().err
    assert source.read_text() == before


def test_an_inspect_option_elsewhere_names_its_mode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = write(tmp_path, "weather.json", weather_messages())
    assert main(["--max-tokens", "100", "--html", "x.html", str(source)]) == 2
    assert "it is an option of ctx-compact inspect" in capsys.readouterr().err


def test_a_malformed_message_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    messages = weather_messages()
    messages[3] = {"role": "tool", "content": "x", "tool_calls": 4}
    source = write(tmp_path, "bad.json", messages)
    assert main(["inspect", str(source)]) == 2
    assert "message 3" in capsys.readouterr().err


@pytest.mark.skipif(sys.platform == "win32", reason="relies on POSIX pipe semantics")
def test_a_closed_output_pipe_ends_inspect_quietly_with_status_1(tmp_path: Path) -> None:
    # Far more JSON than a pipe holds (one record per message), closed after a few bytes.
    source = write(tmp_path, "long.json", [user(f"Message {n}.") for n in range(5000)])
    assert closed_early("inspect", "--json", str(source)) == (1, b"")
