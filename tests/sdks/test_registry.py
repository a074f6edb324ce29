"""An SDK is one module of middleware/sdks/: nothing else in the middleware names one."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from typing import List

import middleware
from middleware.sdks import SDK_NAMES, SDKS, sdk_targets

PACKAGE = Path(middleware.__file__).parent


def _code_strings(path: Path) -> List[str]:
    """The string constants of a module's code, its docstrings left out."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    ]


def test_no_module_outside_sdks_names_an_sdk_in_its_code() -> None:
    for path in sorted(PACKAGE.glob("*.py")):
        for text in _code_strings(path):
            for name in SDK_NAMES:
                assert name not in text.lower(), f"{path.name} names {name!r} in {text!r}"


def test_every_sdk_module_is_in_the_registry_and_describes_its_points() -> None:
    stems = sorted(p.stem for p in (PACKAGE / "sdks").glob("*.py") if p.stem != "__init__")
    # A module's SDK is named by what intercept= takes ("gemini" for google_genai.py).
    described = [importlib.import_module(f"middleware.sdks.{stem}").SDK for stem in stems]
    assert sorted(sdk.name for sdk in described) == sorted(SDKS)
    assert all(SDKS[sdk.name] is sdk for sdk in described)
    for name, sdk in SDKS.items():
        assert sdk.name == name
        targets = sdk_targets(name)
        assert targets
        # Its points are in its own packages.
        assert all(t.path.startswith(tuple(p + "." for p in sdk.package_names)) for t in targets)
        # Each SDK says where its messages are in one way: in a request's body, as an
        # argument, or through a site of its own.
        ways = [bool(sdk.routes), sdk.messages_arg is not None, sdk.site is not None]
        assert ways.count(True) == 1


def test_the_sdks_are_the_five_the_docs_list() -> None:
    assert SDK_NAMES == ("openai", "anthropic", "litellm", "gemini", "bedrock")
