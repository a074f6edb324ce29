"""The breakdown drawn: the terminal chart at several widths, and the page in a real browser."""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path
from typing import Any, Dict, List

import pytest
from helpers import assistant, budgets, conversations, system, tool, tool_call, user
from hypothesis import given, settings
from hypothesis import strategies as st

from ctx_compact import Breakdown, breakdown
from ctx_compact._render import ConversationFigures, dataset_page

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def agent(turns: int = 30) -> List[Dict[str, Any]]:
    messages = [system(), user("TASK: find why the build fails.")]
    for n in range(turns):
        messages.append(user(f"Step {n}: look at module {n}."))
        messages.append(assistant(None, [tool_call(f"c{n}", "read_file" if n % 3 else "grep")]))
        messages.append(tool(f"c{n}", f"module {n}: " + "source line\n" * (20 + 7 * (n % 5))))
        messages.append(assistant(f"Module {n} looks fine."))
    return messages


def budgeted() -> Breakdown:
    return breakdown(
        agent(),
        max_tokens=2500,
        keep_tail=6,
        clear_tool_results=True,
        pin=lambda m: str(m.get("content")).startswith("TASK"),
    )


@pytest.mark.parametrize("width", [40, 80, 200])
def test_the_chart_fits_the_terminal_and_says_every_category(width: int) -> None:
    result = budgeted()
    text = result.chart(width=width)
    lines = text.splitlines()
    assert all(len(line) <= width for line in lines)
    assert all(ord(ch) < 128 for ch in text)  # plain characters only
    assert not ANSI.search(text)
    bar = next(line for line in lines if line.startswith("["))
    assert len(bar) == width
    assert bar[0] == "["
    assert bar[-1] == "]"
    assert "|" in bar or "^ budget" in lines[lines.index(bar) + 1]
    for category, tokens in result.categories.items():
        if tokens:
            assert any(re.match(rf"{category}\s+{tokens:,}\s", line) for line in lines)
    at = next(k for k, line in enumerate(lines) if line.startswith("at 2,500:"))
    said = " ".join(lines[at:])
    assert "dropped" in said
    assert "pinned" in said
    assert "cleared" in said


def test_the_chart_in_colour() -> None:
    text = budgeted().chart(width=80, color=True)
    assert ANSI.search(text)
    plain = ANSI.sub("", text)
    assert all(len(line) <= 80 for line in plain.splitlines())
    assert "\u2588" in plain


def test_the_bar_is_sized_by_tokens_against_the_budget() -> None:
    result = breakdown(agent(2), max_tokens=10_000)  # fits: the free space is dots to the budget
    bar = next(line for line in result.chart(width=100).splitlines() if line.startswith("["))
    cells = len(bar) - 2
    used = sum(1 for ch in bar[1:-1] if ch not in ".|")
    assert abs(used - result.tokens * cells / 10_000) <= 1
    assert bar[-2] == "|"  # the budget is the bar's end
    assert bar.count("|") == 1


# --- the page, in a real browser ------------------------------------------------------------


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail("Debian's chromium is needed for the page tests: apt-get install chromium")
    return found


def run_chromium(url: str, tmp_path: Path, *extra: str) -> str:
    command = [
        chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        f"--user-data-dir={tmp_path / 'profile'}",
        *extra,
        url,
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)
    return done.stdout


def test_the_page_draws_each_message_as_wide_as_its_tokens(tmp_path: Path) -> None:
    result = budgeted()
    path = tmp_path / "report.html"
    path.write_text(result.html(), encoding="utf-8")
    dom = run_chromium(path.as_uri(), tmp_path, "--window-size=1400,900", "--dump-dom")
    measured = json.loads(
        re.search(r'<pre id="measured"[^>]*>(.*?)</pre>', dom, re.S).group(1)  # type: ignore[union-attr]
    )
    blocks = [b for b in measured if b["index"] not in ("system", "tools", "free")]
    assert [int(b["index"]) for b in blocks] == [row.index for row in result.rows]
    assert [b["category"] for b in blocks] == [row.category for row in result.rows]
    total_px = sum(b["px"] for b in measured)
    total_tokens = sum(b["tokens"] for b in measured)
    for block, row in zip(blocks, result.rows):
        assert block["tokens"] == row.tokens
        assert abs(block["px"] - total_px * row.tokens / total_tokens) < 1.5
    statuses = re.findall(r'data-status="(\w+)"', dom)
    assert {"dropped", "cleared", "pinned", "kept"} <= set(statuses)
    assert 'id="budget"' in dom
    for category, tokens in result.categories.items():
        if tokens:
            assert re.search(rf"{category}</td><td>{tokens:,}</td>", dom)


def png_pixels(data: bytes) -> bytes:
    """The raw (filtered) scanlines of a PNG, enough to tell a blank image from a drawn one."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    at, idat = 8, b""
    while at < len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind = data[at + 4 : at + 8]
        if kind == b"IDAT":
            idat += data[at + 8 : at + 8 + length]
        at += 12 + length
    return zlib.decompress(idat)


def test_a_screenshot_of_the_page_is_not_blank(tmp_path: Path) -> None:
    path = tmp_path / "report.html"
    path.write_text(budgeted().html(), encoding="utf-8")
    shot = tmp_path / "shot.png"
    run_chromium(path.as_uri(), tmp_path, "--window-size=1200,800", f"--screenshot={shot}")
    pixels = png_pixels(shot.read_bytes())
    assert len(set(pixels)) > 50  # a blank page has a handful of byte values
    assert pixels.count(255) < 0.98 * len(pixels)


def test_the_page_needs_no_network() -> None:
    text = budgeted().html()
    assert "http://" not in text
    assert "https://" not in text
    assert "<link" not in text
    assert "src=" not in text


@settings(deadline=None)
@given(conversations(), budgets(), st.integers(20, 240), st.booleans())
def test_any_chart_keeps_to_its_width(
    messages: List[Dict[str, Any]], budget: float, width: int, with_budget: bool
) -> None:
    result = breakdown(messages, max_tokens=budget if with_budget else None)
    for line in ANSI.sub("", result.chart(width=width, color=True)).splitlines():
        assert len(line) <= width
    for line in result.chart(width=width).splitlines():
        assert len(line) <= width


def test_a_dataset_page_shows_the_distribution_before_and_after() -> None:
    figures = [
        ConversationFigures(line=n + 1, tokens=500 * n, tokens_after=min(500 * n, 4000), fits=True)
        for n in range(40)
    ]
    text = dataset_page(figures, max_tokens=4000)
    for series in ("before", "after"):
        counts = re.findall(rf'data-series="{series}" data-bin="\d+" data-count="(\d+)"', text)
        assert len(counts) == 20
        assert sum(map(int, counts)) == 40
    assert "40 conversations; budget 4,000: 40 fit after compaction, 31 were over it before" in text
    assert "https://" not in text
