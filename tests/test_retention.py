"""ctx_compact.testing.retention_check: what a summary keeps of the facts an agent needs."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import openai
import pytest

from ctx_compact import check_pairing
from ctx_compact.testing import (
    FakeProvider,
    RetentionReport,
    literal_summary,
    planted_history,
    retention_check,
)
from middleware import llm_summarizer

Message = Dict[str, Any]


def text_of(messages: List[Message]) -> str:
    return "\n".join(str(m.get("content")) for m in messages)


def test_the_history_states_every_fact_early_and_is_well_formed() -> None:
    history, facts = planted_history(40)
    assert len(history) == 1 + 4 * 40
    assert check_pairing(history) == []
    early = text_of(history[:25])
    assert all(fact.value in early for fact in facts)
    assert history[-4]["content"].startswith("Now write the postmortem")


def test_a_summary_that_keeps_nothing_loses_every_fact() -> None:
    report = retention_check(lambda dropped: "We looked at some logs.")

    assert report.kept == 0
    assert report.ratio == 0.0
    assert len(report.missing) == len(report.checks) == 11
    assert report.summary == "We looked at some logs."
    assert report.dropped > 100
    assert report.tokens_after <= 3000 < report.tokens_before
    assert "0 of 11 facts kept" in str(report)
    assert "LOST" in str(report)


def test_without_a_summary_the_facts_are_gone_with_the_dropped_messages() -> None:
    # The check measures the summary: compaction alone keeps none of them.
    report = retention_check(lambda dropped: "", max_tokens=3000)
    assert report.kept == 0


def test_a_literal_rolling_summary_keeps_every_fact() -> None:
    calls: List[Any] = []

    def summarize(dropped: List[Message], previous: Optional[str] = None) -> str:
        calls.append((len(dropped), previous))
        earlier = [] if previous is None else [{"role": "user", "content": previous}]
        return literal_summary(earlier + dropped)

    report = retention_check(summarize, rounds=4)

    assert isinstance(report, RetentionReport)
    assert report.kept == 11, str(report)
    assert all(check.how == "verbatim" for check in report.checks)
    # Rolling: each call got only what was dropped since, and the previous summary.
    assert len(calls) >= 3
    assert calls[0][1] is None
    assert all(previous is not None for _, previous in calls[1:])
    assert sum(count for count, _ in calls) == report.dropped
    assert report.summary in text_of(list(report.messages))


def test_ask_checks_the_facts_a_paraphrase_may_keep() -> None:
    asked: List[str] = []

    def paraphrase(dropped: List[Message]) -> str:
        return "Incident INC-40917; rolled back to the previous release (v2.14.3)."

    def ask(messages: List[Message], question: str) -> str:
        asked.append(question)
        return "v2.14.3" if "version" in question else "I do not know."

    report = retention_check(paraphrase, ask=ask)
    by_name = {check.fact.name: check for check in report.checks}

    assert by_name["rollback"].kept
    assert by_name["rollback"].how == "asked"
    assert not by_name["standing rule"].kept
    assert by_name["incident id"].kept
    assert by_name["incident id"].how == "verbatim"
    assert len(asked) == 5  # the rule, the decision, the error and its fix, the task


# The task ending llm_summarizer's cache-aligned requests, first and rolling.
KEEP = " Keep the summary under 900 tokens. Call no tool."
TASK = "\n\nSummarize the last 2 messages of the conversation above." + KEEP
ROLLING = (
    "\n\nThe summary so far is the summary message above, after the opening messages:"
    " update it with the last 1 messages of the conversation." + KEEP
)


@pytest.mark.parametrize("shape", ["gemini", "bedrock"])
def test_literal_summary_reads_the_task_of_an_aligned_request_in_each_shape(shape: str) -> None:
    # The instructions (with a rule of their own) and the task end the request, as a content
    # of their own (Gemini) or as the last block of the last user message (Bedrock).
    def says(role: str, text: str) -> Dict[str, Any]:
        key = "parts" if shape == "gemini" else "content"
        return {"role": role, key: [{"text": text}]}

    instructions = "Never round a number."
    head = says("user", "Always answer in French.")
    asked = [
        says("model" if shape == "gemini" else "assistant", "We chose v2.1 because it is stable.")
    ]
    asked.append(says("user", "Open task: deploy https://example.com/app after the review."))
    if shape == "gemini":
        request = [head, *asked, says("user", instructions + TASK)]
    else:
        last = {**asked[-1], "content": [*asked[-1]["content"], {"text": instructions + TASK}]}
        request = [head, asked[0], last]
    assert literal_summary(request) == literal_summary(asked)
    assert "Never round" not in literal_summary(request)
    assert "French" not in literal_summary(request)
    # Rolling: the summary so far, just before the messages named, is summarized too.
    rolling = [head, says("user", "- Always use UTC."), asked[-1], says("user", ROLLING)]
    assert literal_summary(rolling) == literal_summary(rolling[1:3])
    assert "UTC" in literal_summary(rolling)


def test_through_the_kits_scripted_model_offline() -> None:
    with FakeProvider(reply=literal_summary) as provider:
        client = openai.OpenAI(base_url=provider.openai_url, api_key="test", max_retries=0)

        def summarize(dropped: List[Message]) -> str:
            prompt = [
                {"role": "system", "content": "Summarize; keep every identifier verbatim."},
                *dropped,
                {"role": "user", "content": "Summarize the conversation above."},
            ]
            reply = client.chat.completions.create(model="gpt-4o", messages=prompt)
            return reply.choices[0].message.content or ""

        report = retention_check(summarize, rounds=2)

    assert report.kept == 11, str(report)
    assert len(provider.requests) == 2
    assert report.summary is not None
    assert "## Identifiers, paths, URLs, numbers and names" in report.summary


def test_bad_arguments_and_an_async_summarizer_are_refused() -> None:
    async def summarize(dropped: List[Message]) -> str:
        return "never awaited"

    with pytest.raises(TypeError, match="sync summarizer"):
        retention_check(summarize)
    with pytest.raises(TypeError, match="summarize"):
        retention_check("summary")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="turns must be at least 7"):
        retention_check(lambda d: "", turns=3)
    with pytest.raises(ValueError, match="rounds must be at least 1"):
        retention_check(lambda d: "", rounds=0)


def test_the_ready_summarizer_with_its_default_prompt_keeps_every_fact_of_a_literal_model() -> None:
    # The harness's figure for llm_summarizer's default prompt: with a model that follows
    # it literally, every fact; a real model's figure is measured with that model.
    with FakeProvider(reply=literal_summary) as provider:
        client = openai.OpenAI(base_url=provider.openai_url, api_key="test", max_retries=0)
        report = retention_check(llm_summarizer(client, model="gpt-4o"))

    assert report.kept == 11, str(report)
    asked = provider.requests[-1].body["messages"]
    assert asked[0]["role"] == "system"
    assert "## Identifiers, paths, URLs, numbers and names" in asked[0]["content"]
    assert "<previous_summary>" in asked[-1]["content"]  # rolled over the rounds
    assert report.summary is not None
    assert report.summary.startswith("## Goal and standing instructions")
