"""``llm_summarizer``: a ready ``summarize=`` that asks a model, through the user's own client.

The work of one summary is written once, as a generator of prompts (``_Settings.rounds``):
it renders the dropped messages, packs them into chunks that fit the
summarizer's input bound, and rolls the summary over the chunks. The sync and
async summarizers are short loops over it that differ only in how they wait
and how they bound the whole work by ``timeout``. What a client is and how to
call it is its SDK module's (``sdks.SummaryApi``); a plain callable is called
with the prompt messages.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import hashlib
import json
import threading
import time
from collections.abc import Mapping
from operator import attrgetter
from typing import (
    Any,
    Awaitable,
    Callable,
    Dict,
    Generator,
    List,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
    Union,
)

import anyio

from ctx_compact._contract import (
    compact_json,
    default_count_tokens,
    media_parts,
    message_views,
    must,
    sdk_dump,
)

from ._call_request import CallRequest
from ._callables import is_async_callable, qualified_name
from ._state import SummarizerCall, report_usage
from ._summary_usage import SummaryUsage
from .sdks import (
    SUMMARY_CLIENTS,
    Alignment,
    PromptMessages,
    SummaryApi,
    SummaryClient,
    summary_client,
)

DEFAULT_INSTRUCTIONS = """\
You write the summary that replaces the earlier part of a conversation between a user and an \
AI agent. The agent goes on from your summary alone, so keep everything it needs to continue \
the work. Write these sections, in this order, under these headings:

## Goal and standing instructions
The user's goal, and every rule, preference or constraint they set that still applies.

## Decisions
What was decided, and why.

## Identifiers, paths, URLs, numbers and names
Every identifier, file path, URL, number and name that appeared, verbatim: never paraphrase, \
round or shorten them.

## Tool results
What each tool call found: the tool, what it was asked, and what it returned that matters.

## Errors and resolutions
Every error met, and how it was resolved (or that it was not).

## Open tasks and the latest request
What remains to be done, and the user's latest request, in their own words.

When a previous summary is given, update it with the new messages: keep everything in it \
that still holds, add what is new and correct what changed; never start over. Write "None." \
under a heading with nothing to report. Do not answer the user or continue the conversation: \
write the summary only."""

DEFAULT_MAX_SUMMARY_TOKENS = 2_000
DEFAULT_MAX_INPUT_TOKENS = 32_000
DEFAULT_TIMEOUT = 60.0

# Seconds a request's own timeout leaves beyond the summarizer's deadline, so that the
# deadline ends the work first and says so, rather than the client's timeout error.
_GRACE = 1.0
# The least room a request must leave for the previous summary and the messages.
_MIN_ROOM = 256
_CUT = "\n[... {} characters cut to fit the summarizer's input ...]"

Prompt = PromptMessages


class Aligned(NamedTuple):
    """A cache-aligned request, ready but for its timeout: the call's keyword arguments."""

    request: Dict[str, Any]


# A summary's rounds: the prompts (or the one aligned request) to send, each answered
# with the model's text; it returns the summary.
Rounds = Generator[Union[Prompt, Aligned], str, str]


def _tokens(text: str) -> int:
    # The library's estimator, over the text as a JSON string.
    return default_count_tokens(text)


def _cut(text: str, tokens: int) -> str:
    """``text`` cut to about ``tokens`` estimated tokens, saying how much went."""
    if _tokens(text) <= tokens:
        return text
    keep = max(tokens * 4 - 80, 0)
    while keep and _tokens(text[:keep] + _CUT.format(len(text) - keep)) > tokens:
        keep = keep * 9 // 10  # non-ASCII text counts more units per character
    return text[:keep] + _CUT.format(len(text) - keep)


def _at(value: Any, path: Sequence[Any], new: Any) -> Any:
    """``value`` with what ``path`` leads to replaced by ``new``; copies only along the path."""
    if not path:
        return new
    head, rest = path[0], path[1:]
    out: Any = dict(value) if isinstance(value, Mapping) else list(value)
    out[head] = _at(value[head], rest, new)
    return out


def _rendered(message: Any) -> str:
    """One dropped message as the summarizer reads it: its JSON, as the estimator writes it,
    each image, document or recording in it named instead of sent (its payload would only
    fill the summarizer's input)."""
    try:
        (view,) = message_views([message])
        for media in media_parts(view):
            named = " ".join(filter(None, (media.mime, media.kind)))
            view = _at(view, media.path, {"omitted": named})
        return compact_json(view)
    except Exception:  # content JSON cannot hold, or no message at all: its repr
        return repr(message)


def _user_message(previous: Optional[str], messages: Sequence[str], max_summary: int) -> str:
    parts = []
    if previous is not None:
        parts.append(f"<previous_summary>\n{previous}\n</previous_summary>")
    parts.append("<messages>\n" + "\n".join(messages) + "\n</messages>")
    task = (
        "Update the previous summary with the messages above."
        if previous is not None
        else "Summarize the messages above."
    )
    parts.append(f"{task} Keep the summary under {max_summary} tokens.")
    return "\n\n".join(parts)


class _Settings:
    """The checked options of one summarizer: what a summary's rounds need."""

    def __init__(self, instructions: str, max_summary: int, max_input: int) -> None:
        self.instructions = instructions
        self.max_summary = max_summary
        self.max_input = max_input
        # What every request holds besides the previous summary and the messages, in the
        # library's estimate of the prompt messages (the bound's unit).
        fixed = sum(map(default_count_tokens, self.prompt("", [])))
        self.room = max_input - fixed
        if self.room < _MIN_ROOM:
            raise must(
                "max_input_tokens",
                f"at least {fixed + _MIN_ROOM} with these instructions (room for the "
                "previous summary and the messages)",
                max_input,
                ValueError,
            )

    def prompt(self, previous: Optional[str], messages: Sequence[str]) -> Prompt:
        """The prompt messages of one request: the instructions, then the previous summary
        and ``messages`` (their texts) in one user message."""
        user = _user_message(previous, messages, self.max_summary)
        return [
            {"role": "system", "content": self.instructions},
            {"role": "user", "content": user},
        ]

    def instruction(self, rolling: bool, count: int) -> str:
        """The message that ends a cache-aligned request: the instructions, then the task
        on the conversation above it."""
        if rolling:
            task = (
                "The summary so far is the summary message above, after the opening "
                f"messages: update it with the last {count} messages of the conversation."
            )
        else:
            task = f"Summarize the last {count} messages of the conversation above."
        return (
            f"{self.instructions}\n\n{task} Keep the summary under {self.max_summary} "
            "tokens. Call no tool."
        )

    def aligned(
        self,
        api: SummaryApi,
        request: Optional[Mapping[str, Any]],
        model: Optional[str],
        dropped: Sequence[Any],
        previous: Optional[str],
    ) -> Optional[Aligned]:
        """The cache-aligned request for ``dropped``, or ``None`` where it cannot be made.

        It repeats the request's prefix as the conversation's last request sent it
        (``CallRequest.sent_before``, then ``dropped``) with the request's own model,
        and ends with ``instruction``, made by ``api``; there is none for a call's
        keyword arguments that name another model or no SDK request, for a request
        of another API, for an API without one or a request it cannot align, and
        for a request over the input bound (today's chunked requests then serve).
        """
        if not isinstance(request, CallRequest):
            return None
        if model is None or request.get(api.model_key) != model:
            return None  # another model's cache would not serve it
        messages = [*request.sent_before, *dropped]
        instruction = self.instruction(previous is not None, len(dropped))
        made = api.align(Alignment(request, messages, instruction, self.max_summary), request.api)
        if made is None:
            return None
        try:
            size = default_count_tokens(json.loads(json.dumps(made, default=_sent)))
        except (TypeError, ValueError):  # messages JSON cannot hold: not to be measured
            return None
        return Aligned(made) if size <= self.max_input else None

    def rounds(
        self, dropped: Sequence[Any], previous: Optional[str], aligned: Optional[Aligned] = None
    ) -> Rounds:
        """The summary of ``dropped`` rolled on from ``previous``: the ``aligned`` request
        when there is one, else one chunk per prompt.

        Each chunk holds as many dropped messages as fit beside the previous
        summary (cut to half the room when longer), and at least one (cut to
        fit when it alone does not); every prompt stays within the input bound.
        """
        if aligned is not None:
            text = yield aligned
            if text.strip():
                return text
            # No text (a tool called, a refusal): the plain prompt asks again.
        texts = [_rendered(m) for m in dropped]
        start = 0
        while True:
            if previous is not None:
                previous = _cut(previous, self.room // 2)
            room = self.room - (_tokens(previous) if previous is not None else 0)
            chunk: List[str] = []
            used = 0
            while start < len(texts):
                # Each message on its own line: one more unit beside its tokens.
                cost = _tokens(texts[start]) + 1
                if chunk and used + cost > room:
                    break
                chunk.append(texts[start] if cost <= room else _cut(texts[start], room - 1))
                used += cost
                start += 1
            previous = yield self.prompt(previous, chunk)
            if start >= len(texts):
                return previous


def _sent(value: Any) -> Any:
    """An SDK object in a request as the JSON it is sent as (a function given as a tool,
    its name), to measure the request."""
    dumped = sdk_dump(value)
    return dumped if dumped is not None else getattr(value, "__name__", str(value))


def _text(value: object, source: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{source} returned {type(value).__name__}, not the summary's text")
    return value


# One round sent: ``(prompt, seconds left) -> text``, or its awaitable.
Send = Callable[[Union[Prompt, Aligned], Optional[float]], Any]


def _sender(
    client: Any, api: Optional[SummaryApi], is_async: bool, model: Optional[str], max_summary: int
) -> Send:
    """How one prompt (or aligned request) is sent to ``client``: through ``api`` for
    an SDK client (``None``: a plain callable, given the prompt messages), whose
    usage is reported for the call being summarized (``report_usage``)."""
    if api is None:
        return lambda prompt, _left: client(prompt)
    method = attrgetter(api.method)(client)

    def arguments(prompt: Union[Prompt, Aligned], left: Optional[float]) -> Dict[str, Any]:
        if isinstance(prompt, Aligned):
            made = prompt.request
        else:
            assert model is not None
            made = api.request(model, prompt, max_summary)
        # None would lift the client's own timeout.
        return made if left is None else api.timed(made, left)

    def text(response: Any) -> str:
        figures = api.usage(response)
        if figures is not None:
            report_usage(SummaryUsage(*figures, requests=1))
        return api.text(response)

    if is_async:

        async def asend(prompt: Union[Prompt, Aligned], left: Optional[float]) -> str:
            return text(await method(**arguments(prompt, left)))

        return asend
    return lambda prompt, left: text(method(**arguments(prompt, left)))


def _api(
    found: Optional[SummaryClient], request: Optional[Mapping[str, Any]]
) -> Optional[SummaryApi]:
    """The client's API a summary for the call of ``request`` goes to: the first of its
    APIs for anything but an SDK request (``SummaryClient.api_for``)."""
    if found is None:
        return None
    if isinstance(request, CallRequest):
        return found.api_for(request, request.api)
    return found.apis[0]


def _model(
    given: Optional[str], api: Optional[SummaryApi], request: Optional[Mapping[str, Any]]
) -> Optional[str]:
    """The model to summarize with: the one given, else the one of the call being compacted."""
    if api is None or given is not None:
        return given
    named = request.get(api.model_key) if isinstance(request, Mapping) else None
    if not isinstance(named, str):
        raise ValueError(
            "the call being compacted names no model the summarizer can see (a decorated "
            "function's model is inside it); give llm_summarizer a model="
        )
    return named


def _in_thread(work: Callable[[], str], timeout: Optional[float]) -> str:
    """``work()`` on a thread of its own, waited for at most ``timeout`` seconds.

    A sync client cannot be interrupted: past the timeout the call goes on without
    its summary, and the thread ends on its own (each request's own timeout is the
    seconds that were left, and ``_GRACE``).
    """
    if timeout is None:
        return work()
    future: concurrent.futures.Future[str] = concurrent.futures.Future()
    context = contextvars.copy_context()

    def run() -> None:
        try:
            future.set_result(context.run(work))
        except BaseException as exc:
            future.set_exception(exc)

    threading.Thread(target=run, name="llm_summarizer", daemon=True).start()
    try:
        return future.result(timeout)
    except concurrent.futures.TimeoutError:
        raise TimeoutError(
            f"the summarizer took longer than its timeout of {timeout:g} s"
        ) from None


def _identity(client: Any, found: Optional[SummaryClient], *parts: object) -> str:
    """A name that differs between summarizers that write different summaries: the
    store keys summaries by the summarizer's name."""
    what = qualified_name(client) if found is None else type(client).__qualname__
    material = "\0".join(map(str, (what, *parts))).encode("utf-8", "surrogatepass")
    return "llm_summarizer_" + hashlib.blake2b(material, digest_size=8).hexdigest()


def _checked_tokens(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise must(name, "an int", value)
    if value <= 0:
        raise must(name, "positive", value, ValueError)
    return value


def llm_summarizer(
    client: Any,
    *,
    model: Optional[str] = None,
    instructions: Optional[str] = None,
    max_summary_tokens: int = DEFAULT_MAX_SUMMARY_TOKENS,
    max_input_tokens: int = DEFAULT_MAX_INPUT_TOKENS,
    cache_aligned: bool = True,
    timeout: Optional[float] = DEFAULT_TIMEOUT,
) -> Callable[..., Union[str, Awaitable[str]]]:
    """A ready summarizer for ``summarize=``: your own model writes the summaries.

    It rolls (it takes ``previous``): the previous summary is updated with what
    was dropped since. With an SDK client, for an intercepted SDK request (or a
    budgeted SDK method) summarized with its own model, the request is
    cache-aligned: it repeats the conversation's prefix as its last request sent
    it (the call's system prompt, tools, model, head, the previous summary's
    message as inserted, then the dropped messages) and ends with one message of
    ``instructions``, so the provider's prompt cache serves the rest; a reply to
    it without text is asked again with the plain prompt. Otherwise (or over
    ``max_input_tokens``, or ``cache_aligned=False``) the dropped messages are
    sent as their JSON (media named, not sent) inside one user message, after a
    system prompt of ``instructions`` (the Responses API's ``instructions``);
    those beyond
    ``max_input_tokens`` are summarized in chunks, each chunk's summary rolled on
    into the next. What each model call reports of its usage is on the event
    (``summary_usage``). A summarizer for a sync client is a plain function and one for
    an async client a coroutine function, so the library runs each the right way.
    Its model calls are never compacted or reported by an active
    ``CompactingSession``, even through a client the session intercepts.

    Args:
        client: An ``openai.OpenAI`` or ``openai.AsyncOpenAI`` client (Chat
            Completions, and the Responses API for a Responses call) or its
            ``responses`` resource (the Responses API for every summary, sent
            with ``store: false``), an ``anthropic.Anthropic`` or
            ``anthropic.AsyncAnthropic`` client, a ``google.genai.Client`` or its
            ``client.aio``, a boto3 ``bedrock-runtime`` client, ``litellm`` or
            ``litellm.acompletion``, or any callable (sync or async) that takes the
            prompt messages (a ``{"role": "system", ...}`` message, then one
            ``{"role": "user", ...}`` message) and returns the model's text.
        model: The model that writes the summaries. ``None`` (the default) uses
            the model of the call being compacted, where the summarizer can see
            it: a call through a session's interception, or a bound
            ``budgeted(...)(client.chat.completions.create)``; a decorated
            function's model is inside its body, so there give ``model=`` (else
            each summary fails, named in ``summary_error``). Not taken with a
            plain callable, which picks its own.
        instructions: The system prompt, replacing ``DEFAULT_INSTRUCTIONS`` (its
            sections: the goal and standing instructions, decisions, identifiers
            verbatim, tool results, errors, open tasks and the latest request).
        max_summary_tokens: The longest summary, sent as the request's
            ``max_tokens`` (``max_completion_tokens`` for OpenAI Chat Completions,
            ``max_output_tokens`` for the Responses API and Gemini, ``maxTokens``
            for Bedrock).
        max_input_tokens: The most a summarization request may hold, in the
            library's estimated tokens: the instructions, the previous summary
            and the dropped messages (and, cache-aligned, the repeated prefix,
            system prompt and tools: over it, today's chunked requests serve).
        cache_aligned: Whether to send cache-aligned requests where they can be
            made (OpenAI Chat Completions and Responses, but not for a Responses
            call whose server holds part of its prefix: ``previous_response_id``,
            ``conversation``, a stored ``prompt``; Anthropic Messages, Bedrock
            Converse, google-genai and LiteLLM); ``False``
            always sends the instructions as the system prompt and the dropped
            messages as JSON.
        timeout: Seconds the whole work of one summary may take, every chunk and
            the client's retries included; ``None`` for no limit. Past it the
            summarizer raises ``TimeoutError``, which costs the call its summary,
            not the call (the event's ``summary_error``).

    Returns:
        ``summarize(dropped, *, previous=None, request=None) -> str``, or a
        coroutine function of that shape for an async client.

    Raises:
        TypeError: ``client`` is neither a supported client nor callable, or an
            option has the wrong type.
        ValueError: An option's value is out of range, ``model`` is given with a
            plain callable, or ``max_input_tokens`` leaves too little room beside
            the instructions.
    """
    found = summary_client(client)
    if found is None and not callable(client):
        raise must(
            "client",
            f"a client ({', '.join(SUMMARY_CLIENTS)}) or a callable",
            client,
        )
    if model is not None and not isinstance(model, str):
        raise must("model", "a model's name or None", model)
    if found is None and model is not None:
        raise must(
            "model", "None with a plain callable (it picks its own model)", model, ValueError
        )
    if instructions is None:
        instructions = DEFAULT_INSTRUCTIONS
    elif not isinstance(instructions, str):
        raise must("instructions", "a str or None", instructions)
    max_summary = _checked_tokens(max_summary_tokens, "max_summary_tokens")
    max_input = _checked_tokens(max_input_tokens, "max_input_tokens")
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
            raise must("timeout", "a number of seconds or None", timeout)
        if not timeout > 0:
            raise must("timeout", "positive", timeout, ValueError)
    if not isinstance(cache_aligned, bool):
        raise must("cache_aligned", "a bool", cache_aligned)
    settings = _Settings(instructions, max_summary, max_input)

    is_async = found.is_async if found is not None else is_async_callable(client)

    def plan(
        dropped: List[Any], previous: Optional[str], request: Optional[Mapping[str, Any]]
    ) -> Tuple[Rounds, Send]:
        """One summary's rounds, and how each is sent."""
        api = _api(found, request)
        chosen = _model(model, api, request)
        ready = None
        if cache_aligned and api is not None:
            ready = settings.aligned(api, request, chosen, dropped, previous)
        rounds = settings.rounds(dropped, previous, ready)
        return rounds, _sender(client, api, is_async, chosen, max_summary)

    source = f"{type(client).__name__} summarizer" if found is not None else repr(client)

    if is_async:

        async def asummarize(
            dropped: List[Any],
            *,
            previous: Optional[str] = None,
            request: Optional[Mapping[str, Any]] = None,
        ) -> str:
            rounds, send = plan(dropped, previous, request)
            with SummarizerCall(), anyio.fail_after(timeout) as scope:
                prompt = next(rounds)
                while True:
                    left = (
                        None if timeout is None else scope.deadline - anyio.current_time() + _GRACE
                    )
                    try:
                        prompt = rounds.send(_text(await send(prompt, left), source))
                    except StopIteration as done:
                        return str(done.value)

        summarize: Callable[..., Any] = asummarize
    else:

        def work(rounds: Rounds, send: Send, deadline: Optional[float]) -> str:
            prompt = next(rounds)
            while True:
                left = None if deadline is None else deadline - time.monotonic() + _GRACE
                try:
                    prompt = rounds.send(_text(send(prompt, left), source))
                except StopIteration as done:
                    return str(done.value)

        def summarize_(
            dropped: List[Any],
            *,
            previous: Optional[str] = None,
            request: Optional[Mapping[str, Any]] = None,
        ) -> str:
            rounds, send = plan(dropped, previous, request)
            with SummarizerCall():
                deadline = None if timeout is None else time.monotonic() + timeout
                return _in_thread(lambda: work(rounds, send, deadline), timeout)

        summarize = summarize_
    name = _identity(client, found, model, instructions, max_summary, max_input, cache_aligned)
    summarize.__name__ = summarize.__qualname__ = name
    return summarize
