"""How large is the breakdown's page, and how fast does a browser draw it?

    python benchmarks/bench_page.py [--messages 2000] [--rounds 3]

An agent conversation of ``--messages`` messages (tool calls and results of varied sizes) at a
budget it is over, drawn as ``Breakdown.html()``; Debian's headless Chromium loads the file and
the page says when its blocks were laid out and measured (``performance.now()``, from the start
of navigation). Prints the page's size, the time to build it, and the drawing time (best of
``--rounds``). Needs ``chromium`` on the PATH; the exit status is 0 whatever the figures.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List

from ctx_compact import breakdown


def conversation(size: int) -> List[Dict[str, Any]]:
    messages: List[Dict[str, Any]] = [
        {"role": "system", "content": "You are an operator."},
        {"role": "user", "content": "TASK: find the slow worker."},
    ]
    n = 0
    while len(messages) < size:
        call = {"id": f"c{n}", "type": "function", "function": {"name": "logs", "arguments": "{}"}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        text = "worker served a request in 12 ms\n" * (5 + (n * 37) % 120)
        messages.append({"role": "tool", "tool_call_id": f"c{n}", "content": text})
        messages.append({"role": "assistant", "content": f"Step {n}: nothing slow yet."})
        n += 1
    return messages[:size]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    chromium = shutil.which("chromium")
    messages = conversation(options.messages)
    start = time.perf_counter()
    result = breakdown(messages, max_tokens=8000, clear_tool_results=True)
    page = result.html()
    built = time.perf_counter() - start
    print(f"{len(messages):,} messages, {result.tokens:,} tokens, budget 8,000")
    print(f"page: {len(page.encode('utf-8')) / 1e6:.2f} MB, built in {built:.2f} s")
    if chromium is None:
        print("chromium is not installed: no drawing time (apt-get install chromium)")
        sys.exit(0)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "page.html"
        path.write_text(page, encoding="utf-8")
        drawn = []
        for k in range(options.rounds):
            dom = subprocess.run(
                [chromium, "--headless", "--no-sandbox", "--disable-gpu",
                 f"--user-data-dir={folder}/profile{k}", "--window-size=1400,900",
                 "--dump-dom", path.as_uri()],
                capture_output=True, text=True, timeout=120, check=True,
            ).stdout  # fmt: skip
            found = re.search(r'data-drawn-ms="([\d.]+)"', dom)
            if found:
                drawn.append(float(found.group(1)) / 1000)
        if drawn:
            print(f"drawn in Chromium in {min(drawn):.2f} s (best of {len(drawn)})")


if __name__ == "__main__":
    main()
