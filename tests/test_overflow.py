"""Recognising a provider's refusal for context length, without importing an SDK."""

from __future__ import annotations

from typing import Any, Optional

import pytest

from middleware._overflow import RETRY_MARGIN, SHRINK_WITHOUT_FIGURES, Overflow, overflow_of


def error(module: str, name: str, text: str, status: Optional[int] = 400, **attrs: Any) -> Any:
    """An exception of a class that claims to live in ``module``, as the SDKs' do."""
    cls = type(name, (Exception,), {"__module__": module})
    err = cls(text)
    err.status_code = status
    err.message = text
    for key, value in attrs.items():
        setattr(err, key, value)
    return err


OPENAI = (
    "This model's maximum context length is 1500 tokens. However, your messages resulted in "
    "1800 tokens. Please reduce the length of the messages."
)


def test_openai_chat_names_both_figures() -> None:
    err = error("openai", "BadRequestError", OPENAI, code="context_length_exceeded")
    assert overflow_of(err) == Overflow(tokens=1800, limit=1500)


def test_the_responses_api_names_none() -> None:
    err = error(
        "openai._exceptions",
        "BadRequestError",
        "Your input exceeds the context window of this model.",
        code="context_length_exceeded",
    )
    assert overflow_of(err) == Overflow()


def test_anthropic_prompt_is_too_long() -> None:
    err = error(
        "anthropic._exceptions",
        "BadRequestError",
        "Error code: 400 - {'type': 'error', 'error': {'type': 'invalid_request_error', "
        "'message': 'prompt is too long: 210 tokens > 200 maximum'}}",
    )
    assert overflow_of(err) == Overflow(tokens=210, limit=200)


def test_litellm_context_window_exceeded_embeds_the_providers_text() -> None:
    err = error(
        "litellm.exceptions",
        "ContextWindowExceededError",
        "litellm.ContextWindowExceededError: AnthropicError - prompt is too long: 45 tokens > 3 "
        "maximum",
        status=None,
    )
    assert overflow_of(err) == Overflow(tokens=45, limit=3)


@pytest.mark.parametrize(
    "err",
    [
        ValueError(OPENAI),  # the right text from code that is not an SDK
        error("myapp.errors", "BadRequestError", OPENAI, code="context_length_exceeded"),
        error("openai", "InternalServerError", OPENAI, status=500),
        error("openai", "BadRequestError", "Invalid parameter: messages with role 'tool'"),
        error("anthropic", "RateLimitError", "prompt is too long: 2 tokens > 1 maximum", 429),
    ],
)
def test_other_errors_are_not_refusals_for_length(err: Exception) -> None:
    assert overflow_of(err) is None


def test_the_retry_budget() -> None:
    # At the refused prompt's ratio (1800 for 1000 estimated), the retry lands under 1500.
    budget = Overflow(tokens=1800, limit=1500).retry_budget(1000)
    assert budget == pytest.approx(1000 * 1500 / 1800 * (1 - RETRY_MARGIN))
    assert budget * 1.8 < 1500
    assert Overflow().retry_budget(1000) == 1000 * SHRINK_WITHOUT_FIGURES


def test_a_failed_retry_chains_the_refusal() -> None:
    from middleware import budgeted

    refusal = error("openai", "BadRequestError", OPENAI, code="context_length_exceeded")
    calls: list[Any] = []

    @budgeted(max_tokens=1500, on_overflow="retry")
    def ask(messages: Any) -> None:
        calls.append(messages)
        if len(calls) == 1:
            raise refusal
        raise ValueError("the retry failed too")

    with pytest.raises(ValueError, match="the retry failed") as raised:
        ask([{"role": "user", "content": "hi"}] * 3)
    assert len(calls) == 2
    assert raised.value.__context__ is refusal
