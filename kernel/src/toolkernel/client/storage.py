"""Where an MCPClient keeps its server registry so it survives a restart.

A :class:`ServerStore` is four async methods; :class:`SqliteServerStore` (the default,
stdlib ``sqlite3`` run in a worker thread so the event loop never blocks) and
:class:`MemoryServerStore` implement it, and a plugin can supply another (Redis, a
database the application already has). Records are the server configs as JSON-ready
dicts, keyed by client id and server name. They hold what the config holds, headers
and env included: keep the file where secrets may live, or keep secrets out of it.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import anyio.to_thread

__all__ = [
    "MemoryServerStore",
    "ServerStore",
    "SqliteServerStore",
    "default_store_path",
]


@runtime_checkable
class ServerStore(Protocol):
    """Persists ``client id → server name → config`` records."""

    async def load(self, client_id: str) -> dict[str, dict[str, Any]]:
        """Every server saved for ``client_id``."""
        ...

    async def save(self, client_id: str, name: str, config: Mapping[str, Any]) -> None:
        """Insert or replace server ``name``."""
        ...

    async def delete(self, client_id: str, name: str) -> None:
        """Forget server ``name`` (no error if unknown)."""
        ...

    async def close(self) -> None:
        """Release what the store holds."""
        ...


class MemoryServerStore:
    """Records in a dict: survives a client restart within one process only."""

    def __init__(self) -> None:
        self._data: dict[str, dict[str, dict[str, Any]]] = {}

    async def load(self, client_id: str) -> dict[str, dict[str, Any]]:
        return {name: dict(config) for name, config in self._data.get(client_id, {}).items()}

    async def save(self, client_id: str, name: str, config: Mapping[str, Any]) -> None:
        self._data.setdefault(client_id, {})[name] = json.loads(json.dumps(dict(config)))

    async def delete(self, client_id: str, name: str) -> None:
        self._data.get(client_id, {}).pop(name, None)

    async def close(self) -> None:
        return None


def default_store_path() -> Path:
    """``$TOOLKERNEL_CLIENT_DB``, else ``$XDG_STATE_HOME/toolkernel/mcp-client.sqlite3``."""
    if explicit := os.environ.get("TOOLKERNEL_CLIENT_DB"):
        return Path(explicit)
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "toolkernel" / "mcp-client.sqlite3"


class SqliteServerStore:
    """Records in one SQLite table; every statement runs in a worker thread, one at a time."""

    _SCHEMA = (
        "CREATE TABLE IF NOT EXISTS mcp_client_servers ("
        " client_id TEXT NOT NULL, name TEXT NOT NULL, config TEXT NOT NULL,"
        " updated_at REAL NOT NULL DEFAULT (julianday('now')),"
        " PRIMARY KEY (client_id, name))"
    )

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else default_store_path()
        self._lock = threading.Lock()
        self._conn: Any = None

    def _connect(self) -> Any:
        import sqlite3

        if self._conn is None:
            if str(self.path) != ":memory:":
                self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(str(self.path), check_same_thread=False, timeout=10.0)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(self._SCHEMA)
            conn.commit()
            self._conn = conn
        return self._conn

    def _run(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        with self._lock:
            conn = self._connect()
            rows = conn.execute(sql, params).fetchall()
            conn.commit()
            return list(rows)

    async def _call(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        return await anyio.to_thread.run_sync(self._run, sql, params)

    async def load(self, client_id: str) -> dict[str, dict[str, Any]]:
        rows = await self._call(
            "SELECT name, config FROM mcp_client_servers WHERE client_id = ? ORDER BY name", client_id
        )
        return {name: json.loads(config) for name, config in rows}

    async def save(self, client_id: str, name: str, config: Mapping[str, Any]) -> None:
        await self._call(
            "INSERT OR REPLACE INTO mcp_client_servers (client_id, name, config) VALUES (?, ?, ?)",
            client_id,
            name,
            json.dumps(dict(config), sort_keys=True),
        )

    async def delete(self, client_id: str, name: str) -> None:
        await self._call("DELETE FROM mcp_client_servers WHERE client_id = ? AND name = ?", client_id, name)

    async def close(self) -> None:
        def _close() -> None:
            with self._lock:
                if self._conn is not None:
                    self._conn.close()
                    self._conn = None

        await anyio.to_thread.run_sync(_close)
