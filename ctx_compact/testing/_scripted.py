"""The scripted model: a fixed text reply, or a call to the first tool a request offers.

With ``tool_calls=N``, while fewer than N tool results follow the last user
prompt and the request offers a function tool, the model calls the first one
offered, with a value for each required argument of its schema; otherwise it
answers with text. A framework therefore runs a real tool loop against the
kit. Each provider's module says what "the first tool" and "a tool result" are
in its format; the decision is made here, once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Union

from ._api import Billing, Json, Reply, Tool, ToolCall
from ._cache import PromptCache

#: The ``reply`` setting: every reply's text, or a callable given the request's messages.
ReplySetting = Union[str, Callable[[List[Json]], str], None]


def sample(schema: Any) -> Any:
    """A value that a JSON schema accepts, for a tool call's required arguments."""
    if not isinstance(schema, dict):
        return "fake"
    if schema.get("enum"):
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            return sample(schema[key][0])
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    samples = {"integer": 1, "number": 1, "boolean": True, "array": [], "null": None}
    if kind in samples:
        return samples[kind]
    if kind == "object" or "properties" in schema:
        return sample_arguments(schema)
    return "fake"


def sample_arguments(schema: Any) -> Json:
    """An object with a sample value for each required property of ``schema``."""
    if not isinstance(schema, dict):
        return {}
    properties = schema.get("properties") or {}
    return {name: sample(properties.get(name)) for name in schema.get("required") or []}


@dataclass(frozen=True)
class ScriptedModel:
    """The provider's settings as one request sees them, and the model's answer to it.

    Attributes:
        reply: The ``reply`` setting; ``None`` answers ``"Fake reply to N messages."``.
        tool_calls: How many tool calls the model makes after each user prompt.
        context_limit: The most input tokens a request may hold, or ``None``.
        new_id: Makes a fresh id from a prefix (the provider's counter).
        prompt_cache: The provider's prompt cache, or ``None`` when caching is off.
        path: The URL path the request was sent to.
        record: Records what the provider billed for the request.
    """

    reply: ReplySetting
    tool_calls: int
    context_limit: Optional[int]
    new_id: Callable[[str], str]
    prompt_cache: Optional[PromptCache] = None
    path: str = ""
    record: Callable[[Billing], None] = lambda billing: None

    def bill(
        self,
        model: str,
        input_tokens: int,
        output_tokens: int,
        cache_read_tokens: int = 0,
        cache_write_tokens: int = 0,
    ) -> None:
        """Record what the provider billed for this request, at its path."""
        self.record(
            Billing(
                self.path, model, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens
            )
        )

    def answer(
        self, messages: List[Json], tool: Optional[Tool], results: int, call_prefix: str
    ) -> Reply:
        """Call ``tool`` while ``results`` (since the last prompt) is under ``tool_calls``."""
        if tool is not None and results < self.tool_calls:
            arguments = json.dumps(sample_arguments(tool.schema))
            return ToolCall(self.new_id(call_prefix), tool.name, arguments)
        if self.reply is None:
            return f"Fake reply to {len(messages)} messages."
        if callable(self.reply):
            return self.reply(messages)
        return self.reply
