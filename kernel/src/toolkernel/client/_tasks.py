"""Task-augmented tool calls (2025-11-25 Tasks, SEP-1686): create, watch, fetch the result, cancel.

A tool whose ``execution.taskSupport`` is ``required`` (or ``optional``, when the caller
asks) is called with a ``task`` parameter; the server answers at once with a task,
runs the tool in the background, and hands the ``CallToolResult`` over ``tasks/result``,
which blocks until the task ends and meanwhile carries the server's own requests
(an elicitation the task needs). While it waits, the client polls ``tasks/get`` at the
server's ``pollInterval`` and reports each status as progress, so a task that keeps
moving keeps its call alive (up to the policy's hard cap). A call that is cancelled or
times out sends ``tasks/cancel``, so the server stops the work too.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio

if TYPE_CHECKING:
    import mcp_types as types
    from mcp.client import Client

TERMINAL = frozenset({"completed", "failed", "cancelled"})
_MIN_POLL_S = 0.1
_DEFAULT_POLL_S = 1.0
_CANCEL_GRACE_S = 5.0

StatusCallback = Callable[[Any], Awaitable[None]]
"""Called with each new state of a task (``task_id``, ``status``, ``status_message``)."""


def task_support(tool: types.Tool | None) -> str:
    """``required``, ``optional`` or ``forbidden`` (absent means forbidden)."""
    execution = tool.execution if tool is not None else None
    return (execution.task_support if execution is not None else None) or "forbidden"


def server_runs_tool_tasks(capabilities: types.ServerCapabilities | None) -> bool:
    """Whether the server announced ``tasks.requests.tools.call``."""
    tasks = capabilities.tasks if capabilities is not None else None
    requests = tasks.requests if tasks is not None else None
    return requests is not None and requests.tools is not None and requests.tools.call is not None


async def _create(client: Client, tool: str, arguments: dict[str, Any], ttl_ms: int | None, meta: Any) -> Any:
    """Send the task-augmented ``tools/call`` and return the created task.

    The SDK has no Tasks support and validates every ``tools/call`` answer as a
    ``CallToolResult``, which a ``CreateTaskResult`` is not; so this one request goes
    through the session's dispatcher with the session's own stamping, unvalidated.
    """
    import mcp_types as types

    request = types.CallToolRequest(
        params=types.CallToolRequestParams(
            name=tool, arguments=arguments, task=types.TaskMetadata(ttl=ttl_ms), _meta=meta
        )
    )
    session = client.session
    data = request.model_dump(by_alias=True, mode="json", exclude_none=True)
    opts: dict[str, Any] = {}
    session._stamp(data, opts)  # type: ignore[arg-type]
    raw = await session._dispatcher.send_raw_request(data["method"], data.get("params"), opts)  # type: ignore[arg-type]
    if "task" not in raw:
        # A server may run the call at once instead (taskSupport optional): that is the result.
        return types.CallToolResult.model_validate(raw, by_name=False)
    return types.CreateTaskResult.model_validate(raw, by_name=False).task


def _modern(client: Client) -> bool:
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    return client.protocol_version in MODERN_PROTOCOL_VERSIONS


async def get(client: Client, task_id: str) -> Any:
    """``tasks/get``: the task's current state (``task_id``, ``status``, ``status_message``, ...).

    A 2025-11-25 ``GetTaskResult``; on 2026-07-28 a detailed task that also inlines the
    ``result``, the ``error`` or the open ``input_requests``.
    """
    import mcp_types as types

    request = types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task_id))
    answer: type[Any] = _v2_types()[0] if _modern(client) else types.GetTaskResult
    return await client.session.send_request(request, answer)


async def cancel(client: Client, task_id: str) -> Any:
    """``tasks/cancel``: ask the server to stop the task (2026-07-28 answers with an empty ack)."""
    import mcp_types as types

    request = types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task_id))
    answer: type[Any] = _v2_types()[2] if _modern(client) else types.CancelTaskResult
    return await client.session.send_request(request, answer)


async def call_as_task(
    client: Client,
    tool: str,
    arguments: dict[str, Any],
    *,
    meta: Any,
    on_status: StatusCallback,
    ttl_ms: int | None = None,
) -> types.CallToolResult:
    """Run ``tool`` as a task and return its result; cancelled or timed out, cancel the task."""
    import mcp_types as types

    created = await _create(client, tool, arguments, ttl_ms, meta)
    if isinstance(created, types.CallToolResult):
        return created
    task: types.Task = created
    await on_status(task)
    try:
        async with anyio.create_task_group() as tg:

            async def watch() -> None:
                current = task
                while current.status not in TERMINAL:
                    interval = (current.poll_interval or 0) / 1000 or _DEFAULT_POLL_S
                    await anyio.sleep(max(_MIN_POLL_S, interval))
                    latest = await get(client, task.task_id)
                    if (latest.status, latest.status_message) != (current.status, current.status_message):
                        await on_status(latest)
                    current = latest

            tg.start_soon(watch)
            payload = types.GetTaskPayloadRequest(
                params=types.GetTaskPayloadRequestParams(task_id=task.task_id)
            )
            result = await client.session.send_request(payload, types.CallToolResult)
            tg.cancel_scope.cancel()
        return result
    except BaseException:
        # The task may have ended already: the original error is what matters.
        with anyio.move_on_after(_CANCEL_GRACE_S, shield=True), contextlib.suppress(Exception):
            await cancel(client, task.task_id)
        raise


# -- 2026-07-28: the io.modelcontextprotocol/tasks extension (SEP-2663) ------------------------

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
"""The extension identifier the client advertises under ``capabilities.extensions``."""

status_callback: contextvars.ContextVar[StatusCallback | None] = contextvars.ContextVar(
    "toolkernel_task_status", default=None
)
"""Where the task a ``tools/call`` turns into reports its statuses (set around each call)."""


@functools.cache
def extension() -> Any:
    """A client extension that resolves a ``tools/call`` answered with ``resultType: "task"``.

    The SDK hands the created task to :func:`_resolve_v2`, which polls ``tasks/get``,
    answers ``inputRequests`` with the client's own callbacks (``tasks/update``), and
    returns the result the server inlines once the task completes.
    """
    from typing import Literal

    import mcp_types as types
    from mcp.client.extension import ClientExtension, ResultClaim
    from pydantic import ConfigDict

    class CreatedTask(types.Result):
        model_config = ConfigDict(extra="allow")
        result_type: Literal["task"]
        task_id: str
        status: str
        status_message: str | None = None
        poll_interval_ms: int | None = None

    class TasksExtension(ClientExtension):
        identifier = TASKS_EXTENSION

        def claims(self) -> Any:
            return [ResultClaim(result_type="task", model=CreatedTask, resolve=_resolve_v2)]

    return TasksExtension()


@functools.cache
def _v2_types() -> tuple[type[Any], type[Any], type[Any]]:
    """``tasks/get`` answer, ``tasks/update`` request and the empty ack, as models the SDK can send."""
    from typing import Literal

    import mcp_types as types
    from pydantic import ConfigDict

    class DetailedTask(types.Result):
        model_config = ConfigDict(extra="allow")
        task_id: str
        status: str
        status_message: str | None = None
        poll_interval_ms: int | None = None
        result: dict[str, Any] | None = None
        error: dict[str, Any] | None = None
        input_requests: types.InputRequests | None = None

    class UpdateParams(types.RequestParams):
        task_id: str
        input_responses: dict[str, Any]

    class UpdateTaskRequest(types.Request[UpdateParams, Literal["tasks/update"]]):
        method: Literal["tasks/update"] = "tasks/update"
        params: UpdateParams

    class Ack(types.Result):
        model_config = ConfigDict(extra="allow")

    return DetailedTask, UpdateTaskRequest, Ack


async def _resolve_v2(created: Any, ctx: Any) -> types.CallToolResult:
    """Poll the task to its end, answering its questions; cancelled, cancel it on the server."""
    import mcp_types as types
    from mcp.client.context import ClientRequestContext
    from mcp.shared.exceptions import MCPError

    detailed_type, update_type, ack = _v2_types()
    session = ctx.session
    report = status_callback.get()
    task_id: str = created.task_id
    current: Any = created
    if report is not None:
        await report(created)
    answered: set[str] = set()
    try:
        while True:
            if current.status == "input_required" and getattr(current, "input_requests", None):
                pending = {k: v for k, v in current.input_requests.items() if k not in answered}
                if pending:
                    answers = {}
                    for key, request in pending.items():
                        context = ClientRequestContext(session=session, request_id=key, meta=None)
                        answer = await session.dispatch_input_request(context, request)
                        if isinstance(answer, types.ErrorData):
                            raise MCPError.from_error_data(answer)
                        answers[key] = answer.model_dump(by_alias=True, mode="json", exclude_none=True)
                    params = {"taskId": task_id, "inputResponses": answers}
                    await session.send_request(update_type(params=params), ack)
                    answered |= set(pending)
            if current.status == "completed":
                if current.result is None:
                    raise MCPError(
                        code=types.INTERNAL_ERROR, message=f"task {task_id} completed with no result"
                    )
                return types.CallToolResult.model_validate(current.result, by_name=False)
            if current.status == "failed":
                error = current.error or {"code": types.INTERNAL_ERROR, "message": f"task {task_id} failed"}
                raise MCPError.from_error_data(types.ErrorData.model_validate(error))
            if current.status == "cancelled":
                raise MCPError(
                    code=types.INTERNAL_ERROR, message=f"task {task_id} was cancelled on the server"
                )
            interval = (current.poll_interval_ms or 0) / 1000 or _DEFAULT_POLL_S
            await anyio.sleep(max(_MIN_POLL_S, interval))
            get_request = types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task_id))
            latest = await session.send_request(get_request, detailed_type)
            if report is not None and (latest.status, latest.status_message) != (
                current.status,
                current.status_message,
            ):
                await report(latest)
            current = latest
    except BaseException:
        if current.status not in TERMINAL:
            cancel_request = types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task_id))
            with anyio.move_on_after(_CANCEL_GRACE_S, shield=True), contextlib.suppress(Exception):
                await session.send_request(cancel_request, ack)
        raise
