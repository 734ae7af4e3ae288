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

StatusCallback = Callable[["types.Task"], Awaitable[None]]


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


async def get(client: Client, task_id: str) -> types.GetTaskResult:
    """``tasks/get``: the task's current state."""
    import mcp_types as types

    request = types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task_id))
    return await client.session.send_request(request, types.GetTaskResult)


async def cancel(client: Client, task_id: str) -> types.CancelTaskResult:
    """``tasks/cancel``: ask the server to stop the task."""
    import mcp_types as types

    request = types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task_id))
    return await client.session.send_request(request, types.CancelTaskResult)


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
