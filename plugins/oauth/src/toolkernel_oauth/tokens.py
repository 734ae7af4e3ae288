"""Where a client keeps what it got from authorization servers: tokens and client registrations.

A :class:`TokenStore` is three async methods over string keys and JSON values (as Mastra's
``OAuthStorage``). :class:`FileTokenStore` is the default: one JSON file, mode 0600, under the
user's config directory, written atomically. :class:`MemoryTokenStore` keeps them for the life
of the process. Nothing here logs a value.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import anyio.to_thread


@runtime_checkable
class TokenStore(Protocol):
    """Persists JSON values (tokens, client registrations) under string keys."""

    async def get(self, key: str) -> Any | None:
        """The value stored under ``key``, or ``None``."""
        ...

    async def set(self, key: str, value: Any) -> None:
        """Store ``value`` (JSON-ready) under ``key``, replacing what was there."""
        ...

    async def delete(self, key: str) -> None:
        """Forget ``key`` (no error if unknown)."""
        ...


class MemoryTokenStore:
    """Values in a dict, for the life of the process."""

    def __init__(self) -> None:
        self._data: dict[str, Any] = {}

    async def get(self, key: str) -> Any | None:
        value = self._data.get(key)
        return json.loads(json.dumps(value)) if value is not None else None

    async def set(self, key: str, value: Any) -> None:
        self._data[key] = json.loads(json.dumps(value))

    async def delete(self, key: str) -> None:
        self._data.pop(key, None)

    def keys(self) -> list[str]:
        """Every stored key."""
        return sorted(self._data)


def default_token_path() -> Path:
    """``$TOOLKERNEL_OAUTH_TOKENS``, else ``$XDG_CONFIG_HOME/toolkernel/oauth-tokens.json``."""
    if explicit := os.environ.get("TOOLKERNEL_OAUTH_TOKENS"):
        return Path(explicit)
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "toolkernel" / "oauth-tokens.json"


class FileTokenStore:
    """Values in one JSON file readable only by its owner (0600), replaced atomically on write."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else default_token_path()
        self._lock = threading.Lock()

    def _read(self) -> dict[str, Any]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            raise ValueError(
                f"token file {self.path} is not valid JSON: delete it and log in again"
            ) from None
        return data if isinstance(data, dict) else {}

    def _write(self, data: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(prefix=".oauth-tokens.", dir=self.path.parent)
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, indent=1, sort_keys=True)
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def _update(self, key: str, value: Any | None) -> None:
        with self._lock:
            data = self._read()
            if value is None:
                if key not in data:
                    return
                data.pop(key)
            else:
                data[key] = value
            self._write(data)

    async def get(self, key: str) -> Any | None:
        def read() -> Any | None:
            with self._lock:
                return self._read().get(key)

        return await anyio.to_thread.run_sync(read)

    async def set(self, key: str, value: Any) -> None:
        await anyio.to_thread.run_sync(self._update, key, json.loads(json.dumps(value)))

    async def delete(self, key: str) -> None:
        await anyio.to_thread.run_sync(self._update, key, None)

    def keys(self) -> list[str]:
        """Every stored key."""
        return sorted(self.records())

    def records(self) -> dict[str, Any]:
        """Everything stored, by key (for ``toolkernel auth status``, which shows no secret)."""
        with self._lock:
            return self._read()
