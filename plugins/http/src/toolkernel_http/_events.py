"""Event stores for Streamable HTTP resumability: the in-memory default and per-session scoping.

The interface is the ``mcp`` SDK's :class:`mcp.server.streamable_http.EventStore`:
``store_event(stream_id, message) -> event_id`` and ``replay_events_after(last_event_id,
send) -> stream_id | None``. Event ids must be unique across every stream the store
holds; a store shared by several replicas (Redis, a database) must make them unique
across replicas too, and be able to find an event's stream from its id alone.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from dataclasses import dataclass

from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp_types import JSONRPCMessage

SCOPE_SEPARATOR = "\x1f"
"""Joins a session id and a request's stream id into the stream id the backing store sees."""


@dataclass(frozen=True, slots=True)
class _Event:
    stream_id: StreamId
    seq: int
    message: JSONRPCMessage | None


class InMemoryEventStore(EventStore):
    """Keeps the last ``max_events`` events of all streams in memory; the oldest go first.

    Event ids are ``<seq>`` from one counter, so ordering within a stream is numeric
    order. Replays skip priming events (no message) and events a client already saw.
    """

    def __init__(self, max_events: int = 10_000) -> None:
        if max_events <= 0:
            raise ValueError("max_events must be positive")
        self.max_events = max_events
        self._counter = itertools.count(1)
        self._events: OrderedDict[EventId, _Event] = OrderedDict()
        self._streams: dict[StreamId, OrderedDict[EventId, None]] = {}

    def __len__(self) -> int:
        return len(self._events)

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        """Record ``message`` (``None`` for a priming event) on ``stream_id`` and return its id."""
        seq = next(self._counter)
        event_id = str(seq)
        self._events[event_id] = _Event(stream_id, seq, message)
        self._streams.setdefault(stream_id, OrderedDict())[event_id] = None
        while len(self._events) > self.max_events:
            old_id, old = self._events.popitem(last=False)
            stream = self._streams.get(old.stream_id)
            if stream is not None:
                stream.pop(old_id, None)
                if not stream:
                    del self._streams[old.stream_id]
        return event_id

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        """Send the events of ``last_event_id``'s stream that came after it; ``None`` if it is unknown."""
        last = self._events.get(last_event_id)
        if last is None:
            return None
        for event_id in list(self._streams.get(last.stream_id, ())):
            event = self._events.get(event_id)
            if event is not None and event.seq > last.seq and event.message is not None:
                await send_callback(EventMessage(event.message, event_id))
        return last.stream_id


class SessionScopedEventStore(EventStore):
    """One session's view of a shared store: stream ids are prefixed with the session id.

    Request ids repeat across sessions (every client starts at 1), so without this a
    resuming client could be replayed another session's events.
    """

    def __init__(self, inner: EventStore, session_id: str) -> None:
        self._inner = inner
        self._prefix = session_id + SCOPE_SEPARATOR

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        """Store under ``<session><US><stream>`` in the shared store."""
        return await self._inner.store_event(self._prefix + stream_id, message)

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        """Replay only if ``last_event_id`` belongs to this session; return the unscoped stream id."""
        # Learn which stream the id is on (sending nothing), then replay only our own.
        stream = await self._inner.replay_events_after(last_event_id, _discard)
        if stream is None or not stream.startswith(self._prefix):
            return None
        await self._inner.replay_events_after(last_event_id, send_callback)
        return stream[len(self._prefix) :]


async def _discard(event: EventMessage) -> None:
    """Swallow events while the owning stream of an id is being checked."""
