"""The local provider: a stand-in for the OpenAI, Anthropic, Gemini, Bedrock and Ollama APIs.

The real ``openai``, ``anthropic``, ``google-genai`` and ``boto3`` SDKs can be
pointed at it on 127.0.0.1, so tests prove that a compacted message list is one
the providers accept, without a network::

    with FakeProvider() as provider:
        client = openai.OpenAI(base_url=provider.base_url + "/v1", api_key="test", max_retries=0)
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
        provider.requests[-1].body["messages"]

This module is the HTTP side only: it reads each request as its headers frame
it (``_framing``), records it, hands its JSON body to the route for its path
and sends the route's answer, as JSON or as a chunked event stream. What each
provider accepts, how it words a refusal, what it replies and what it counts is
that provider's module (``openai_chat``, ``responses``, ``anthropic``, ``gemini``,
``bedrock``, ``ollama``), and the model behind every route is ``_scripted``. Adding a
provider is one module with a ``Route`` (or a few) and one line in ``ROUTES``.

A request no route claims gets a 404 in the envelope of the SDK that sent it
(by ``Envelope.sdk_header``, OpenAI's otherwise); a body that is not JSON gets
the route's own 400; a shape a validator did not foresee gets a 500 naming the
exception, so a test sees what broke. Nothing else is modelled: no sampling, no
authentication (any headers are accepted and recorded, an API key or a SigV4
signature alike).

Token figures are deterministic. Every message costs ``count_tokens(message)``:
its compact JSON (``separators=(",", ":")``, ``ensure_ascii=False``), measured in
UTF-16 code units, divided by 4 and rounded up, which is also ctx-compact's
default estimator, with its media parts (images, PDFs, audio) left out and each
billed as its provider publishes instead (``_billing``). What each API sums is
said in its module. With ``prompt_cache`` on (the default), the OpenAI,
Anthropic and Bedrock routes also report the part of that sum their provider's
prompt cache would serve or write (``_cache``), and ``billing`` keeps each
reply's figures.

Standard library only, Python 3.9+. Run ``python -m ctx_compact.testing
[--port N]`` to serve in the foreground for the examples.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import socket
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple
from urllib.parse import parse_qsl, urlsplit

from . import anthropic, bedrock, gemini, ollama, openai_chat, responses
from ._api import Billing, Envelope, Json, RequestRejected, Route, Stream, Target
from ._cache import PromptCache
from ._framing import FramingError, read_body
from ._scripted import ReplySetting, ScriptedModel

__all__ = ["FakeProvider", "RecordedRequest", "main"]

#: Every route the server answers, by path; a new provider registers its own here.
ROUTES: Dict[str, Route] = {
    route.path: route
    for route in (
        openai_chat.ROUTE,
        responses.ROUTE,
        anthropic.ROUTE,
        *gemini.ROUTES,
        *bedrock.ROUTES,
        ollama.ROUTE,
    )
}
#: The envelope of a request no route claims and no ``sdk_header`` marks.
FALLBACK: Envelope = openai_chat.ROUTE.envelope
SSE_CONTENT_TYPE = "text/event-stream; charset=utf-8"


def route_for(path: str) -> Optional[Tuple[Route, Dict[str, str]]]:
    """The route that serves ``path`` and the values of its ``{name}`` segments, if any."""
    for route in ROUTES.values():
        params = route.match(path)
        if params is not None:
            return route, params
    return None


def envelope_for(path: str, headers: Dict[str, str]) -> Envelope:
    """The envelope a request's errors go out in: its route's, or its SDK's by header."""
    found = route_for(path)
    if found is not None:
        return found[0].envelope
    for envelope in (route.envelope for route in ROUTES.values()):
        if envelope.sdk_header is not None and envelope.sdk_header in headers:
            return envelope
    return FALLBACK


@dataclass(frozen=True)
class RecordedRequest:
    """One request the fake provider received.

    Attributes:
        method: The HTTP method, e.g. ``"POST"``.
        path: The URL path without the query string, e.g. ``"/v1/messages"``.
        headers: The request headers, names lower-cased.
        body: The decoded JSON body, or ``None`` when it was empty or not JSON.
        query: The query string without its ``?``, e.g. ``"beta=true"``.
    """

    method: str
    path: str
    headers: Dict[str, str]
    body: Any
    query: str = ""


# --- HTTP ---------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # A test suite's burst of parallel clients must find room in the accept queue:
    # with socketserver's 5, the kernel drops the SYNs beyond it and those clients
    # wait a second or more to try again.
    request_queue_size = 128
    provider: FakeProvider

    def __init__(self, address: Tuple[str, int], handler: Any) -> None:
        # Each open connection and the thread serving it, so close() can end them.
        self._connections: Dict[socket.socket, threading.Thread] = {}
        self._connections_lock = threading.Lock()
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        # ThreadingMixIn's, except that the thread is remembered with its connection.
        thread = threading.Thread(
            target=self.process_request_thread,
            args=(request, client_address),
            name="fake-provider-connection",
            daemon=True,
        )
        with self._connections_lock:
            self._connections[request] = thread
        thread.start()

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.pop(request, None)
        super().shutdown_request(request)

    def close_connections(self, grace: float = 2.0) -> None:
        """End every open connection; a request being answered is answered first.

        Shutting a connection for reading makes its handler see the end of the
        stream once the response in hand is written. One whose handler is still
        busy after ``grace`` seconds (a stream its client does not read) is cut.
        """
        with self._connections_lock:
            connections = list(self._connections.items())
        for connection, _ in connections:
            _shutdown(connection, socket.SHUT_RD)
        deadline = time.monotonic() + grace
        for connection, thread in connections:
            if thread is threading.current_thread():
                continue  # close() called from a reply callable
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                _shutdown(connection, socket.SHUT_RDWR)
                thread.join(1.0)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up mid-stream is normal; anything else is a bug.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def _shutdown(connection: socket.socket, how: int) -> None:
    with contextlib.suppress(OSError):  # already closed by its handler
        connection.shutdown(how)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "FakeProvider/1.0"
    # Idle keep-alive connections end on their own instead of pinning a thread.
    timeout = 10
    # A response goes out in one send: headers and body are buffered together and
    # flushed after each request (a stream flushes each event). Written apart, the
    # body waited for the client's delayed ACK of the headers, about 40 ms a request.
    # No Nagle either, so a stream's events are not held back behind one another.
    wbufsize = 64 * 1024
    disable_nagle_algorithm = True
    server: _Server
    _streaming = False  # set once a stream's headers are sent

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self._serve("POST")

    def do_GET(self) -> None:
        self._serve("GET")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def handle_expect_100(self) -> bool:
        answered = super().handle_expect_100()
        self.wfile.flush()  # wfile is buffered, and the client waits for this to send the body
        return answered

    def _serve(self, method: str) -> None:
        self._streaming = False  # a keep-alive connection reuses the handler
        provider = self.server.provider
        url = urlsplit(self.path)
        path = url.path
        headers = {name.lower(): value for name, value in self.headers.items()}
        envelope = envelope_for(path, headers)
        try:
            raw = read_body(self.headers, self.rfile)
        except FramingError as broken:
            provider._record(RecordedRequest(method, path, headers, None, url.query))
            error = envelope.framing_error(str(broken), broken.status)
            self._send_json(error.status, error.body, envelope, close=True)
            return
        try:
            body: Any = json.loads(raw) if raw else None
            parsed = True
        except (ValueError, RecursionError):  # RecursionError: arrays nested too deep
            body, parsed = None, False
        provider._record(RecordedRequest(method, path, headers, body, url.query))
        try:
            found = route_for(path)
            if method != "POST" or found is None:
                raise envelope.not_found(method, path)
            if not parsed:
                raise envelope.unparseable()
            route, params = found
            target = Target(params, dict(parse_qsl(url.query, keep_blank_values=True)))
            answer = route.serve(body, provider._model(path), target)
            if isinstance(answer, dict):
                self._send_json(200, answer, envelope)
            elif isinstance(answer, Stream):
                self._send_events(answer.chunks, envelope, answer.content_type)
            else:
                self._send_events(answer, envelope, SSE_CONTENT_TYPE)
        except RequestRejected as rejected:
            self._send_json(rejected.status, rejected.body, envelope, headers=rejected.headers)
        except Exception as exc:
            # A shape the validators did not foresee: answer 500 rather than
            # hang up, so the test sees what broke. Mid-stream, headers are gone.
            if self._streaming:
                raise
            error = envelope.failed(f"fake provider failed: {exc!r}")
            self._send_json(error.status, error.body, envelope)

    def _send_json(
        self,
        status: int,
        body: Json,
        envelope: Envelope,
        close: bool = False,
        headers: Optional[Dict[str, str]] = None,
    ) -> None:
        request_id = self.server.provider._new_id("req_fake")
        data = json.dumps(envelope.identified(body, request_id)).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if envelope.request_id_header is not None:
            self.send_header(envelope.request_id_header, request_id)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if close:
            self.send_header("Connection", "close")  # also ends the handler's loop
        self.end_headers()
        self.wfile.write(data)  # sent with the headers when the stdlib flushes wfile

    def _send_events(self, events: Iterator[bytes], envelope: Envelope, content_type: str) -> None:
        request_id = self.server.provider._new_id("req_fake")
        self._streaming = True
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        if envelope.request_id_header is not None:
            self.send_header(envelope.request_id_header, request_id)
        self.end_headers()
        for event in events:
            self.wfile.write(b"%X\r\n%s\r\n" % (len(event), event))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class FakeProvider:
    """A fake OpenAI, Anthropic, Gemini and Bedrock HTTP server on a background thread.

    Use it as a context manager; it listens from construction and serves once
    started:

        with FakeProvider() as provider:
            ...  # point a client at provider.base_url

    Args:
        host: The address to bind; loopback by default.
        port: The port to bind; 0 picks a free one.
        reply: The assistant text of every reply, or a callable given the
            request's messages (Responses input items, a string input as one
            user message; Gemini ``contents``; Converse ``messages``). By
            default ``"Fake reply to N messages."``.
        tool_calls: How many tool calls the model makes after each user
            prompt before it answers with text: while fewer than this many tool
            results follow the last user prompt and the request offers a
            function tool, the reply calls the first one offered, with a value
            for each required argument of its schema.
        context_limit: The most input tokens a request may hold; a request
            over it gets the provider's context-length error. ``None`` (the
            default) sets no limit.
        prompt_cache: Whether the provider caches prompts as OpenAI, Anthropic,
            Bedrock and Gemini do (on by default, as they always do), reporting the
            cached tokens in each reply's usage; ``False`` reports none.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        reply: ReplySetting = None,
        tool_calls: int = 0,
        context_limit: Optional[int] = None,
        prompt_cache: bool = True,
    ) -> None:
        self._host = host
        self._server = _Server((host, port), _Handler)
        self._server.provider = self
        self._reply_setting = reply
        self.tool_calls = tool_calls
        self.context_limit = context_limit
        self.prompt_cache = prompt_cache
        self._cache = PromptCache()
        self._lock = threading.Lock()
        self._requests: List[RecordedRequest] = []
        self._billing: List[Billing] = []
        self._ids = itertools.count(1)
        self._thread: Optional[threading.Thread] = None

    @property
    def port(self) -> int:
        """The port the server listens on."""
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT``; OpenAI clients add ``/v1``, Anthropic clients do not."""
        return f"http://{self._host}:{self.port}"

    @property
    def openai_url(self) -> str:
        """The ``base_url`` an OpenAI client takes: ``http://HOST:PORT/v1``."""
        return self.base_url + "/v1"

    @property
    def anthropic_url(self) -> str:
        """The ``base_url`` an Anthropic client takes: ``http://HOST:PORT``."""
        return self.base_url

    @property
    def gemini_url(self) -> str:
        """The ``base_url`` google-genai takes in ``HttpOptions``: ``http://HOST:PORT``."""
        return self.base_url

    @property
    def bedrock_url(self) -> str:
        """The ``endpoint_url`` a boto3 ``bedrock-runtime`` client takes: ``http://HOST:PORT``."""
        return self.base_url

    @property
    def requests(self) -> List[RecordedRequest]:
        """A snapshot of every request received so far, oldest first."""
        with self._lock:
            return list(self._requests)

    @property
    def billing(self) -> List[Billing]:
        """What was billed for each request answered so far, oldest first.

        One ``Billing`` per reply a model gave (a rejected request and Gemini's
        ``countTokens`` bill nothing), in the order they were made.
        """
        with self._lock:
            return list(self._billing)

    def clear(self) -> None:
        """Forget the recorded requests and their billing (not what is cached)."""
        with self._lock:
            self._requests.clear()
            self._billing.clear()

    def clear_cache(self) -> None:
        """Forget every cached prompt prefix: the next requests find the cache cold."""
        self._cache.clear()

    def start(self) -> FakeProvider:
        """Serve on a daemon thread; return ``self``."""
        if self._thread is None:
            # A short poll interval keeps close() quick: shutdown() waits for one poll.
            self._thread = threading.Thread(
                target=self._server.serve_forever,
                kwargs={"poll_interval": 0.02},
                name="fake-provider",
                daemon=True,
            )
            self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve on the calling thread until interrupted (the command line uses this)."""
        self._server.serve_forever()

    def close(self) -> None:
        """Stop serving and release the port. Safe to call more than once."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        self._server.server_close()
        # Keep-alive connections opened earlier would otherwise go on being served.
        self._server.close_connections()

    def __enter__(self) -> FakeProvider:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def _new_id(self, prefix: str) -> str:
        with self._lock:
            return f"{prefix}{next(self._ids):06d}"

    def _bill(self, billing: Billing) -> None:
        with self._lock:
            self._billing.append(billing)

    def _model(self, path: str = "") -> ScriptedModel:
        # A snapshot per request: a test may change tool_calls, context_limit or
        # prompt_cache between calls.
        return ScriptedModel(
            self._reply_setting,
            self.tool_calls,
            self.context_limit,
            self._new_id,
            self._cache if self.prompt_cache else None,
            path,
            self._bill,
        )


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Serve in the foreground, printing the base URL, until Ctrl-C."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback)")
    parser.add_argument("--port", type=int, default=0, help="port to bind (default: a free one)")
    args = parser.parse_args(argv)
    provider = FakeProvider(args.host, args.port)
    print(provider.base_url, flush=True)
    try:
        provider.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        provider.close()
    return 0
