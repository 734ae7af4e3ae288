"""The loopback redirect a command-line login waits on (RFC 8252 §7.3).

A listener on 127.0.0.1 with an ephemeral port; the authorization URL goes to the browser
(when one can be opened) or to stderr; the first request to ``/callback`` whose ``state``
matches the one in the authorization URL ends the wait. Anything else is answered 400 and
ignored, so a stray or forged request cannot complete a login. One authorization runs at a
time (one URL on screen); each waits for its own ``state``, so a second one (a scope
step-up) never gets the first one's redirect.
"""

from __future__ import annotations

import os
import sys
import webbrowser
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import anyio.abc

_PAGE = b"<!doctype html><title>toolkernel</title><p>Logged in. You can close this window."
_REFUSED = b"<!doctype html><title>toolkernel</title><p>This is not the login this listener waits for."


class LoopbackRedirect:
    """``async with LoopbackRedirect() as r``: ``r.uri`` to register, ``await r.authorize(url)`` to log in."""

    def __init__(self, *, open_browser: bool = True) -> None:
        self.open_browser = open_browser
        self.uri = ""
        self._listener: Any = None
        self._expected_state: str | None = None
        self._received: str | None = None
        self._done = anyio.Event()
        self._one_at_a_time = anyio.Lock()

    async def __aenter__(self) -> LoopbackRedirect:
        self._listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        port = self._listener.extra(anyio.abc.SocketAttribute.local_port)
        self.uri = f"http://127.0.0.1:{port}/callback"
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._listener is not None:
            await self._listener.aclose()

    async def authorize(self, authorization_url: str) -> str:
        """Send the user to ``authorization_url``; return the redirect URL the browser came back with."""
        async with self._one_at_a_time:
            self._expected_state = parse_qs(urlsplit(authorization_url).query).get("state", [None])[0]
            self._received = None
            self._done = anyio.Event()
            shown = False
            if self.open_browser and _has_browser():
                shown = webbrowser.open(authorization_url)
            if not shown:
                print(f"Open this URL to log in:\n\n  {authorization_url}\n", file=sys.stderr, flush=True)
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._listener.serve, self._handle)
                await self._done.wait()
                tg.cancel_scope.cancel()
            assert self._received is not None
            return self._received

    async def _handle(self, stream: anyio.abc.SocketStream) -> None:
        async with stream:
            with anyio.move_on_after(10):
                head = b""
                while b"\r\n\r\n" not in head and len(head) < 16384:
                    head += await stream.receive(4096)
                line = head.split(b"\r\n", 1)[0].decode("latin-1")
                parts = line.split(" ")
                target = parts[1] if len(parts) >= 2 else ""
                url = urlsplit(target)
                state = parse_qs(url.query).get("state", [None])[0]
                good = (
                    parts[0] == "GET"
                    and url.path == "/callback"
                    and state is not None
                    and state == self._expected_state
                    and not self._done.is_set()
                )
                body = _PAGE if good else _REFUSED
                status = b"200 OK" if good else b"400 Bad Request"
                await stream.send(
                    b"HTTP/1.1 "
                    + status
                    + b"\r\ncontent-type: text/html\r\ncontent-length: "
                    + str(len(body)).encode()
                    + b"\r\nconnection: close\r\n\r\n"
                    + body
                )
                if good:
                    self._received = self.uri + ("?" + url.query if url.query else "")
                    self._done.set()


def _has_browser() -> bool:
    """Whether a browser can be opened here: a desktop session, or ``$BROWSER`` set."""
    if os.environ.get("BROWSER"):
        return True
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
