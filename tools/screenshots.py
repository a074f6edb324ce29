"""Make the screenshots in docs/images: the breakdown's page and its terminal chart, in colour,
of the agent the docs describe, taken with Debian's headless Chromium.

    python tools/screenshots.py

The chart is drawn as ``ctx-compact inspect`` draws it in a colour terminal; its ANSI colours
are shown with the page's colours of the same categories, on a terminal's dark background.
"""

from __future__ import annotations

import html
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from test_breakdown_render import budgeted  # noqa: E402  (the docs' agent)

from ctx_compact._render import _MARKS  # noqa: E402

IMAGES = ROOT / "docs" / "images"
_ANSI = re.compile(r"\x1b\[([0-9;]*)m")
_COLOURS = {code: colour for _, code, colour in _MARKS.values()}


def terminal(text: str) -> str:
    """The chart's ANSI text as a page that looks like a terminal showing it."""
    spans, at, open_span = [], 0, False
    for found in _ANSI.finditer(text):
        spans.append(html.escape(text[at : found.start()]))
        if open_span:
            spans.append("</span>")
            open_span = False
        code = found.group(1)
        if code in _COLOURS:
            spans.append(f'<span style="color:{_COLOURS[code]}">')
            open_span = True
        at = found.end()
    spans.append(html.escape(text[at:]))
    return (
        "<!doctype html><meta charset='utf-8'><body style='margin:0;background:#1e1e1e'>"
        "<pre style='margin:0;padding:16px;color:#d4d4d4;"
        'font:15px/1.35 "DejaVu Sans Mono",monospace\'>' + "".join(spans) + "</pre>"
    )


def shoot(page: str, out: Path, size: str, work: Path) -> None:
    source = work / f"{out.stem}.html"
    source.write_text(page, encoding="utf-8")
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        raise SystemExit("Debian's chromium is needed: apt-get install chromium")
    subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--user-data-dir={work / 'profile'}",
            f"--window-size={size}",
            f"--screenshot={out}",
            source.as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    print(f"wrote {out.relative_to(ROOT)}")


def main() -> None:
    result = budgeted()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        shoot(result.html(), IMAGES / "breakdown-page.png", "1200,800", work)
        chart = result.chart(width=80, color=True)
        shoot(terminal(chart), IMAGES / "breakdown-chart.png", "760,370", work)


if __name__ == "__main__":
    main()
