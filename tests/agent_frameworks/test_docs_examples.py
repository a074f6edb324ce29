"""The agent framework pages' examples run as written, in this venv where their frameworks are.

``tests/test_docs.py`` skips them where the frameworks are not installed; here a missing
framework fails them. Each block runs in its own interpreter, as a reader would paste it.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import List, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = ["google-adk.md", "strands.md", "llama-index.md", "autogen.md"]


def blocks() -> List[Tuple[str, int, str]]:
    found = []
    for name in PAGES:
        text = (ROOT / "docs" / "integrations" / name).read_text("utf-8")
        for index, code in enumerate(re.findall(r"```python\n(.*?)```", text, re.S)):
            found.append((name, index, code))
    return found


BLOCKS = blocks()


def test_every_page_opens_with_its_pip_line_and_an_agent() -> None:
    for name in PAGES:
        text = (ROOT / "docs" / "integrations" / name).read_text("utf-8")
        first = re.search(r"```(\w+)\n(.*?)```", text, re.S)
        assert first is not None, name
        assert first.group(1) == "sh", name
        assert first.group(2).startswith("python -m pip install ctx-compact "), name
    assert {name for name, _, _ in BLOCKS} == set(PAGES)


@pytest.mark.parametrize(("page", "index", "code"), BLOCKS, ids=[f"{p}:{k}" for p, k, _ in BLOCKS])
def test_example_runs(page: str, index: int, code: str, tmp_path: Path) -> None:
    script = tmp_path / f"example_{index}.py"
    script.write_text(code, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert done.returncode == 0, f"{page} block {index}:\n{done.stderr}"
