"""Google ADK: ``before_model_callback(...)`` for an ``LlmAgent``.

Before every model call the request's ``contents`` are compacted, with the
system instruction and the tools' declarations counted beside them; the
session keeps every event. See docs/integrations/google-adk.md.

Requires ``google-adk``: the ``google-adk`` extra (``python -m pip install ".[google-adk]"``
in a checkout), or ``pip install google-adk``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Awaitable, Callable, List, Optional

from ._common import Compactor, HookOptions, changed, missing

try:
    from google.adk.agents.callback_context import CallbackContext
    from google.adk.models import LlmRequest, LlmResponse
    from google.genai import types
except ImportError as exc:  # pragma: no cover - the message is tested without google-adk
    raise missing("google_adk", "pip install 'google-adk'", exc) from exc

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["before_model_callback"]

BeforeModelCallback = Callable[[CallbackContext, LlmRequest], Awaitable[Optional[LlmResponse]]]


def _sent(value: Any) -> Any:
    # A google-genai object as the JSON the SDK sends for it (camelCase, nothing unset).
    if isinstance(value, str):
        return {"parts": [{"text": value}]}
    dump = getattr(value, "model_dump", None)
    if dump is not None:
        return dump(mode="json", by_alias=True, exclude_none=True)
    return value


def _content(message: Any) -> Any:
    # The core adds plain Gemini dicts (a summary, a cleared or summary-carrying
    # copy); ADK's request holds types.Content.
    if isinstance(message, Mapping):
        return types.Content.model_validate(dict(message))
    return message


def before_model_callback(max_tokens: float, **options: Unpack[HookOptions]) -> BeforeModelCallback:
    """A ``before_model_callback`` that keeps every model call of an ADK agent in budget.

    Each model call reports one ``CompactionEvent`` (``function`` is ``"google-adk
    before_model_callback"``) to ``on_compact`` and to every active
    ``CompactingSession``. The callback is async (ADK awaits it), so an async
    ``summarize`` or hook is awaited and a sync one runs on a worker thread; a
    summary is a user content in the dropped turns' place (or a text part added
    to the next user turn, where Gemini's turn order wants it). It returns
    ``None``, so ADK goes on to call the model with the compacted contents; to
    chain it with callbacks of your own, pass ``before_model_callback=[...]``.

    Args:
        max_tokens: The budget of each model call: the contents, the system
            instruction and the tools' declarations (counted as google-genai
            sends them).
        **options: ``budgeted``'s options (``keep_head``, ``summarize``,
            ``on_compact``, ``clear_tool_results``, ...), with the same meanings.
            ``on_overflow="retry"`` is refused: the callback prepares the
            request but does not make the call.

    Returns:
        The callback, ``async (callback_context, llm_request) -> None``.

    Raises:
        TypeError, ValueError: A bad option, naming it (a ``summary_role``
            other than Gemini's ``"user"`` and ``"model"`` among them).
    """
    compactor = Compactor(
        "before_model_callback",
        "google-adk before_model_callback",
        max_tokens,
        options,
        wraps_call=False,
    )
    compactor.check_summary_role(("user", "model"), "Gemini's roles")

    async def compact_contents(
        callback_context: CallbackContext, llm_request: LlmRequest
    ) -> Optional[LlmResponse]:
        config = llm_request.config
        system: List[Any] = []
        tools: List[Any] = []
        if config is not None:
            if config.system_instruction is not None:
                system.append(_sent(config.system_instruction))
            tools = [_sent(tool) for tool in config.tools or ()]
        contents = llm_request.contents
        kept = await compactor.acompacted(contents, compactor.beside(system=system, tools=tools))
        if changed(kept, contents):
            llm_request.contents = [_content(message) for message in kept]
        return None

    return compact_contents
