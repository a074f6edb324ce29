"""The SDKs that ``intercept=`` names as a whole: the interface each one's module fills in.

Everything about one SDK lives in its module here (``openai``, ``anthropic``,
``litellm``, ``google_genai``, ``bedrock``) as one ``Sdk`` value: its
interception points, the routes of its requests and where their messages are
(or a site of its own that finds them), its "not given" sentinels, its stream
and raw-response classes, its usage fields and its context-length errors. The
rest of the middleware reads them through ``SDKS`` and the merged tables below
and names no SDK. Adding one means one module here, its line in ``SDKS``, its
tests and a page.

Nothing here imports an SDK: a module only describes one.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import (
    Any,
    Callable,
    Dict,
    FrozenSet,
    List,
    NamedTuple,
    Optional,
    Pattern,
    Tuple,
)

from ctx_compact._contract import CountTokens


@dataclass(frozen=True)
class Route:
    """One API an SDK request may go to, and where its messages are in the body.

    Attributes:
        path: The end of the request's path (``/chat/completions``).
        key: The body's key holding the messages.
        counted: Keys sent beside them, counted against the budget, never dropped
            (the system prompt's: no route counts tool schemas).
    """

    path: str
    key: str
    counted: Tuple[str, ...] = ()


@dataclass(frozen=True)
class Point:
    """One interception point: ``module``, the attribute path in it, and its name in events.

    ``stream``: the point returns a stream of responses (a generator, sync or
    async), each read for usage as the caller iterates; a sync generator is
    advanced to its first response inside the call, so that a refusal before any
    response reaches ``on_overflow="retry"``.
    """

    module: str
    attr: str
    name: str
    stream: bool = False


@dataclass(frozen=True)
class Figures:
    """An error text naming both figures; ``tokens`` and ``limit`` are its group numbers."""

    pattern: Pattern[str]
    tokens: int
    limit: int


# A summarization request in the middleware's own terms, before an SDK's ``SummaryApi``
# turns it into a call: the model, the prompt as chat messages (a system message,
# then one user message) and the reply's token bound.
PromptMessages = List[Dict[str, str]]


class Alignment(NamedTuple):
    """What a cache-aligned summarization request is made of (``SummaryApi.aligned``)."""

    body: Mapping[str, Any]  # the request of the call being compacted, one of the API's own
    messages: List[Any]  # the conversation's prefix as it was sent, then the dropped messages
    instruction: str  # the text of the message that ends the request
    max_tokens: int  # the reply's token bound


# A cache-aligned request's keyword arguments, or ``None`` when the body's cannot be aligned.
AlignedRequest = Callable[[Alignment], Optional[Dict[str, Any]]]


def timeout_keyword(request: Dict[str, Any], seconds: float) -> Dict[str, Any]:
    """``request`` with ``timeout=seconds``, as the OpenAI and Anthropic SDKs take it."""
    return {**request, "timeout": seconds}


@dataclass(frozen=True)
class SummaryApi:
    """How ``middleware.llm_summarizer`` asks one of the SDK's clients for a summary.

    Attributes:
        clients: The class names of its sync clients (their subclasses count too).
        async_clients: The class names of its async clients.
        method: The call's attribute path on a client (``"chat.completions.create"``).
        request: ``(model, prompt, max_tokens)`` to the call's keyword arguments;
            ``prompt`` is a system message, then one user message.
        text: The reply's text, read off the call's response.
        usage: The response's input tokens (the cached ones included), cached
            input tokens and output tokens; ``None`` when it reports none.
        aligned: How a cache-aligned request is made from an ``Alignment``, for an
            API that offers one: the body's model, system prompt and tools, the
            messages and the instruction after them, tool use off where the
            provider's cache allows it. It is asked only for a body this API
            ``speaks``.
        model_key: The key of the compacted call's request (``Located.request``)
            that names its model, for a summarizer given no ``model=``.
        timed: A request's keyword arguments with the seconds left for it
            (``timeout_keyword``: a ``timeout`` keyword argument).
        route: The ``CallRequest.api`` of the calls this API answers
            (``"openai /responses"``); ``None`` where no intercepted call is one.
        key: The key of its requests holding the messages (``"input"``), which
            also tells a call's keyword arguments (``CallRequest.api`` ``None``)
            for this API apart.
        recognise: For clients that are no instance of a client class (a module,
            a function): the method's attribute path on ``client`` and whether it
            is async, else ``None``. Their names go in ``clients`` and
            ``async_clients``, for the errors.
    """

    clients: FrozenSet[str]
    async_clients: FrozenSet[str]
    method: str
    request: Callable[[str, PromptMessages, int], Dict[str, Any]]
    text: Callable[[Any], str]
    usage: Callable[[Any], Optional[Tuple[int, int, int]]]
    aligned: Optional[AlignedRequest] = None
    model_key: str = "model"
    timed: Callable[[Dict[str, Any], float], Dict[str, Any]] = timeout_keyword
    recognise: Optional[Callable[[Any], Optional[Tuple[str, bool]]]] = None
    route: Optional[str] = None
    key: str = "messages"

    def speaks(self, request: Mapping[str, Any], api: Optional[str]) -> bool:
        """Whether ``request``, the body of a call to ``api`` (``None``: a call's keyword
        arguments), is one of this API's own."""
        return api == self.route if api is not None else self.key in request

    def align(self, made: Alignment, api: Optional[str]) -> Optional[Dict[str, Any]]:
        """The cache-aligned request ``made`` asks for, or ``None`` where this API offers
        none or ``made.body``, the body of a call to ``api``, is not one of its own."""
        if self.aligned is None or not self.speaks(made.body, api):
            return None
        return self.aligned(made)


@dataclass(frozen=True)
class Sdk:
    """Everything the middleware knows about one SDK.

    Attributes:
        name: What ``intercept=`` takes, and the SDK's top-level package unless
            ``packages`` says otherwise.
        points: Where its calls pass.
        routes: For points that take a request (``request(options)``), the routes
            whose body holds messages; empty when the points take the messages.
        messages_arg: For points that take the messages themselves, their argument.
        site: For points whose messages need the SDK's own reading (which calls
            carry them, what is counted beside them): ``site(fn, count_tokens)``
            makes the ``_calls.Site`` of the patched ``fn``.
        packages: The packages (``"google.genai"``) whose classes are this SDK's
            results and errors; ``(name,)`` when empty.
        sentinels: The module and class names of its "not given" values, which a
            request body holds for keys the caller left out.
        streams: Its stream classes iterated synchronously.
        async_streams: Its stream classes iterated with ``async for``.
        either_streams: Its stream classes that serve both ways (async when the call is).
        raw_responses: Its raw-response classes, whose usage is read once parsed.
        usage_keys: The attributes (or keys) of a response that hold its usage.
        usage: The usage fields holding the prompt size, each with the fields
            counted separately and added back (cached parts).
        usage_holders: Attributes (or keys) of a stream event that hold a response
            with usage.
        stream_keys: Keys of a response mapping that hold its stream (boto3's
            ``converse_stream`` returns ``{"stream": EventStream, ...}``).
        overflow_classes: Error class names that always mean a refusal for length.
        overflow_codes: Error codes that mean one (with HTTP status 400).
        overflow_texts: Error texts that always mean a refusal for length.
        overflow_figures: Error texts naming the refused prompt's size and the limit.
        summary: How ``llm_summarizer`` calls its clients, one ``SummaryApi`` per
            API it may ask: a client is served by every one that names its class,
            the first of them for a call of none of their APIs.
    """

    name: str
    points: Tuple[Point, ...]
    routes: Tuple[Route, ...] = ()
    messages_arg: Optional[str] = None
    site: Optional[Callable[[Any, Optional[CountTokens]], Any]] = None
    packages: Tuple[str, ...] = ()
    sentinels: Optional[Tuple[str, Tuple[str, ...]]] = None
    streams: FrozenSet[str] = frozenset()
    async_streams: FrozenSet[str] = frozenset()
    either_streams: FrozenSet[str] = frozenset()
    raw_responses: FrozenSet[str] = frozenset()
    usage_keys: Tuple[str, ...] = ("usage",)
    usage: Tuple[Tuple[str, Tuple[str, ...]], ...] = ()
    usage_holders: Tuple[str, ...] = ()
    stream_keys: Tuple[str, ...] = ()
    overflow_classes: FrozenSet[str] = frozenset()
    overflow_codes: FrozenSet[str] = frozenset()
    overflow_texts: FrozenSet[str] = frozenset()
    overflow_figures: Tuple[Figures, ...] = ()
    summary: Tuple[SummaryApi, ...] = ()

    @property
    def package_names(self) -> Tuple[str, ...]:
        """The packages whose classes are this SDK's: ``packages``, or its name."""
        return self.packages or (self.name,)

    def sentinel_types(self) -> Tuple[type, ...]:
        """The classes of the "not given" sentinels that the installed release defines."""
        if self.sentinels is None:
            return ()
        module_name, names = self.sentinels
        module = importlib.import_module(module_name)
        found = (getattr(module, name, None) for name in names)
        return tuple(kind for kind in found if isinstance(kind, type))


def figures(pattern: str, tokens: int, limit: int) -> Figures:
    """A ``Figures`` from the text of its pattern."""
    return Figures(re.compile(pattern), tokens, limit)


@dataclass(frozen=True)
class SdkTarget:
    """One interception point of an SDK named in ``intercept=``."""

    sdk: Sdk
    point: Point

    @property
    def name(self) -> str:
        """The name of the point's calls in events."""
        return self.point.name

    @property
    def path(self) -> str:
        """The point as ``intercept`` takes it: ``"module.attr"``."""
        return f"{self.point.module}.{self.point.attr}"


def field(obj: Any, name: str) -> Any:
    """``obj[name]`` of a mapping, else ``obj.name``; ``None`` when absent."""
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def _registry() -> Dict[str, Sdk]:
    from . import anthropic, bedrock, google_genai, litellm, openai

    sdks = (openai.SDK, anthropic.SDK, litellm.SDK, google_genai.SDK, bedrock.SDK)
    return {sdk.name: sdk for sdk in sdks}


# Every SDK, in the order their rules are tried (OpenAI's usage field first).
SDKS: Dict[str, Sdk] = _registry()
SDK_NAMES: Tuple[str, ...] = tuple(SDKS)


def _union(rule: str) -> FrozenSet[Any]:
    return frozenset().union(*(getattr(sdk, rule) for sdk in SDKS.values()))


def _merged(rule: str) -> Tuple[Any, ...]:
    # Every SDK's entries, in the order of SDKS, each once.
    return tuple(dict.fromkeys(item for sdk in SDKS.values() for item in getattr(sdk, rule)))


# The SDKs' rules merged, for the code that reads any SDK's results and errors.
ASYNC_STREAMS: FrozenSet[str] = _union("async_streams")
EITHER_STREAMS: FrozenSet[str] = _union("either_streams")
ALL_STREAMS: FrozenSet[str] = _union("streams") | ASYNC_STREAMS | EITHER_STREAMS
RAW_RESPONSES: FrozenSet[str] = _union("raw_responses")
OVERFLOW_CLASSES: FrozenSet[str] = _union("overflow_classes")
OVERFLOW_CODES: FrozenSet[str] = _union("overflow_codes")
OVERFLOW_TEXTS: FrozenSet[str] = _union("overflow_texts")
OVERFLOW_FIGURES: Tuple[Figures, ...] = _merged("overflow_figures")
USAGE_HOLDERS: Tuple[str, ...] = _merged("usage_holders")
USAGE_KEYS: Tuple[str, ...] = _merged("usage_keys")
STREAM_KEYS: Tuple[str, ...] = _merged("stream_keys")
# Every SDK's packages, for telling its classes from others by their module.
PACKAGES: Tuple[str, ...] = _merged("package_names")


def _usage_fields() -> Tuple[Tuple[str, Tuple[str, ...]], ...]:
    # One entry per field, in first-seen order, with every SDK's added-back parts.
    merged: Dict[str, List[str]] = {}
    for sdk in SDKS.values():
        for field, extras in sdk.usage:
            parts = merged.setdefault(field, [])
            parts.extend(e for e in extras if e not in parts)
    return tuple((field, tuple(parts)) for field, parts in merged.items())


USAGE_FIELDS: Tuple[Tuple[str, Tuple[str, ...]], ...] = _usage_fields()


def sdk_of_class(kind: type) -> bool:
    """Whether ``kind`` is defined in one of the SDKs' packages."""
    module = str(getattr(kind, "__module__", ""))
    return any(module == p or module.startswith(p + ".") for p in PACKAGES)


def is_sdk_name(target: object) -> bool:
    """Whether ``target`` names a whole SDK (``"openai"``, ``"gemini"``, ...: ``SDK_NAMES``)."""
    return isinstance(target, str) and target in SDKS


class SummaryClient(NamedTuple):
    """A client ``llm_summarizer`` can call: the APIs of its SDK that serve it, in order
    (each a ``SummaryApi``), and its kind."""

    apis: Tuple[SummaryApi, ...]
    is_async: bool

    def api_for(self, request: Mapping[str, Any], api: Optional[str]) -> SummaryApi:
        """The API a summary for ``request`` (the body of a call to ``api``) goes to: the
        first that speaks the call's own, else the first."""
        return next((each for each in self.apis if each.speaks(request, api)), self.apis[0])


# The client classes llm_summarizer can call, for its errors.
SUMMARY_CLIENTS: Tuple[str, ...] = tuple(
    dict.fromkeys(
        name
        for sdk in SDKS.values()
        for api in sdk.summary
        for name in (*sorted(api.clients), *sorted(api.async_clients))
    )
)


def summary_client(client: object) -> Optional[SummaryClient]:
    """How to ask ``client`` for a summary, when it is one of an SDK's clients (or a
    subclass of one: ``AzureOpenAI``, or a module or function its ``recognise``
    knows: ``litellm``); ``None`` otherwise."""
    for sdk in SDKS.values():
        for api in sdk.summary:
            known = None if api.recognise is None else api.recognise(client)
            if known is not None:
                method, is_async = known
                return SummaryClient((replace(api, method=method),), is_async)
    for kind in type(client).__mro__:
        module = str(getattr(kind, "__module__", ""))
        for sdk in SDKS.values():
            if not any(module == p or module.startswith(p + ".") for p in sdk.package_names):
                continue
            sync = tuple(api for api in sdk.summary if kind.__name__ in api.clients)
            if sync:
                return SummaryClient(sync, False)
            async_ = tuple(api for api in sdk.summary if kind.__name__ in api.async_clients)
            if async_:
                return SummaryClient(async_, True)
    return None


def sdk_targets(name: str) -> List[SdkTarget]:
    """The interception points of the SDK ``name``."""
    sdk = SDKS[name]
    return [SdkTarget(sdk, point) for point in sdk.points]
