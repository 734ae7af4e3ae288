"""Line-delimited JSON-RPC streams over asyncio pipes, for both ends of a stdio connection.

The SDK consumes any object with ``receive``/``send``; these parse and serialize
each line in the caller's task, so a message crosses no queue and no thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import stat
import sys
import threading
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import anyio
from mcp.shared.message import SessionMessage
from mcp_types import (
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError

from toolkernel.errors import ConfigError
from toolkernel.transports import ReadStreamBase, WriteStreamBase
from toolkernel.wire import encode_message, misplaced_id, refusal, too_long

if TYPE_CHECKING:
    from toolkernel.transports import ClientTransportOptions, ServeOptions, ServingApp, TransportStreams

MAX_LINE = 64 * 1024 * 1024
"""Largest message accepted on a stdio line (64 MiB); a longer one is an error, not a hang."""
_HIGH_WATER = 1024 * 1024
_EXIT_GRACE_S = 2.0
END_OF_INPUT_GRACE_S = 30.0
"""When a client's input ends, how long requests still running get to finish and be answered."""


class LineReadStream(ReadStreamBase):
    """Reads one JSON-RPC message per line; malformed lines come through as exceptions.

    With ``reply`` (the server side), a line that is not a valid message is instead
    answered on ``reply`` as JSON-RPC 2.0 asks (see :func:`toolkernel.wire.refusal`) and
    skipped, and so is a request whose id has a type MCP does not allow. The server side
    also holds back the end of input until every request it passed on has been answered
    (at most :data:`END_OF_INPUT_GRACE_S`): the dispatcher cancels what is in flight when
    input ends, and ``serve < requests.jsonl`` would lose the answers still being computed.
    """

    def __init__(self, reader: asyncio.StreamReader, reply: LineWriteStream | None = None) -> None:
        self._reader = reader
        self._reply = reply

    async def receive(self) -> SessionMessage | Exception:
        """The next message; :class:`anyio.EndOfStream` when the peer closed the pipe."""
        try:
            message = await self._receive()
        except anyio.EndOfStream:
            if self._reply is not None:
                with anyio.move_on_after(END_OF_INPUT_GRACE_S):
                    await self._reply.answered()
            raise
        if self._reply is not None and isinstance(message, SessionMessage):
            self._reply.track(message.message)
        return message

    async def _receive(self) -> SessionMessage | Exception:
        while True:
            line = await self._read_line()
            if line is None:
                error: Exception = ValueError(f"stdio message longer than {MAX_LINE} bytes was dropped")
                if self._reply is None:
                    return error
                await self._reply.send(SessionMessage(too_long(MAX_LINE)))
                continue
            try:
                message = jsonrpc_message_adapter.validate_json(line, by_name=False)
            except ValidationError as exc:
                if self._reply is None:
                    return exc
                if (answer := refusal(line, exc)) is not None:
                    await self._reply.send(SessionMessage(answer))
                continue
            if (
                self._reply is not None
                and type(message) is JSONRPCNotification
                and (answer := misplaced_id(line)) is not None
            ):
                await self._reply.send(SessionMessage(answer))
                continue
            return SessionMessage(message)

    async def _read_line(self) -> bytes | None:
        """The next non-blank line, ``None`` for one over :data:`MAX_LINE` (skipped)."""
        while True:
            try:
                line = await self._reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:
                line = exc.partial
                if not line.strip():
                    raise anyio.EndOfStream from None
            except asyncio.LimitOverrunError as exc:
                await self._skip_line(exc.consumed)
                return None
            if line.strip():
                return line

    async def _skip_line(self, consumed: int) -> None:
        while True:
            await self._reader.readexactly(consumed)
            try:
                await self._reader.readuntil(b"\n")
                return
            except asyncio.LimitOverrunError as exc:
                consumed = exc.consumed
            except asyncio.IncompleteReadError:
                return


class LineWriteStream(WriteStreamBase):
    """Writes one JSON-RPC message per line, waiting only when the pipe is backed up.

    Messages sent in the same event-loop turn go out in one write: under pipelined load
    that is one syscall (and one wake-up of the peer) for many responses.
    """

    def __init__(self, transport: asyncio.WriteTransport, protocol: Any) -> None:
        self._transport = transport
        self._protocol = protocol
        self._pending: list[bytes] = []
        self._unanswered: set[str | int] = set()
        self._all_answered = anyio.Event()

    def track(self, message: Any) -> None:
        """Note a request read from the peer (it awaits an answer) or the peer's cancelling of one."""
        if isinstance(message, JSONRPCRequest):
            self._unanswered.add(message.id)
        elif isinstance(message, JSONRPCNotification) and message.method == "notifications/cancelled":
            # A cancelled request gets no answer (MCP); stop waiting for it.
            self._answer((message.params or {}).get("requestId"))

    async def answered(self) -> None:
        """Wait until every request noted by :meth:`track` has been answered or cancelled."""
        if self._unanswered:
            await self._all_answered.wait()

    def _answer(self, request_id: Any) -> None:
        if request_id in self._unanswered:
            self._unanswered.discard(request_id)
            if not self._unanswered:
                self._all_answered.set()
                self._all_answered = anyio.Event()

    async def send(self, item: SessionMessage, /) -> None:
        """Serialize and queue ``item``; :class:`anyio.BrokenResourceError` if the pipe closed.

        A result JSON cannot encode raises ``MCPError`` (see :mod:`toolkernel.wire`) before
        anything is queued; the dispatcher then sends the request's error instead.
        """
        if self._transport.is_closing():
            raise anyio.BrokenResourceError("stdio pipe is closed")
        data = encode_message(item.message) + b"\n"
        if isinstance(item.message, (JSONRPCResponse, JSONRPCError)) and self._unanswered:
            self._answer(item.message.id)
        if not self._pending:
            asyncio.get_running_loop().call_soon(self._flush)
        self._pending.append(data)
        if self._transport.get_write_buffer_size() > _HIGH_WATER:
            await self._protocol._drain_helper()

    def _flush(self) -> None:
        if self._pending and not self._transport.is_closing():
            self._transport.write(b"".join(self._pending))
        self._pending.clear()

    async def aclose(self) -> None:
        """Write what is queued, then close the write side, which the peer sees as end of input."""
        self._flush()
        if not self._transport.is_closing():
            self._transport.close()


async def _server_streams(read_fd: int, write_fd: int) -> tuple[LineReadStream, LineWriteStream]:
    """Line streams over the server's descriptors, whatever they are: pipes, terminals, files.

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
    write = LineWriteStream(transport, protocol)
    return LineReadStream(reader, reply=write), write


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


@contextlib.asynccontextmanager
async def claim_stdio() -> AsyncIterator[TransportStreams]:
    """Take over fd 0/1 for the wire; while held, fd 0 reads /dev/null and fd 1 writes to stderr."""
    sys.stdout.flush()
    wire_in, wire_out = os.dup(0), os.dup(1)
    saved_in, saved_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    os.close(devnull)
    try:
        read, write = await _server_streams(wire_in, wire_out)
        try:
            yield read, write
        finally:
            await write.aclose()
    finally:
        sys.stdout.flush()
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        os.close(saved_in)
        os.close(saved_out)


def _is_pipe(fd: int) -> bool:
    mode = os.fstat(fd).st_mode
    # Of character devices only terminals can be polled: /dev/null cannot, and the event
    # loop would never see its end of file.
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or (stat.S_ISCHR(mode) and os.isatty(fd))


class StdioServerTransport:
    """Serves one MCP session over this process's stdin and stdout."""

    def __init__(self, options: ServeOptions) -> None:
        self.options = options

    async def serve(self, app: ServingApp) -> None:
        """Run the session until the client closes stdin."""
        async with claim_stdio() as (read, write):
            await app.run_session(read, write, transport="stdio")


@contextlib.asynccontextmanager
async def stdio_client(
    target: str | list[str], options: ClientTransportOptions
) -> AsyncIterator[TransportStreams]:
    """Spawn ``target`` (a command line) and yield streams to its stdin/stdout.

    On exit stdin is closed, then the process is given ``extra["exit_grace_s"]`` seconds
    (two by default), then terminated, then killed: it never outlives the context.
    """
    argv = shlex.split(target) if isinstance(target, str) else list(target)
    if not argv:
        raise ConfigError("stdio: the server command is empty")
    env = {**os.environ, **options.env} if options.env is not None else None
    stderr = asyncio.subprocess.DEVNULL if options.extra.get("stderr") == "devnull" else None
    try:
        with anyio.fail_after(options.connect_timeout):
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=stderr,
                cwd=options.cwd,
                env=env,
                limit=MAX_LINE,
            )
    except FileNotFoundError:
        raise ConfigError(f"stdio: command not found: {argv[0]!r}") from None
    except PermissionError:
        raise ConfigError(f"stdio: command is not executable: {argv[0]!r}") from None
    assert proc.stdin is not None
    assert proc.stdout is not None
    stdin_transport: Any = proc.stdin.transport
    write = LineWriteStream(stdin_transport, stdin_transport.get_protocol())
    try:
        yield LineReadStream(proc.stdout), write
    finally:
        await write.aclose()
        with anyio.CancelScope(shield=True):
            await _reap(proc, float(options.extra.get("exit_grace_s", _EXIT_GRACE_S)))


async def _reap(proc: asyncio.subprocess.Process, grace: float) -> None:
    for step, wait in ((None, grace), (proc.terminate, _EXIT_GRACE_S), (proc.kill, _EXIT_GRACE_S)):
        if proc.returncode is not None:
            return
        if step is not None:
            with contextlib.suppress(ProcessLookupError):
                step()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), wait)
