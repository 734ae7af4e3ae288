"""What a transport is: a small interface on each side of the wire.

A *server transport* takes a :class:`ServingApp` (the kernel's view of one
:class:`~toolkernel.MCPServer`) and serves it until cancelled. A *client transport* is
an async context manager that yields the ``(read, write)`` stream pair of the ``mcp``
SDK, so anything built on the SDK's ``Client`` can use it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, Self

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from mcp.server.lowlevel.server import Server as ProtocolServer
    from mcp.shared._stream_protocols import ReadStream, WriteStream
    from mcp.shared.message import SessionMessage

    from toolkernel._kernel import Kernel
    from toolkernel.server import MCPServer

    TransportStreams = tuple[ReadStream[SessionMessage | Exception], WriteStream[SessionMessage]]


__all__ = [
    "ClientTransportFactory",
    "ClientTransportOptions",
    "ReadStreamBase",
    "ServeOptions",
    "ServerTransport",
    "ServerTransportFactory",
    "ServingApp",
    "WriteStreamBase",
]


class ServeOptions(BaseModel):
    """Where and how to serve; transports ignore what does not apply to them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = Field("127.0.0.1", description="Interface to bind (network transports).")
    port: int = Field(8000, ge=0, le=65535, description="TCP port (network transports); 0 picks a free one.")
    path: str = Field("/mcp", pattern=r"^/", description="URL path of the MCP endpoint.")
    extra: Mapping[str, Any] = Field(default_factory=dict, description="Transport-specific options.")
    workers: int = Field(1, ge=1, description="Processes serving the port (`toolkernel serve --workers`).")
    reuse_port: bool = Field(
        False, description="Bind with SO_REUSEPORT: this process is one of several serving the port."
    )


class ServingApp(Protocol):
    """The kernel's handle on a server being served, as a transport sees it."""

    @property
    def server(self) -> MCPServer:
        """The user's server definition."""

    @property
    def kernel(self) -> Kernel:
        """The kernel serving it: its hooks fire for sessions the transport runs itself."""

    @property
    def protocol_server(self) -> ProtocolServer[Any]:
        """The ``mcp`` SDK low-level server that speaks the protocol (both eras)."""

    async def run_session(
        self,
        read: ReadStream[SessionMessage | Exception],
        write: WriteStream[SessionMessage],
        *,
        transport: str,
        session_id: str | None = None,
    ) -> None:
        """Serve one connection over a stream pair, firing the session hooks around it."""

    def session(self, *, transport: str, session_id: str | None = None) -> AbstractAsyncContextManager[None]:
        """The session hooks around a session a transport runs itself: ``async with app.session(...)``."""


class ServerTransport(Protocol):
    """Serves a :class:`ServingApp` until cancelled."""

    async def serve(self, app: ServingApp) -> None: ...


ServerTransportFactory = (
    Callable[[ServeOptions], ServerTransport] | Callable[[ServeOptions, Any], ServerTransport]
)
"""``factory(options)``, or ``factory(options, settings)`` when registered with ``settings=``."""


class _StreamBase:
    """``async with`` closes the stream; :meth:`aclose` releases nothing unless overridden."""

    async def aclose(self) -> None:
        """Release what the stream holds; nothing by default."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


class ReadStreamBase(_StreamBase, ABC):
    """The SDK's read-stream protocol from one method: implement :meth:`receive` (and :meth:`aclose`).

    For transports that hand the SDK messages they read themselves (the stdio pipe, an
    HTTP session's inbox) rather than through an anyio memory stream.
    """

    @abstractmethod
    async def receive(self) -> SessionMessage | Exception:
        """The next message, or an exception the dispatcher reports; ``anyio.EndOfStream`` at the end."""

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        import anyio

        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None


class WriteStreamBase(_StreamBase, ABC):
    """The SDK's write-stream protocol from one method: implement :meth:`send` (and :meth:`aclose`)."""

    @abstractmethod
    async def send(self, item: SessionMessage, /) -> None:
        """Deliver one outgoing message."""


class ClientTransportOptions(BaseModel):
    """Options every client transport understands; the rest go in ``extra``."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True, arbitrary_types_allowed=True)

    env: Mapping[str, str] | None = Field(None, description="Environment of a spawned server (stdio).")
    cwd: str | None = Field(None, description="Working directory of a spawned server (stdio).")
    headers: Mapping[str, str] = Field(default_factory=dict, description="Extra HTTP headers.")
    connect_timeout: float = Field(10.0, gt=0, description="Seconds to establish the connection.")
    read_timeout: float = Field(300.0, gt=0, description="Seconds to wait on a silent stream.")
    extra: Mapping[str, Any] = Field(default_factory=dict, description="Transport-specific options.")


ClientTransportFactory = (
    Callable[[str | list[str], ClientTransportOptions], "AbstractAsyncContextManager[TransportStreams]"]
    | Callable[
        [str | list[str], ClientTransportOptions, Any], "AbstractAsyncContextManager[TransportStreams]"
    ]
)
"""``factory(target, options)``, or ``factory(target, options, settings)`` with ``settings=``."""
