"""Generated JSON-RPC frames against the real servers: each gets the answer JSON-RPC 2.0 asks for.

Hypothesis builds frames around the shape of a message (valid and invalid ``jsonrpc``,
ids of every JSON type, methods, params, results, errors), plus batches, scalars, cut
JSON and raw bytes, and sends each to ``toolkernel serve`` over stdio and over Streamable
HTTP (stateful SSE and stateless JSON). The expectation is worked out here from the
specification, independently of the server's code:

- not JSON: an error with id null (-32700; -32600 for what only Python's parser reads);
- not an object, or an object that is not a valid message: -32600, with the request's id
  when it is a string or an integer, else with id null;
- a request (valid id): an answer with its id, whatever the outcome;
- a notification, or a response (valid or not): no answer;
- a frame that is both a valid request and a valid response: either.

After every frame a ``ping`` with a sentinel id proves the server still serves and, over
stdio, closes the window in which an answer to the frame may arrive.

Under CI (``CI`` set) the examples are derandomized, so every run sends the same frames and a
failure reproduces; elsewhere they are random, to keep exploring. Frames that once broke
something are explicit ``@example``s, sent on every run.
"""

from __future__ import annotations

import json
import os
import re
import selectors
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
TARGET = "docs/examples/echo_server.py:app"
TIMEOUT_S = 20.0
EXAMPLES = 2000
HUGE = "__1e400__"  # stands for the number 1e400, which no Python value encodes as
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    derandomize=bool(os.environ.get("CI")),
    suppress_health_check=list(HealthCheck),
)
# An id holding U+0085 (NEXT LINE): the answer carries it raw, and it does not end an SSE line.
NEL_ID_FRAME = b'{"jsonrpc": "2.0", "id": "\\u0085", "method": "ping"}'

# -- frames -------------------------------------------------------------------------------------

_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=8)
_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**53), 2**53), st.floats(allow_nan=False), _text
)
_ids = st.one_of(
    st.integers(-(2**53), 2**53),
    st.just(2**64),
    _text,
    st.floats(allow_nan=False, allow_infinity=False),
    st.none(),
    st.booleans(),
    st.just({}),
    st.lists(st.integers(), max_size=2),
    st.just(HUGE),
)
_methods = st.one_of(
    st.sampled_from(
        [
            "ping",
            "tools/list",
            "tools/call",
            "resources/list",
            "prompts/list",
            "initialize",
            "notifications/initialized",
            "notifications/cancelled",
            "nope/nope",
        ]
    ),
    _text,
    st.integers(),
    st.none(),
)
_params = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {},
        optional={
            "name": st.sampled_from(["echo", "nope"]) | _scalars,
            "arguments": st.fixed_dictionaries({}, optional={"text": _scalars}) | _scalars,
            "cursor": _scalars,
            "protocolVersion": st.sampled_from(["2025-11-25", "1999-01-01"]) | _scalars,
        },
    ),
    st.lists(st.integers(), max_size=2),
    _scalars,
)
_messages = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "2.0", "2.0", "1.0", 2.0, None]),
        "id": _ids,
        "method": _methods,
        "params": _params,
        "result": st.just({}) | _scalars,
        "error": st.fixed_dictionaries({"code": st.integers(), "message": _text}) | _scalars,
    },
)


def _encode(value: Any) -> bytes:
    return json.dumps(value).replace(f'"{HUGE}"', "1e400").encode()


FRAMES = st.one_of(
    _messages.map(_encode),
    _messages.map(_encode),
    _messages.map(_encode),
    st.lists(_messages, max_size=2).map(_encode),
    _scalars.map(_encode),
    _messages.map(_encode).flatmap(lambda b: st.integers(1, max(1, len(b) - 1)).map(lambda n: b[:n])),
    st.binary(min_size=1, max_size=24).filter(lambda b: b"\n" not in b),
)

# -- what JSON-RPC 2.0 asks for ----------------------------------------------------------------------


def _valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _valid_response(message: dict[str, Any]) -> bool:
    """A response (``result`` object) or an error (integer ``code``, string ``message``), extra keys aside."""
    if message.get("jsonrpc") != "2.0":
        return False
    if "result" in message and _valid_id(message.get("id")) and isinstance(message["result"], dict):
        return True
    error = message.get("error")
    return (
        isinstance(error, dict)
        and (message.get("id") is None or _valid_id(message["id"]))
        and "id" in message
        and _valid_id(error.get("code"))
        and not isinstance(error.get("code"), str)
        and isinstance(error.get("message"), str)
    )


def expected(frame: bytes) -> tuple[str, Any]:
    """``("silence", None)``, ``("request" or "ambiguous", id)``, or ``("invalid", id or None)``."""
    try:
        decoded = json.loads(frame.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return "invalid", None
    if not isinstance(decoded, dict):
        return "invalid", None
    request_id = decoded.get("id")
    has_id = "id" in decoded
    well_formed = (
        decoded.get("jsonrpc") == "2.0"
        and isinstance(decoded.get("method"), str)
        and isinstance(decoded.get("params"), dict | None)
    )
    if well_formed and has_id and _valid_id(request_id):
        # Also a valid response (a "result" or "error" beside "method"): JSON-RPC does not say
        # which it is, so an answer and silence are both right.
        return ("ambiguous" if _valid_response(decoded) else "request"), request_id
    if well_formed and not has_id:
        return "silence", None  # a notification
    if _valid_response(decoded):
        return "silence", None
    if "method" not in decoded and ("result" in decoded or "error" in decoded):
        return "silence", None  # a malformed response: answering could start a loop
    if has_id and not _valid_id(request_id):
        return "invalid", None
    return "invalid", request_id if has_id else None


# -- stdio ----------------------------------------------------------------------------------------


class StdioServer:
    """``toolkernel serve`` over pipes, read line by line with a deadline on every read."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "toolkernel", "serve", TARGET],
            cwd=ROOT,
            env={**os.environ, "TOOLKERNEL_LOG_LEVEL": "ERROR"},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.stdin = self.proc.stdin
        self.fd = self.proc.stdout.fileno()
        os.set_blocking(self.fd, False)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.fd, selectors.EVENT_READ)
        self.buffer = b""
        self.sentinel = 0

    def send(self, frame: bytes) -> None:
        self.stdin.write(frame + b"\n")
        self.stdin.flush()

    def line(self) -> dict[str, Any]:
        deadline = time.monotonic() + TIMEOUT_S
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            assert left > 0, f"no answer within {TIMEOUT_S}s"
            if self.selector.select(left):
                chunk = os.read(self.fd, 65536)
                assert chunk, "the server closed its stdout"
                self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return dict(json.loads(line))

    def ping(self) -> list[dict[str, Any]]:
        """Send a sentinel ping; return every answer that came before its answer."""
        self.sentinel += 1
        sentinel = f"sentinel-{self.sentinel}"
        self.send(_encode({"jsonrpc": "2.0", "id": sentinel, "method": "ping"}))
        before = []
        while (answer := self.line()).get("id") != sentinel:
            before.append(answer)
        return before

    def close(self) -> None:
        self.stdin.close()
        try:
            self.proc.wait(TIMEOUT_S)
        finally:
            self.proc.kill()
            self.selector.close()


@pytest.fixture(scope="module")
def stdio_server() -> Iterator[StdioServer]:
    server = StdioServer()
    try:
        server.send(_encode(_initialize(0)))
        assert "result" in server.line()
        server.send(_encode({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        yield server
    finally:
        server.close()


def _initialize(request_id: int) -> dict[str, Any]:
    params = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "fuzz", "version": "0"},
    }
    return {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": params}


@FUZZ
@given(frame=FRAMES)
@example(frame=NEL_ID_FRAME)
def test_stdio_answers_every_frame_as_jsonrpc_asks(stdio_server: StdioServer, frame: bytes) -> None:
    stdio_server.send(frame)
    kind, request_id = expected(frame) if frame.strip() else ("silence", None)
    answers = stdio_server.ping()
    if kind == "ambiguous" and not answers:
        return
    if kind == "silence":
        assert answers == [], frame
        return
    assert len(answers) == 1, (frame, answers)
    answer = answers[0]
    assert answer["jsonrpc"] == "2.0"
    assert ("result" in answer) != ("error" in answer), answer
    if kind == "invalid":
        assert answer["id"] == request_id, (frame, answer)
        assert answer["error"]["code"] in (-32700, -32600) if request_id is None else -32600, (frame, answer)
    else:
        assert answer["id"] == request_id, (frame, answer)


# -- HTTP -----------------------------------------------------------------------------------------

HTTP_MODES = {"stateful-sse": {}, "stateless-json": {"STATELESS": "true", "JSON_RESPONSE": "true"}}


class HTTPServer:
    """``toolkernel serve --transport http --port 0`` with one established session."""

    def __init__(self, mode: dict[str, str]) -> None:
        env = {**os.environ, "TOOLKERNEL_LOG_LEVEL": "ERROR"}
        env.update({f"TOOLKERNEL_HTTP_{key}": value for key, value in mode.items()})
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "toolkernel", "serve", TARGET, "--transport", "http", "--port", "0"],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stderr is not None
        deadline = time.monotonic() + 60
        url = None
        while url is None and time.monotonic() < deadline:
            found = re.search(r"on (http://\S+)", self.proc.stderr.readline())
            url = found.group(1) if found else None
        assert url is not None, "the server did not announce its URL"
        self.url = url
        self.client = httpx.Client(timeout=TIMEOUT_S)
        self.headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        opened = self.client.post(url, content=_encode(_initialize(0)), headers=self.headers)
        assert opened.status_code == 200, opened.text
        self.headers["mcp-protocol-version"] = "2025-11-25"
        if "mcp-session-id" in opened.headers:
            self.headers["mcp-session-id"] = opened.headers["mcp-session-id"]
        initialized = _encode({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert self.client.post(url, content=initialized, headers=self.headers).status_code == 202

    def post(self, frame: bytes) -> httpx.Response:
        return self.client.post(self.url, content=frame, headers=self.headers)

    def close(self) -> None:
        self.client.close()
        self.proc.terminate()
        try:
            self.proc.wait(TIMEOUT_S)
        finally:
            self.proc.kill()


@pytest.fixture(scope="module", params=list(HTTP_MODES))
def http_server(request: pytest.FixtureRequest) -> Iterator[HTTPServer]:
    server = HTTPServer(HTTP_MODES[request.param])
    try:
        yield server
    finally:
        server.close()


def sse_data(text: str) -> list[str]:
    """The data of each event in an SSE stream, parsed as the HTML standard says: lines end at
    CR, LF or CRLF only (not at the other breaks ``str.splitlines`` knows, such as U+0085), a
    single space after the colon is dropped, ``data`` lines of one event are joined by LF, and
    a blank line ends the event."""
    events, data = [], []
    for line in re.split(r"\r\n|\r|\n", text):
        if not line:
            if data:
                events.append("\n".join(data))
            data = []
            continue
        field, _, value = line.partition(":")
        if field == "data":
            data.append(value[1:] if value.startswith(" ") else value)
    return events


def test_sse_lines_end_only_at_cr_and_lf() -> None:
    stream = 'event: message\r\ndata: {"id": "\x85\u2028"}\r\n\rdata:a\ndata: b\n\n: note\ndata: c'
    assert sse_data(stream) == ['{"id": "\x85\u2028"}', "a\nb"]


def _messages_of(response: httpx.Response) -> list[dict[str, Any]]:
    if response.headers.get("content-type", "").startswith("application/json"):
        return [json.loads(response.content)] if response.content else []
    return [json.loads(data) for data in sse_data(response.text) if data.strip()]


@FUZZ
@given(frame=FRAMES)
@example(frame=NEL_ID_FRAME)
def test_http_answers_every_frame_as_jsonrpc_asks(http_server: HTTPServer, frame: bytes) -> None:
    response = http_server.post(frame)
    kind, request_id = expected(frame)
    answers = [m for m in _messages_of(response) if "result" in m or "error" in m]
    if kind == "ambiguous" and response.status_code == 202:
        kind = "silence"
    if kind == "silence":
        assert (response.status_code, answers) == (202, []), (frame, response.status_code, response.text)
    elif kind == "invalid":
        assert response.status_code == 400, (frame, response.status_code, response.text)
        assert [a["id"] for a in answers] == [request_id], (frame, response.text)
        codes = (-32700, -32600) if request_id is None else (-32600,)
        assert answers[0]["error"]["code"] in codes, (frame, response.text)
    else:
        assert response.status_code in (200, 400), (frame, response.status_code, response.text)
        assert [a["id"] for a in answers] == [request_id], (frame, response.text)
    assert (
        http_server.post(_encode({"jsonrpc": "2.0", "id": "sentinel", "method": "ping"})).status_code == 200
    )
