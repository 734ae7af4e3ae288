"""Stateful sessions shared by replicas: what moves between them and what each keeps to itself.

With a shared store (``shared_state``), a session opened on one replica is recorded in
the store's session registry; a request for it reaching another replica *adopts* it
there: that replica starts its own dispatcher for the session, already initialized
with the recorded ``initialize`` (same protocol version, same client capabilities), and
serves the request. So every replica may hold a copy of a session, and:

- a request is served where it lands, its response stream written there (and stored
  in the shared event store when the session is resumable);
- the client's answers to server requests and its notifications (``cancelled``,
  ``roots/list_changed``) are broadcast to every replica's copy;
- an event on a stream this replica has no open response for (the session's GET stream
  held by another replica, or a request whose client went away and resumed elsewhere)
  is broadcast, and the replica holding that stream writes it;
- list-change notifications are written only by the replica holding the GET stream
  (every copy would otherwise send its own);
- a stream resumed with ``Last-Event-ID`` on another replica replays from the store
  and then follows the request while the replica serving it lives; if that replica is
  gone, the client gets a JSON-RPC error for the request telling it to send it again.

Ending a session (DELETE, a failed ``initialize``) drops the record and events and tells
every replica to drop its copy; otherwise a copy idle on one replica is only let go there.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mcp.server.connection import Connection
from mcp.server.runner import ServerRunner, serve_connection
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher

if TYPE_CHECKING:
    from mcp.server.lowlevel.server import Server
    from mcp.shared._stream_protocols import ReadStream, WriteStream
    from mcp.shared.message import SessionMessage

    from toolkernel.shared_state import SharedState

logger = logging.getLogger("toolkernel.http")

LIST_CHANGED = frozenset(
    {
        "notifications/tools/list_changed",
        "notifications/prompts/list_changed",
        "notifications/resources/list_changed",
    }
)
"""Server-wide notifications every copy of a session sends: only the GET stream's holder writes them."""
WATCH_WRITER_S = 1.0
"""How often a stream followed from another replica checks that replica is still alive."""


class Replicas:
    """This replica's side of the shared store, as the session table uses it."""

    def __init__(self, state: SharedState) -> None:
        self.state = state
        self.name: str = str(getattr(state, "replica", "local"))
        self._pending: set[asyncio.Task[Any]] = set()

    @property
    def store(self) -> str:
        """The shared store's URL, credentials removed (for messages)."""
        return self.state.url

    def listen(self, on_message: Callable[[dict[str, Any]], None]) -> Callable[[], None]:
        """Hear broadcasts sent by other replicas (this one's own are skipped)."""

        def mine_skipped(message: dict[str, Any]) -> None:
            if message.get("o") != self.name:
                on_message(message)

        return self.state.broadcast.subscribe(mine_skipped)

    async def publish(self, message: dict[str, Any]) -> None:
        """Broadcast ``message`` to the other replicas, signed as this one's."""
        await self.state.broadcast.publish({**message, "o": self.name})

    def spawn(self, work: Any) -> None:
        """Run ``work`` (a coroutine) in the background; its failure is logged, not raised."""

        async def run() -> None:
            try:
                await work
            except Exception as exc:
                logger.warning("shared state: %s", exc)

        task = asyncio.get_running_loop().create_task(run())
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def writer_alive(self, replica: str | None) -> bool:
        """Whether ``replica`` (the one that last wrote a stream) is still serving."""
        if not replica:
            return False
        alive = getattr(self.state, "alive", None)
        return True if alive is None else bool(await alive(replica))


class TouchClock:
    """When a session's time to live in the registry was last restarted by this replica."""

    def __init__(self) -> None:
        self.at = time.monotonic()

    def due(self, ttl_s: float | None) -> bool:
        """Whether a tenth of ``ttl_s`` has passed since the last restart, so it is time for another."""
        return ttl_s is not None and time.monotonic() - self.at > ttl_s / 10


async def serve_adopted(
    server: Server[Any],
    read: ReadStream[SessionMessage | Exception],
    write: WriteStream[SessionMessage],
    *,
    lifespan_state: Any,
    session_id: str,
    initialize: dict[str, Any],
    on_connection: Callable[[Connection], None],
) -> None:
    """The SDK's session loop for a session another replica opened: born initialized.

    It is ``mcp.server.runner.serve_loop`` with the connection's handshake state set from
    the recorded ``initialize`` params, negotiated exactly as the SDK negotiates them.
    """
    dispatcher: JSONRPCDispatcher[Any] = JSONRPCDispatcher(
        read, write, raise_handler_exceptions=False, inline_methods=frozenset({"initialize"})
    )
    connection = Connection.for_loop(dispatcher, session_id=session_id)
    params, version = ServerRunner._negotiate_initialize(initialize)
    connection.client_params = params
    connection.protocol_version = version
    connection.initialized.set()
    on_connection(connection)
    await serve_connection(server, dispatcher, connection=connection, lifespan_state=lifespan_state)


def request_id_of(stream: str) -> int | str:
    """The JSON-RPC id a request stream is named after (numbers were sent as numbers)."""
    with contextlib.suppress(ValueError):
        return int(stream)
    return stream
