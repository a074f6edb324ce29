"""The core's option defaults, said once: the functions, the option objects, the CLI and the
middleware all take them from here."""

from __future__ import annotations

KEEP_HEAD = 1  # compact*: leading messages always kept
KEEP_TAIL = 4  # compact*: trailing messages always kept
KEEP_RESULTS = 3  # clear_tool_results: the most recent results never cleared
PLACEHOLDER = "[cleared]"  # clear_tool_results: what a cleared result says
KEEP_RATIO = 0.5  # truncate_tool_results: the share of what is kept that goes to the head
# truncate_tool_results: what stands for the cut part of a result
TRUNCATION_MARKER = "\n[... {chars} characters (about {tokens} tokens) cut{where} ...]\n"
KEEP_TURNS = 1  # clear_thinking: the most recent turns whose thinking is kept
REPAIR_PLACEHOLDER = "[tool result missing]"  # repair_pairing: what a placeholder answer says
