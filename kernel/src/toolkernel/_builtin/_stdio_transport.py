"""Line-delimited JSON-RPC streams over asyncio pipes, for both ends of a stdio connection.

The SDK consumes any object with ``receive``/``send``; these parse and serialize
each line in the caller's task, so a message crosses no queue and no thread. The
server's end of the pipes is set up by :mod:`toolkernel._builtin._stdio_server`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
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

from toolkernel._builtin._stdio_server import MAX_LINE
from toolkernel.errors import ConfigError
from toolkernel.transports import ReadStreamBase, WriteStreamBase
from toolkernel.wire import encode_message, misplaced_id, refusal, too_long

if TYPE_CHECKING:
    from toolkernel.transports import ClientTransportOptions, TransportStreams

_HIGH_WATER = 1024 * 1024
_EXIT_GRACE_S = 2.0
_EARLY_REPLAY_WAIT_S = 30.0
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
    ``first`` is a line already taken from ``reader``; it is read before the rest.
    """

    def __init__(
        self, reader: asyncio.StreamReader, reply: LineWriteStream | None = None, first: bytes | None = None
    ) -> None:
        self._reader = reader
        self._reply = reply
        self._first = first

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
        if self._first is not None:
            line, self._first = self._first, None
            return line
        if self._reply is not None and self._reply.early_pending:
            # The client may reuse the id of a request answered early as soon as it has the
            # answer: read on once the SDK has answered (and dropped) its own replay of it.
            await self._reply.early_replayed()
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

    ``answered`` is ``(id, line)`` of a request the transport answered before the SDK was
    loaded (:mod:`toolkernel._handshake`): the SDK's own answer to that request is not sent
    again, and if it differs from ``line`` the difference is logged as an error.
    """

    def __init__(
        self,
        transport: asyncio.WriteTransport,
        protocol: Any,
        answered: tuple[int | str, bytes] | None = None,
    ) -> None:
        self._transport = transport
        self._protocol = protocol
        self._early = answered
        self._early_done = anyio.Event()
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
        if isinstance(item.message, (JSONRPCResponse, JSONRPCError)):
            if self._unanswered:
                self._answer(item.message.id)
            if self._early is not None and item.message.id == self._early[0]:
                self._check_early(data)
                return
        if not self._pending:
            asyncio.get_running_loop().call_soon(self._flush)
        self._pending.append(data)
        if self._transport.get_write_buffer_size() > _HIGH_WATER:
            await self._protocol._drain_helper()

    @property
    def early_pending(self) -> bool:
        """Whether a request was answered early and the SDK has not yet answered its replay."""
        return self._early is not None

    async def early_replayed(self) -> None:
        """Wait until the SDK has answered the replay of the request answered early (30 s at most)."""
        with anyio.move_on_after(_EARLY_REPLAY_WAIT_S):
            await self._early_done.wait()

    def _check_early(self, data: bytes) -> None:
        """The SDK's answer to the request answered early: drop it, saying so if it differs."""
        assert self._early is not None
        sent, self._early = self._early[1], None
        self._early_done.set()
        if data != sent + b"\n":
            from toolkernel._logging import get_logger

            get_logger("toolkernel.stdio").error(
                "a request was answered before the SDK loaded, and differently from the SDK "
                "(a toolkernel bug: set TOOLKERNEL_STDIO_EARLY_INITIALIZE=0 and report it)",
                sent=sent.decode(errors="replace"),
                sdk=data.decode(errors="replace").rstrip("\n"),
            )

    def _flush(self) -> None:
        if self._pending and not self._transport.is_closing():
            self._transport.write(b"".join(self._pending))
        self._pending.clear()

    async def aclose(self) -> None:
        """Write what is queued, then close the write side, which the peer sees as end of input."""
        self._flush()
        if not self._transport.is_closing():
            self._transport.close()


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
