"""Proofs with the real SDKs (openai, anthropic, LiteLLM, instructor) against the testing kit.

A package, as tests/frameworks is, so that its conftest and module names (``test_openai``,
``test_litellm``) do not collide with the rest of the suite's.
"""
