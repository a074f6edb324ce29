"""The local provider's HTTP server, spoken to over raw sockets: framing, close, latency, bursts.

No SDK is needed here, so these run on every Python the package supports. Every
socket has a timeout, so a server that fails to answer fails the test instead of
hanging it.
"""

from __future__ import annotations

import http.client
import json
import re
import select
import socket
import struct
import sys
import threading
from typing import Any, List, Tuple

import pytest

from ctx_compact.testing import FakeProvider

TIMEOUT = 5.0
CHAT = "/v1/chat/completions"
MESSAGES = "/v1/messages"
CHAT_BODY = json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]})
MAX_BODY_BYTES = 32 * 1024 * 1024  # the limit the provider documents


def request_bytes(path: str = CHAT, body: str = CHAT_BODY, *extra: str) -> bytes:
    """A well-formed POST, with any extra header lines."""
    data = body.encode()
    head = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json"]
    head += [f"Content-Length: {len(data)}", *extra]
    return "\r\n".join(head).encode() + b"\r\n\r\n" + data


def connect(provider: FakeProvider) -> socket.socket:
    return socket.create_connection(("127.0.0.1", provider.port), timeout=TIMEOUT)


def read_response(sock: socket.socket) -> Tuple[http.client.HTTPResponse, bytes]:
    response = http.client.HTTPResponse(sock)
    response.begin()
    return response, response.read()


def exchange(
    provider: FakeProvider, raw: bytes, *, half_close: bool = False
) -> Tuple[http.client.HTTPResponse, Any]:
    """Send ``raw`` on a new connection; return the response and its decoded JSON body."""
    with connect(provider) as sock:
        sock.sendall(raw)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        response, body = read_response(sock)
    return response, json.loads(body)


def assert_still_serving(provider: FakeProvider) -> None:
    response, body = exchange(provider, request_bytes())
    assert response.status == 200
    assert body["choices"][0]["message"]["content"] == "Fake reply to 1 messages."


# --- broken framing ----------------------------------------------------------------


def head_only(*lines: str, path: str = CHAT) -> bytes:
    head = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json", *lines]
    return "\r\n".join(head).encode() + b"\r\n\r\n"


CHUNKED = "Transfer-Encoding: chunked"
BAD_FRAMING = {
    "a Content-Length that is not a number": head_only("Content-Length: abc") + b"{}",
    "a negative Content-Length": head_only("Content-Length: -1") + b"{}",
    "a Content-Length with a sign": head_only("Content-Length: +2") + b"{}",
    "two Content-Lengths that differ": head_only("Content-Length: 2", "Content-Length: 3") + b"{}",
    "a chunk size that is not hex": head_only(CHUNKED) + b"zz\r\n{}\r\n0\r\n\r\n",
    "a negative chunk size": head_only(CHUNKED) + b"-2\r\n{}\r\n0\r\n\r\n",
    "an empty chunk size line": head_only(CHUNKED) + b"\r\n",
    "a chunk not ended by CRLF": head_only(CHUNKED) + b"2\r\n{}xx0\r\n\r\n",
    "a transfer coding other than chunked": head_only("Transfer-Encoding: gzip") + b"{}",
    "both Content-Length and chunks": head_only("Content-Length: 2", CHUNKED)
    + b"2\r\n{}\r\n0\r\n\r\n",
}


@pytest.mark.parametrize("raw", BAD_FRAMING.values(), ids=list(BAD_FRAMING))
def test_broken_framing_is_a_400_and_the_server_goes_on(
    provider: FakeProvider, raw: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    response, body = exchange(provider, raw)

    assert response.status == 400
    assert body["error"]["type"] == "invalid_request_error"
    # Where the next request starts is unknown after a framing error.
    assert response.getheader("Connection") == "close"
    assert_still_serving(provider)
    assert capsys.readouterr().err == ""


def test_a_body_shorter_than_its_content_length_is_a_400(
    provider: FakeProvider, capsys: pytest.CaptureFixture[str]
) -> None:
    response, body = exchange(provider, head_only("Content-Length: 100") + b"{}", half_close=True)

    assert response.status == 400
    assert "ended after 2 of 100 bytes" in body["error"]["message"]
    assert_still_serving(provider)
    assert capsys.readouterr().err == ""


TOO_LARGE = {
    "a huge Content-Length": head_only(f"Content-Length: {10**15}"),
    "a Content-Length one byte over the limit": head_only(f"Content-Length: {MAX_BODY_BYTES + 1}"),
    "a Content-Length of 5,000 digits": head_only("Content-Length: " + "9" * 5000),
    "a huge chunk size": head_only(CHUNKED) + b"FFFFFFFFFFFF\r\n",
}


@pytest.mark.parametrize("raw", TOO_LARGE.values(), ids=list(TOO_LARGE))
def test_a_body_over_the_limit_is_refused_before_it_is_read(
    provider: FakeProvider, raw: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    # No body follows the head: an answer proves that nothing was waited for.
    response, body = exchange(provider, raw)

    assert response.status == 413
    assert body["error"]["type"] == "invalid_request_error"
    assert response.getheader("Connection") == "close"
    assert_still_serving(provider)
    assert capsys.readouterr().err == ""


def test_anthropic_gets_its_own_413(provider: FakeProvider) -> None:
    response, body = exchange(provider, head_only(f"Content-Length: {10**15}", path=MESSAGES))

    assert response.status == 413
    assert body["type"] == "error"
    assert body["error"]["type"] == "request_too_large"
    assert body["request_id"] == response.getheader("request-id")


def test_a_chunked_body_is_read_with_its_extensions_and_trailers(provider: FakeProvider) -> None:
    data = CHAT_BODY.encode()
    chunks = b"%x;ext=1\r\n%s\r\n%x\r\n%s\r\n0\r\nX-Trailer: yes\r\n\r\n" % (
        10,
        data[:10],
        len(data) - 10,
        data[10:],
    )
    raw = head_only(CHUNKED) + chunks

    with connect(provider) as sock:
        sock.sendall(raw)
        first, _ = read_response(sock)
        # A trailer left unread would be taken for the next request's first line.
        sock.sendall(request_bytes())
        second, _ = read_response(sock)

    assert (first.status, second.status) == (200, 200)
    assert provider.requests[0].body == json.loads(CHAT_BODY)


@pytest.mark.parametrize("path", [CHAT, MESSAGES])
def test_a_body_of_100000_nested_arrays_is_a_400(
    provider: FakeProvider, path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    nested = "[" * 100_000 + "]" * 100_000

    response, body = exchange(provider, request_bytes(path, nested))

    assert response.status == 400
    message = body["error"]["message"]
    assert "parsing the body" in message or "could not parse the JSON body" in message
    assert provider.requests[-1].body is None
    assert_still_serving(provider)
    assert capsys.readouterr().err == ""


# --- close() ----------------------------------------------------------------------


def test_close_ends_a_keep_alive_connection_opened_before_it() -> None:
    provider = FakeProvider().start()
    with connect(provider) as sock:
        sock.sendall(request_bytes())
        response, _ = read_response(sock)
        assert response.status == 200
        assert not response.will_close

        provider.close()

        try:
            sock.sendall(request_bytes())
            after = sock.recv(65536)
        except ConnectionError:
            after = b""
    assert after == b"", "a connection opened before close() was served after it"


def test_close_lets_a_request_in_flight_finish() -> None:
    started, release = threading.Event(), threading.Event()

    def slow_reply(messages: List[Any]) -> str:
        started.set()
        release.wait(TIMEOUT)
        return "finished"

    provider = FakeProvider(reply=slow_reply).start()
    with connect(provider) as sock:
        sock.sendall(request_bytes())
        assert started.wait(TIMEOUT)
        closing = threading.Thread(target=provider.close)
        closing.start()
        release.set()
        response, body = read_response(sock)
        closing.join(TIMEOUT)
        assert not closing.is_alive()
        assert sock.recv(65536) == b""  # and then the connection ends

    assert response.status == 200
    assert json.loads(body)["choices"][0]["message"]["content"] == "finished"


# --- latency: one segment per response, no Nagle -------------------------------------


def test_each_json_response_on_a_keep_alive_connection_arrives_in_one_segment(
    provider: FakeProvider,
) -> None:
    # Headers and body written apart leave the body to Nagle's algorithm, which holds it
    # until the client's delayed ACK of the headers (about 40 ms): then the first read
    # holds the headers alone. The first exchange of a connection is quick-ACKed, so
    # several are made on one connection.
    with connect(provider) as sock:
        for _ in range(4):
            sock.sendall(request_bytes())
            segment = sock.recv(1 << 20)
            head, _, body = segment.partition(b"\r\n\r\n")
            length = re.search(rb"\r\nContent-Length: (\d+)\r\n", head + b"\r\n")
            assert length is not None, head
            assert len(body) == int(length.group(1)), "the body did not come with the headers"


@pytest.fixture
def accepted(monkeypatch: pytest.MonkeyPatch) -> List[socket.socket]:
    """The server side of every connection accepted during the test."""
    sockets: List[socket.socket] = []
    accept = socket.socket.accept

    def recording_accept(self: socket.socket) -> Tuple[socket.socket, Any]:
        connection, address = accept(self)
        sockets.append(connection)
        return connection, address

    monkeypatch.setattr(socket.socket, "accept", recording_accept)
    return sockets


def test_accepted_connections_disable_nagle(accepted: List[socket.socket]) -> None:
    # A stream writes one event at a time; with Nagle each would wait for an ACK.
    with FakeProvider() as provider, connect(provider) as sock:
        sock.sendall(request_bytes())
        read_response(sock)
        assert len(accepted) == 1
        assert accepted[0].getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0


# --- a burst of connections ------------------------------------------------------


def _syn_retransmits(sock: socket.socket) -> int:
    # struct tcp_info (linux/tcp.h): tcpi_total_retrans is the __u32 at byte 100.
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
    return int(struct.unpack_from("I", info, 100)[0])


def test_a_burst_of_32_connections_is_accepted_at_once() -> None:
    # All 32 connect while the server is not yet accepting: each must find room in the
    # listen queue. A full queue drops the SYN, and the client retries a second later.
    provider = FakeProvider()
    clients = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(32)]
    try:
        for client in clients:
            client.setblocking(False)
            client.connect_ex(("127.0.0.1", provider.port))
        provider.start()
        statuses = []
        for client in clients:
            _, writable, _ = select.select([], [client], [], TIMEOUT)
            assert writable
            assert client.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0
            client.settimeout(TIMEOUT)
            client.sendall(request_bytes(CHAT, CHAT_BODY, "Connection: close"))
            statuses.append(read_response(client)[0].status)
        assert statuses == [200] * 32
        if sys.platform.startswith("linux"):
            assert [_syn_retransmits(client) for client in clients] == [0] * 32
    finally:
        for client in clients:
            client.close()
        provider.close()
