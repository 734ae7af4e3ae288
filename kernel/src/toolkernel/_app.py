"""The handle a transport serves a server through, loading the ``mcp`` SDK only when first needed.

:class:`ServingAppImpl` holds what a served server needs whatever the protocol code: its
tools, tool caller, task runner and session hooks. The SDK low-level server and its request
handlers live in :mod:`toolkernel._serving` and are imported on first use, so a stdio
server can answer the handshake before the SDK is loaded (see :mod:`toolkernel._handshake`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import AsyncIterator, Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Any

import anyio

from toolkernel.auth import AuthInfo
from toolkernel.calls import ToolCaller
from toolkernel.context import ToolContext
from toolkernel.events import SessionEvent
from toolkernel.skills import SKILLS_EXTENSION
from toolkernel.tasks import TASKS_EXTENSION, TaskHandle, TaskRunner

if TYPE_CHECKING:
    from mcp.server.models import InitializationOptions
    from mcp.shared._stream_protocols import ReadStream, WriteStream
    from mcp.shared.message import SessionMessage

    from toolkernel._kernel import Kernel
    from toolkernel._serving import ProtocolServer
    from toolkernel.server import MCPServer
    from toolkernel.tools import Tool

_logger = logging.getLogger("toolkernel.tasks")

_callers: weakref.WeakKeyDictionary[MCPServer, ToolCaller] = weakref.WeakKeyDictionary()


def caller_for(server: MCPServer) -> ToolCaller:
    """The tool caller of ``server``: remade when its kernel or middleware list changes."""
    caller = _callers.get(server)
    if caller is None or not caller.serves(server.kernel, server.middleware):
        caller = _callers[server] = ToolCaller(server.kernel, server.middleware)
    return caller


def advertised_extensions(server: MCPServer, tools: Mapping[str, Tool]) -> dict[str, dict[str, Any]]:
    """The extensions a server advertises (SEP-2133): tasks when a tool can run as one, skills
    when it has some."""
    extensions: dict[str, dict[str, Any]] = {}
    if any(t.task is not None for t in tools.values()):
        extensions[TASKS_EXTENSION] = {}
    if server.skills:
        extensions[SKILLS_EXTENSION] = {"directoryRead": True}
    return extensions


class ServingAppImpl:
    """A server being served: the SDK server plus the session hooks, as transports see it.

    Making one loads no protocol code: the SDK server is built on first use of
    :attr:`protocol_server`, so a transport can do what needs no SDK (answer
    a client's first request, see :mod:`toolkernel._handshake`) before paying for its import.
    """

    def __init__(self, server: MCPServer, kernel: Kernel) -> None:
        self.server = server
        self.kernel = kernel
        self.caller = caller_for(server)
        self.tasks = TaskRunner(server.task_store)
        self._tools: dict[str, Tool] = {}
        self._seen: tuple[int, int] | None = None

    @property
    def tools(self) -> dict[str, Tool]:
        """Every tool the server offers now: recomputed only after the server or its plugins change."""
        seen = (self.server._revision, self.kernel._generation)
        if seen != self._seen:
            self._tools = self.server.all_tools()
            self._seen = seen
        return self._tools

    @cached_property
    def protocol_server(self) -> ProtocolServer:
        """The SDK low-level server carrying this server's handlers (loads the SDK on first use)."""
        from toolkernel._serving import protocol_server_for

        return protocol_server_for(self)

    def early_answer(self, frame: bytes) -> tuple[int | str, bytes] | None:
        """``(id, answer)`` for ``frame`` when it is a plain ``initialize`` or ``server/discover``,
        made without the SDK.

        ``None`` for any other frame (see :mod:`toolkernel._handshake`), and once the SDK
        server exists: a transport may have changed what it advertises.
        """
        if "protocol_server" in vars(self):
            return None
        from toolkernel._handshake import early_answer

        return early_answer(frame, self.server, advertised_extensions(self.server, self.tools))

    @cached_property
    def init_options(self) -> InitializationOptions:
        """Initialization options advertising list-changed notifications."""
        return self.protocol_server.create_initialization_options()

    async def run_session(
        self,
        read: ReadStream[SessionMessage | Exception],
        write: WriteStream[SessionMessage],
        *,
        transport: str,
        session_id: str | None = None,
    ) -> None:
        """Serve one connection over a stream pair, firing the session hooks around it."""
        async with self.session(transport=transport, session_id=session_id):
            await self.protocol_server.run(read, write, self.init_options)

    @contextlib.asynccontextmanager
    async def task_worker(self, queue: Any) -> AsyncIterator[None]:
        """Run the task bodies ``queue`` (a ``TaskQueue``) hands this process, while the block runs."""
        worker = asyncio.get_running_loop().create_task(self._work(queue), name="task worker")
        try:
            yield
        finally:
            worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await worker
            await self.tasks.aclose()

    async def _work(self, queue: Any) -> None:
        running: set[asyncio.Task[None]] = set()
        try:
            async for job in queue.take():
                task = asyncio.get_running_loop().create_task(self._run_job(job))
                running.add(task)
                task.add_done_callback(running.discard)
        finally:
            for task in list(running):
                task.cancel()

    async def _run_job(self, job: Any) -> None:
        """Run one queued task body; the job is done once its task has ended (or cannot run).

        When the store fails meanwhile (unreachable, or raising), the job is released rather
        than left claimed by this worker for as long as it lives: the queue hands it out
        again, and the task runs once the store answers.
        """
        try:
            await self._run_job_body(job.data)
            await job.done()
        except asyncio.CancelledError:
            raise  # the worker is stopping: the backend hands the job to another worker
        except Exception as exc:
            _logger.warning("task %s: job released to the queue: %s", job.data.get("task"), exc)
            with contextlib.suppress(Exception):
                await job.release()

    async def _run_job_body(self, data: dict[str, Any]) -> None:
        record = await self.tasks.store.get(str(data.get("task")))
        tool = self.tools.get(str(data.get("tool")))
        if record is None or record.terminal or tool is None:
            if record is not None and not record.terminal:
                await self.tasks._finish(record, "failed", error={"code": -32602, "message": "Unknown tool"})
            return
        auth = AuthInfo.model_validate(data["auth"]) if data.get("auth") else None
        values = data.get("values")

        async def work(handle: TaskHandle) -> dict[str, Any]:
            from toolkernel._serving import _call_result

            tctx = ToolContext(
                server=self.server,
                tool_name=tool.name,
                call_id=record.task_id,
                values=values if isinstance(values, dict) else None,
                auth=auth,
                task=handle,
                client_capabilities=data.get("capabilities"),
            )
            outcome = await self.caller.call(tool, dict(data.get("arguments") or {}), tctx)
            return _call_result(outcome).model_dump(by_alias=True, mode="json", exclude_none=True)

        await self.tasks.run_taken(record, work)

    @contextlib.asynccontextmanager
    async def session(self, *, transport: str, session_id: str | None = None) -> AsyncIterator[None]:
        """Fire ``on_session_start`` on entry and ``on_session_stop`` on exit, however it exits."""
        event = SessionEvent(server=self.server, transport=transport, session_id=session_id)
        await self.kernel.emit("on_session_start", event=event)
        try:
            yield
        finally:
            # A session usually ends by cancellation: shield the hooks, or async ones never run.
            with anyio.CancelScope(shield=True):
                await self.kernel.emit("on_session_stop", event=event)
