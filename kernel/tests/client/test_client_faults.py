"""Faults, with real processes: killed servers, silent servers, hung tools, restarts. Nothing hangs."""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

import anyio
import pytest

from toolkernel.client import MCPClient, MemoryServerStore, SqliteServerStore, StateChange
from toolkernel.client.errors import CONNECTION_CLOSED, REQUEST_CANCELLED, REQUEST_TIMEOUT
from toolkernel.errors import ConfigError, MCPClientError

from .conftest import SILENT_SERVER, echo_stdio, everything_http, sdk_stdio

pytestmark = pytest.mark.timeout(120)

FAST_RESTART = {"max_attempts": 5, "delay": 0.1, "max_delay": 0.5}


def sdk_client(kernel: Any, **config: Any) -> MCPClient:
    base: dict[str, Any] = {
        "servers": {"sdk": sdk_stdio()},
        "connect_timeout": 60,
        "policy": {"stdio_restart": FAST_RESTART},
    }
    base.update(config)
    return MCPClient(base, kernel=kernel, store=MemoryServerStore())


class States:
    """State changes as they are delivered; ``wait_for(state)`` is bounded."""

    def __init__(self) -> None:
        self.changes: list[StateChange] = []
        self._new = anyio.Event()

    def __call__(self, change: StateChange) -> None:
        self.changes.append(change)
        self._new.set()

    async def wait_for(self, state: str, after: int = 0, limit: float = 60.0) -> StateChange:
        with anyio.fail_after(limit):
            while True:
                for change in self.changes[after:]:
                    if change.new == state:
                        return change
                self._new = anyio.Event()
                await self._new.wait()


@pytest.mark.anyio
async def test_killed_stdio_server_fails_the_call_within_a_second_then_restarts(client_kernel: Any) -> None:
    async with sdk_client(client_kernel) as client:
        states = States()
        client.on_state_change(states)
        first_pid = int((await client.call_tool("sdk_pid")).text)
        failure: list[BaseException] = []
        killed_at = 0.0
        failed_at = 0.0

        async def slow_call() -> None:
            nonlocal failed_at
            try:
                await client.call_tool("sdk_slow", {"seconds": 30})
            except MCPClientError as exc:
                failed_at = anyio.current_time()
                failure.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(slow_call)
            await anyio.sleep(0.5)
            killed_at = anyio.current_time()
            os.kill(first_pid, signal.SIGKILL)
        (error,) = failure
        assert isinstance(error, MCPClientError)
        assert error.server == "sdk"
        assert error.code == CONNECTION_CLOSED
        assert failed_at - killed_at < 1.0
        failed = await states.wait_for("failed")
        assert failed.server == "sdk"
        ready = await states.wait_for("ready", after=states.changes.index(failed))
        assert ready.attempt == 1
        assert int((await client.call_tool("sdk_pid")).text) != first_pid


@pytest.mark.anyio
async def test_read_only_tool_is_retried_after_a_lost_connection(client_kernel: Any) -> None:
    async with sdk_client(client_kernel) as client:
        first_pid = int((await client.call_tool("sdk_pid")).text)
        result: list[str] = []

        async def read_call() -> None:
            result.append((await client.call_tool("sdk_slow_read", {"seconds": 1.5}, timeout=60)).text)

        async with anyio.create_task_group() as tg:
            tg.start_soon(read_call)
            await anyio.sleep(0.5)
            os.kill(first_pid, signal.SIGKILL)
        (text,) = result
        assert text.startswith("read after 1.5s in ")
        assert int(text.rsplit(" ", 1)[1]) != first_pid


@pytest.mark.anyio
async def test_a_server_that_never_answers_times_out_connecting(client_kernel: Any) -> None:
    config = {
        "servers": {
            "silent": {"command": sys.executable, "args": [str(SILENT_SERVER)], "connect_timeout": 1.5}
        },
        "policy": {"stdio_restart": {"max_attempts": 0}},
    }
    start = anyio.current_time()
    async with MCPClient(config, kernel=client_kernel, store=MemoryServerStore()) as client:
        silent = client.get_servers()["silent"]
        assert silent.state == "failed"
        assert silent.error is not None
        assert "connecting timed out after 1.5s" in silent.error
        assert "reconnects" not in silent.error  # none were allowed, so none is spoken of
        with pytest.raises(MCPClientError, match="silent: server is unavailable"):
            await client.read_resource("silent", "x://y")
    assert anyio.current_time() - start < 20


@pytest.mark.anyio
async def test_a_tool_that_never_answers_times_out_and_the_server_stays_usable(client_kernel: Any) -> None:
    async with sdk_client(client_kernel) as client:
        start = anyio.current_time()
        with pytest.raises(MCPClientError) as info:
            await client.call_tool("sdk_hang", timeout=1.0)
        assert info.value.code == REQUEST_TIMEOUT
        assert "timed out after 1." in str(info.value)
        assert anyio.current_time() - start < 3
        assert (await client.call_tool("sdk_echo", {"message": "still here"})).text == "sdk: still here"
        assert client.get_servers()["sdk"].state == "ready"


@pytest.mark.anyio
async def test_progress_extends_the_timeout_up_to_the_hard_cap(client_kernel: Any) -> None:
    crawl = {"steps": 5, "step_seconds": 0.5}  # 2.5 s in all, progress every 0.5 s
    async with sdk_client(client_kernel, policy={"max_timeout": 3.5}) as client:
        steps: list[str | None] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            steps.append(message)

        out = await client.call_tool("sdk_crawl", crawl, timeout=1.5, on_progress=on_progress)
        assert out.text == "crawled 5"
        assert steps == [f"step {i}" for i in range(1, 6)]
        start = anyio.current_time()
        with pytest.raises(MCPClientError) as info:
            await client.call_tool("sdk_crawl", {"steps": 20, "step_seconds": 0.5}, timeout=1.5)
        assert info.value.code == REQUEST_TIMEOUT
        assert 3.0 < anyio.current_time() - start < 5.0
    async with sdk_client(client_kernel, policy={"progress_extends_timeout": False}) as client:
        with pytest.raises(MCPClientError) as info:
            await client.call_tool("sdk_crawl", crawl, timeout=1.5)
        assert info.value.code == REQUEST_TIMEOUT


@pytest.mark.anyio
async def test_cancel_a_call_by_its_run_id(client_kernel: Any) -> None:
    async with sdk_client(client_kernel) as client:
        errors: list[MCPClientError] = []

        async def call() -> None:
            try:
                await client.call_tool("sdk_hang", run_id="run-7", timeout=30)
            except MCPClientError as exc:
                errors.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            with anyio.fail_after(10):
                for _ in iter(lambda: client.cancel("run-7"), True):  # until the call is in flight
                    await anyio.sleep(0.05)
        assert errors[0].code == REQUEST_CANCELLED
        assert client.cancel("run-7") is False
        assert (await client.call_tool("sdk_echo", {"message": "ok"})).text == "sdk: ok"


@pytest.mark.anyio
@pytest.mark.node
async def test_restarted_http_server_is_ready_again_without_user_action(client_kernel: Any) -> None:
    with everything_http("streamableHttp") as http:
        config = {
            "servers": {"web": {"url": http.url}},
            "policy": {
                "heartbeat_interval": 0.5,
                "http_reconnect": {"max_attempts": 60, "delay": 0.2, "max_delay": 1},
            },
        }
        async with MCPClient(config, kernel=client_kernel, store=MemoryServerStore()) as client:
            states = States()
            client.on_state_change(states)
            assert (await client.call_tool("web_echo", {"message": "one"})).text == "Echo: one"
            http.stop()
            failed = await states.wait_for("failed", limit=20)
            http.start()
            ready = await states.wait_for("ready", after=states.changes.index(failed), limit=60)
            assert ready.server == "web"
            assert client.get_servers()["web"].state == "ready"
            assert (await client.call_tool("web_echo", {"message": "two"})).text == "Echo: two"


@pytest.mark.anyio
async def test_registry_is_restored_from_storage_after_a_restart(client_kernel: Any, tmp_path: Any) -> None:
    db = tmp_path / "clients.sqlite3"
    config = {"id": "app", "connect_timeout": 60}
    async with MCPClient(config, kernel=client_kernel, store=SqliteServerStore(db)) as first:
        assert first.get_servers() == {}
        await first.add_server("sdk", sdk_stdio())
        await first.add_server("echo", echo_stdio(), persist=False)
    async with MCPClient(config, kernel=client_kernel, store=SqliteServerStore(db)) as second:
        servers = second.get_servers()
        assert sorted(servers) == ["sdk"]
        assert servers["sdk"].state == "ready"
        assert (await second.call_tool("sdk_echo", {"message": "back"})).text == "sdk: back"
        await second.remove_server("sdk")
    async with MCPClient(config, kernel=client_kernel, store=SqliteServerStore(db)) as third:
        assert third.get_servers() == {}


@pytest.mark.anyio
async def test_two_live_clients_with_one_config_need_ids(client_kernel: Any) -> None:
    config = {"servers": {}}
    async with MCPClient(config, kernel=client_kernel, store=MemoryServerStore()):
        with pytest.raises(ConfigError, match="same configuration and no id is already running"):
            async with MCPClient(config, kernel=client_kernel, store=MemoryServerStore()):
                pass
        async with MCPClient({**config, "id": "other"}, kernel=client_kernel, store=MemoryServerStore()):
            pass
    async with MCPClient(config, kernel=client_kernel, store=MemoryServerStore()):
        pass


@pytest.mark.anyio
@pytest.mark.node
async def test_http_auth_is_applied_to_every_request(client_kernel: Any) -> None:
    import httpx2

    class Bearer(httpx2.Auth):
        def __init__(self) -> None:
            self.used = 0

        def auth_flow(self, request: httpx2.Request) -> Any:
            self.used += 1
            request.headers["Authorization"] = "Bearer test-token"
            yield request

    bearer = Bearer()
    with everything_http("streamableHttp") as http:
        config = {"servers": {"web": {"url": http.url, "transport": "streamable-http"}}}
        client = MCPClient(config, kernel=client_kernel, store=MemoryServerStore(), auth={"web": bearer})
        async with client:
            assert (await client.call_tool("web_echo", {"message": "auth"})).text == "Echo: auth"
    assert bearer.used >= 2
