"""Tasks: a tool call that outlives its request (the ``io.modelcontextprotocol/tasks`` extension).

A tool declared with ``task="optional"`` or ``task="required"`` runs as a task when the
client opts into the extension (in the request's ``_meta`` client capabilities): the
call is answered at once with the new task's id and status, the tool runs on in the
background, and the client polls ``tasks/get`` for its status and, once it is done, the
inlined result; ``tasks/update`` answers the questions the tool asked
(``input_required``) and ``tasks/cancel`` stops it. A tool error ends the task
``completed`` with ``isError``; a :class:`~toolkernel.errors.ProtocolError` (or a crash)
ends it ``failed``.

What a task looks like (:class:`TaskRecord`) lives behind :class:`TaskStore`, which is
in memory by default; a shared store lets any replica answer ``tasks/get``. The running
tool and its open questions (:class:`TaskRunner`) stay with the process that runs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, Protocol, runtime_checkable

from toolkernel.errors import ProtocolError

__all__ = [
    "ANSWER_TIMEOUT",
    "DEFAULT_ANSWER_TIMEOUT_S",
    "DEFAULT_POLL_INTERVAL_MS",
    "DEFAULT_TTL_MS",
    "InMemoryTaskStore",
    "TASKS_EXTENSION",
    "TERMINAL",
    "TaskHandle",
    "TaskRecord",
    "TaskRunner",
    "TaskStatus",
    "TaskStore",
    "TaskSupport",
    "Work",
]

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
"""The extension's identifier, advertised under ``capabilities.extensions``."""

TaskSupport = Literal["optional", "required"]
"""How a tool runs as a task: when the client supports tasks, or only then (else -32021)."""

TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]
TERMINAL: frozenset[str] = frozenset({"completed", "failed", "cancelled"})

DEFAULT_TTL_MS = 60 * 60 * 1000
"""How long a task is kept after it is created (one hour), unless the runner says otherwise."""
DEFAULT_POLL_INTERVAL_MS = 200
DEFAULT_ANSWER_TIMEOUT_S = 60 * 60.0
"""Longest a task waits for ``tasks/update`` to answer one question, unless its ttl ends sooner."""
ANSWER_TIMEOUT = -32001
"""The error code a task fails with when a question of its goes unanswered (JSON-RPC request timeout)."""


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class TaskRecord:
    """A task's state as clients see it: status, timestamps, and its outcome once there is one."""

    task_id: str
    status: TaskStatus = "working"
    created_at: str = field(default_factory=_now)
    last_updated_at: str = ""
    ttl_ms: int | None = DEFAULT_TTL_MS
    poll_interval_ms: int | None = DEFAULT_POLL_INTERVAL_MS
    status_message: str | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.last_updated_at:
            self.last_updated_at = self.created_at

    @property
    def terminal(self) -> bool:
        """Whether the task is over (completed, failed or cancelled)."""
        return self.status in TERMINAL

    def expired(self, now: datetime) -> bool:
        """Whether the task has outlived its ``ttl_ms`` (counted from creation)."""
        left = self.seconds_left(now)
        return left is not None and left < 0

    def seconds_left(self, now: datetime) -> float | None:
        """Seconds until the task outlives its ``ttl_ms`` (negative once it has); ``None``: it never does."""
        if self.ttl_ms is None:
            return None
        created = datetime.fromisoformat(self.created_at.replace("Z", "+00:00"))
        return self.ttl_ms / 1000 - (now - created).total_seconds()

    def info(self) -> dict[str, Any]:
        """The task's wire fields (``Task``): what ``CreateTaskResult`` carries."""
        out: dict[str, Any] = {
            "taskId": self.task_id,
            "status": self.status,
            "createdAt": self.created_at,
            "lastUpdatedAt": self.last_updated_at,
            "ttlMs": self.ttl_ms,
        }
        if self.poll_interval_ms is not None:
            out["pollIntervalMs"] = self.poll_interval_ms
        if self.status_message is not None:
            out["statusMessage"] = self.status_message
        return out

    def detailed(self) -> dict[str, Any]:
        """``DetailedTask``, what ``tasks/get`` returns: the info plus what the status implies."""
        out = self.info()
        if self.status == "completed" and self.result is not None:
            out["result"] = self.result
        elif self.status == "failed" and self.error is not None:
            out["error"] = self.error
        elif self.status == "input_required":
            out["inputRequests"] = dict(self.input_requests)
        return out


@runtime_checkable
class TaskStore(Protocol):
    """Where task state lives; every method is a single read or write of one task."""

    async def create(self, record: TaskRecord) -> None:
        """Store a new task; it must be readable by :meth:`get` when this returns."""
        ...

    async def get(self, task_id: str) -> TaskRecord | None:
        """The task, or ``None`` when it is unknown or expired."""
        ...

    async def save(self, record: TaskRecord) -> None:
        """Replace a task's stored state with ``record``."""
        ...


class InMemoryTaskStore:
    """The default :class:`TaskStore`: a dict in this process, expired tasks dropped as it grows."""

    def __init__(self, max_tasks: int = 10_000) -> None:
        self.max_tasks = max_tasks
        self._tasks: dict[str, TaskRecord] = {}

    async def create(self, record: TaskRecord) -> None:
        """Store ``record``; when full, expired tasks go first, then the oldest finished ones."""
        if len(self._tasks) >= self.max_tasks:
            self._evict()
        self._tasks[record.task_id] = record

    async def get(self, task_id: str) -> TaskRecord | None:
        """The task, unless unknown or past its ttl."""
        record = self._tasks.get(task_id)
        if record is not None and record.expired(datetime.now(UTC)):
            del self._tasks[task_id]
            return None
        return record

    async def save(self, record: TaskRecord) -> None:
        """Replace the stored task."""
        self._tasks[record.task_id] = record

    def _evict(self) -> None:
        now = datetime.now(UTC)
        for task_id in [t for t, r in self._tasks.items() if r.expired(now)]:
            del self._tasks[task_id]
        finished = [t for t, r in self._tasks.items() if r.terminal]
        for task_id in finished[: max(0, len(self._tasks) - self.max_tasks + 1)]:
            del self._tasks[task_id]


class TaskHandle:
    """What a tool running as a task holds: its id, a way to ask the client, a status line."""

    def __init__(self, runner: TaskRunner, record: TaskRecord) -> None:
        self.runner = runner
        self.record = record
        self.queued = False
        """Taken from a shared queue: another worker runs it again if this process stops."""

    @property
    def task_id(self) -> str:
        """The task's id."""
        return self.record.task_id

    async def ask(self, key: str, request: dict[str, Any]) -> dict[str, Any]:
        """Park the task on ``input_required`` until ``tasks/update`` answers ``key``."""
        return await self.runner._ask(self.record, key, request)

    async def status(self, message: str) -> None:
        """Set the task's ``statusMessage`` (shown by ``tasks/get``)."""
        self.record.status_message = message
        await self.runner._touch(self.record)


Work = Callable[[TaskHandle], Awaitable[dict[str, Any]]]
"""A task's body: given its handle, returns the ``CallToolResult`` it ends with."""


class TaskRunner:
    """Runs task bodies in the background and keeps their state in a :class:`TaskStore`.

    One per served server. The bodies run as tasks of the event loop that started them,
    so they outlive the request that created them; :meth:`aclose` cancels what is left.
    """

    def __init__(
        self,
        store: TaskStore | None = None,
        *,
        ttl_ms: int | None = DEFAULT_TTL_MS,
        poll_interval_ms: int | None = DEFAULT_POLL_INTERVAL_MS,
        answer_timeout_s: float = DEFAULT_ANSWER_TIMEOUT_S,
    ) -> None:
        self.store: TaskStore = store if store is not None else InMemoryTaskStore()
        self.ttl_ms = ttl_ms
        self.poll_interval_ms = poll_interval_ms
        self.answer_timeout_s = answer_timeout_s
        """Longest :meth:`TaskHandle.ask` waits; the task's own ttl may end the wait sooner."""
        self._running: dict[str, asyncio.Task[None]] = {}
        self._waiting: dict[str, dict[str, asyncio.Future[dict[str, Any]]]] = {}
        self._watchers: list[Callable[[TaskRecord], None]] = []
        self._broadcast: Any = None
        self.queue: Any = None
        """A :class:`toolkernel.shared_state.TaskQueue` task bodies go to, when tasks are shared."""
        self._closing = False

    def share(self, store: TaskStore, broadcast: Any, queue: Any = None) -> Callable[[], None]:
        """Keep task state in ``store`` and hear other replicas' ``tasks/update`` and ``tasks/cancel``.

        ``broadcast`` is a :class:`toolkernel.shared_state.Broadcast`: answers or a
        cancellation taken by any replica reach the process running the task body through
        it. With a ``queue`` (a :class:`toolkernel.shared_state.TaskQueue`) the server
        queues task bodies for the replicas' workers instead of running them where the
        call came in. Returns the way to stop listening.
        """
        self.store = store
        self._broadcast = broadcast
        self.queue = queue

        def on_message(message: dict[str, Any]) -> None:
            if message.get("t") != "task":
                return
            task_id = str(message.get("task"))
            if message.get("op") == "update":
                self._answer(task_id, message.get("responses") or {})
            elif message.get("op") == "cancel" and (task := self._running.get(task_id)) is not None:
                task.cancel()

        stop: Callable[[], None] = broadcast.subscribe(on_message)
        return stop

    def watch(self, listener: Callable[[TaskRecord], None]) -> Callable[[], None]:
        """Call ``listener`` with each task this runner changes; returns the way to stop."""
        self._watchers.append(listener)

        def stop() -> None:
            with contextlib.suppress(ValueError):
                self._watchers.remove(listener)

        return stop

    async def start(self, work: Work, *, record: TaskRecord | None = None) -> TaskRecord:
        """Create a task, store it, start ``work`` on it; returns it once ``tasks/get`` can see it."""
        if record is None:
            record = self.new_record()
        await self.store.create(record)
        snapshot = TaskRecord(**{**record.__dict__, "input_requests": {}})
        handle = TaskHandle(self, record)
        task = asyncio.get_running_loop().create_task(self._run(handle, work), name=f"task {record.task_id}")
        self._running[record.task_id] = task
        task.add_done_callback(lambda _: self._running.pop(record.task_id, None))
        return snapshot

    def new_record(self) -> TaskRecord:
        """A fresh ``working`` task with a new id and this runner's ttl and poll interval."""
        return TaskRecord(
            task_id=secrets.token_urlsafe(16), ttl_ms=self.ttl_ms, poll_interval_ms=self.poll_interval_ms
        )

    def attach(self, record: TaskRecord, work: Callable[[], Awaitable[dict[str, Any]]]) -> None:
        """Finish an already-running body (started in a request) as the task ``record``."""

        async def finish(handle: TaskHandle) -> dict[str, Any]:
            return await work()

        task = asyncio.get_running_loop().create_task(
            self._run(TaskHandle(self, record), finish), name=f"task {record.task_id}"
        )
        self._running[record.task_id] = task
        task.add_done_callback(lambda _: self._running.pop(record.task_id, None))

    async def run_taken(self, record: TaskRecord, work: Work) -> None:
        """Run ``work`` here as the stored task ``record``, which a worker took from the queue.

        Returns when the task ends. If this runner closes first (its server stops), the task
        is left ``working`` for another worker to take again, not marked cancelled.
        """
        handle = TaskHandle(self, record)
        handle.queued = True
        task = asyncio.get_running_loop().create_task(self._run(handle, work), name=f"task {record.task_id}")
        self._running[record.task_id] = task
        task.add_done_callback(lambda _: self._running.pop(record.task_id, None))
        try:
            await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # this worker is being stopped, not the task cancelled

    async def get(self, task_id: str) -> TaskRecord | None:
        """The task's current state, or ``None`` when unknown or expired."""
        return await self.store.get(task_id)

    async def update(self, task_id: str, responses: Mapping[str, Any]) -> TaskRecord | None:
        """Deliver answers to the task's open questions; unknown keys are ignored."""
        record = await self.store.get(task_id)
        if record is None:
            return None
        if self._broadcast is not None:  # the body may run in another replica
            message = {"t": "task", "op": "update", "task": task_id, "responses": dict(responses)}
            await self._broadcast.publish(message)
        else:
            self._answer(task_id, responses)
        return record

    def _answer(self, task_id: str, responses: Mapping[str, Any]) -> None:
        waiting = self._waiting.get(task_id, {})
        for key, answer in responses.items():
            future = waiting.pop(key, None)
            if future is not None and not future.done():
                future.set_result(dict(answer) if isinstance(answer, Mapping) else {"value": answer})

    async def cancel(self, task_id: str) -> TaskRecord | None:
        """Stop the task; a task already over is left as it is (cancelling is idempotent)."""
        record = await self.store.get(task_id)
        if record is None:
            return None
        if not record.terminal:
            await self._finish(record, "cancelled")
            task = self._running.get(task_id)
            if task is not None:
                task.cancel()
            elif self._broadcast is not None:  # running in another replica
                await self._broadcast.publish({"t": "task", "op": "cancel", "task": task_id})
        return record

    async def aclose(self) -> None:
        """Cancel every task still running here and wait for them to stop."""
        self._closing = True
        tasks = list(self._running.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task

    # -- internals ----------------------------------------------------------------------

    async def _run(self, handle: TaskHandle, work: Work) -> None:
        record = handle.record
        try:
            result = await work(handle)
        except asyncio.CancelledError:
            if not record.terminal and not (handle.queued and self._closing):
                await self._finish(record, "cancelled")
            raise
        except ProtocolError as exc:
            if not record.terminal:
                await self._finish(record, "failed", error=exc.error())
            return
        except Exception as exc:
            if not record.terminal:
                await self._finish(
                    record, "failed", error={"code": -32603, "message": f"{type(exc).__name__}: {exc}"}
                )
            return
        finally:
            self._waiting.pop(record.task_id, None)
        if not record.terminal:
            await self._finish(record, "completed", result=result)

    async def _finish(
        self,
        record: TaskRecord,
        status: TaskStatus,
        *,
        result: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
    ) -> None:
        record.status = status
        record.result = result
        record.error = error
        record.input_requests = {}
        for future in self._waiting.pop(record.task_id, {}).values():
            future.cancel()
        await self._touch(record)

    async def _touch(self, record: TaskRecord) -> None:
        record.last_updated_at = _now()
        await self.store.save(record)
        for listener in list(self._watchers):
            listener(record)

    async def _ask(self, record: TaskRecord, key: str, request: dict[str, Any]) -> dict[str, Any]:
        """Wait for the answer to ``key``, at most :attr:`answer_timeout_s` and never past the task's
        ttl (an expired task can no longer be updated); a question left unanswered fails the task."""
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(record.task_id, {})[key] = future
        record.input_requests[key] = request
        record.status = "input_required"
        await self._touch(record)
        left = record.seconds_left(datetime.now(UTC))
        wait_s = max(0.0, self.answer_timeout_s if left is None else min(left, self.answer_timeout_s))
        try:
            return await asyncio.wait_for(future, wait_s)
        except TimeoutError:
            raise ProtocolError(
                ANSWER_TIMEOUT,
                f"task {record.task_id}: no answer to input request {key!r} within {wait_s:g} s "
                "(answer with tasks/update)",
                {"taskId": record.task_id, "inputRequest": key},
            ) from None
        finally:
            record.input_requests.pop(key, None)
            if not record.terminal and not record.input_requests:
                record.status = "working"
            if not record.terminal:
                await self._touch(record)
