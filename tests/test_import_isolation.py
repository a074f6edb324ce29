"""The core loads neither wrapt nor anyio: only the middleware may pull them in."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

HEAVY = ("wrapt", "anyio")

PROBE = textwrap.dedent(
    """
    import json, sys
    {setup}
    import ctx_compact
    from ctx_compact import compact, compact_with_summary, estimate_tokens

    messages = [
        {{"role": "system", "content": "s"}},
        {{"role": "user", "content": "u" * 40}},
        {{"role": "assistant", "content": None, "tool_calls": [{{"id": "c1"}}]}},
        {{"role": "tool", "tool_call_id": "c1", "content": "r" * 40}},
        {{"role": "user", "content": "last"}},
    ]
    result = compact(messages, max_tokens=20, keep_head=1, keep_tail=1)
    assert result.dropped, "the probe must actually compact something"
    compact_with_summary(messages, max_tokens=20, summarize=lambda d: "gist")
    estimate_tokens(messages[0])
    loaded = sorted(
        name for name in sys.modules if name.split(".")[0] in {heavy!r}
    )
    print(json.dumps(loaded))
    """
)


def loaded_after(setup: str = "") -> list:  # type: ignore[type-arg]
    code = PROBE.format(setup=setup, heavy=set(HEAVY))
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=60
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)  # type: ignore[no-any-return]


def test_import_and_compact_load_neither_wrapt_nor_anyio():
    assert loaded_after() == []


def test_star_import_of_the_core_loads_neither_wrapt_nor_anyio():
    assert loaded_after(setup="from ctx_compact import *") == []


def test_the_probe_sees_a_loaded_module():
    # The control: the same probe does report anyio once something imports it.
    assert "anyio" in loaded_after(setup="import anyio")
