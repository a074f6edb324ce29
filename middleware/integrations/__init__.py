"""Compaction in each agent framework's own hook: one small module per framework.

Each module is imported on its own, and imports its framework only then (this
package imports none):

- ``middleware.integrations.langchain``: ``CompactionMiddleware`` for
  ``langchain.agents.create_agent(..., middleware=[...])``;
- ``middleware.integrations.langgraph``: ``pre_model_hook(...)`` for
  ``langgraph.prebuilt.create_react_agent``;
- ``middleware.integrations.pydantic_ai``: ``history_processor(...)`` for
  ``pydantic_ai.Agent(history_processors=[...])``;
- ``middleware.integrations.openai_agents``: ``input_filter(...)`` for
  ``agents.RunConfig(call_model_input_filter=...)``;
- ``middleware.integrations.google_adk``, ``.strands``, ``.llama_index`` and
  ``.autogen`` likewise for their frameworks.

Every one takes ``budgeted``'s options (``messages_arg`` aside), counts what the framework
sends beside the messages (its system prompt, its tools) against the budget, and reports the
same ``CompactionEvent``. Importing a module whose framework is not installed raises
``ImportError`` naming the command that installs it.
"""
