"""boto3's Bedrock Runtime, ``intercept="bedrock"``: ``converse`` and ``converse_stream``.

The point is ``BaseClient._make_api_call``, which every botocore client calls;
the site lets through every operation but a ``bedrock-runtime`` client's
``Converse`` and ``ConverseStream``. ``messages`` is compacted, ``system`` and
``toolConfig`` counted. Nothing here imports boto3 or botocore.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Dict, List, Optional, Tuple

from ctx_compact._contract import CountTokens, count_value

from .._callables import ArgSpec, Arguments, Beside, Located, replace
from . import Point, Sdk

SERVICE = "bedrock-runtime"
# The operations whose messages are compacted, and their names in events.
OPERATIONS = {"Converse": "bedrock Converse", "ConverseStream": "bedrock ConverseStream"}
# What a request sends beside the messages, counted against the budget: its system
# prompt, its tool schemas.
SYSTEM, TOOLS = "system", "toolConfig"


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

        return Located(messages, rebuild, fixed, function)


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
)
