"""Shared state: what replicas of one server keep in common so they behave as one server.

A *shared-state backend* is registered for a URL scheme through the
``register_shared_state`` hook and built with :meth:`toolkernel.Kernel.shared_state`
from a URL (``memory://``, the built-in default; ``redis://HOST:PORT/DB`` with
toolkernel-redis). It provides four stores, each a contract of its own:

- an **event store** (the ``mcp`` SDK's ``EventStore`` plus :meth:`EventLog.forget`) that
  keeps the events of resumable SSE streams so any replica can replay them by
  ``Last-Event-ID``, bounded by count, bytes and age, and released when a session ends;
- a **session registry** (:class:`SessionRegistry`) holding what a 2025-era stateful
  session needs to continue on another replica: who owns it and its ``initialize``;
- a **broadcast** (:class:`Broadcast`) delivering small JSON messages to every replica,
  on which the kernel builds the notification bus (``notify_updated``, ``list_changed``,
  ``subscriptions/listen``), task signals (cancel, answers) and stream hand-over;
- a **task store** (:class:`~toolkernel.tasks.TaskStore`) so ``tasks/get`` answers from
  any replica, and optionally a **task queue** (:class:`TaskQueue`) whose jobs every
  replica's worker takes, so a task outlives the replica that accepted it.

Every operation that needs the backend and cannot reach it raises
:class:`StoreUnavailable` within :data:`STORE_TIMEOUT_S`, naming the store, so a
transport can answer 503 at once instead of hanging.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from toolkernel.errors import ToolkernelError

if TYPE_CHECKING:
    from mcp.server.streamable_http import EventStore

    from toolkernel.tasks import TaskStore

__all__ = [
    "SCOPE_SEPARATOR",
    "STORE_TIMEOUT_S",
    "Broadcast",
    "BroadcastSubscriptionBus",
    "EventLog",
    "InMemoryBroadcast",
    "InMemorySessionRegistry",
    "MemorySharedState",
    "QueuedJob",
    "SessionRecord",
    "SessionRegistry",
    "SharedState",
    "SharedStateFactory",
    "StoreUnavailable",
    "TaskQueue",
    "redact_url",
]

_logger = logging.getLogger("toolkernel.shared_state")

STORE_TIMEOUT_S = 1.5
"""Longest a backend may take to answer before the operation fails with :class:`StoreUnavailable`."""


SCOPE_SEPARATOR = "\x1f"
"""Joins a session id and one of its streams into the stream id an :class:`EventLog` sees."""


class StoreUnavailable(ToolkernelError):
    """The shared-state store cannot be reached; ``store`` names it (credentials removed)."""

    def __init__(self, store: str, reason: str) -> None:
        super().__init__(f"shared state store {store} is unavailable: {reason}")
        self.store = store
        self.reason = reason


def redact_url(url: str) -> str:
    """``url`` without a password, for messages and logs."""
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest:
        return url
    credentials, _, host = rest.rpartition("@")
    user = credentials.partition(":")[0]
    return f"{scheme}://{user + ':***@' if user else '***@'}{host}"


@dataclass
class SessionRecord:
    """What a stateful session needs to continue on another replica.

    ``owner`` is the credential that opened it (an ``AuthorizationContext``, or ``None``
    for an unauthenticated server); ``client`` the key its per-client quota counts
    against; ``initialize`` the params of the ``initialize`` request that opened it, from
    which any replica negotiates the same protocol version and client capabilities.
    """

    session_id: str
    owner: dict[str, Any] | None
    client: str
    initialize: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        """The record as plain JSON data."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SessionRecord:
        """The record stored as :meth:`to_json`."""
        return cls(data["session_id"], data.get("owner"), data.get("client", ""), data.get("initialize", {}))


@runtime_checkable
class SessionRegistry(Protocol):
    """Stateful sessions every replica can find; an entry lives ``ttl_s`` past its last touch."""

    async def save(self, record: SessionRecord, ttl_s: float | None) -> None:
        """Store ``record``; any replica's :meth:`load` sees it once this returns."""
        ...

    async def load(self, session_id: str) -> SessionRecord | None:
        """The session, or ``None`` when it ended, expired or never existed."""
        ...

    async def touch(self, session_id: str, ttl_s: float | None) -> bool:
        """Restart the session's time to live; whether it still exists."""
        ...

    async def drop(self, session_id: str) -> None:
        """End the session everywhere (DELETE, a failed ``initialize``, idle timeout)."""
        ...


@runtime_checkable
class Broadcast(Protocol):
    """Small JSON messages to every subscriber in every replica, the publisher's own included.

    Delivery is at most once and in publication order per publisher; a replica that is
    disconnected misses what is published meanwhile (the notifications it carries are
    level triggers: "this changed, read it again"). Listeners are synchronous, must not
    raise, and run on the subscriber's event loop.
    """

    async def publish(self, message: dict[str, Any]) -> None:
        """Send ``message`` (JSON-serializable) to every subscriber."""
        ...

    def subscribe(self, listener: Callable[[dict[str, Any]], None]) -> Callable[[], None]:
        """Register ``listener``; returns an idempotent way to unregister it."""
        ...


@runtime_checkable
class QueuedJob(Protocol):
    """A job a worker took from a :class:`TaskQueue`; held by that worker until :meth:`done`."""

    data: dict[str, Any]

    async def done(self) -> None:
        """The job is over (whatever its outcome): no other worker will run it."""
        ...

    async def release(self) -> None:
        """Give the job back unfinished (the store failed): a worker, maybe this one, takes it again."""
        ...


@runtime_checkable
class TaskQueue(Protocol):
    """Task bodies waiting for a worker, delivered at least once.

    A job taken by a worker stays that worker's while the worker lives (the backend
    renews its claim) until it is done or released; if the worker's process dies, or it
    releases the job, a worker takes the job again after a delay, so a job may run more
    than once.
    """

    async def put(self, data: dict[str, Any]) -> None:
        """Queue a job (JSON-serializable)."""
        ...

    def take(self) -> AsyncIterator[QueuedJob]:
        """The jobs this process's worker should run, as they come, until cancelled."""
        ...


@runtime_checkable
class EventLog(Protocol):
    """The SDK's ``EventStore`` contract (``store_event``, ``replay_events_after``), plus release.

    Stream ids are ``<session id><US><stream>`` (:data:`SCOPE_SEPARATOR`);
    event ids must be unique across every replica and name their stream on their own.
    """

    async def store_event(self, stream_id: str, message: Any, size: int | None = None) -> str:
        """Record ``message`` (``None``: a priming event) on ``stream_id``; return its id."""
        ...

    async def replay_events_after(self, last_event_id: str, send_callback: Any) -> str | None:
        """Send the events of ``last_event_id``'s stream stored after it; its stream, or ``None``."""
        ...

    def forget(self, session_id: str) -> Any:
        """Drop every event of ``session_id`` (it ended); may return an awaitable."""
        ...


@runtime_checkable
class SharedState(Protocol):
    """One backend's stores, opened by :meth:`run` for a server's lifetime."""

    url: str
    """Where the state lives, credentials removed (for messages)."""
    shared: bool
    """Whether other processes see this state (``False`` for ``memory://``)."""
    sessions: SessionRegistry
    broadcast: Broadcast
    tasks: TaskStore
    queue: TaskQueue | None
    """Where task bodies wait for a worker; ``None``: a task runs in the process that accepted it."""

    def event_store(
        self, *, max_events: int, max_bytes: int, max_session_bytes: int, max_age_s: float
    ) -> EventStore | None:
        """The event store, with these bounds (see :class:`EventLog`); ``None``: the transport's own."""
        ...

    def run(self) -> contextlib.AbstractAsyncContextManager[None]:
        """Connect and start delivering broadcasts; disconnect on exit."""
        ...

    async def secret(self, name: str) -> bytes:
        """A random secret named ``name``, the same for every replica (made by the first to ask).

        What replicas must agree on without configuration: the key ``requestState`` is
        signed with, so a 2026-07-28 multi-round call may continue on another replica.
        """
        ...


SharedStateFactory = Callable[[str], SharedState]
"""Builds a backend's :class:`SharedState` from its URL (``redis://HOST:PORT/DB``)."""


# ---------------------------------------------------------------------------
# The built-in in-process backend (memory://)
# ---------------------------------------------------------------------------


class InMemorySessionRegistry:
    """Sessions in a dict of this process (the default: nothing to share).

    Expired records go when they are loaded, and each :meth:`save` and :meth:`touch`
    also looks at up to :data:`SWEEP_BATCH` of the others, in turn, dropping those
    expired: records nobody asks for again do not pile up, and no call pays for more than
    a batch.
    """

    SWEEP_BATCH = 32

    def __init__(self) -> None:
        self._records: dict[str, tuple[SessionRecord, float | None]] = {}

    def __len__(self) -> int:
        return len(self._records)

    async def save(self, record: SessionRecord, ttl_s: float | None) -> None:
        """Store ``record`` until ``ttl_s`` passes without a touch."""
        self._sweep()
        self._records[record.session_id] = (record, _deadline(ttl_s))

    async def load(self, session_id: str) -> SessionRecord | None:
        """The record unless unknown or expired."""
        entry = self._records.get(session_id)
        if entry is None:
            return None
        if entry[1] is not None and entry[1] < time.monotonic():
            del self._records[session_id]
            return None
        return entry[0]

    async def touch(self, session_id: str, ttl_s: float | None) -> bool:
        """Restart the record's time to live."""
        self._sweep()
        record = await self.load(session_id)
        if record is not None:
            self._records[session_id] = (record, _deadline(ttl_s))
        return record is not None

    async def drop(self, session_id: str) -> None:
        """Forget the session."""
        self._records.pop(session_id, None)

    def _sweep(self) -> None:
        """Look at the :data:`SWEEP_BATCH` records stored longest ago: drop the expired, requeue the rest."""
        now = time.monotonic()
        for _ in range(min(self.SWEEP_BATCH, len(self._records))):
            session_id = next(iter(self._records))
            entry = self._records.pop(session_id)
            if entry[1] is None or entry[1] >= now:
                self._records[session_id] = entry


def _deadline(ttl_s: float | None) -> float | None:
    return None if ttl_s is None else time.monotonic() + ttl_s


class InMemoryBroadcast:
    """Delivers each message to this process's listeners within :meth:`publish`, then yields to the loop."""

    def __init__(self) -> None:
        self._listeners: dict[object, Callable[[dict[str, Any]], None]] = {}

    async def publish(self, message: dict[str, Any]) -> None:
        """Call every listener with ``message``; one that raises is logged and skipped."""
        for listener in list(self._listeners.values()):
            try:
                listener(message)
            except Exception:
                _logger.exception("broadcast listener raised; continuing")
        await asyncio.sleep(0)

    def subscribe(self, listener: Callable[[dict[str, Any]], None]) -> Callable[[], None]:
        """Register ``listener``."""
        token = object()
        self._listeners[token] = listener
        return lambda: self._listeners.pop(token, None) and None


class MemorySharedState:
    """``memory://``: the stores of one process, the default when nothing is shared."""

    shared = False

    def __init__(self, url: str = "memory://") -> None:
        from toolkernel.tasks import InMemoryTaskStore

        self.url = url
        self.sessions: SessionRegistry = InMemorySessionRegistry()
        self.broadcast: Broadcast = InMemoryBroadcast()
        self.tasks: TaskStore = InMemoryTaskStore()
        self.queue: TaskQueue | None = None
        self._secrets: dict[str, bytes] = {}

    def event_store(
        self, *, max_events: int, max_bytes: int, max_session_bytes: int, max_age_s: float
    ) -> EventStore | None:
        """``None``: the transport keeps its events in its own in-process store."""
        return None

    @contextlib.asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """Nothing to connect."""
        yield

    async def secret(self, name: str) -> bytes:
        """A random secret made once per process and name (nothing is shared)."""
        import secrets

        return self._secrets.setdefault(name, secrets.token_bytes(32))


# ---------------------------------------------------------------------------
# The notification bus on a broadcast
# ---------------------------------------------------------------------------


class BroadcastSubscriptionBus:
    """The SDK's ``SubscriptionBus`` over a :class:`Broadcast`: listen streams on every replica hear it."""

    delivers_everywhere = True
    """Published events reach this process through the broadcast too (no direct local delivery)."""

    def __init__(self, broadcast: Broadcast) -> None:
        self._broadcast = broadcast

    async def publish(self, event: Any) -> None:
        """Send a list-change or resource-update event to every replica."""
        from mcp.shared import subscriptions as events

        kinds = {
            events.ToolsListChanged: "tools",
            events.PromptsListChanged: "prompts",
            events.ResourcesListChanged: "resources",
        }
        if isinstance(event, events.ResourceUpdated):
            await self._broadcast.publish({"t": "event", "kind": "updated", "uri": event.uri})
        else:
            await self._broadcast.publish({"t": "event", "kind": kinds[type(event)]})

    def subscribe(self, listener: Callable[[Any], None]) -> Callable[[], None]:
        """Call ``listener`` with each event published by any replica."""
        from mcp.shared import subscriptions as events

        def on_message(message: dict[str, Any]) -> None:
            if message.get("t") != "event":
                return
            kind = message.get("kind")
            if kind == "updated":
                listener(events.ResourceUpdated(uri=str(message.get("uri"))))
            elif kind == "tools":
                listener(events.ToolsListChanged())
            elif kind == "prompts":
                listener(events.PromptsListChanged())
            elif kind == "resources":
                listener(events.ResourcesListChanged())

        return self._broadcast.subscribe(on_message)
