"""The in-process shared-state stores and the task worker's handling of a failing store."""

from __future__ import annotations

import ast
import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from toolkernel import MCPServer, tool
from toolkernel._app import ServingAppImpl
from toolkernel.shared_state import (
    SCOPE_SEPARATOR,
    InMemorySessionRegistry,
    QueuedJob,
    SessionRecord,
    StoreUnavailable,
    TaskQueue,
)
from toolkernel.tasks import InMemoryTaskStore, TaskRecord

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.anyio
async def test_expired_sessions_nobody_loads_again_are_swept_by_later_saves():
    registry = InMemorySessionRegistry()
    for i in range(1000):
        await registry.save(SessionRecord(f"gone-{i}", None, "c", {}), ttl_s=0.01)
    await asyncio.sleep(0.05)  # every one of them is past its time to live now
    for i in range(100):
        await registry.save(SessionRecord(f"kept-{i}", None, "c", {}), ttl_s=None)
    # No one asked for the expired sessions again: the saves' sweeps dropped them anyway.
    assert len(registry) == 100
    assert await registry.load("kept-0") is not None
    assert await registry.touch("kept-99", None)


@pytest.mark.anyio
async def test_a_sweep_keeps_live_sessions_and_looks_at_a_batch_per_call():
    registry = InMemorySessionRegistry()
    for i in range(200):
        await registry.save(SessionRecord(f"s{i}", None, "c", {}), ttl_s=3600)
    for i in range(200):
        await registry.touch(f"s{i}", 3600)
    assert len(registry) == 200
    assert all([await registry.load(f"s{i}") is not None for i in range(200)])


def test_the_scope_separator_is_defined_once_in_the_kernel_contract():
    defined = []
    for source in [*REPO.glob("kernel/src/**/*.py"), *REPO.glob("plugins/*/src/**/*.py")]:
        for node in ast.walk(ast.parse(source.read_text())):
            targets = node.targets if isinstance(node, ast.Assign) else []
            if isinstance(node, ast.AnnAssign):
                targets = [node.target]
            if any(isinstance(t, ast.Name) and t.id == "SCOPE_SEPARATOR" for t in targets):
                defined.append(str(source.relative_to(REPO)))
    assert defined == ["kernel/src/toolkernel/shared_state.py"]
    assert SCOPE_SEPARATOR == "\x1f"


class _Job:
    """A job as a queue backend hands it out, recording how the worker let go of it."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        self.outcome = asyncio.get_running_loop().create_future()

    async def done(self) -> None:
        self.outcome.set_result("done")

    async def release(self) -> None:
        self.outcome.set_result("released")


class _OneJobQueue:
    """A queue holding one job (in process: the worker's handling is what is under test)."""

    def __init__(self, job: _Job) -> None:
        self.job = job

    async def put(self, data: dict[str, Any]) -> None:
        raise NotImplementedError

    async def take(self) -> AsyncIterator[_Job]:
        yield self.job
        await asyncio.Event().wait()  # no more jobs until the worker stops


class _StoreDown(InMemoryTaskStore):
    """A task store whose backend cannot be reached."""

    async def get(self, task_id: str) -> TaskRecord | None:
        raise StoreUnavailable("redis://127.0.0.1:1/0", "Connection refused")


@pytest.mark.anyio
@pytest.mark.parametrize("failing", ["get", "save"])
async def test_a_worker_releases_a_job_when_the_store_fails(failing):
    @tool
    def echo(text: str) -> str:
        """Echo."""
        return text

    store: InMemoryTaskStore = _StoreDown() if failing == "get" else InMemoryTaskStore()
    server = MCPServer("jobs", tools=[echo], task_store=store)
    app = ServingAppImpl(server, server.kernel)
    record = TaskRecord(task_id="t1")
    await store.create(record)
    if failing == "save":  # the body runs, then its outcome cannot be stored

        async def down(record: TaskRecord) -> None:
            raise StoreUnavailable("redis://127.0.0.1:1/0", "Connection refused")

        store.save = down  # type: ignore[method-assign]
    job = _Job({"task": "t1", "tool": "echo", "arguments": {"text": "hi"}})
    queue = _OneJobQueue(job)
    assert isinstance(queue, TaskQueue)
    assert isinstance(job, QueuedJob)
    async with app.task_worker(queue):
        outcome = await asyncio.wait_for(job.outcome, 10)
    # Not left claimed by this worker for as long as it lives: given back to the queue.
    assert outcome == "released"
