"""Resumable-stream events on Redis: one Redis stream per MCP session, trimmed by a script.

``store_event`` is one round trip: a Lua script appends the event (``XADD``), counts its
bytes, removes the session's oldest events while the session holds more than
``max_events`` events, more than ``max_session_bytes`` bytes, or events older than
``max_age_s``, and sets both keys to expire ``max_age_s`` after the last write (so an
abandoned session's events go on their own). Event ids are ``<session>/<entry id>``:
unique across replicas (Redis assigns the entry id) and naming their session, so any
replica replays from any id with one ``XRANGE``. Bounds hold per session; the store as
a whole is bounded by Redis's own ``maxmemory``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import redis.asyncio as aioredis
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp_types import JSONRPCMessage, jsonrpc_message_adapter

from toolkernel.shared_state import SCOPE_SEPARATOR
from toolkernel.wire import encode_message
from toolkernel_redis._client import PREFIX, guarded, text

_APPEND = """
local key, sizes = KEYS[1], KEYS[2]
local max_n, max_b, max_age = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local id = redis.call('XADD', key, '*', 's', ARGV[1], 'd', ARGV[2], 'n', ARGV[3], 'r', ARGV[7])
local bytes = redis.call('INCRBY', sizes, ARGV[3])
local now = redis.call('TIME')
local oldest = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) - max_age
while true do
  local n = redis.call('XLEN', key)
  if n <= 1 then break end
  local head = redis.call('XRANGE', key, '-', '+', 'COUNT', 1)[1]
  local ms = tonumber(string.match(head[1], '^(%d+)'))
  if n <= max_n and bytes <= max_b and ms >= oldest then break end
  redis.call('XDEL', key, head[1])
  bytes = redis.call('DECRBY', sizes, head[2][6])
end
redis.call('PEXPIRE', key, max_age)
redis.call('PEXPIRE', sizes, max_age)
return id
"""


def events_key(session_id: str) -> str:
    """The Redis stream holding ``session_id``'s events."""
    return f"{PREFIX}events:{session_id}"


def sizes_key(session_id: str) -> str:
    """The counter of the bytes ``session_id``'s stored events take (what the byte bound trims by)."""
    return f"{PREFIX}event-bytes:{session_id}"


class RedisEventStore(EventStore):
    """The ``mcp`` ``EventStore`` on Redis streams, shared by every replica (see the module doc)."""

    accepts_size = True
    """``store_event`` takes the encoded size the transport already knows."""

    def __init__(
        self,
        client: aioredis.Redis,
        store: str,
        replica: str,
        *,
        max_events: int,
        max_session_bytes: int,
        max_age_s: float,
    ) -> None:
        self._client = client
        self._store = store
        self._replica = replica
        self._append: Any = client.register_script(_APPEND)
        self.max_events = max_events
        self.max_session_bytes = max_session_bytes
        self.max_age_ms = max(1, int(max_age_s * 1000))

    async def store_event(
        self, stream_id: str, message: JSONRPCMessage | None, size: int | None = None
    ) -> str:
        """Append ``message`` (``None``: a priming event) to its session's stream; return its id."""
        session, _, stream = stream_id.partition(SCOPE_SEPARATOR)
        data = b"" if message is None else encode_message(message)
        size = len(data) if size is None or message is None else size
        args = [stream, data, max(size, 1), self.max_events, self.max_session_bytes, self.max_age_ms]
        entry = await guarded(
            self._store,
            self._append(keys=[events_key(session), sizes_key(session)], args=[*args, self._replica]),
        )
        return f"{session}/{text(entry)}"

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
        """Send the events stored after ``last_event_id`` on its stream; that stream, or ``None``."""
        found = await self.locate(last_event_id)
        if found is None:
            return None
        session, entry, stream = found[:3]
        key = events_key(session)
        later: Any = await guarded(self._store, self._client.xrange(key, f"({entry}", "+"))
        for entry_id, fields in later:
            if text(fields[b"s"]) != stream or not fields[b"d"]:
                continue
            message = jsonrpc_message_adapter.validate_json(fields[b"d"], by_name=False)
            await send_callback(EventMessage(message, f"{session}/{text(entry_id)}"))
        return f"{session}{SCOPE_SEPARATOR}{stream}"

    @staticmethod
    def session_of(event_id: str) -> str:
        """The session an event id belongs to (ids are ``<session>/<entry>``)."""
        return event_id.partition("/")[0]

    async def locate(self, event_id: str) -> tuple[str, str, str, str, bool] | None:
        """``(session, entry, stream, replica that stored it, whether it is the stream's response)``
        for ``event_id``, or ``None``."""
        session, sep, entry = event_id.partition("/")
        if not sep or not entry:
            return None
        try:
            found = await guarded(self._store, self._client.xrange(events_key(session), entry, entry))
        except Exception as exc:  # a malformed entry id is an unknown event, not a failure
            if "Invalid stream ID" in str(exc):
                return None
            raise
        if not found:
            return None
        fields = found[0][1] or {}
        data = fields.get(b"d", b"")
        final = bool(data) and json.loads(data).get("method") is None
        return session, entry, text(fields.get(b"s", b"")), text(fields.get(b"r", b"")), final

    async def last_writer(self, session_id: str, stream: str) -> str | None:
        """The replica that stored the latest event on ``stream`` of ``session_id``, if any is kept."""
        key = events_key(session_id)
        recent: Any = await guarded(self._store, self._client.xrevrange(key, "+", "-", count=50))
        for _, fields in recent:
            if text(fields[b"s"]) == stream:
                return text(fields.get(b"r", b""))
        return None

    async def follow(self, last_event_id: str, block_ms: int = 1000) -> AsyncIterator[EventMessage | None]:
        """Events stored after ``last_event_id`` on its stream, as they come; ``None`` each quiet second.

        For a stream resumed on a replica other than the one serving its request: the
        caller writes each event on, and between events checks the writer still lives.
        """
        session, _, entry = last_event_id.partition("/")
        found = await self.locate(last_event_id)
        if found is None or found[4]:
            return  # unknown, or the response itself: the stream is over
        stream = found[2]
        key = events_key(session)
        while True:
            batch: Any = await guarded(
                self._store, self._client.xread({key: entry}, block=block_ms, count=100)
            )
            if not batch:
                yield None
                continue
            for entry_id, fields in batch[0][1]:
                entry = text(entry_id)
                if text(fields[b"s"]) != stream or not fields[b"d"]:
                    continue
                message = jsonrpc_message_adapter.validate_json(fields[b"d"], by_name=False)
                yield EventMessage(message, f"{session}/{entry}")

    async def forget(self, session_id: str) -> None:
        """Drop every event of ``session_id`` (it ended: nobody can resume it)."""
        await guarded(self._store, self._client.delete(events_key(session_id), sizes_key(session_id)))
