"""The task store and runner on their own: expiry, eviction, cancelling, answering."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from toolkernel.errors import ProtocolError
from toolkernel.tasks import InMemoryTaskStore, TaskHandle, TaskRecord, TaskRunner, TaskStore


@pytest.mark.anyio
async def test_in_memory_store_is_a_task_store_and_forgets_expired_tasks():
    store = InMemoryTaskStore()
    assert isinstance(store, TaskStore)
    await store.create(TaskRecord(task_id="old", created_at="2000-01-01T00:00:00.000Z", ttl_ms=1000))
    await store.create(TaskRecord(task_id="kept", ttl_ms=None))
    assert await store.get("old") is None
    assert (await store.get("kept")) is not None


@pytest.mark.anyio
async def test_full_store_evicts_finished_tasks_first():
    store = InMemoryTaskStore(max_tasks=2)
    await store.create(TaskRecord(task_id="done", status="completed"))
    await store.create(TaskRecord(task_id="running"))
    await store.create(TaskRecord(task_id="new"))
    assert await store.get("done") is None
    assert await store.get("running") is not None
    assert await store.get("new") is not None


@pytest.mark.anyio
async def test_runner_answers_questions_and_records_outcomes():
    runner = TaskRunner()

    async def asks(handle: TaskHandle) -> dict[str, Any]:
        answer = await handle.ask("q", {"method": "roots/list", "params": {}})
        return {"content": [{"type": "text", "text": str(answer["roots"])}]}

    async def breaks(handle: TaskHandle) -> dict[str, Any]:
        raise ProtocolError(-32000, "no")

    asking = await runner.start(asks)
    broken = await runner.start(breaks)
    for _ in range(100):
        if (await runner.get(asking.task_id)).status == "input_required":  # type: ignore[union-attr]
            break
        await asyncio.sleep(0.01)
    detailed = (await runner.get(asking.task_id)).detailed()  # type: ignore[union-attr]
    assert detailed["inputRequests"] == {"q": {"method": "roots/list", "params": {}}}
    await runner.update(asking.task_id, {"q": {"roots": []}, "unknown": {}})
    for _ in range(100):
        if (await runner.get(asking.task_id)).terminal:  # type: ignore[union-attr]
            break
        await asyncio.sleep(0.01)
    done = (await runner.get(asking.task_id)).detailed()  # type: ignore[union-attr]
    assert done["status"] == "completed"
    assert done["result"]["content"][0]["text"] == "[]"
    failed = (await runner.get(broken.task_id)).detailed()  # type: ignore[union-attr]
    assert failed["status"] == "failed"
    assert failed["error"] == {"code": -32000, "message": "no"}
    await runner.aclose()


@pytest.mark.anyio
async def test_cancel_stops_the_body_and_is_idempotent():
    runner = TaskRunner()
    stopped = asyncio.Event()

    async def forever(handle: TaskHandle) -> dict[str, Any]:
        try:
            await asyncio.sleep(3600)
        finally:
            stopped.set()
        return {}

    record = await runner.start(forever)
    await asyncio.sleep(0)
    assert (await runner.cancel(record.task_id)).status == "cancelled"  # type: ignore[union-attr]
    await asyncio.wait_for(stopped.wait(), 5)
    assert (await runner.cancel(record.task_id)).status == "cancelled"  # type: ignore[union-attr]
    assert await runner.cancel("unknown") is None


@pytest.mark.anyio
async def test_an_unanswered_question_fails_the_task_instead_of_waiting_forever():
    runner = TaskRunner(answer_timeout_s=0.05)

    async def asks(handle: TaskHandle) -> dict[str, Any]:
        await handle.ask("name", {"method": "elicitation/create", "params": {}})
        return {"content": []}

    record = await runner.start(asks)
    await asyncio.wait_for(runner._running[record.task_id], 10)
    failed = (await runner.get(record.task_id)).detailed()  # type: ignore[union-attr]
    assert failed["status"] == "failed"
    assert failed["error"]["code"] == -32001
    assert "no answer to input request 'name'" in failed["error"]["message"]
    assert record.task_id in failed["error"]["message"]
    await runner.aclose()


@pytest.mark.anyio
async def test_a_question_waits_no_longer_than_the_task_lives():
    runner = TaskRunner(ttl_ms=50)  # the default answer timeout is an hour: the ttl ends the wait

    async def asks(handle: TaskHandle) -> dict[str, Any]:
        await handle.ask("q", {"method": "roots/list", "params": {}})
        return {"content": []}

    record = await runner.start(asks)
    task = runner._running[record.task_id]
    await asyncio.wait_for(task, 10)
    assert not task.cancelled()  # it ended on its own: the wait for an answer ran out
    await runner.aclose()
