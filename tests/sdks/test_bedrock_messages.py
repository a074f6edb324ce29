"""A boto3 Converse agent loop, compacted before every call, is never refused by the kit.

Runs in the ``providers`` extra's venv (boto3 installed), against the testing
kit's Bedrock routes (the plugin's ``fake_bedrock`` client).
"""

from __future__ import annotations

from typing import Any, Dict, List

import pytest

from ctx_compact import check_pairing, compact, compact_with_summary
from ctx_compact.testing import FakeProvider

MODEL_ID = "anthropic.claude-3-5-haiku-20241022-v1:0"
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TOOL_CONFIG = {"tools": [{"toolSpec": {"name": "get_weather", "inputSchema": {"json": SCHEMA}}}]}
Message = Dict[str, Any]


def _results(reply: Message) -> Message:
    """The user message answering every toolUse block of ``reply``."""
    return {
        "role": "user",
        "content": [
            {
                "toolResult": {
                    "toolUseId": block["toolUse"]["toolUseId"],
                    "content": [{"text": "Sunny, with a light breeze. " * 12}],
                    "status": "success",
                }
            }
            for block in reply["content"]
            if "toolUse" in block
        ],
    }


@pytest.mark.parametrize("summarize", [False, True])
def test_an_agent_loop_under_a_context_limit_gets_no_validation_exception(
    fake_bedrock: Any, fake_provider: FakeProvider, summarize: bool
) -> None:
    fake_provider.tool_calls = 3
    fake_provider.context_limit = 700
    messages: List[Message] = [{"role": "user", "content": [{"text": "Weather in Paris?"}]}]
    dropped = 0
    for n in range(30):
        if summarize:
            result = compact_with_summary(messages, max_tokens=600, summarize=lambda d: "earlier")
        else:
            result = compact(messages, max_tokens=600)
        dropped += len(result.dropped)
        assert check_pairing(result.messages) == []
        response = fake_bedrock.converse(
            modelId=MODEL_ID, messages=result.messages, toolConfig=TOOL_CONFIG
        )
        reply = response["output"]["message"]
        messages.append(reply)
        if response["stopReason"] == "tool_use":
            messages.append(_results(reply))
        else:
            messages.append({"role": "user", "content": [{"text": f"And then {n}?"}]})
    assert dropped
    assert sum("toolUse" in b for m in messages for b in m["content"]) >= 20
