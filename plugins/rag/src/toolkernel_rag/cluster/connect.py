"""Starting or joining the Ray cluster an ingest runs on, with a timeout, and leaving it again.

Without ``--address`` a Ray of this machine is started for the run: bound to loopback (else
it advertises the machine's other address), no dashboard, its session and temp directories in
a temporary folder removed afterwards, and as many logical CPUs as the actors need beside one
for the reading tasks. ``--address auto`` joins the cluster this machine is part of,
``--address ray://host:10001`` a remote one through Ray Client. A process that has Ray
initialized already (a test, a notebook) is used as it is and left running.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from toolkernel_rag.layout import KBError

if TYPE_CHECKING:
    from toolkernel_rag.cluster.job import RayOptions

CONNECT_TIMEOUT = 120.0
"""Seconds to wait for Ray to start or for a cluster to answer."""

_PASSED_ENV = ("TOOLKERNEL_", "OTEL_")
"""Environment variables the workers get from the driver: toolkernel's own and OpenTelemetry's."""


def require_ray() -> None:
    """One line naming what to install when the ``ray`` extra is missing."""
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError:
        raise KBError(
            "--engine ray needs Ray: pip install 'toolkernel-rag[ray]' (on the driver and every worker)"
        ) from None


@dataclass
class RaySession:
    """Ray as this run uses it; :meth:`close` shuts down only what :func:`connect` started or joined."""

    address: str | None
    owned: bool
    temp_dir: str | None = None
    _resources: dict[str, float] = field(default_factory=dict)

    def check_resources(self, options: RayOptions) -> None:
        """Refuse, in one line, actors the cluster can never place (else the job would wait forever)."""
        import ray

        if not self._resources:
            self._resources = dict(ray.cluster_resources())  # type: ignore[no-untyped-call]
        cpus = self._resources.get("CPU", 0.0)
        gpus = self._resources.get("GPU", 0.0)
        wanted = options.actors * options.cpus_per_actor
        if wanted + 1 > cpus:  # the reading tasks' and writers' shares fit in the one CPU beside
            raise KBError(
                f"--actors {options.actors}: the actors need {wanted:g} CPUs and the reading tasks 1, "
                f"the Ray cluster has {cpus:g}"
            )
        if options.gpus_per_actor and options.actors * options.gpus_per_actor > gpus:
            raise KBError(
                f"--gpus-per-actor {options.gpus_per_actor:g} x --actors {options.actors}: the Ray cluster "
                f"has {gpus:g} GPUs"
            )

    def close(self) -> None:
        """Shut Ray down when this run started or joined it; remove the temporary folder it used."""
        if not self.owned:
            return
        import ray

        ray.shutdown()
        if self.temp_dir is not None:
            shutil.rmtree(self.temp_dir, ignore_errors=True)


class _Deadline(BaseException):
    """Raised in the main thread by the alarm of :func:`_deadline`."""


@contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    """Interrupt the main thread after ``seconds`` (SIGALRM); elsewhere Ray's own timeouts apply.

    ``ray.init`` must run on a thread that outlives the run: the processes it starts die with
    the thread that started them (``PR_SET_PDEATHSIG``), so it cannot be pushed off to a helper thread.
    """
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGALRM"):
        yield
        return

    def expired(signum: int, frame: object) -> None:
        raise _Deadline

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def connect(address: str | None, actors: int, cpus_per_actor: float = 1.0) -> RaySession:
    """Start a local Ray (``address`` ``None``) or join a cluster, within :data:`CONNECT_TIMEOUT`.

    Call it on the main thread (see :func:`_deadline`).
    """
    require_ray()
    import ray

    if ray.is_initialized():
        return RaySession(address, owned=False)
    env = {k: v for k, v in os.environ.items() if k.startswith(_PASSED_ENV)}
    kwargs: dict[str, Any] = {
        "runtime_env": {"env_vars": env} if env else None,
        "log_to_driver": False,
        "configure_logging": True,
        "logging_level": "ERROR",
    }
    temp_dir: str | None = None
    if address is None:
        # Ray's socket paths must stay under 107 bytes: a short folder under /tmp.
        temp_dir = tempfile.mkdtemp(prefix="tk-ray-", dir="/tmp" if os.path.isdir("/tmp") else None)
        cpus = max(os.cpu_count() or 1, int(actors * cpus_per_actor + 1.999))
        kwargs.update(
            num_cpus=cpus,
            include_dashboard=False,
            _node_ip_address="127.0.0.1",
            _temp_dir=temp_dir,
        )
    else:
        kwargs["address"] = address
    where = f"the Ray cluster at {address}" if address else "a local Ray"
    try:
        with _deadline(CONNECT_TIMEOUT):
            ray.init(**kwargs)
    except BaseException as exc:
        if temp_dir is not None:
            shutil.rmtree(temp_dir, ignore_errors=True)
        if isinstance(exc, _Deadline):
            raise KBError(f"--engine ray: {where} did not answer within {CONNECT_TIMEOUT:.0f} s") from None
        if not isinstance(exc, Exception):
            raise
        text = " ".join(str(exc).split())[:300]
        raise KBError(f"--engine ray: could not start or join {where}: {text}") from None
    return RaySession(address, owned=True, temp_dir=temp_dir)
