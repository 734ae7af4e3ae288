"""One writer at a time: an exclusive OS lock on ``KB_DIR/writer.lock``.

``kb ingest``, ``kb remove``, ``kb repair`` and ``kb delete`` (and the Python API opened
writable) take it before they open the vector store or embed anything, so a second writer
is refused at once instead of failing midway. The lock is ``flock(2)``: the operating system
releases it when the holder exits, ``kill -9`` included, so a crashed writer never leaves a
stale lock behind. The holder writes who it is (pid, command, host, since) into the file for
the refusal message; the file's content is informational, the lock is what counts.

Readers (servers, ``kb stats``) never take it: they never write into the knowledge base.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import sys
import time
from pathlib import Path

from toolkernel_rag.layout import KBError

LOCK_FILE = "writer.lock"
POLL_SECONDS = 0.1


class WriterLock:
    """The writer lock of the knowledge base in ``directory``; :meth:`acquire` it, :meth:`release` it."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / LOCK_FILE
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, wait: float = 0.0) -> None:
        """Take the lock, waiting up to ``wait`` seconds for the current holder.

        :raises KBError: another process holds it (the message names the holder).
        """
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        deadline = time.monotonic() + max(0.0, wait)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = describe_holder(self.path)
                    os.close(fd)
                    waited = f" (waited {wait:g} s)" if wait > 0 else ""
                    raise KBError(
                        f"knowledge base {str(self.path.parent)!r} is being written by {holder}{waited}: "
                        "one writer at a time; wait for it to finish or pass --wait SECONDS"
                    ) from None
                time.sleep(POLL_SECONDS)
        holder_info = {
            "pid": os.getpid(),
            "command": " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(sys.argv))[:200],
            "host": socket.gethostname(),
            "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(holder_info).encode(), 0)
        self._fd = fd

    def release(self) -> None:
        """Let the next writer in (the file stays; its content describes the last holder)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def describe_holder(path: Path) -> str:
    """``pid 123 (toolkernel kb ingest docs --kb x) on host since 2026-…``, from the lock file."""
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
        return f"pid {info['pid']} ({info['command']}) on {info['host']} since {info['since']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "another process"
