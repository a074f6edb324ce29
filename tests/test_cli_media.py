"""ctx-compact counts a photo as billed; --no-count-media counts it as the specification does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, List

import media_files as files
import pytest
from helpers import run_cli as run

from ctx_compact import compact, estimate_tokens, media_aware_counter
from ctx_compact.cli import main

PHOTO = files.pillow(1024, 768, "JPEG", quality=95)


def chat() -> List[Any]:
    image = {"type": "image_url", "image_url": {"url": files.data_url("image/jpeg", PHOTO)}}
    messages: List[Any] = [{"role": "system", "content": "You look at photos."}]
    for turn in range(6):
        content: Any = f"Question {turn} " * 5
        if turn % 2 == 0:
            content = [{"type": "text", "text": content}, image]
        messages.append({"role": "user", "content": content})
        messages.append({"role": "assistant", "content": f"Answer {turn} " * 5})
    return messages


@pytest.mark.parametrize("mode", [[], ["--explain"], ["--clear-tool-results"], ["--indent", "0"]])
def test_photos_count_as_billed_by_default(
    mode: List[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    messages = chat()
    counted = sum(map(media_aware_counter(), messages))
    assert counted < 3000 < sum(map(estimate_tokens, messages))
    status, out, err = run(["--max-tokens", "3000", "--stats", *mode], messages, tmp_path, capsys)
    assert status == 0
    assert out == messages
    assert f"tokens {counted} -> {counted}" in err


def test_the_specification_s_counting_when_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    messages = chat()
    spec = compact(messages, max_tokens=3000)
    _, out, err = run(
        ["--max-tokens", "3000", "--stats", "--no-count-media"], messages, tmp_path, capsys
    )
    assert out == spec.messages
    assert len(out) < len(messages)
    assert f"tokens {spec.tokens_before} -> {spec.tokens_after}" in err


def test_jsonl_counts_photos_as_billed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    messages = chat()
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps(messages) + "\n" + json.dumps(messages) + "\n")
    out = tmp_path / "out.jsonl"
    assert main(["--jsonl", "--max-tokens", "3000", "-o", str(out), str(source)]) == 0
    assert [json.loads(line) for line in out.read_text().splitlines()] == [messages, messages]
