"""boto3's Bedrock Runtime, ``intercept="bedrock"``: ``converse`` and ``converse_stream``.

The point is ``BaseClient._make_api_call``, which every botocore client calls;
the site lets through every operation but a ``bedrock-runtime`` client's
``Converse`` and ``ConverseStream``. ``messages`` is compacted, ``system`` and
``toolConfig`` counted. ``llm_summarizer`` calls a ``bedrock-runtime`` client's
``converse``. Nothing here imports boto3 or botocore.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Dict, List, Optional, Tuple

from ctx_compact._contract import CountTokens, count_value

from .._callables import ArgSpec, Arguments, Beside, Located, replace
from . import Alignment, Point, PromptMessages, Sdk, SummaryApi

SERVICE = "bedrock-runtime"
# The operations whose messages are compacted, and their names in events.
OPERATIONS = {"Converse": "bedrock Converse", "ConverseStream": "bedrock ConverseStream"}
# What a request sends beside the messages, counted against the budget: its system
# prompt, its tool schemas.
SYSTEM, TOOLS = "system", "toolConfig"
# The API of a request body as ``CallRequest.api`` names it.
API = "bedrock Converse"
_CACHE_POINT = {"cachePoint": {"type": "default"}}
# The most cachePoint blocks Bedrock takes in one request.
_MOST_CACHE_POINTS = 4


def _service(client: Any) -> Optional[str]:
    try:
        return str(client.meta.service_model.service_name)
    except AttributeError:
        return None


class ConverseSite:
    """Where a Bedrock Runtime ``Converse``/``ConverseStream`` call carries its messages.

    Args:
        fn: The patched ``_make_api_call``, whose ``operation_name`` and
            ``api_params`` are bound.
        count_tokens: The options' counter, for ``system`` and ``toolConfig``.
    """

    def __init__(self, fn: Any, count_tokens: Optional[CountTokens]) -> None:
        self.operation = ArgSpec.of(fn, "operation_name", "botocore _make_api_call")
        self.params = ArgSpec.of(fn, "api_params", "botocore _make_api_call")
        self.count_tokens = count_tokens

    def locate(
        self, instance: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]
    ) -> Optional[Located]:
        """The call's messages, or ``None`` for any other service, operation or shape."""
        _, operation, _ = self.operation.find(instance, args, kwargs)
        function = OPERATIONS.get(operation) if isinstance(operation, str) else None
        if function is None or _service(instance) != SERVICE:
            return None
        found, params, index = self.params.find(instance, args, kwargs)
        if not found or not isinstance(params, Mapping):
            return None
        messages = params.get("messages")
        if not isinstance(messages, list):
            return None  # botocore's own validation reports it
        fixed = Beside(
            *(
                0 if params.get(key) is None else count_value(params[key], self.count_tokens)
                for key in (SYSTEM, TOOLS)
            )
        )

        def rebuild(new: List[Any]) -> Arguments:
            return replace(args, kwargs, "api_params", index, {**params, "messages": new})

        return Located(
            messages, rebuild, fixed, function, request=MappingProxyType(params), api=API
        )


def _summary_request(model: str, prompt: PromptMessages, max_tokens: int) -> Dict[str, Any]:
    system = [{"text": m["content"]} for m in prompt if m["role"] == "system"]
    messages = [
        {"role": m["role"], "content": [{"text": m["content"]}]}
        for m in prompt
        if m["role"] != "system"
    ]
    return {
        "modelId": model,
        "system": system,
        "messages": messages,
        "inferenceConfig": {"maxTokens": max_tokens},
    }


def _untimed(request: Dict[str, Any], _seconds: float) -> Dict[str, Any]:
    # A botocore call takes no timeout of its own: the client's read_timeout bounds
    # each request, and the summarizer's timeout the whole work.
    return request


def _cache_points(value: Any) -> int:
    """The cachePoint blocks in a system prompt, a tool list or a message's content."""
    if not isinstance(value, list):
        return 0
    return sum(1 for item in value if isinstance(item, Mapping) and "cachePoint" in item)


def _aligned_request(made: Alignment) -> Optional[Dict[str, Any]]:
    # The prefix is repeated with the call's system prompt and toolConfig as sent (a
    # toolChoice forcing a tool left out: the instruction asks for none), a cachePoint
    # after it, then the instruction; its additionalModelRequestFields are not sent.
    body, messages, instruction = made.body, made.messages, made.instruction
    if not messages:
        return None
    *earlier, last = messages
    content = last.get("content") if isinstance(last, Mapping) else None
    if not isinstance(content, list) or last.get("role") not in ("user", "assistant"):
        return None
    request: Dict[str, Any] = {
        "modelId": body["modelId"],
        "inferenceConfig": {"maxTokens": made.max_tokens},
    }
    system, config = body.get(SYSTEM), body.get(TOOLS)
    if isinstance(system, list) and system:
        request[SYSTEM] = system
    if isinstance(config, Mapping):
        choice = config.get("toolChoice")
        forced = isinstance(choice, Mapping) and "auto" not in choice
        request[TOOLS] = {k: v for k, v in config.items() if not (forced and k == "toolChoice")}
    used = _cache_points(system) + _cache_points(
        config.get("tools") if isinstance(config, Mapping) else None
    )
    used += sum(_cache_points(m.get("content")) for m in messages if isinstance(m, Mapping))
    blocks = list(content)
    if used < _MOST_CACHE_POINTS and not (blocks and _cache_points(blocks[-1:])):
        blocks.append(dict(_CACHE_POINT))
    # Roles alternate: after a user message the instruction joins it as one more block.
    if last["role"] == "user":
        request["messages"] = [*earlier, {**last, "content": [*blocks, {"text": instruction}]}]
    else:
        request["messages"] = [
            *earlier,
            {**last, "content": blocks},
            {"role": "user", "content": [{"text": instruction}]},
        ]
    return request


def _summary_text(response: Any) -> str:
    # Text blocks only: a reasoningContent block is not part of the summary.
    content = response.get("output", {}).get("message", {}).get("content", [])
    return "".join(block["text"] for block in content if "text" in block)


def _summary_usage(response: Any) -> Optional[Tuple[int, int, int]]:
    usage = response.get("usage")
    if usage is None:
        return None
    # inputTokens leaves out the cached parts: added back, as for provider_tokens.
    read = usage.get("cacheReadInputTokens", 0)
    written = usage.get("cacheWriteInputTokens", 0)
    return usage["inputTokens"] + read + written, read, usage["outputTokens"]


SDK = Sdk(
    name="bedrock",
    points=(Point("botocore.client", "BaseClient._make_api_call", "bedrock"),),
    site=ConverseSite,
    packages=("botocore",),
    streams=frozenset({"EventStream"}),
    # usage.inputTokens leaves out the cached parts: added back.
    usage=(("inputTokens", ("cacheReadInputTokens", "cacheWriteInputTokens")),),
    # converse_stream's response holds the stream; its metadata event the usage.
    stream_keys=("stream",),
    usage_holders=("metadata",),
    # A botocore ClientError (ValidationException, HTTP 400); it names no figures.
    overflow_texts=frozenset({"Input is too long for requested model"}),
    # boto3 makes each service's client class at run time, named after the service;
    # it has no async client.
    summary=(
        SummaryApi(
            clients=frozenset({"BedrockRuntime"}),
            async_clients=frozenset(),
            method="converse",
            request=_summary_request,
            text=_summary_text,
            usage=_summary_usage,
            aligned=_aligned_request,
            timed=_untimed,
            model_key="modelId",
            route=API,
        ),
    ),
)
