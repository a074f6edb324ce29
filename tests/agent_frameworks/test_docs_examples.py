"""The agent framework integration pages open with their pip line, then an agent that runs.

Their examples run in CI's venv of the agents extra, where ``tests/test_docs.py`` (under
``CTX_COMPACT_EXTRAS=agents``) fails rather than skips an example whose framework is missing.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = ["google-adk.md", "strands.md", "llama-index.md", "autogen.md"]


@pytest.mark.parametrize("page", PAGES)
def test_the_page_opens_with_its_pip_line_and_a_runnable_agent(page: str) -> None:
    text = (ROOT / "docs" / "integrations" / page).read_text("utf-8")
    blocks = re.findall(r"```(\w+)\n(.*?)```", text, re.S)

    (first, pip), (second, agent) = blocks[:2]
    assert first == "sh"
    # This project from the checkout, with the extra named as the page is (the package index's
    # ctx-compact is another project); tests/test_install_commands.py checks the rest of the line.
    assert pip.startswith(f'python -m pip install ".[{Path(page).stem}]"')
    assert second == "python"
    assert "from middleware.integrations." in agent
    assert "FakeProvider(" in agent  # it runs offline, against the local provider
    assert f"integrations/{page}" in (ROOT / "mkdocs.yml").read_text("utf-8")
    assert f"docs/integrations/{page}" in (ROOT / "README.md").read_text("utf-8")
