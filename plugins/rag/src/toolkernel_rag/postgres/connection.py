"""Connections to the database a PostgreSQL knowledge-base home names, with bounded waits.

Every connection is opened with a short connect timeout and kept idle in a small pool for the
next call; a connection that fails is dropped, so once the database is back the next call
opens a fresh one. Failures surface as :class:`~toolkernel_rag.layout.KBError` naming the
database (never its password), which the server turns into an ``isError`` result.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

from toolkernel_rag.layout import KBError

if TYPE_CHECKING:
    import psycopg

CONNECT_TIMEOUT = 2
"""Seconds to wait for a connection: a stopped database fails a search within this."""

IDLE_CONNECTIONS = 4
"""Connections kept open between calls."""


def describe(url: str) -> str:
    """``url`` without its password, for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


class Database:
    """A PostgreSQL database reached by URL; :meth:`connection` is safe from several threads."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.where = describe(url)
        self._idle: list[psycopg.Connection] = []
        self._lock = threading.Lock()
        self._closed = False

    def _connect(self) -> psycopg.Connection:
        import psycopg

        try:
            return psycopg.connect(self.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT)
        except psycopg.Error as exc:
            raise self.unavailable(exc) from None

    def unavailable(self, exc: BaseException) -> KBError:
        """The error a caller sees when the database cannot be reached or fails."""
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return KBError(f"PostgreSQL database {self.where} is unavailable: {reason}")

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        """A connection in autocommit mode (open a transaction with ``conn.transaction()``)."""
        import psycopg

        with self._lock:
            if self._closed:
                raise KBError(f"PostgreSQL database {self.where}: the knowledge base is closed")
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = self._connect()
        try:
            yield conn
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            conn.close()
            raise self.unavailable(exc) from None
        except BaseException:
            if conn.closed or conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                conn.close()
            else:
                self._release(conn)
            raise
        else:
            self._release(conn)

    def _release(self, conn: psycopg.Connection) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < IDLE_CONNECTIONS:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
