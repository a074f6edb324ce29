"""Every Python example in the README and on the documentation site runs as written.

Each block runs in its own interpreter, as a reader would paste it. The recipes of
``docs/batch.md`` need their data files and engines: ``tests/test_engines.py`` runs them.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import List, Tuple

import pytest
from install_commands import text_problems

ROOT = Path(__file__).resolve().parent.parent
RUN_ELSEWHERE = {"docs/batch.md"}  # run by tests/test_engines.py
# The optional packages a page's example may need (top-level import names), by the extra
# that installs them (instructor is in none: see INSTALL). Where one is missing the example
# skips, saying how to install it, except in a run that names its extra in CTX_COMPACT_EXTRAS
# (CI's venv of that extra): there it fails.
OPTIONAL = {
    "pydantic_ai": "frameworks",
    "langchain": "frameworks",
    "langgraph": "frameworks",
    "langchain_openai": "frameworks",
    "langchain_anthropic": "frameworks",
    "litellm": "frameworks",
    "agents": "frameworks",  # openai-agents
    "instructor": "instructor",
    "google": "providers",  # google-genai; google.adk is the agents extra's (below)
    "boto3": "providers",
    "strands": "agents",
    "llama_index": "agents",
    "autogen_agentchat": "agents",
    "autogen_core": "agents",
    "autogen_ext": "agents",
    "mistralai": "agents",
    "smolagents": "agents",
}
# How to install what is in no extra (instructor pins an older openai: its page says so).
INSTALL = {"instructor": "pip install instructor, in a venv of its own"}
REQUIRED_EXTRAS = set(filter(None, os.environ.get("CTX_COMPACT_EXTRAS", "").split(",")))
# Appended to every example: the reader's own warnings must still show after it ran. An
# example may hide a warning its framework gives, by category and message, not all of them.
OWN_WARNING = "\nimport warnings\nwarnings.warn('the reader will see this', UserWarning)\n"


def missing_optional(code: str) -> List[str]:
    imported = set(re.findall(r"^\s*(?:from|import)\s+([A-Za-z_][\w.]*)", code, re.M))
    missing = []
    for name in sorted(imported):
        top = name.split(".")[0]
        if top not in OPTIONAL:
            continue
        try:
            found = importlib.util.find_spec(name) is not None
        except ImportError:  # its parent package is missing
            found = False
        if not found:
            missing.append(name)
    return missing


def extra_of(module: str) -> str:
    if module.startswith("google.adk"):
        return "agents"
    return OPTIONAL[module.split(".")[0]]


def skip_reason(missing: List[str]) -> str:
    extras = sorted({extra_of(module) for module in missing})
    how = [INSTALL.get(e, f'python -m pip install ".[{e}]", in a checkout') for e in extras]
    return f"needs {', '.join(missing)} ({'; '.join(how)})"


def blocks() -> List[Tuple[str, int, str]]:
    found = []
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    for page in pages:
        name = page.relative_to(ROOT).as_posix()
        if name in RUN_ELSEWHERE:
            continue
        for k, code in enumerate(re.findall(r"```python\n(.*?)```", page.read_text("utf-8"), re.S)):
            found.append((name, k, code))
    return found


BLOCKS = blocks()


def test_the_readme_and_the_site_have_examples() -> None:
    assert sum(name == "README.md" for name, _, _ in BLOCKS) >= 3
    assert len({name for name, _, _ in BLOCKS}) >= 10


@pytest.mark.parametrize(("page", "index", "code"), BLOCKS, ids=[f"{p}:{k}" for p, k, _ in BLOCKS])
def test_example_runs(page: str, index: int, code: str, tmp_path: Path) -> None:
    missing = missing_optional(code)
    required = sorted(m for m in missing if extra_of(m) in REQUIRED_EXTRAS)
    if required:
        pytest.fail(f"needs {', '.join(required)}, which the extras of this run must install")
    if missing:
        pytest.skip(skip_reason(missing))
    script = tmp_path / f"example_{index}.py"
    script.write_text(code + OWN_WARNING, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, f"{page} block {index}:\n{done.stderr}"
    assert "UserWarning: the reader will see this" in done.stderr, (
        f"{page} block {index} hides the warnings of the program it is pasted in"
    )


@pytest.mark.parametrize("module", sorted(OPTIONAL))
def test_a_skip_says_how_to_install_what_is_missing(module: str) -> None:
    reason = skip_reason([module])

    assert "pip install" in reason
    assert text_problems(iter([reason])) == []  # an extra pyproject.toml has, or a real package
