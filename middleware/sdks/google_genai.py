"""google-genai (``google.genai``), ``intercept="gemini"``: the models API and the chats on it.

The points are ``Models._generate_content`` and ``_generate_content_stream``
(and their ``AsyncModels`` twins), which every request passes through, chats
and automatic function calling included. ``contents`` is compacted when it is a
list of contents; the config's ``system_instruction`` and ``tools`` are counted.
``llm_summarizer`` calls a ``Client``'s ``models.generate_content``, or the async
one of its ``client.aio``. Nothing here imports google-genai: its objects are
read by their attributes.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Dict, List, Optional, Tuple

from ctx_compact._contract import CountTokens, count_value

from .._callables import ArgSpec, Arguments, Beside, Located, replace
from . import Alignment, Point, PromptMessages, Sdk, SummaryApi, field, figures

# The content classes of google.genai.types (UserContent and ModelContent derive from Content).
_CONTENT_CLASSES = frozenset({"Content"})
_PACKAGE = "google.genai"
# The API of a request as ``CallRequest.api`` names it.
API = "gemini generateContent"
# What a cache-aligned summary repeats of the call's config: what comes before the
# contents in the prompt, and the context cache the call reads.
_REPEATED = ("system_instruction", "tools", "tool_config", "cached_content")


def _from_sdk(value: Any) -> bool:
    module = str(getattr(type(value), "__module__", ""))
    return module == _PACKAGE or module.startswith(_PACKAGE + ".")


def _is_content(value: Any) -> bool:
    """Whether ``value`` is one content (a turn), not a part or a string."""
    if isinstance(value, Mapping):
        return "parts" in value
    return _from_sdk(value) and any(c.__name__ in _CONTENT_CLASSES for c in type(value).__mro__)


def _plain(value: Any) -> Any:
    """What a config value is sent as, closely enough to count it.

    An SDK object is its JSON (``model_dump``); a Python function given as a
    tool (automatic function calling) its name and docstring, which the SDK
    sends as its declaration.
    """
    if isinstance(value, (type(None), str, int, float, bool)):
        return value
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_none=True)
    if callable(value):
        return {"name": getattr(value, "__name__", ""), "description": inspect.getdoc(value) or ""}
    return str(value)


def _instruction(value: Any) -> Any:
    """A ``system_instruction`` as the SDK sends it: one user content of its parts."""
    if _is_content(value):
        return value
    parts = value if isinstance(value, (list, tuple)) else [value]
    return {"parts": [{"text": p} if isinstance(p, str) else p for p in parts], "role": "user"}


class ContentsSite:
    """Where a models API request carries its contents, and what its config adds.

    Args:
        fn: The patched method, whose ``contents`` and ``config`` are bound.
        count_tokens: The options' counter, for the config's counted parts.
    """

    def __init__(self, fn: Any, count_tokens: Optional[CountTokens]) -> None:
        self.contents = ArgSpec.of(fn, "contents", "gemini request")
        self.config = ArgSpec.of(fn, "config", "gemini request")
        self.model = ArgSpec.of(fn, "model", "gemini request")
        self.count_tokens = count_tokens

    def beside(self, config: Any) -> Beside:
        """The tokens of the config's ``system_instruction`` and ``tools``, counted against
        the budget."""
        if config is None:
            return Beside()
        instruction, tools = field(config, "system_instruction"), field(config, "tools")
        return Beside(
            0 if instruction is None else self._count(_instruction(instruction)),
            0 if tools is None else self._count(tools),
        )

    def _count(self, value: Any) -> int:
        return count_value(_plain(value), self.count_tokens)

    def locate(
        self, instance: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]
    ) -> Optional[Located]:
        """The request's contents when they are a list of contents, else ``None``."""
        found, contents, index = self.contents.find(instance, args, kwargs)
        if not found or not isinstance(contents, list) or not contents:
            return None
        if not all(_is_content(item) for item in contents):
            return None
        _, config, _ = self.config.find(instance, args, kwargs)
        _, model, _ = self.model.find(instance, args, kwargs)

        def rebuild(new: List[Any]) -> Arguments:
            return replace(args, kwargs, "contents", index, new)

        request = MappingProxyType({"model": model, "contents": contents, "config": config})
        return Located(contents, rebuild, self.beside(config), request=request, api=API)


def _summary_request(model: str, prompt: PromptMessages, max_tokens: int) -> Dict[str, Any]:
    # The system prompt goes in the config, beside the contents.
    system = "\n\n".join(m["content"] for m in prompt if m["role"] == "system")
    contents = [
        {"role": "user", "parts": [{"text": m["content"]}]} for m in prompt if m["role"] != "system"
    ]
    config = {"system_instruction": system, "max_output_tokens": max_tokens}
    return {"model": model, "contents": contents, "config": config}


def _timed(request: Dict[str, Any], seconds: float) -> Dict[str, Any]:
    # In milliseconds, in the config's http_options.
    http = {"timeout": max(1, round(seconds * 1000))}
    return {**request, "config": {**request["config"], "http_options": http}}


def _forces_a_call(tool_config: Any) -> bool:
    calling = field(tool_config, "function_calling_config")
    mode = field(calling, "mode") if calling is not None else None
    return str(getattr(mode, "value", mode)).upper() == "ANY"


def _aligned_request(made: Alignment) -> Optional[Dict[str, Any]]:
    # The contents as sent, then one user content of the instruction (Gemini takes two
    # user turns in a row), with the call's system instruction, tools, tool config and
    # context cache; a tool config that forces a call is turned to mode NONE, and the
    # SDK's automatic function calling is off, so a call the model makes anyway comes
    # back as a reply without text (asked again with the plain prompt).
    body = made.body
    if not isinstance(body.get("model"), str):
        return None
    config = body.get("config")
    sent = {} if config is None else {k: field(config, k) for k in _REPEATED}
    repeated: Dict[str, Any] = {k: v for k, v in sent.items() if v is not None}
    if _forces_a_call(repeated.get("tool_config")):
        repeated["tool_config"] = {"function_calling_config": {"mode": "NONE"}}
    return {
        "model": body["model"],
        "contents": [*made.messages, {"role": "user", "parts": [{"text": made.instruction}]}],
        "config": {
            **repeated,
            "max_output_tokens": made.max_tokens,
            "automatic_function_calling": {"disable": True},
        },
    }


def _summary_text(response: Any) -> str:
    # The first candidate's text parts; a thought is not part of the summary.
    candidates = response.candidates or []
    content = candidates[0].content if candidates else None
    parts = (content.parts or []) if content is not None else []
    return "".join(part.text for part in parts if part.text and not part.thought)


def _summary_usage(response: Any) -> Optional[Tuple[int, int, int]]:
    usage = response.usage_metadata
    if usage is None:
        return None
    # prompt_token_count includes the cached content; thoughts are billed as output.
    return (
        usage.prompt_token_count or 0,
        usage.cached_content_token_count or 0,
        (usage.candidates_token_count or 0) + (usage.thoughts_token_count or 0),
    )


SDK = Sdk(
    name="gemini",
    points=(
        Point("google.genai.models", "Models._generate_content", "gemini generateContent"),
        Point(
            "google.genai.models",
            "Models._generate_content_stream",
            "gemini streamGenerateContent",
            stream=True,
        ),
        Point("google.genai.models", "AsyncModels._generate_content", "gemini generateContent"),
        Point(
            "google.genai.models",
            "AsyncModels._generate_content_stream",
            "gemini streamGenerateContent",
            stream=True,
        ),
    ),
    site=ContentsSite,
    packages=(_PACKAGE,),
    # prompt_token_count includes the cached content (cached_content_token_count
    # is the part of it read from the cache): nothing is added back.
    usage_keys=("usage_metadata",),
    usage=(("prompt_token_count", ()),),
    # A ClientError (400 INVALID_ARGUMENT) naming both figures.
    overflow_texts=frozenset({"exceeds the maximum number of tokens allowed"}),
    overflow_figures=(
        figures(
            r"input token count \((\d+)\) exceeds the maximum number of tokens allowed \((\d+)\)",
            tokens=1,
            limit=2,
        ),
    ),
    # client.aio is the async client.
    summary=(
        SummaryApi(
            clients=frozenset({"Client"}),
            async_clients=frozenset({"AsyncClient"}),
            method="models.generate_content",
            request=_summary_request,
            text=_summary_text,
            usage=_summary_usage,
            aligned=_aligned_request,
            timed=_timed,
            route=API,
            key="contents",
        ),
    ),
)
