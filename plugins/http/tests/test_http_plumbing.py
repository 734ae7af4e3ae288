"""Event stores, plugin registration, mounting in a parent app, and serving through the kernel."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

import anyio
import httpx
import pytest
from mcp.client import Client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.streamable_http import EventMessage
from mcp_types import JSONRPCNotification
from starlette.applications import Starlette
from starlette.routing import Mount

import toolkernel_http.plugin
from toolkernel import Kernel, MCPServer, SessionEvent, hookimpl
from toolkernel.transports import ServeOptions
from toolkernel_http import InMemoryEventStore, SessionScopedEventStore, asgi_app

from . import _raw as raw
from .conftest import initialize, make_server, serving

TIMEOUT_S = 60.0


def _note(text: str) -> JSONRPCNotification:
    return JSONRPCNotification(jsonrpc="2.0", method="notifications/message", params={"data": text})


async def _replayed(store: Any, last_event_id: str) -> tuple[Any, list[str]]:
    seen: list[str] = []

    async def collect(event: EventMessage) -> None:
        seen.append(event.message.params["data"])  # type: ignore[union-attr]

    stream = await store.replay_events_after(last_event_id, collect)
    return stream, seen


@pytest.mark.anyio
async def test_in_memory_store_replays_one_stream_after_an_id() -> None:
    """Replay sends the later events of the same stream only, priming events skipped."""
    store = InMemoryEventStore()
    priming = await store.store_event("a", None)
    await store.store_event("a", _note("a1"))
    await store.store_event("b", _note("b1"))
    await store.store_event("a", _note("a2"))
    assert await _replayed(store, priming) == ("a", ["a1", "a2"])
    assert await _replayed(store, "999") == (None, [])


@pytest.mark.anyio
async def test_in_memory_store_forgets_the_oldest_beyond_its_bound() -> None:
    """At ``max_events`` the oldest event goes; an evicted id can no longer be resumed from."""
    store = InMemoryEventStore(max_events=2)
    first = await store.store_event("a", _note("1"))
    second = await store.store_event("a", _note("2"))
    await store.store_event("a", _note("3"))
    assert len(store) == 2
    assert await _replayed(store, first) == (None, [])
    assert await _replayed(store, second) == ("a", ["3"])


@pytest.mark.anyio
async def test_session_scoped_store_keeps_sessions_apart() -> None:
    """Two sessions using request id 1 never see each other's events."""
    shared = InMemoryEventStore()
    alice, bob = SessionScopedEventStore(shared, "alice"), SessionScopedEventStore(shared, "bob")
    alice_start = await alice.store_event("1", None)
    await bob.store_event("1", _note("bob"))
    await alice.store_event("1", _note("alice"))
    assert await _replayed(alice, alice_start) == ("1", ["alice"])
    assert await _replayed(bob, alice_start) == (None, [])


@pytest.mark.anyio
async def test_in_memory_store_bounds_each_session_and_the_total_by_bytes() -> None:
    """Past a session's byte bound its own oldest events go, other sessions untouched; past the
    total bound the oldest of all go. ``bytes`` counts what is held."""
    store = InMemoryEventStore(max_bytes=10_000, max_session_bytes=4_000)
    alice, bob = SessionScopedEventStore(store, "alice"), SessionScopedEventStore(store, "bob")
    bob_first = await bob.store_event("1", _note("b" * 1_000))
    alice_ids = [await alice.store_event("1", _note("a" * 1_000)) for _ in range(10)]
    assert store.session_bytes("alice") <= 4_000
    assert await _replayed(alice, alice_ids[0]) == (None, [])  # evicted: no longer resumable
    assert (await _replayed(alice, alice_ids[-2]))[1] == ["a" * 1_000]
    assert await _replayed(bob, bob_first) == ("1", [])  # bob's own event is still known
    carol = SessionScopedEventStore(store, "carol")
    for _ in range(10):
        await carol.store_event("1", _note("c" * 1_000))
    assert store.bytes <= 10_000
    assert store.bytes == sum(store.session_bytes(s) for s in ("alice", "bob", "carol"))


@pytest.mark.anyio
async def test_in_memory_store_keeps_its_bounds_and_order_through_a_long_churn() -> None:
    """Through 20,000 events over three sessions (and one ended midway) the store holds exactly
    what a plain list applying the same policy holds: count, bytes and per-session bytes within
    bounds, always the oldest evicted first, released sessions gone. (Each bound evicts
    thousands of times here: phases of large events hit the byte bounds, of small ones the count.)"""
    store = InMemoryEventStore(max_events=300, max_bytes=30_000, max_session_bytes=12_000)
    sessions = {name: SessionScopedEventStore(store, name) for name in ("alice", "bob", "carol")}
    expected: list[tuple[str, str, int]] = []  # (event id, session, size), oldest first

    def evict_first(session: str | None = None) -> None:
        expected.remove(next(item for item in expected if session in (None, item[1])))

    for step in range(20_000):
        if step == 10_000:  # bob's session ends: its events go, later ones are alice's
            sessions["bob"].release()
            expected[:] = [item for item in expected if item[1] != "bob"]
        name = ("alice", "bob" if step < 10_000 else "alice", "carol", "alice")[step % 4]
        size = 10 + (step * 37) % (400 if step % 2_000 < 1_000 else 60)  # bytes bound, then count
        event_id = await sessions[name].store_event(str(step % 3), _note(str(step)), size)
        expected.append((event_id, name, size))
        while sum(s for _, n, s in expected if n == name) > 12_000:
            evict_first(name)
        while len(expected) > 300 or sum(s for *_, s in expected) > 30_000:
            evict_first()
        assert len(store) <= 300
        assert store.bytes <= 30_000
        assert all(store.session_bytes(n) <= 12_000 for n in sessions)
        if step % 500 == 0 or step == 19_999:
            held = [event_id for event_id, *_ in expected]
            assert [i for i in held if await _replayed(store, i) != (None, [])] == held
            assert store.bytes == sum(s for *_, s in expected)
            assert len(store) == len(expected)
    assert store.session_bytes("bob") == 0
    sessions["alice"].release()
    sessions["carol"].release()
    assert (len(store), store.bytes) == (0, 0)


@pytest.mark.anyio
async def test_in_memory_store_drops_events_past_their_age() -> None:
    store = InMemoryEventStore(max_age_s=0.05)
    old = await store.store_event("a", _note("old"))
    await anyio.sleep(0.1)
    await store.store_event("b", _note("new"))
    assert await _replayed(store, old) == (None, [])
    assert len(store) == 1


@pytest.mark.anyio
async def test_session_scoped_store_releases_its_events() -> None:
    """A session's events leave the shared store when it ends; other sessions keep theirs."""
    shared = InMemoryEventStore()
    alice, bob = SessionScopedEventStore(shared, "alice"), SessionScopedEventStore(shared, "bob")
    await alice.store_event("1", _note("alice"))
    kept = await bob.store_event("1", None)
    await bob.store_event("1", _note("bob"))
    alice.release()
    assert shared.session_bytes("alice") == 0
    assert await _replayed(bob, kept) == ("1", ["bob"])
    assert len(shared) == 2


def _big_server() -> MCPServer:
    server = MCPServer("big", "1.0.0", kernel=Kernel(load_entry_points=False))

    @server.tool
    def big(size: int) -> str:
        """``size`` bytes of text."""
        return "x" * size

    return server


@pytest.mark.anyio
async def test_session_events_are_bounded_and_released_on_delete() -> None:
    """Large results stay within the session's byte bound, and DELETE releases them all."""
    app = asgi_app(_big_server(), session_event_bytes=3_000_000)
    assert app.sessions is not None
    store = app.sessions.event_store
    assert isinstance(store, InMemoryEventStore)
    with anyio.fail_after(TIMEOUT_S):
        async with serving(app) as base, httpx.AsyncClient(timeout=30) as client:
            url = f"{base}/mcp"
            session = await raw.open_session(client, url)
            for request_id in range(1, 11):
                call = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call"}
                call["params"] = {"name": "big", "arguments": {"size": 1_000_000}}
                response = await raw.post(client, url, call, session)
                assert len(raw.answer(response, request_id)["result"]["content"][0]["text"]) == 1_000_000
            held = store.bytes
            deleted = await client.delete(url, headers=session)
            after_delete, events_after_delete = store.bytes, len(store)
    assert deleted.status_code == 200
    assert 1_000_000 < held <= 3_000_000
    assert after_delete == 0
    assert events_after_delete == 0


def test_json_response_mode_keeps_no_events() -> None:
    """A JSON body can never be resumed: no event store, so nothing is held."""
    app = asgi_app(make_server(), json_response=True)
    assert app.sessions is not None
    assert app.sessions.event_store is None


def test_plugin_registers_transports_and_settings(kernel_with: Callable[..., Kernel]) -> None:
    """``http``/``sse`` server transports, the http(s) client transport and the ``http`` settings."""
    kernel = kernel_with(toolkernel_http.plugin)
    assert {"http", "sse"} <= set(kernel.server_transports)
    assert kernel.client_transports.for_target("https://example.com/mcp") == "http"
    assert kernel.client_transports.for_target("http://127.0.0.1:1/mcp") == "http"
    assert "http" in kernel.settings_models


@pytest.mark.anyio
async def test_mounted_under_a_parent_app(tk_server: MCPServer) -> None:
    """Mounted at /tools with the parent running its lifespan: Streamable HTTP and legacy SSE both work."""
    mcp = asgi_app(tk_server)
    parent = Starlette(routes=[Mount("/tools", app=mcp)], lifespan=mcp.lifespan)
    with anyio.fail_after(TIMEOUT_S):
        async with serving(parent) as base:
            async with Client(streamable_http_client(f"{base}/tools/mcp"), mode="legacy") as client:  # type: ignore[arg-type]
                assert (await client.call_tool("echo", {"text": "mounted"})).content[0].text == "mounted"  # type: ignore[union-attr]
            async with Client(sse_client(f"{base}/tools/sse"), mode="legacy") as client:  # type: ignore[arg-type]
                assert (await client.call_tool("echo", {"text": "sse"})).content[0].text == "sse"  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_unstarted_app_says_how_to_start_it(tk_server: MCPServer) -> None:
    """Mounted without its lifespan, the app answers 500 with a JSON-RPC error naming the fix."""
    parent = Starlette(routes=[Mount("/tools", app=asgi_app(tk_server))])
    transport = httpx.ASGITransport(app=parent)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        response = await client.post(
            "/tools/mcp",
            content=b"{}",
            headers={"content-type": "application/json", "accept": "application/json, text/event-stream"},
        )
    assert response.status_code == 500
    assert "lifespan" in response.json()["error"]["message"]


class _SessionLog:
    """Records the session events the kernel fires."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    @hookimpl
    def on_session_start(self, event: SessionEvent) -> None:
        self.events.append(("start", event.transport))

    @hookimpl
    def on_session_stop(self, event: SessionEvent) -> None:
        self.events.append(("stop", event.transport))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.anyio
@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_kernel_serves_through_the_registered_transport(transport: str) -> None:
    """``kernel.serve(server, NAME, ServeOptions(...))`` serves, fires session hooks, stops when cancelled."""
    log = _SessionLog()
    kernel = Kernel(load_entry_points=False, plugins=[toolkernel_http.plugin, log])
    server = make_server()
    server._kernel = kernel
    port = _free_port()
    url = f"http://127.0.0.1:{port}/mcp" if transport == "http" else f"http://127.0.0.1:{port}/sse"
    with anyio.fail_after(TIMEOUT_S):
        async with anyio.create_task_group() as tg:
            tg.start_soon(kernel.serve, server, transport, ServeOptions(port=port))
            async with Client(kernel.client_transport(url), mode="legacy") as client:  # type: ignore[arg-type]
                assert (await client.call_tool("echo", {"text": "kernel"})).content[0].text == "kernel"  # type: ignore[union-attr]
            tg.cancel_scope.cancel()
    # Both transports fire the session hooks once per session (http: the client's DELETE ends it).
    assert log.events == [("start", transport), ("stop", transport)]


def _starlette_parent(mcp: Any) -> Any:
    return Starlette(routes=[Mount("/mcp", app=mcp)], lifespan=mcp.lifespan)


def _fastapi_parent(mcp: Any) -> Any:
    from fastapi import FastAPI

    parent = FastAPI(lifespan=mcp.lifespan)
    parent.mount("/mcp", mcp)
    return parent


@pytest.mark.anyio
@pytest.mark.parametrize("make_parent", [_starlette_parent, _fastapi_parent], ids=["starlette", "fastapi"])
async def test_mounted_at_its_own_path_answers_the_bare_path(tk_server: MCPServer, make_parent: Any) -> None:
    """``Mount("/mcp", asgi_app(server, path="/"))``: ``POST /mcp`` is answered, not redirected
    (307) to ``/mcp/``; ``/mcp/`` answers too, and a client works at either."""
    parent = make_parent(asgi_app(tk_server, path="/"))
    with anyio.fail_after(TIMEOUT_S):
        async with serving(parent) as base:
            async with httpx.AsyncClient(timeout=TIMEOUT_S) as http:
                for url in (f"{base}/mcp", f"{base}/mcp/"):
                    response = await http.post(url, json=initialize(), headers=raw.HEADERS)
                    assert response.status_code == 200, (url, response.status_code, response.headers)
            for url in (f"{base}/mcp", f"{base}/mcp/"):
                async with Client(streamable_http_client(url), mode="legacy") as client:  # type: ignore[arg-type]
                    out = await client.call_tool("echo", {"text": "bare"})
                    assert out.content[0].text == "bare"  # type: ignore[union-attr]
