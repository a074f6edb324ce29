"""A reader of ``pip install`` commands: what each one installs, and whether it is what we mean.

The ``ctx-compact`` on the package index is an older, unrelated project, so a command that
installs this one names a path (``python -m pip install ".[langchain]"`` in a checkout); any
other package it names is one this project means: a dependency or an extra's (pyproject.toml),
or one of the few that a page installs beside them (``OTHERS``). Used by
tests/test_install_commands.py on every page and source string, and by the tests of the
messages that are put together at run time.
"""

from __future__ import annotations

import ast
import re
import shlex
import sys
from pathlib import Path
from typing import Dict, Iterator, List, Set

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

if sys.version_info >= (3, 11):
    import tomllib
else:  # pytest brings tomli before 3.11
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
NAME = canonicalize_name(PROJECT["name"])
EXTRAS: Dict[str, List[str]] = {
    canonicalize_name(extra): requirements
    for extra, requirements in PROJECT["optional-dependencies"].items()
}
# Installed by a page beside this project, in no extra: instructor pins an older openai, so
# docs/sdks/instructor.md installs it in a venv of its own; radon is a maintainer's tool, which
# benchmarks/code_size.py asks for.
OTHERS = {"instructor", "radon"}
KNOWN: Set[str] = {
    canonicalize_name(Requirement(line).name)
    for line in [*PROJECT["dependencies"], *(r for rs in EXTRAS.values() for r in rs)]
} | OTHERS

COMMAND = re.compile(r"\bpip3?\s+install\b")
FENCE = re.compile(r"^[ \t]*(```|~~~)[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", re.M | re.S)
PATH = re.compile(r"(?P<path>[^\[\]]+)(?:\[(?P<extras>[^\]]*)\])?")
# What ends a command in a sentence or a shell line (a quoted argument keeps them).
ENDS = "();<>|&,"


def commands(text: str) -> Iterator[str]:
    """What follows each ``pip install`` in ``text``, up to the end of its command."""
    for found in COMMAND.finditer(text):
        yield text[found.end() :].split("`", 1)[0]  # a code span ends it


def problems(command: str) -> List[str]:
    """What is wrong with one command (the text after ``pip install``): nothing, if it works."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=ENDS)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError as exc:  # an unclosed quote
        return [f"cannot read {command!r}: {exc}"]
    found: List[str] = []
    named = 0
    for token in tokens:
        if set(token) <= set(ENDS):
            break
        if token.startswith("-"):
            if token in {"-r", "--requirement", "-c", "--constraint"}:
                found.append(f"{token} reads a file this reader cannot check")
            continue
        named += 1
        found += _path_problems(token) if token[0] in "./~" else _requirement_problems(token)
    if not named:
        found.append(f"names nothing to install: {command!r}")
    return found


def _path_problems(token: str) -> List[str]:
    parts = PATH.fullmatch(token)
    if parts is None:
        return [f"{token!r} is not a path with extras"]
    unknown = [
        extra.strip()
        for extra in (parts["extras"] or "").split(",")
        if extra.strip() and canonicalize_name(extra.strip()) not in EXTRAS
    ]
    return [f"{token!r}: pyproject.toml has no extra {extra!r}" for extra in unknown]


def _requirement_problems(token: str) -> List[str]:
    try:
        requirement = Requirement(token)
    except InvalidRequirement:
        return [f"{token!r} is not a requirement"]
    name = canonicalize_name(requirement.name)
    if name == NAME:
        return [
            f"{token!r} installs the unrelated {NAME} of the package index, not this project "
            '(install it from a path: python -m pip install ".[extra]" in a checkout)'
        ]
    if name not in KNOWN:
        return [f"{token!r} is no dependency of this project (pyproject.toml) nor in OTHERS"]
    if name not in OTHERS and any(spec.operator in {"==", "==="} for spec in requirement.specifier):
        # A user's venv would be moved back to that release: pyproject.toml gives a range.
        return [f"{token!r} pins one release of a package the extras give a range of"]
    return []


def markdown_texts(text: str) -> Iterator[str]:
    """A page's text as commands run: each line of a fenced block, and the prose between."""
    at = 0
    for block in FENCE.finditer(text):
        yield " ".join(text[at : block.start()].split())  # a code span may wrap
        yield from block[2].replace("\\\n", " ").splitlines()
        at = block.end()
    yield " ".join(text[at:].split())


def source_texts(source: str) -> Iterator[str]:
    """A module's strings (docstrings, messages), an f-string's fields read as ``{}``."""
    tree = ast.parse(source)
    parts = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            parts.update(id(value) for value in node.values)
            text = "".join(
                value.value if isinstance(value, ast.Constant) else "{}" for value in node.values
            )
            yield " ".join(text.split())
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in parts:
            yield " ".join(node.value.split())


def text_problems(texts: Iterator[str]) -> List[str]:
    """Every problem of every ``pip install`` in ``texts``."""
    return [found for text in texts for command in commands(text) for found in problems(command)]
