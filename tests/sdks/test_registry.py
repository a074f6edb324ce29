"""An SDK is one module of middleware/sdks/: nothing else in the middleware names one."""

from __future__ import annotations

import ast
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
    modules = {p.stem for p in (PACKAGE / "sdks").glob("*.py") if p.stem != "__init__"}
    assert modules == set(SDKS)
    for name, sdk in SDKS.items():
        assert sdk.name == name
        targets = sdk_targets(name)
        assert targets
        assert all(t.path.startswith(name + ".") for t in targets)
        # Each SDK says where its messages are: in a request's body or as an argument.
        assert bool(sdk.routes) != (sdk.messages_arg is not None)
