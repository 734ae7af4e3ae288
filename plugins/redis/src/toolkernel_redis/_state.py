"""The Redis backend: sessions, events, broadcast and tasks of every replica under one URL.

Keys (all under ``toolkernel:``): ``session:<id>`` (the session record, expiring
``idle_timeout`` after its last touch), ``events:<id>`` / ``event-bytes:<id>`` (see
:mod:`toolkernel_redis._events`), ``task:<id>`` (a task, expiring with its ttl),
``replica:<id>`` (a replica's heartbeat). One pub/sub channel, ``toolkernel:broadcast``,
carries every broadcast message.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict
from typing import Any

from toolkernel.shared_state import (
    Broadcast,
    SessionRecord,
    SessionRegistry,
    StoreUnavailable,
    TaskQueue,
    redact_url,
)
from toolkernel.tasks import TaskRecord, TaskStore
from toolkernel_redis._client import PREFIX, connect, guarded
from toolkernel_redis._events import RedisEventStore, events_key, sizes_key
from toolkernel_redis._queue import RedisTaskQueue

logger = logging.getLogger("toolkernel.redis")

CHANNEL = f"{PREFIX}broadcast"
HEARTBEAT_S = 1.0
"""How often a replica says it is alive; it counts as dead after three missed beats."""


class RedisSessionRegistry:
    """Session records as JSON strings with a time to live."""

    def __init__(self, state: RedisSharedState) -> None:
        self._state = state

    async def save(self, record: SessionRecord, ttl_s: float | None) -> None:
        """Store ``record`` (expiring ``ttl_s`` after its last touch)."""
        px = None if ttl_s is None else int(ttl_s * 1000)
        data = json.dumps(record.to_json())
        await self._state.guard(self._state.client.set(_session_key(record.session_id), data, px=px))

    async def load(self, session_id: str) -> SessionRecord | None:
        """The record, or ``None``."""
        data = await self._state.guard(self._state.client.get(_session_key(session_id)))
        return None if data is None else SessionRecord.from_json(json.loads(data))

    async def touch(self, session_id: str, ttl_s: float | None) -> bool:
        """Restart its time to live; whether it exists."""
        key = _session_key(session_id)
        client = self._state.client
        done = client.persist(key) if ttl_s is None else client.pexpire(key, int(ttl_s * 1000))
        return bool(await self._state.guard(done))

    async def drop(self, session_id: str) -> None:
        """Delete the record and the session's events."""
        keys = (_session_key(session_id), events_key(session_id), sizes_key(session_id))
        await self._state.guard(self._state.client.delete(*keys))


class RedisTaskStore:
    """Tasks as JSON strings expiring with their ttl: ``tasks/get`` answers from any replica."""

    def __init__(self, state: RedisSharedState) -> None:
        self._state = state

    async def create(self, record: TaskRecord) -> None:
        """Store a new task."""
        await self.save(record)

    async def get(self, task_id: str) -> TaskRecord | None:
        """The task, unless unknown or expired."""
        data = await self._state.guard(self._state.client.get(_task_key(task_id)))
        return None if data is None else TaskRecord(**json.loads(data))

    async def save(self, record: TaskRecord) -> None:
        """Replace the stored task."""
        px = None if record.ttl_ms is None else max(1, record.ttl_ms)
        data = json.dumps(asdict(record))
        await self._state.guard(self._state.client.set(_task_key(record.task_id), data, px=px))


class RedisBroadcast:
    """Pub/sub on one channel; a reader task per replica delivers to its listeners."""

    def __init__(self, state: RedisSharedState) -> None:
        self._state = state
        self._listeners: dict[object, Callable[[dict[str, Any]], None]] = {}

    async def publish(self, message: dict[str, Any]) -> None:
        """Send ``message`` to every replica (this one included)."""
        await self._state.guard(self._state.client.publish(CHANNEL, json.dumps(message)))

    def subscribe(self, listener: Callable[[dict[str, Any]], None]) -> Callable[[], None]:
        """Register ``listener``."""
        token = object()
        self._listeners[token] = listener
        return lambda: self._listeners.pop(token, None) and None

    def deliver(self, message: dict[str, Any]) -> None:
        """Call every listener of this replica with ``message``; one that raises is logged and skipped."""
        for listener in list(self._listeners.values()):
            try:
                listener(message)
            except Exception:
                logger.exception("broadcast listener raised; continuing")

    async def read(self) -> None:
        """Deliver the channel's messages until cancelled, reconnecting while Redis is away."""
        away = False
        while True:
            pubsub = self._state.client.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(CHANNEL)
                if away:
                    logger.warning("broadcast from %s: reconnected", self._state.url)
                    away = False
                async for raw in pubsub.listen():
                    if raw.get("type") == "message":
                        self.deliver(json.loads(raw["data"]))
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if not away:
                    logger.warning("broadcast from %s interrupted (%s); reconnecting", self._state.url, exc)
                    away = True
                await asyncio.sleep(0.5)
            finally:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()  # type: ignore[no-untyped-call]


class RedisSharedState:
    """Every store of one ``redis://`` URL; :meth:`run` keeps the broadcast and heartbeat going."""

    shared = True

    def __init__(self, url: str) -> None:
        self.url = redact_url(url)
        self.client = connect(url)
        self.replica = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        """This process's name among the replicas (host and pid first, for operators)."""
        self.sessions: SessionRegistry = RedisSessionRegistry(self)
        self.bus = RedisBroadcast(self)
        self.broadcast: Broadcast = self.bus
        self.tasks: TaskStore = RedisTaskStore(self)
        self.queue: TaskQueue | None = RedisTaskQueue(self)

    async def guard(self, call: Any) -> Any:
        """Await a Redis call, raising :class:`StoreUnavailable` naming this store when Redis is away."""
        return await guarded(self.url, call)

    def event_store(
        self, *, max_events: int, max_bytes: int, max_session_bytes: int, max_age_s: float
    ) -> RedisEventStore:
        """Stream events in Redis, bounded per session by count, bytes and age."""
        return RedisEventStore(
            self.client,
            self.url,
            self.replica,
            max_events=max_events,
            max_session_bytes=min(max_session_bytes, max_bytes),
            max_age_s=max_age_s,
        )

    async def secret(self, name: str) -> bytes:
        """The secret ``name``: made by the first replica to ask (``SET NX``), read by the others."""
        import secrets

        key = f"{PREFIX}secret:{name}"
        await self.guard(self.client.set(key, secrets.token_bytes(32), nx=True))
        value = await self.guard(self.client.get(key))
        return bytes(value)

    async def alive(self, replica: str) -> bool:
        """Whether ``replica`` has beaten its heart in the last three beats."""
        if replica == self.replica:
            return True
        return bool(await self.guard(self.client.exists(_replica_key(replica))))

    @contextlib.asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """Read the broadcast channel and beat the heart for the server's lifetime."""
        async with asyncio.TaskGroup() as tg:
            reader = tg.create_task(self.bus.read())
            heart = tg.create_task(self._beat())
            try:
                yield
            finally:
                reader.cancel()
                heart.cancel()
        with contextlib.suppress(Exception):
            await self.client.delete(_replica_key(self.replica))
        await self.client.aclose()

    async def _beat(self) -> None:
        while True:
            with contextlib.suppress(StoreUnavailable):
                beat = self.client.set(_replica_key(self.replica), b"1", px=int(HEARTBEAT_S * 3000))
                await self.guard(beat)
            await asyncio.sleep(HEARTBEAT_S)


def _session_key(session_id: str) -> str:
    return f"{PREFIX}session:{session_id}"


def _task_key(task_id: str) -> str:
    return f"{PREFIX}task:{task_id}"


def _replica_key(replica: str) -> str:
    return f"{PREFIX}replica:{replica}"
