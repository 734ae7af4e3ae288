"""Tool inputs built to exhaust a server: a real ``toolkernel kb serve`` subprocess over stdio,
on a knowledge base whose vectors live in a real Postgres with pgvector.

The server must keep answering ``ping`` while it works on any of them, and refuse the
oversized ones (by a documented limit, named in the error) before doing any work on them.
No assertion here is about speed: each wait has a generous timeout as a guard against a hang,
and "ping keeps answering" is checked by order (a ping answered before the slow call's reply)
or by every ping being answered, never by how long an answer took.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolkernel.testing.services import postgres_server

ROOT = Path(__file__).resolve().parents[1]
TOOLKERNEL = str(Path(sys.executable).with_name("toolkernel"))
EMBEDDER = "local/minilm-l6-int8"
"""The default embedder: its tokenizer ships, so chunk_document can count tokens."""
REPLY_TIMEOUT_S = 120.0
"""How long any reply may take before the test gives up on the server (not a measured bound)."""

CATASTROPHIC = {"title": {"$regex": "^(\\w+\\s?)*$"}}
"""Exponential for a backtracking engine on a title of many words that ends in a non-word character."""


class StdioServer:
    """A server subprocess spoken to with raw JSON-RPC lines; replies are collected by a thread."""

    def __init__(self, argv: list[str], stderr: Path) -> None:
        with stderr.open("w") as err:
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True, cwd=ROOT
            )
        self.replies: queue.Queue[tuple[int, dict[str, Any]]] = queue.Queue()
        self._ids = iter(range(1, 1_000_000))
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for arrived, line in enumerate(self.proc.stdout):
            self.replies.put((arrived, json.loads(line)))

    def send(self, method: str, params: dict[str, Any] | None = None) -> int:
        """Send a request; its id."""
        request_id = next(self._ids)
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.write(json.dumps(message))
        return request_id

    def write(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def wait_for(self, request_id: int, timeout: float = REPLY_TIMEOUT_S) -> tuple[int, dict[str, Any]]:
        """The reply to ``request_id`` and its place in the order replies arrived (others are kept)."""
        deadline = time.monotonic() + timeout
        kept: list[tuple[int, dict[str, Any]]] = []
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    pytest.fail(f"no reply to request {request_id} within {timeout:.0f}s")
                try:
                    at, reply = self.replies.get(timeout=remaining)
                except queue.Empty:
                    continue
                if reply.get("id") == request_id:
                    return at, reply
                kept.append((at, reply))
        finally:
            for item in kept:
                self.replies.put(item)

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.wait_for(self.send(method, params))[1]

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=15)


def _records() -> list[dict[str, Any]]:
    """Titles of thirty words ending in '!' (the regex's worst case) about topics BM25 will find."""
    topics = ["solar panels", "wind turbines", "hydro dams", "battery storage"]
    return [
        {
            "id": f"doc-{n}",
            "title": " ".join(f"{topic.split()[0]}{i}" for i in range(30)) + " !",
            "text": f"Notes on {topic}: how {topic} produce and keep energy. Entry {n}.",
        }
        for n, topic in enumerate(topics * 3)
    ] + [{"id": "plain", "title": "solar panels", "text": "Solar panels turn sunlight into energy."}]


@pytest.fixture(scope="module")
def pg_kb() -> Iterator[Path]:
    """A knowledge base on pgvector (which offers $regex), built with the real ``kb ingest`` command."""
    with (
        tempfile.TemporaryDirectory(prefix="toolkernel-hostile-") as directory,
        postgres_server(Path(directory) / "pg") as pg,
    ):
        root = Path(directory)
        corpus = root / "corpus.jsonl"
        corpus.write_text("".join(json.dumps(r) + "\n" for r in _records()), encoding="utf-8")
        store_options = json.dumps({"dsn": pg.uri})
        argv = [TOOLKERNEL, "kb", "ingest", str(corpus), "--kb", str(root / "kb"), "--quiet"]
        argv += ["--store", "pgvector", "--store-options", store_options, "--embedder", EMBEDDER]
        subprocess.run(argv, check=True, timeout=300, capture_output=True)
        yield root / "kb"


@pytest.fixture
def served(pg_kb: Path, tmp_path: Path) -> Iterator[StdioServer]:
    """``toolkernel kb serve`` over stdio, initialized, its models loaded by a first search."""
    server = StdioServer([TOOLKERNEL, "kb", "serve", "--kb", str(pg_kb)], tmp_path / "stderr.log")
    try:
        client = {"name": "hostile-inputs", "version": "1"}
        init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client}
        assert "result" in server.request("initialize", init)
        server.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        warm = server.request("tools/call", {"name": "search", "arguments": {"query": "solar panels"}})
        assert warm["result"]["isError"] is False, warm
        yield server
    finally:
        server.close()


def _call_while_pinging(
    server: StdioServer, tool: str, arguments: dict[str, Any]
) -> tuple[dict[str, Any], int]:
    """Call ``tool`` and ping the server, one ping at a time, until the call answers: its reply and
    how many pings were answered before it. Every ping must be answered; the timeouts only guard
    against a hang (a server whose event loop a tool input blocked for good fails there)."""
    call_id = server.send("tools/call", {"name": tool, "arguments": arguments})
    answered_before = 0
    deadline = time.monotonic() + REPLY_TIMEOUT_S
    while time.monotonic() < deadline:
        ping_arrived, reply = server.wait_for(server.send("ping"))
        assert reply.get("result") == {}, reply
        try:
            call_arrived, result = server.wait_for(call_id, timeout=0.2)
        except pytest.fail.Exception:
            answered_before += 1
            continue
        return result, answered_before + (ping_arrived < call_arrived)
    pytest.fail(f"{tool} did not answer")


def test_a_catastrophic_regex_filter_in_hybrid_mode_never_stalls_ping(served: StdioServer) -> None:
    reply, _ = _call_while_pinging(
        served, "search", {"query": "solar panels energy", "mode": "hybrid", "filter": CATASTROPHIC}
    )
    result = reply["result"]
    assert result["isError"] is False, result
    # Only the plain title is a run of words; the others end in '!' and match on neither side.
    assert [h["source"]["title"] for h in result["structuredContent"]["results"]] == ["solar panels"]


def _refused(reply: dict[str, Any]) -> str:
    """The text of an isError tool result."""
    result = reply["result"]
    assert result["isError"] is True, result
    text = result["content"][0]["text"]
    assert isinstance(text, str)
    return text


@pytest.mark.parametrize("size", [4 * 1024 * 1024, 8 * 1024 * 1024])
def test_a_huge_query_is_refused_by_its_limit_and_ping_keeps_answering(
    served: StdioServer, size: int
) -> None:
    reply, _ = _call_while_pinging(served, "search", {"query": "solar " * (size // 6)})
    text = _refused(reply)
    assert f"query: {size // 6 * 6} characters, over max_query_chars (10000)" in text, text[:300]
    assert len(text) < 500, "the refusal names the limit; it does not echo the input"


def test_a_filter_of_20000_branches_is_refused_by_its_limit(served: StdioServer) -> None:
    huge_or = {"$or": [{"title": f"t{i}"} for i in range(20_000)]}
    reply, _ = _call_while_pinging(served, "search", {"query": "solar panels", "filter": huge_or})
    text = _refused(reply)
    assert "filter.$or: 20000 filters, over max_branches (100)" in text, text[:300]


def test_limits_are_options(pg_kb: Path, tmp_path: Path) -> None:
    """``[plugins.rag]`` sets them: a 20-character query limit, and 200 branches for a 151-branch filter."""
    wide_or = {"$or": [{"title": f"t{i}"} for i in range(150)] + [{"title": "solar panels"}]}
    config = tmp_path / "toolkernel.toml"
    config.write_text(
        "[plugins.rag]\nmax_query_chars = 20\n[plugins.rag.filter_limits]\nmax_branches = 200\n"
    )
    argv = [TOOLKERNEL, "--config", str(config), "kb", "serve", "--kb", str(pg_kb)]
    server = StdioServer(argv, tmp_path / "stderr.log")
    try:
        client = {"name": "hostile-inputs", "version": "1"}
        init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client}
        assert "result" in server.request("initialize", init)
        reply = server.request("tools/call", {"name": "search", "arguments": {"query": "x" * 21}})
        assert "over max_query_chars (20)" in _refused(reply)
        arguments = {"query": "solar panels", "filter": wide_or}
        reply = server.request("tools/call", {"name": "search", "arguments": arguments})
        assert reply["result"]["isError"] is False, reply
        assert [h["source"]["title"] for h in reply["result"]["structuredContent"]["results"]] == [
            "solar panels"
        ]
    finally:
        server.close()


def test_chunking_a_long_text_by_tokens_never_stalls_ping(served: StdioServer) -> None:
    """Counting tokens over 400 kB took 2.6 s on the event loop; it runs in a worker thread, so
    the ping sent right after the call is answered while the split is still under way (on the
    event loop, no ping could be answered before the split's own reply)."""
    text = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 7_000
    arguments = {"text": text, "size": 250, "length": "tokens"}
    reply, pings_meanwhile = _call_while_pinging(served, "chunk_document", arguments)
    assert reply["result"]["isError"] is False, str(reply)[:500]
    assert pings_meanwhile >= 1, "no ping was answered while chunk_document ran"
    assert len(reply["result"]["structuredContent"]["chunks"]) > 100


def test_a_text_over_the_chunking_limit_is_refused_by_it(served: StdioServer) -> None:
    reply, _ = _call_while_pinging(served, "chunk_document", {"text": "x" * 2_000_001})
    text = _refused(reply)
    assert "text: 2000001 characters, over max_chunk_text_chars (1000000)" in text, text[:300]


def test_a_4mb_query_over_http_is_refused_by_its_limit(pg_kb: Path, tmp_path: Path) -> None:
    """Under the HTTP body cap (a 4 MB query is a valid request), it is still refused by max_query_chars."""
    import re
    import signal

    import httpx

    log = tmp_path / "stderr.log"
    with log.open("w") as stderr:
        argv = [TOOLKERNEL, "kb", "serve", "--kb", str(pg_kb), "--transport", "http", "--port", "0"]
        proc = subprocess.Popen(argv, stderr=stderr, cwd=ROOT)
    try:
        deadline = time.monotonic() + REPLY_TIMEOUT_S
        while not (found := re.search(r"on (http://\S+)", log.read_text())):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"kb serve did not start:\n{log.read_text()}")
            time.sleep(0.2)
        headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18"}
        with httpx.Client(timeout=REPLY_TIMEOUT_S) as client:
            client_info = {"name": "hostile-inputs", "version": "1"}
            init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client_info}
            opened = client.post(
                found.group(1),
                json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
                headers=headers,
            )
            assert opened.status_code == 200, opened.text
            session = {**headers, "mcp-session-id": opened.headers["mcp-session-id"]}
            query = "solar " * (4_000_000 // 6)  # 4 MB: the body stays under the 4 MiB cap
            call = {"name": "search", "arguments": {"query": query}}
            answer = client.post(
                found.group(1),
                json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call},
                headers=session,
            )
        assert answer.status_code == 200, answer.text[:300]
        data = [line[5:] for line in answer.text.split("\n") if line.startswith("data:") and line[5:].strip()]
        reply = json.loads(data[-1]) if data else answer.json()
        assert f"query: {len(query)} characters, over max_query_chars (10000)" in _refused(reply)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)
