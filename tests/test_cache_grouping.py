"""The session cache regroups incrementally in every wire format, as grouping from scratch does.

A Responses output may answer a call made many items before it, so a message
appended to a history can join a group that started several calls ago. The
cache's arrays must still equal those a from-scratch pass computes.
"""

from __future__ import annotations

from typing import Any, List

from hypothesis import given
from test_agreement import PROPERTY, edit_sequences, histories

from ctx_compact._contract import measure
from middleware._cache import CountCache


@PROPERTY
@given(edit_sequences())
def test_the_count_cache_equals_measuring_from_scratch_as_a_history_changes(states):
    cache = CountCache(None)
    first = {"role": "system", "content": "one conversation"}
    for messages in states:
        history: List[Any] = [first, *messages]

        assert cache.arrays(history) == measure(history, None)


@PROPERTY
@given(histories(corrupt=True))
def test_the_count_cache_equals_measuring_from_scratch_message_by_message(messages):
    cache = CountCache(None)
    first = {"role": "system", "content": "one conversation"}
    for end in range(len(messages) + 1):
        history = [first, *messages[:end]]

        assert cache.arrays(history) == measure(history, None)
