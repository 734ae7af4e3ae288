"""``toolkernel dev`` and ``toolkernel list``: the commands for working on a server.

``dev`` serves a server over Streamable HTTP in a child process that is restarted when a
watched file changes (with watchfiles, as ``uvicorn --reload`` does) and opens the MCP
Inspector on it. ``list`` shows what a server definition offers without serving it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from toolkernel.cli import port_number

if TYPE_CHECKING:
    from toolkernel._kernel import Kernel

STOP_TIMEOUT_S = 5.0
"""How long a server being replaced or stopped gets to exit after SIGINT before it is killed."""

INSPECTOR = "npx --yes @modelcontextprotocol/inspector"
"""The MCP Inspector from npm (v2: its launcher takes ``--web --transport http --server-url URL``)."""


def dev_args(parser: argparse.ArgumentParser) -> None:
    """``toolkernel dev`` options."""
    parser.add_argument("target", metavar="TARGET", help="path/file.py:attr or package.module:attr")
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on")
    parser.add_argument("--port", type=port_number, default=8000, help="port to listen on (default 8000)")
    parser.add_argument("--path", default="/mcp", help="URL path of the MCP endpoint")
    parser.add_argument(
        "--watch",
        action="append",
        default=[],
        metavar="PATH",
        help="file or directory whose changes restart the server (repeatable; default: the "
        "target file's directory, or the current directory for a module target)",
    )
    parser.add_argument("--no-inspector", action="store_true", help="serve and reload only")
    parser.add_argument(
        "--inspector-command",
        default=INSPECTOR,
        metavar="COMMAND",
        help=f"how to start the Inspector (default {INSPECTOR!r}); "
        "'--web --transport http --server-url URL' is appended",
    )


def dev(args: argparse.Namespace, kernel: Kernel) -> int:
    """Serve TARGET over HTTP, restart it on changes, and run the Inspector beside it until Ctrl-C."""
    from toolkernel._targets import load_server
    from toolkernel.errors import ConfigError, MissingDependencyError

    if "http" not in kernel.server_transports:
        raise ConfigError("toolkernel dev serves over HTTP: pip install toolkernel-http")
    try:
        import watchfiles
    except ImportError:
        raise MissingDependencyError(
            "toolkernel dev restarts the server with watchfiles: pip install 'toolkernel[dev]'"
        ) from None
    load_server(args.target)  # a bad target fails here, once, not on every restart
    url = f"http://{args.host}:{args.port}{args.path}"
    serve = [sys.executable, "-m", "toolkernel", "serve", args.target, "--transport", "http"]
    serve += ["--host", args.host, "--port", str(args.port), "--path", args.path]
    watched = [Path(p) for p in args.watch] or [_default_watch(args.target)]
    for path in watched:
        if not path.exists():
            raise ConfigError(f"--watch {str(path)!r}: no such file or directory")
    inspector = None if args.no_inspector else _start_inspector(args.inspector_command, url)
    print(f"toolkernel dev: {url}, restarting on changes in {', '.join(map(str, watched))}", file=sys.stderr)
    try:
        code = _serve_and_reload(serve, watched, watchfiles.watch)
    finally:
        if inspector is not None:
            inspector.terminate()
            try:
                inspector.wait(timeout=10)
            except subprocess.TimeoutExpired:
                inspector.kill()
                inspector.wait(timeout=10)
    return code


def _serve_and_reload(serve: list[str], watched: list[Path], watch: Any) -> int:
    """Run ``serve`` and replace it after every batch of changes, until Ctrl-C or SIGTERM.

    watchfiles' ``run_process`` leaves the new server running when Ctrl-C lands between
    stopping one server and starting the next; here both signals wait until the replacement
    is in hand, so the server that is running is always the one stopped on the way out.
    A first server that exits on its own with an error (the port is taken, say) ends the
    command with its exit status rather than leaving it watching files for nothing.
    """
    # Both stop the loop, even where the parent left SIGINT ignored (a job started in the
    # background by a script), as uvicorn's reloader does.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _interrupt)
    server: subprocess.Popen[bytes] | None = None
    first_failed: list[int] = []
    replaced = threading.Event()
    try:
        with _signals_deferred():
            server = subprocess.Popen(serve)
        threading.Thread(target=_end_if_failed, args=(server, replaced, first_failed), daemon=True).start()
        for changes in watch(*watched):
            _restarted(changes)
            with _signals_deferred():
                replaced.set()
                _stop(server)
                server = subprocess.Popen(serve)
    except KeyboardInterrupt:
        pass
    finally:
        replaced.set()
        if server is not None:
            _stop(server)
    return first_failed[0] if first_failed else 0


def _end_if_failed(server: subprocess.Popen[bytes], replaced: threading.Event, failed: list[int]) -> None:
    """Wait for the first server; if it exits with an error before being replaced, interrupt
    the watch loop (as Ctrl-C would) and keep its exit status."""
    code = server.wait()
    if code != 0 and not replaced.is_set():
        failed.append(code)
        os.kill(os.getpid(), signal.SIGINT)


def _interrupt(signum: int, frame: Any) -> NoReturn:
    raise KeyboardInterrupt


@contextlib.contextmanager
def _signals_deferred() -> Iterator[None]:
    """Act on SIGINT or SIGTERM received during the block only once it is done.

    A handler, not a signal mask: a child started in the block would inherit a mask, while
    handlers are reset in it by ``exec``.
    """
    received: list[int] = []
    signals = (signal.SIGINT, signal.SIGTERM)
    previous = [signal.signal(s, lambda signum, frame: received.append(signum)) for s in signals]
    try:
        yield
    finally:
        for s, handler in zip(signals, previous, strict=True):
            signal.signal(s, handler)
    if received:
        raise KeyboardInterrupt


def _stop(server: subprocess.Popen[bytes]) -> None:
    """Ask ``server`` to exit as Ctrl-C would, then kill it if it has not within :data:`STOP_TIMEOUT_S`."""
    if server.poll() is not None:
        return
    server.send_signal(signal.SIGINT)
    try:
        server.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait(timeout=STOP_TIMEOUT_S)


def _default_watch(target: str) -> Path:
    where = target.rpartition(":")[0]
    if where.endswith(".py") or "/" in where or "\\" in where:
        return Path(where).resolve().parent
    return Path.cwd()


def _start_inspector(command: str, url: str) -> subprocess.Popen[bytes]:
    from toolkernel.errors import ConfigError

    argv = [*shlex.split(command), "--web", "--transport", "http", "--server-url", url]
    try:
        return subprocess.Popen(argv)
    except FileNotFoundError:
        raise ConfigError(
            f"cannot start the Inspector ({argv[0]!r} not found): install Node.js 20+, or pass --no-inspector"
        ) from None


def _restarted(changes: set[Any]) -> None:
    names = sorted({str(Path(path).name) for _, path in changes})
    print(f"toolkernel dev: {', '.join(names)} changed; restarting", file=sys.stderr)


# -- list ---------------------------------------------------------------------------------------


def list_args(parser: argparse.ArgumentParser) -> None:
    """``toolkernel list`` options."""
    parser.add_argument("target", metavar="TARGET", help="path/file.py:attr or package.module:attr")
    parser.add_argument("--json", action="store_true", help="print JSON")


def list_(args: argparse.Namespace, kernel: Kernel) -> int:
    """Print the tools, resources, templates, prompts and skills TARGET offers (plugins' included),
    unserved."""
    from toolkernel._targets import load_server

    server = load_server(args.target)
    if server._kernel is None:
        server._kernel = kernel
    fixed, templates = server.all_resources()
    report: dict[str, list[dict[str, Any]]] = {
        "tools": [t.describe() for t in server.all_tools().values()],
        "resources": [
            {"uri": r.uri, "name": r.name, "description": r.description, "mimeType": r.mime_type}
            for r in fixed.values()
        ],
        "resource_templates": [
            {"uriTemplate": t.uri_template, "name": t.name, "description": t.description}
            for t in templates.values()
        ],
        "prompts": [
            {
                "name": name,
                "versions": [v for v in versions if v is not None],
                "description": list(versions.values())[-1].description,
            }
            for name, versions in server.all_prompts().items()
        ],
        "skills": [
            {"uri": k.uri, "name": k.name, "description": k.description} for k in server.skills.values()
        ],
    }
    if args.json:
        print(json.dumps({"server": {"name": server.name, "version": server.version}, **report}, indent=2))
        return 0
    print(f"{server.name} {server.version}")
    for section, key in (
        ("tools", "name"),
        ("resources", "uri"),
        ("resource_templates", "uriTemplate"),
        ("prompts", "name"),
        ("skills", "uri"),
    ):
        print(f"{section}: {len(report[section])}")
        for item in report[section]:
            notes = []
            if task := item.get("execution", {}).get("taskSupport"):
                notes.append(f"task: {task}")
            if item.get("versions"):
                notes.append("versions: " + ", ".join(item["versions"]))
            summary = (item.get("description") or "").strip().splitlines()
            extra = f" [{'; '.join(notes)}]" if notes else ""
            print(f"  {item[key]}{extra}  {summary[0] if summary else ''}".rstrip())
    return 0
