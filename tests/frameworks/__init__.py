"""Proofs with the real agent frameworks (issue 9).

A package, so that its conftest does not take the name ``conftest`` from tests/conftest.py.
"""
