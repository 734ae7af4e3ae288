"""``toolkernel serve --workers N``: N copies of this serve command sharing one port.

The supervisor starts each worker as this same command line with
:data:`WORKER_ENV` set; a worker binds the port with ``SO_REUSEPORT``, so the operating
system spreads new connections over the workers (as uvicorn's and gunicorn's workers
share theirs). A worker that exits is started again (at most :data:`MAX_RESTARTS` times a
minute); Ctrl-C or SIGTERM stops them all. The transport decides first whether its mode
can run as several processes (``check_workers``): N processes share nothing unless a
shared store is configured.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

from toolkernel.errors import ConfigError

if TYPE_CHECKING:
    from toolkernel._kernel import Kernel
    from toolkernel.server import MCPServer
    from toolkernel.transports import ServeOptions

WORKER_ENV = "TOOLKERNEL_SERVE_WORKER"
"""Set (to the worker's number) in the environment of each worker the supervisor starts."""
MAX_RESTARTS = 5
"""Worker exits a minute the supervisor restarts; one more and it stops serving (exit 3)."""
STARTUP_S = 3.0
"""A worker that exits this soon after it started failed to start: the supervisor gives up."""
STOP_GRACE_S = 10.0
"""How long workers get to drain after SIGTERM before the supervisor kills them."""


def is_worker() -> bool:
    """Whether this process is one of a supervisor's workers."""
    return WORKER_ENV in os.environ


def check(kernel: Kernel, server: MCPServer, transport: str, options: ServeOptions) -> None:
    """Refuse ``--workers`` where several processes cannot serve as one (with the reason)."""
    if options.port == 0:
        raise ConfigError("--workers: give a --port (workers share one port; 0 would give each its own)")
    built = kernel.server_transport(transport, options)
    check_workers = getattr(built, "check_workers", None)
    if check_workers is None:
        raise ConfigError(f"--workers: the {transport!r} transport cannot share a port between processes")
    check_workers(kernel.serving_app(server))


def supervise(workers: int) -> int:
    """Run ``workers`` copies of this command until interrupted; the exit status.

    Runs before any event loop starts, so the workers inherit no loop's signal handling.
    """
    command = [sys.executable, "-m", "toolkernel", *sys.argv[1:]]
    processes: dict[int, subprocess.Popen[bytes]] = {}
    restarts: list[float] = []

    def start(number: int) -> None:
        processes[number] = subprocess.Popen(command, env={**os.environ, WORKER_ENV: str(number)})

    def terminate(signum: int, frame: Any) -> None:
        raise SystemExit(0)

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        for number in range(workers):
            start(number)
        print(f"toolkernel: serving with {workers} worker processes", file=sys.stderr, flush=True)
        started = time.monotonic()
        while True:
            time.sleep(0.2)
            for number, process in list(processes.items()):
                code = process.poll()
                if code is None:
                    continue
                if time.monotonic() - started < STARTUP_S:
                    print(f"toolkernel: worker {number} failed to start (exit {code})", file=sys.stderr)
                    return 2 if code == 2 else 3
                now = time.monotonic()
                restarts[:] = [t for t in restarts if now - t < 60] + [now]
                if len(restarts) > MAX_RESTARTS:
                    print("toolkernel: workers keep exiting; stopping", file=sys.stderr)
                    return 3
                print(f"toolkernel: worker {number} exited ({code}); starting it again", file=sys.stderr)
                start(number)
    finally:
        signal.signal(signal.SIGTERM, previous)
        _stop_all(list(processes.values()))


def _stop_all(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    for process in processes:
        try:
            process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
