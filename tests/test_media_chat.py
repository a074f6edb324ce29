"""A photo chat against the testing kit: counted as the provider bills it, kept when it fits.

The scenario, for OpenAI Chat, Responses, Anthropic and Gemini: ten turns
and three 1024x768 photos (306 KB each as JPEG) that the provider bills at a few
thousand tokens, under ``@budgeted(max_tokens=8000)``. The kit bills media by
the providers' published formulas (its own reading of them), so the figures
here are what a provider's usage would say.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any, Callable, Dict, List, Optional

import media_files as files
import pytest

from ctx_compact import estimate_tokens
from ctx_compact.testing import FakeProvider
from middleware import BudgetExceededError, CompactingSession, CompactionEvent, budgeted

PHOTO = files.noisy_jpeg(1024, 768, quality=52)  # about 306 KB, as in the issue

Build = Callable[[str, Optional[bytes]], Dict[str, Any]]


def _chat_user(text: str, photo: Optional[bytes]) -> Dict[str, Any]:
    if photo is None:
        return {"role": "user", "content": text}
    image = {"type": "image_url", "image_url": {"url": files.data_url("image/jpeg", photo)}}
    return {"role": "user", "content": [{"type": "text", "text": text}, image]}


def _responses_user(text: str, photo: Optional[bytes]) -> Dict[str, Any]:
    if photo is None:
        return {"role": "user", "content": text}
    image = {"type": "input_image", "image_url": files.data_url("image/jpeg", photo)}
    return {"role": "user", "content": [{"type": "input_text", "text": text}, image]}


def _anthropic_user(text: str, photo: Optional[bytes]) -> Dict[str, Any]:
    if photo is None:
        return {"role": "user", "content": text}
    source = {"type": "base64", "media_type": "image/jpeg", "data": files.b64(photo)}
    return {
        "role": "user",
        "content": [{"type": "image", "source": source}, {"type": "text", "text": text}],
    }


def _gemini_user(text: str, photo: Optional[bytes]) -> Dict[str, Any]:
    parts: List[Any] = [{"text": text}]
    if photo is not None:
        parts.append({"inline_data": {"mime_type": "image/jpeg", "data": files.b64(photo)}})
    return {"role": "user", "parts": parts}


def _assistant(api: str, text: str) -> Dict[str, Any]:
    if api == "gemini":
        return {"role": "model", "parts": [{"text": text}]}
    return {"role": "assistant", "content": text}


USERS: Dict[str, Build] = {
    "chat": _chat_user,
    "responses": _responses_user,
    "anthropic": _anthropic_user,
    "gemini": _gemini_user,
}


def photo_chat(api: str, turns: int, photos: List[int], last_photo: bool = False) -> List[Any]:
    """``turns`` question-and-answer turns, a photo in the questions of ``photos``, and a
    last question (with a photo if ``last_photo``)."""
    user = USERS[api]
    history: List[Any] = []
    for turn in range(turns):
        photo = PHOTO if turn in photos else None
        history.append(user(f"Turn {turn}: what do you see in this? " + "and " * 20, photo))
        history.append(_assistant(api, f"In turn {turn} I see " + "a detail, " * 25))
    history.append(user("And now, which was the brightest?", PHOTO if last_photo else None))
    return history


class Caller:
    """One API's call through the kit, returning the prompt tokens the kit billed."""

    def __init__(self, api: str, provider: FakeProvider, openai: Any, anthropic: Any) -> None:
        self.api = api
        self.provider = provider
        self.openai = openai
        self.anthropic = anthropic

    def __call__(self, messages: List[Any]) -> int:
        if self.api == "chat":
            reply = self.openai.chat.completions.create(model="gpt-4o", messages=messages)
            return int(reply.usage.prompt_tokens)
        if self.api == "responses":
            reply = self.openai.responses.create(model="gpt-4o", input=messages)
            return int(reply.usage.input_tokens)
        if self.api == "anthropic":
            reply = self.anthropic.messages.create(
                model="claude-test", max_tokens=64, messages=messages
            )
            return int(reply.usage.input_tokens)
        url = f"{self.provider.base_url}/v1beta/models/gemini-2.0-flash:generateContent"
        body = json.dumps({"contents": messages}).encode()
        request = urllib.request.Request(url, body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(request) as response:  # the kit, on 127.0.0.1
            return int(json.load(response)["usageMetadata"]["promptTokenCount"])

    def sent(self) -> List[Any]:
        body = self.provider.requests[-1].body
        return body[
            {
                "chat": "messages",
                "responses": "input",
                "anthropic": "messages",
                "gemini": "contents",
            }[self.api]
        ]


APIS = ["chat", "responses", "anthropic", "gemini"]


@pytest.fixture(params=APIS)
def call(
    request: Any, fake_provider: FakeProvider, fake_openai: Any, fake_anthropic: Any
) -> Caller:
    return Caller(request.param, fake_provider, fake_openai, fake_anthropic)


def _ask(call: Caller, **options: Any) -> Callable[[List[Any]], int]:
    arg = {"chat": "messages", "anthropic": "messages", "responses": "input", "gemini": "contents"}[
        call.api
    ]

    @budgeted(max_tokens=8000, messages_arg=arg, **options)
    def ask(**kwargs: Any) -> int:
        return call(kwargs[arg])

    return lambda messages: ask(**{arg: messages})


def test_a_photo_chat_billed_well_under_the_budget_keeps_every_message(call: Caller) -> None:
    history = photo_chat(call.api, turns=10, photos=[2, 5, 8])
    assert sum(estimate_tokens(m) for m in history) > 300_000  # as base64 text
    events: List[CompactionEvent] = []
    billed = _ask(call, on_compact=events.append)(history)
    assert billed < 6000  # what the provider bills: well under the budget
    assert call.sent() == history  # every message, every photo
    assert len(events[0].messages) == len(history) == 21
    assert events[0].dropped == ()
    assert abs(events[0].tokens_after - billed) <= 0.1 * billed


def test_over_the_budget_photos_go_only_with_their_turns_oldest_first(call: Caller) -> None:
    history = photo_chat(call.api, turns=30, photos=list(range(0, 30, 3)))
    events: List[CompactionEvent] = []
    billed = _ask(call, keep_head=0, keep_tail=2, on_compact=events.append)(history)
    event = events[0]
    sent = call.sent()
    kept = len(sent)
    assert 0 < len(event.dropped) < len(history) - 2
    # The oldest turns went, each message whole: what is sent is the history's most
    # recent part, the caller's own messages as they were, photos included.
    assert sent == history[len(history) - kept :]
    assert list(event.dropped) == history[: len(history) - kept]
    assert all(a is b for a, b in zip(event.messages, history[len(history) - kept :]))
    assert sum(1 for m in sent if "photo" in _kinds(m)) >= 3
    assert billed <= 8000
    assert abs(event.tokens_after - billed) <= 0.1 * billed


def _kinds(message: Any) -> str:
    text = json.dumps(message)[:2000]
    return (
        "photo"
        if any(k in text for k in ("image_url", "input_image", "base64", "inline_data"))
        else "text"
    )


def test_a_last_question_with_a_photo_is_sent_when_it_fits(call: Caller) -> None:
    history = photo_chat(call.api, turns=3, photos=[1], last_photo=True)
    billed = _ask(call, on_overflow="raise")(history)
    assert billed < 8000
    assert call.sent() == history
    # The specification's counting sees the base64 and refuses what fits.
    with pytest.raises(BudgetExceededError):
        _ask(call, on_overflow="raise", count_media=False)(history)


def test_the_specification_s_counting_everywhere_when_asked(call: Caller) -> None:
    history = photo_chat(call.api, turns=10, photos=[2, 5, 8])
    events: List[CompactionEvent] = []
    _ask(call, count_media=False, on_compact=events.append)(history)
    assert events[0].tokens_before == sum(estimate_tokens(m) for m in history)
    assert "photo" not in {_kinds(m) for m in call.sent()}  # dropped as base64 text


def test_calibration_with_photos_in_the_history(call: Caller) -> None:
    history = photo_chat(call.api, turns=30, photos=list(range(0, 30, 3)))
    ask = _ask(call, keep_tail=2)
    with CompactingSession(calibrate=True) as session:
        for _ in range(3):
            billed = ask(history)
    assert billed <= 8000
    assert session.calibration == pytest.approx(1.0, rel=0.1)
    for event in session.events:
        if event.provider_tokens is not None:
            assert abs(event.tokens_after - event.provider_tokens) <= 0.1 * event.provider_tokens
