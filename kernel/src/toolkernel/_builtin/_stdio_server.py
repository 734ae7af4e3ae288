"""The server side of stdio: take over this process's stdin/stdout and serve one session on them.

Nothing here imports the ``mcp`` SDK. The transport reads the client's first frame on the
event loop, answers it at once when it is a plain ``initialize`` or ``server/discover``
(:func:`toolkernel._handshake.early_answer`), and only then loads the SDK and the line
streams of :mod:`toolkernel._builtin._stdio_transport`, which replay that frame through
the SDK. A client's first request is thus answered in the time it takes to start Python,
the kernel and the user's module, not that plus the SDK's protocol models.
``TOOLKERNEL_STDIO_EARLY_INITIALIZE=0`` turns this off (every frame takes the SDK's path).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import stat
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolkernel.transports import ServeOptions, ServingApp

MAX_LINE = 64 * 1024 * 1024
"""Largest message accepted on a stdio line (64 MiB); a longer one is an error, not a hang."""

EARLY_INITIALIZE_ENV = "TOOLKERNEL_STDIO_EARLY_INITIALIZE"
"""Set to ``0`` to let the SDK answer the first request too (the answer is the same, only later)."""


class StdioServerTransport:
    """Serves one MCP session over this process's stdin and stdout."""

    def __init__(self, options: ServeOptions) -> None:
        self.options = options

    async def serve(self, app: ServingApp) -> None:
        """Run the session until the client closes stdin."""
        async with claim_stdio() as (reader, transport, protocol):
            first = await _first_frame(reader)
            early = _early_answer(app, first)
            if early is not None:
                transport.write(early[1] + b"\n")
            with _collection_paused():
                # The SDK and the protocol server, loaded while the client reads the answer.
                from toolkernel._builtin._stdio_transport import LineReadStream, LineWriteStream

                app.protocol_server  # noqa: B018 - built here, under the paused collector
            write = LineWriteStream(transport, protocol, answered=early)
            read = LineReadStream(reader, reply=write, first=first)
            try:
                await app.run_session(read, write, transport="stdio")
            finally:
                await write.aclose()


def _early_answer(app: ServingApp, first: bytes | None) -> tuple[int | str, bytes] | None:
    """The answer to ``first`` made without the SDK, if the app can make it and it is on."""
    answer = getattr(app, "early_answer", None)
    if first is None or answer is None or os.environ.get(EARLY_INITIALIZE_ENV, "1").strip() == "0":
        return None
    result: tuple[int | str, bytes] | None = answer(first)
    return result


async def _first_frame(reader: asyncio.StreamReader) -> bytes | None:
    """The first non-blank line, consumed; ``None`` at the end of input or for an over-long
    line, which stays unread for the line stream to refuse as it refuses any other."""
    while True:
        try:
            line = await reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as exc:
            return exc.partial if exc.partial.strip() else None
        except asyncio.LimitOverrunError:
            return None
        if line.strip():
            return line


@contextlib.contextmanager
def _collection_paused() -> Iterator[None]:
    """Pause the cycle collector while the SDK loads, then freeze what it built (as ``cli.main``
    does for the start-up): collection passes over the protocol models only cost time."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


@contextlib.asynccontextmanager
async def claim_stdio() -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.WriteTransport, Any]]:
    """Take over fd 0/1 for the wire; while held, fd 0 reads /dev/null and fd 1 writes to stderr.

    Yields the reader of the wire's input and the write transport (and its protocol, for
    flow control) of its output.
    """
    sys.stdout.flush()
    wire_in, wire_out = os.dup(0), os.dup(1)
    saved_in, saved_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    os.close(devnull)
    try:
        reader, transport, protocol = await _server_pipes(wire_in, wire_out)
        try:
            yield reader, transport, protocol
        finally:
            if not transport.is_closing():
                transport.close()
    finally:
        sys.stdout.flush()
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        os.close(saved_in)
        os.close(saved_out)


async def _server_pipes(
    read_fd: int, write_fd: int
) -> tuple[asyncio.StreamReader, asyncio.WriteTransport, Any]:
    """Asyncio ends of the server's descriptors, whatever they are: pipes, terminals, files.

    asyncio polls pipes, sockets and terminals. It cannot poll a regular file or ``/dev/null``
    (``serve < requests.jsonl > answers.jsonl``): such input is read in a thread and fed to
    the loop, and such output is written directly (a write to a file does not wait on a peer).
    """
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_LINE)
    source = os.fdopen(read_fd, "rb", 0)
    if _is_pipe(read_fd):
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), source)
    else:
        feeder = threading.Thread(target=_feed, args=(source, reader, loop), name="stdin-feed", daemon=True)
        feeder.start()
    sink = os.fdopen(write_fd, "wb", 0)
    transport: asyncio.WriteTransport
    if _is_pipe(write_fd):
        transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, sink)
    else:
        transport, protocol = _FileWriter(sink), None
    return reader, transport, protocol


def _feed(source: Any, reader: asyncio.StreamReader, loop: asyncio.AbstractEventLoop) -> None:
    """Read ``source`` to its end in this thread, handing each chunk to ``reader`` on ``loop``."""
    try:
        while chunk := source.read(1 << 16):
            loop.call_soon_threadsafe(reader.feed_data, chunk)
    except (OSError, RuntimeError):  # the descriptor or the loop closed under us: input is over
        pass
    finally:
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(reader.feed_eof)
        source.close()


class _FileWriter(asyncio.WriteTransport):
    """The write transport for output asyncio cannot poll (a regular file, ``/dev/null``)."""

    def __init__(self, sink: Any) -> None:
        super().__init__()
        self._sink = sink
        self._closing = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data)
        while view:
            view = view[self._sink.write(view) :]

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        if not self._closing:
            self._closing = True
            self._sink.close()

    def get_write_buffer_size(self) -> int:
        return 0


def _is_pipe(fd: int) -> bool:
    mode = os.fstat(fd).st_mode
    # Of character devices only terminals can be polled: /dev/null cannot, and the event
    # loop would never see its end of file.
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or (stat.S_ISCHR(mode) and os.isatty(fd))
