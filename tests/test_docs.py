"""Every Python example in the README and on the documentation site runs as written.

Each block runs in its own interpreter, as a reader would paste it. The recipes of
``docs/batch.md`` need their data files and engines: ``tests/test_engines.py`` runs them.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from typing import List, Tuple

import pytest

ROOT = Path(__file__).resolve().parent.parent
RUN_ELSEWHERE = {"docs/batch.md"}  # run by tests/test_engines.py
# Optional packages a page's example may need; CI runs these pages where they are installed.
OPTIONAL = (
    "pydantic_ai",
    "langchain",
    "langgraph",
    "langchain_openai",
    "langchain_anthropic",
    "litellm",
    "agents",
    "instructor",
    # The providers extra: google-genai (imported as google) and boto3.
    "google",
    "boto3",
    # The agents extra's frameworks (tests/agents/test_docs_examples.py runs their pages).
    "google.adk",
    "strands",
    "llama_index",
    "autogen_agentchat",
    "autogen_core",
    "autogen_ext",
    # SDK message objects read as what they send (docs/formats/message-objects.md).
    "mistralai",
    "smolagents",
)


def missing_optional(code: str) -> List[str]:
    modules = set(re.findall(r"^\s*(?:from|import)\s+([A-Za-z_][\w.]*)", code, re.M))
    # A name is a package ("google") or a package in a namespace ("google.adk").
    imported = {".".join(m.split(".")[:depth]) for m in modules for depth in (1, 2)}
    return [name for name in OPTIONAL if name in imported and not _installed(name)]


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # "google.adk" without any google package
        return False


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
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (the frameworks or providers extra)")
    script = tmp_path / f"example_{index}.py"
    script.write_text(code, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, f"{page} block {index}:\n{done.stderr}"
