"""``subscriptions/listen`` with task status: the SDK's list-change events plus ``notifications/tasks``.

A 2026-07-28 client that declared the tasks extension may put ``taskIds`` in its listen
filter; the acknowledgement echoes the ids it will hear about, and every change of those
tasks (status, status message, open questions, outcome) arrives on the stream as a
``notifications/tasks`` whose params are the task as ``tasks/get`` would return it. The
rest (tool, prompt and resource list changes, resource updates) is the SDK's
:class:`~mcp.server.subscriptions.ListenHandler` behaviour, unchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import anyio
from mcp.server.subscriptions import ListenHandler, SubscriptionBus
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY, event_matches, event_to_notification
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    SubscriptionFilter,
    SubscriptionsAcknowledgedNotification,
    SubscriptionsAcknowledgedNotificationParams,
    SubscriptionsListenRequestParams,
    SubscriptionsListenResult,
)
from pydantic import BaseModel

from toolkernel.tasks import TASKS_EXTENSION, TaskRecord, TaskRunner

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext


class _TaskNotification(BaseModel):
    """``notifications/tasks``: one task's current state (a DetailedTask) on a listen stream."""

    method: Literal["notifications/tasks"] = "notifications/tasks"
    params: dict[str, Any]


class TaskListenHandler(ListenHandler):
    """The SDK's listen handler, also streaming the status of the tasks a client names."""

    def __init__(self, bus: SubscriptionBus, tasks: TaskRunner, *, max_buffered_events: int = 1024) -> None:
        super().__init__(bus, max_buffered_events=max_buffered_events)
        self._tasks = tasks
        self._buffered = max_buffered_events

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], params: SubscriptionsListenRequestParams
    ) -> SubscriptionsListenResult:
        """Serve one listen stream; with no ``taskIds`` (or no tasks extension) it is the SDK's."""
        requested = (params.notifications.model_extra or {}).get("taskIds")
        if not isinstance(requested, list) or not requested or not _declares_tasks(ctx):
            return await super().__call__(ctx, params)
        task_ids = frozenset(t for t in requested if isinstance(t, str))
        subscription_id = ctx.request_id
        if subscription_id is None:
            raise MCPError(INVALID_REQUEST, "subscriptions/listen requires a request id")
        if len(self._streams) >= self._max_subscriptions:
            raise MCPError(INTERNAL_ERROR, "Subscription limit reached")
        wanted = params.notifications
        honored = SubscriptionFilter.model_validate(
            {
                "toolsListChanged": True if wanted.tools_list_changed else None,
                "promptsListChanged": True if wanted.prompts_list_changed else None,
                "resourcesListChanged": True if wanted.resources_list_changed else None,
                "resourceSubscriptions": list(wanted.resource_subscriptions or ()) or None,
                "taskIds": sorted(task_ids),
            }
        )
        uris = frozenset(honored.resource_subscriptions or ())
        meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: subscription_id}
        send, recv = anyio.create_memory_object_stream[Any](self._buffered)

        def deliver(item: Any) -> None:
            try:
                send.send_nowait(item)
            except (anyio.ClosedResourceError, anyio.WouldBlock):
                send.close()  # a reader that stopped reading loses the stream, as in the SDK

        def on_event(event: Any) -> None:
            if event_matches(honored, uris, event):
                deliver(event)

        def on_task(record: TaskRecord) -> None:
            if record.task_id in task_ids:
                deliver(record.detailed())

        unsubscribe = self._bus.subscribe(on_event)
        stop_tasks = self._tasks.watch(on_task)
        self._streams.add(send)
        try:
            await ctx.session.send_notification(
                SubscriptionsAcknowledgedNotification(
                    params=SubscriptionsAcknowledgedNotificationParams(notifications=honored, _meta=meta)
                ),
                related_request_id=subscription_id,
            )
            async for item in recv:
                notification: Any = (
                    _TaskNotification(params={**item, "_meta": meta})
                    if isinstance(item, dict)
                    else event_to_notification(item, meta)
                )
                await ctx.session.send_notification(notification, related_request_id=subscription_id)
        finally:
            unsubscribe()
            stop_tasks()
            self._streams.discard(send)
            send.close()
            recv.close()
        return SubscriptionsListenResult(_meta=meta)


def _declares_tasks(ctx: ServerRequestContext[Any, Any]) -> bool:
    capabilities = getattr(getattr(ctx.session, "_connection", None), "client_capabilities", None)
    extensions = getattr(capabilities, "extensions", None)
    return isinstance(extensions, dict) and TASKS_EXTENSION in extensions
