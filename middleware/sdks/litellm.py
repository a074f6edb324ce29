"""LiteLLM (``litellm``): ``completion`` and ``acompletion``, in OpenAI's message format.

The points are the module globals ``_PYTHON_COMPLETION``/``_PYTHON_ACOMPLETION``
of ``litellm.chat_completions.dispatch``, which ``litellm.completion`` and
``litellm.acompletion`` (also as imported before the session) read at every
call; they take the messages themselves, as ``messages``.

``llm_summarizer`` takes the ``litellm`` module (it calls ``completion``), or
``litellm.completion`` or ``litellm.acompletion`` themselves: LiteLLM has no
client object, so the async one is asked for by its function, and a cache-aligned
summary repeats where the call went (``api_base``, ``api_key``, ...).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, Dict, Optional, Tuple

from . import Alignment, Point, PromptMessages, Sdk, SummaryApi

_PACKAGE = "litellm"
# LiteLLM's completion functions, by name: whether each is async.
_FUNCTIONS = {"completion": False, "acompletion": True}
# What a call names beside its messages that a cache-aligned summary repeats: where
# the call goes (the provider, its address and key) and how its cache is keyed.
_REPEATED = (
    "api_base",
    "base_url",
    "api_key",
    "api_version",
    "custom_llm_provider",
    "extra_headers",
    "prompt_cache_key",
)


def _summary_client(client: Any) -> Optional[Tuple[str, bool]]:
    """The method to call on ``client`` and whether it is async, when ``client`` is
    the ``litellm`` module or one of its completion functions."""
    if isinstance(client, ModuleType):
        return ("completion", False) if client.__name__ == _PACKAGE else None
    module = str(getattr(client, "__module__", None))
    name = getattr(client, "__qualname__", None)
    if (module == _PACKAGE or module.startswith(_PACKAGE + ".")) and name in _FUNCTIONS:
        return "__call__", _FUNCTIONS[name]
    return None


def _summary_request(model: str, prompt: PromptMessages, max_tokens: int) -> Dict[str, Any]:
    # max_tokens: the parameter LiteLLM translates for every provider.
    return {"model": model, "messages": prompt, "max_tokens": max_tokens}


def _aligned_request(made: Alignment) -> Dict[str, Any]:
    # The call's keyword arguments, in OpenAI's format; the system prompt is among the
    # messages. tool_choice stays as the call sent it (a provider's cached messages may
    # depend on it: Anthropic's do), unless it forces a tool; the instruction asks for
    # no tool call, and a reply without text is asked again with the plain prompt.
    body, instruction = made.body, {"role": "user", "content": made.instruction}
    request = _summary_request(body["model"], [*made.messages, instruction], made.max_tokens)
    tools = body.get("tools")
    if isinstance(tools, list) and tools:
        request["tools"] = tools
        choice = body.get("tool_choice")
        if choice in ("auto", "none"):
            request["tool_choice"] = choice
        elif choice is not None:
            request["tool_choice"] = "none"
    request.update((key, body[key]) for key in _REPEATED if body.get(key) is not None)
    return request


def _summary_text(response: Any) -> str:
    # A refusal or a reply cut at max_tokens before any text holds None.
    return response.choices[0].message.content or ""


def _summary_usage(response: Any) -> Optional[Tuple[int, int, int]]:
    usage = getattr(response, "usage", None)
    if usage is None:
        return None
    details = getattr(usage, "prompt_tokens_details", None)
    cached = (getattr(details, "cached_tokens", None) or 0) if details is not None else 0
    return usage.prompt_tokens or 0, cached, usage.completion_tokens or 0


SDK = Sdk(
    name="litellm",
    points=(
        Point("litellm.chat_completions.dispatch", "_PYTHON_COMPLETION", "litellm.completion"),
        Point("litellm.chat_completions.dispatch", "_PYTHON_ACOMPLETION", "litellm.acompletion"),
    ),
    messages_arg="messages",
    # One stream class for both: async when the call was.
    either_streams=frozenset({"CustomStreamWrapper"}),
    usage=(("prompt_tokens", ()),),
    # Its text embeds the provider's, whose figures the other SDKs' patterns read.
    overflow_classes=frozenset({"ContextWindowExceededError"}),
    # Its usage is OpenAI's shape: prompt_tokens includes the cached tokens.
    summary=(
        SummaryApi(
            clients=frozenset({"litellm", "litellm.completion"}),
            async_clients=frozenset({"litellm.acompletion"}),
            method="completion",
            request=_summary_request,
            text=_summary_text,
            usage=_summary_usage,
            aligned=_aligned_request,
            recognise=_summary_client,
        ),
    ),
)
