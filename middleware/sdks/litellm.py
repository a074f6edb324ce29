"""LiteLLM (``litellm``): ``completion`` and ``acompletion``, in OpenAI's message format.

The points are the module globals ``_PYTHON_COMPLETION``/``_PYTHON_ACOMPLETION``
of ``litellm.chat_completions.dispatch``, which ``litellm.completion`` and
``litellm.acompletion`` (also as imported before the session) read at every
call; they take the messages themselves, as ``messages``.
"""

from __future__ import annotations

from . import Point, Sdk

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
)
