"""Checked by mypy (strict, in CI), never run: the integrations take ``budgeted``'s options typed.

Each takes ``**options: Unpack[HookOptions]``, so a misspelt or mistyped option is a type
error there as it is for ``budgeted`` (see ``options.py`` for how the ignores are checked).
The frameworks need not be installed: mypy reads them as untyped.
"""

from __future__ import annotations

from middleware.integrations.langchain import CompactionMiddleware
from middleware.integrations.langgraph import pre_model_hook
from middleware.integrations.openai_agents import input_filter
from middleware.integrations.pydantic_ai import CompactionCapability, history_processor

# What users write, exactly typed.
CompactionMiddleware(1500, keep_tail=2, on_overflow="retry", rewrite_state=True)
pre_model_hook(1500, prompt="Be terse.", keep_head=0, validate="report")
CompactionCapability(1500, clear_tool_results={"keep": 2}, target_tokens=1000)
history_processor(1500, instructions="Be terse.", on_overflow="raise")
input_filter(1500, on_compact=print)

# Misspelt options.
CompactionMiddleware(1500, keep_tial=2)  # type: ignore[call-arg]
pre_model_hook(1500, keep_heda=1)  # type: ignore[call-arg]
input_filter(1500, sumarize=len)  # type: ignore[call-arg]

# Mistyped options.
CompactionCapability(1500, keep_head="2")  # type: ignore[arg-type]
history_processor(1500, on_overflow="later")  # type: ignore[arg-type]
CompactionMiddleware(1500, messages_arg="messages")  # type: ignore[call-arg]
