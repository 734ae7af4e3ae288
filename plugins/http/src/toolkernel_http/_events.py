"""Event stores for Streamable HTTP resumability: the in-memory default and per-session scoping.

The interface is the ``mcp`` SDK's :class:`mcp.server.streamable_http.EventStore`:
``store_event(stream_id, message) -> event_id`` and ``replay_events_after(last_event_id,
send) -> stream_id | None``. Event ids must be unique across every stream the store
holds; a store shared by several replicas (Redis, a database) must make them unique
across replicas too, and be able to find an event's stream from its id alone.
"""

from __future__ import annotations

import itertools
import time
from collections import OrderedDict
from dataclasses import dataclass

from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp_types import JSONRPCMessage

from toolkernel.shared_state import SCOPE_SEPARATOR
from toolkernel.wire import encode_message

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_SESSION_BYTES = 8 * 1024 * 1024
DEFAULT_MAX_AGE_S = 300.0
_PRIMING_BYTES = 16


@dataclass(slots=True)
class _Event:
    stream_id: StreamId
    group: str
    seq: int
    message: JSONRPCMessage | None
    size: int
    stored_at: float


class InMemoryEventStore(EventStore):
    """Keeps recent events of all streams in memory, bounded by count, bytes, bytes per session and age.

    A session is the part of a stream id before :data:`SCOPE_SEPARATOR` (the whole id when
    there is none). Past ``max_session_bytes`` a session's own oldest events go, so one
    session's large results cannot push out everyone else's; past ``max_events`` or
    ``max_bytes`` the oldest events of all go; events older than ``max_age_s`` go when the
    next one is stored; :meth:`forget` drops a session's events at once (its end). An
    event's size is its encoded length, passed by the transport (encoded here otherwise).

    Event ids are ``<seq>`` from one counter, so ordering within a stream is numeric
    order. Replays skip priming events (no message) and events a client already saw.
    """

    def __init__(
        self,
        max_events: int = 10_000,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_session_bytes: int = DEFAULT_MAX_SESSION_BYTES,
        max_age_s: float = DEFAULT_MAX_AGE_S,
    ) -> None:
        if min(max_events, max_bytes, max_session_bytes) <= 0 or max_age_s <= 0:
            raise ValueError("max_events, max_bytes, max_session_bytes and max_age_s must be positive")
        self.max_events = max_events
        self.max_bytes = max_bytes
        self.max_session_bytes = max_session_bytes
        self.max_age_s = max_age_s
        self.bytes = 0
        """Sizes of the events held, summed."""
        self._counter = itertools.count(1)
        # Oldest first. OrderedDicts, because eviction reads and drops the head again and again:
        # a plain dict leaves a dummy slot at its front per deletion, so finding its first key
        # scans them all (until the next resize) and eviction grew with the evictions made.
        self._events: OrderedDict[EventId, _Event] = OrderedDict()
        self._streams: dict[StreamId, dict[EventId, None]] = {}
        self._groups: dict[str, OrderedDict[EventId, None]] = {}
        self._group_bytes: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._events)

    def session_bytes(self, session_id: str) -> int:
        """Sizes of the events held for ``session_id``, summed."""
        return self._group_bytes.get(session_id, 0)

    async def store_event(
        self, stream_id: StreamId, message: JSONRPCMessage | None, size: int | None = None
    ) -> EventId:
        """Record ``message`` (``None`` for a priming event) on ``stream_id`` and return its id."""
        if size is None:
            size = _PRIMING_BYTES if message is None else len(encode_message(message))
        seq = next(self._counter)
        event_id = str(seq)
        group = stream_id.partition(SCOPE_SEPARATOR)[0]
        now = time.monotonic()
        self._events[event_id] = _Event(stream_id, group, seq, message, size, now)
        self._streams.setdefault(stream_id, {})[event_id] = None
        self._groups.setdefault(group, OrderedDict())[event_id] = None
        self._group_bytes[group] = self._group_bytes.get(group, 0) + size
        self.bytes += size
        while self._group_bytes.get(group, 0) > self.max_session_bytes:
            self._remove(next(iter(self._groups[group])))
        oldest_kept = now - self.max_age_s
        while self._events:
            head = next(iter(self._events.values()))
            if (
                len(self._events) <= self.max_events
                and self.bytes <= self.max_bytes
                and head.stored_at > oldest_kept
            ):
                break
            self._remove(str(head.seq))
        return event_id

    def forget(self, session_id: str) -> None:
        """Drop every event of ``session_id`` (it ended; no client can resume it)."""
        for event_id in list(self._groups.get(session_id, ())):
            self._remove(event_id)

    def _remove(self, event_id: EventId) -> None:
        event = self._events.pop(event_id)
        self.bytes -= event.size
        stream = self._streams[event.stream_id]
        del stream[event_id]
        if not stream:
            del self._streams[event.stream_id]
        group = self._groups[event.group]
        del group[event_id]
        if group:
            self._group_bytes[event.group] -= event.size
        else:
            del self._groups[event.group]
            del self._group_bytes[event.group]

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
        self._session_id = session_id
        self._prefix = session_id + SCOPE_SEPARATOR

    async def store_event(
        self, stream_id: StreamId, message: JSONRPCMessage | None, size: int | None = None
    ) -> EventId:
        """Store under ``<session><US><stream>`` in the shared store (``size``: the encoded length)."""
        if isinstance(self._inner, InMemoryEventStore) or getattr(self._inner, "accepts_size", False):
            return await self._inner.store_event(self._prefix + stream_id, message, size)  # type: ignore[call-arg]
        return await self._inner.store_event(self._prefix + stream_id, message)

    def release(self) -> None:
        """Drop the session's events from a shared in-memory store (others keep their own policy)."""
        if isinstance(self._inner, InMemoryEventStore):
            self._inner.forget(self._session_id)

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        """Replay only if ``last_event_id`` belongs to this session; return the unscoped stream id."""
        session_of = getattr(self._inner, "session_of", None)
        if session_of is not None:  # the id names its session: one replay suffices
            if session_of(last_event_id) != self._session_id:
                return None
            stream = await self._inner.replay_events_after(last_event_id, send_callback)
            return None if stream is None else stream[len(self._prefix) :]
        # Learn which stream the id is on (sending nothing), then replay only our own.
        stream = await self._inner.replay_events_after(last_event_id, _discard)
        if stream is None or not stream.startswith(self._prefix):
            return None
        await self._inner.replay_events_after(last_event_id, send_callback)
        return stream[len(self._prefix) :]


async def _discard(event: EventMessage) -> None:
    """Swallow events while the owning stream of an id is being checked."""
