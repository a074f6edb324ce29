"""One reason a provider would reject a request: what every format's pairing check reports."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence, Tuple


@dataclass(frozen=True)
class PairingProblem:
    """One reason a provider would reject the request.

    Attributes:
        index: The position of the offending message or item.
        code: A stable identifier of the kind of problem: ``"orphan_tool_result"``,
            ``"unknown_tool_call_id"``, ``"missing_tool_results"``,
            ``"orphan_function_result"`` (OpenAI Chat),
            ``"missing_tool_result_blocks"``, ``"tool_result_not_at_start"``,
            ``"unexpected_tool_result"`` (Anthropic), ``"missing_call_output"``,
            ``"orphan_call_output"``, ``"reasoning_without_following_item"``
            (OpenAI Responses), ``"orphan_function_response"``,
            ``"function_response_count"``, ``"function_call_not_after_user"``
            (Gemini), ``"too_many_tool_results"``, ``"missing_tool_results"``,
            ``"first_message_not_user"``, ``"roles_not_alternating"`` (Bedrock).
        ids: The tool call, tool use or item ids concerned (for a legacy
            ``function`` message, which has no id, its function's name; for a
            Gemini function part without an id, its function's name; none for
            Bedrock's role problems).
        provider: ``"openai"``, ``"anthropic"``, ``"openai-responses"``,
            ``"gemini"``, ``"bedrock"``, or ``"ollama"`` for Ollama's tool
            messages without ids.
        message: The provider's own wording for the rejection. Ollama accepts
            any order and rejects nothing, so its problems are worded by this
            library: a result the model would read with no call before it
            (``"orphan_tool_result"``), calls it would read with no result
            (``"missing_tool_results"``, naming the calls' tools).
    """

    index: int
    code: str
    ids: Tuple[str, ...]
    provider: str
    message: str

    def __str__(self) -> str:
        return f"message {self.index}: {self.message}"


def names(ids: Sequence[Any]) -> Tuple[str, ...]:
    """Ids as the strings a ``PairingProblem`` reports them by."""
    return tuple(str(i) for i in ids)
