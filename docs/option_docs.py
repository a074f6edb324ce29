"""A griffe extension for the API reference (mkdocs.yml): the functions whose ``Args:``
``ctx_compact._compact.with_option_docs`` writes at import are shown with that docstring."""

from __future__ import annotations

import inspect
from typing import Any

import griffe


class OptionDocs(griffe.Extension):
    def on_function_instance(self, *, func: griffe.Function, **kwargs: Any) -> None:
        if any("with_option_docs" in str(d.value) for d in func.decorators):
            static = func.docstring
            func.docstring = griffe.Docstring(
                inspect.getdoc(griffe.dynamic_import(func.path)) or "",
                parent=func,
                parser=static and static.parser,
                parser_options=static and static.parser_options,
            )
