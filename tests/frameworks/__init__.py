"""Proofs with the real agent frameworks.

A package, so that its conftest does not take the name ``conftest`` from tests/conftest.py.
"""
