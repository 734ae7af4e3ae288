"""The built-in sub-commands: serve, dev, list, plugins, plugin, inspect, call, version."""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from toolkernel import hookimpl
from toolkernel._builtin import devserver, workers
from toolkernel.cli import port_number, positive_seconds

if TYPE_CHECKING:
    from toolkernel._kernel import Kernel
    from toolkernel.cli import CommandRegistry
    from toolkernel.transports import ServeOptions


@hookimpl
def register_commands(registry: CommandRegistry) -> None:
    """Register the commands every installation has."""
    registry.add("serve", _serve_args, _serve, help="Serve an MCPServer (path/file.py:attr or module:attr).")
    registry.add("plugins", _plugins_args, _plugins, help="List plugins without importing their backends.")
    registry.add(
        "plugin", _plugin_args, _plugin, help="Write a new plugin distribution (plugin new NAME --kind KIND)."
    )
    registry.add(
        "inspect", _inspect_args, _inspect, help="Show a server's info, tools, resources and prompts."
    )
    registry.add("call", _call_args, _call, help="Call one tool on a server and print the result.")
    registry.add("version", lambda p: None, _version, help="Print the toolkernel version.")
    registry.add(
        "dev",
        devserver.dev_args,
        devserver.dev,
        help="Serve over HTTP, restart on code changes and open the MCP Inspector.",
    )
    registry.add(
        "list", devserver.list_args, devserver.list_, help="List what a server offers, without serving it."
    )


# -- serve ------------------------------------------------------------------------------------


def _serve_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="TARGET", help="path/file.py:attr or package.module:attr")
    parser.add_argument(
        "--transport", default="stdio", help="stdio (built in), http or sse (toolkernel-http)"
    )
    parser.add_argument("--host", default="127.0.0.1", help="interface for network transports")
    parser.add_argument("--port", type=port_number, default=8000, help="port for network transports")
    parser.add_argument("--path", default="/mcp", help="URL path of the MCP endpoint")
    parser.add_argument(
        "--insecure",
        action="store_true",
        help="serve a network transport off loopback with no allowed hosts and no authentication "
        "(any web page could call the tools)",
    )
    auth_argument(parser)
    parser.add_argument(
        "--workers",
        type=_worker_count,
        default=1,
        metavar="N",
        help="serve from N processes on one port (http; stateful mode needs a shared store)",
    )
    parser.add_argument(
        "--loop",
        choices=("auto", "asyncio", "uvloop"),
        default="auto",
        help="event loop: auto picks uvloop when it is installed (as uvicorn does), else asyncio",
    )


def _serve(args: argparse.Namespace, kernel: Kernel) -> Any:
    from pydantic import ValidationError

    from toolkernel._targets import load_server
    from toolkernel.errors import ConfigError

    if args.transport not in kernel.server_transports:
        hint = " (pip install toolkernel-http)" if args.transport in ("http", "sse") else ""
        known = ", ".join(kernel.server_transports) or "none"
        raise ConfigError(f"--transport {args.transport!r} is not installed{hint}; available: {known}")
    check_auth_option(kernel, args.transport, args.auth)
    try:
        options = serve_options(args)
    except ValidationError as exc:
        from toolkernel.client.config import format_errors

        raise ConfigError(f"serve: {format_errors(exc)}") from None
    args.loop = _event_loop(args.loop)
    server = load_server(args.target)
    if server._kernel is None:
        server._kernel = kernel
    if args.transport != "stdio":  # stdio loads it once it has answered initialize (see _stdio_server)
        import toolkernel._serving  # noqa: F401 - load the protocol layer now, during set-up (see cli.main)

    if options.workers > 1 and not workers.is_worker():
        if args.transport == "stdio":
            raise ConfigError("--workers applies to network transports (http, sse), not to stdio")
        workers.check(server.kernel, server, args.transport, options)
        return workers.supervise(options.workers)
    return server.kernel.serve(server, args.transport, options)


def auth_argument(parser: argparse.ArgumentParser) -> None:
    """``--auth PROVIDER``, as ``serve`` and ``kb serve`` take it."""
    parser.add_argument(
        "--auth",
        default=None,
        metavar="PROVIDER",
        help="require a token: the auth provider that checks it (toolkernel-oauth: jwt, introspection, "
        "static-tokens, chain); network transports only",
    )


def check_auth_option(kernel: Kernel, transport: str, auth: str | None) -> None:
    """Refuse ``--auth`` on stdio, or naming a provider no plugin registered."""
    from toolkernel.errors import ConfigError

    if auth is None:
        return
    if transport == "stdio":
        raise ConfigError("--auth applies to network transports (http, sse), not to stdio")
    if auth not in kernel.auth_providers:
        known = ", ".join(kernel.auth_providers) or "none (pip install toolkernel-oauth)"
        raise ConfigError(f"--auth {auth!r}: no such auth provider; available: {known}")


def serve_options(args: argparse.Namespace) -> ServeOptions:
    """The ``ServeOptions`` of a ``serve`` command line (``--insecure`` and ``--auth`` go to the
    transport's extra)."""
    from toolkernel.transports import ServeOptions

    extra: dict[str, Any] = {"insecure": True} if args.insecure else {}
    if args.auth is not None:
        extra["auth"] = args.auth
    return ServeOptions(
        host=args.host,
        port=args.port,
        path=args.path,
        extra=extra,
        workers=getattr(args, "workers", 1),
        reuse_port=workers.is_worker(),
    )


def _worker_count(text: str) -> int:
    """An argparse ``type``: a number of worker processes, 1 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of workers") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} workers: give 1 or more")
    return value


def _event_loop(choice: str) -> str:
    """The loop ``--loop`` names, with ``auto`` resolved without importing uvloop."""
    import importlib.util

    from toolkernel.errors import ConfigError

    installed = importlib.util.find_spec("uvloop") is not None
    if choice == "auto":
        return "uvloop" if installed else "asyncio"
    if choice == "uvloop" and not installed:
        raise ConfigError("--loop uvloop: uvloop is not installed (pip install uvloop)")
    return choice


# -- plugins ----------------------------------------------------------------------------------


def _plugins_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON")


def _plugins(args: argparse.Namespace, kernel: Kernel) -> int:
    infos = kernel.plugins()
    if args.json:
        print(json.dumps([i.as_dict() for i in infos], indent=2))
        return 0
    for info in infos:
        version = f" {info.version}" if info.version else ""
        dist = f" [{info.distribution}{version}]" if info.distribution else ""
        print(f"{info.name}{dist} ({info.origin}, {info.status})")
        if info.hooks:
            print(f"    hooks: {', '.join(info.hooks)}")
        if info.error:
            print(f"    error: {info.error}")
    return 0


# -- plugin new ------------------------------------------------------------------------------


def _plugin_args(parser: argparse.ArgumentParser) -> None:
    from toolkernel._scaffold import KINDS

    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    new = actions.add_parser(
        "new", help="write a ready plugin distribution: pyproject, module, tests, README"
    )
    new.add_argument("name", metavar="NAME", help="the plugin's name, e.g. lancedb (toolkernel-NAME)")
    new.add_argument("--kind", required=True, choices=KINDS, help="what the plugin provides")
    new.add_argument("--dir", default=None, help="where to write it (default ./toolkernel-NAME)")


def _plugin(args: argparse.Namespace, kernel: Kernel) -> int:
    from toolkernel._scaffold import new_plugin
    from toolkernel.errors import ConfigError

    try:
        written = new_plugin(args.name, args.kind, args.dir)
    except OSError as exc:
        raise ConfigError(f"plugin new: cannot write {exc.filename or args.dir!r}: {exc.strerror}") from None
    root = written[0].parent
    for path in written:
        print(path)
    # "./" so pip reads a path, not a requirement name; the same form the docs give.
    shown = str(root) if root.is_absolute() or str(root).startswith(".") else f"./{root}"
    print(f"\nnext: pip install -e '{shown}[test]' && pytest {shown}", file=sys.stderr)
    return 0


# -- inspect / call ---------------------------------------------------------------------------


def _client_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "server", metavar="SERVER", help="a URL, or a command line that starts a stdio server"
    )
    parser.add_argument(
        "--timeout", type=positive_seconds, default=30.0, help="seconds before giving up (default 30)"
    )
    parser.add_argument("--mode", default="auto", help="protocol era: auto, legacy or 2026-07-28")
    parser.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="HTTP header to send to a URL server, e.g. 'Authorization: Bearer TOKEN' (repeatable)",
    )
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="environment variable for a command-line server (repeatable)",
    )


def _inspect_args(parser: argparse.ArgumentParser) -> None:
    _client_args(parser)
    parser.add_argument("--json", action="store_true", help="print JSON")


def _call_args(parser: argparse.ArgumentParser) -> None:
    _client_args(parser)
    parser.add_argument("tool", metavar="TOOL")
    parser.add_argument("--args", default="{}", help="tool arguments as a JSON object")
    parser.add_argument("--json", action="store_true", help="print the whole result as JSON")


def _one_server(args: argparse.Namespace, kernel: Kernel) -> Any:
    """An MCPClient holding just SERVER (a URL or a command line), loaded or failing loudly."""
    import shlex

    from toolkernel.client import MCPClient
    from toolkernel.errors import ConfigError

    if not args.server.strip():
        raise ConfigError("SERVER is empty: give a URL or a command line")
    # A URL is one word that starts with a scheme; a command line may carry URLs among its arguments.
    if re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*://\S*", args.server.strip()):
        if args.env:
            raise ConfigError("--env applies to a command-line server, not to a URL")
        server: dict[str, Any] = {"url": args.server, "headers": _pairs(args.header, ":", "--header")}
        if "oauth" in kernel.client_auth and not any(h.lower() == "authorization" for h in server["headers"]):
            server["auth"] = {"type": "oauth"}  # tokens kept by `toolkernel auth login`
    else:
        if args.header:
            raise ConfigError("--header applies to a URL server, not to a command line")
        argv = shlex.split(args.server)
        # One-shot: a server that has not exited half a second after its stdin closed is stopped,
        # so the command ends close to --timeout even when the server hangs.
        server = {
            "command": argv[0],
            "args": argv[1:],
            "env": _pairs(args.env, "=", "--env"),
            "exit_grace": 0.5,
        }
    server.update(protocol=args.mode, timeout=args.timeout, connect_timeout=args.timeout)
    config = {
        "id": f"cli-{id(args)}",
        "servers": {"server": server},
        "throw_on_load_error": True,
        "prefix_tool_name_with_server_name": False,
        "policy": {"stdio_restart": {"max_attempts": 0}, "http_reconnect": {"max_attempts": 0}},
    }
    return MCPClient(config, kernel=kernel, persist=False)


@contextlib.contextmanager
def _quiet_unless_asked(args: argparse.Namespace, also: tuple[str, ...] = ()) -> Iterator[None]:
    """While a one-shot client runs, log only errors unless a level was asked for: its failure is
    the one error line. The loggers named in ``also`` are silenced altogether (a library logging a
    traceback for the error the command reports). The previous configuration comes back
    afterwards (``main`` may run in-process)."""
    import logging
    import os

    if args.log_level or "TOOLKERNEL_LOG_LEVEL" in os.environ:
        yield
        return
    import structlog

    from toolkernel._logging import get_logger

    get_logger()  # configured as usual first, so only the level changes
    wrapper = structlog.get_config()["wrapper_class"]
    root = logging.getLogger()
    root_level = root.level
    silenced = {name: logging.getLogger(name).level for name in also}
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    root.setLevel(logging.ERROR)
    for name in silenced:
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        structlog.configure(wrapper_class=wrapper)
        root.setLevel(root_level)
        for name, level in silenced.items():
            logging.getLogger(name).setLevel(level)


@contextlib.contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    """Bound the whole command by ``--timeout``; running out is a :class:`RequestTimeout` (exit 4)."""
    import anyio

    from toolkernel.client.errors import REQUEST_TIMEOUT, RequestTimeout

    try:
        with anyio.fail_after(seconds):
            yield
    except TimeoutError:
        raise RequestTimeout("server", f"timed out after {seconds:g}s (--timeout)", REQUEST_TIMEOUT) from None


def _pairs(items: list[str], separator: str, option: str) -> dict[str, str]:
    """``NAME<separator>VALUE`` strings as a dict, or a ConfigError naming the bad one."""
    from toolkernel.errors import ConfigError

    pairs = {}
    for item in items:
        name, found, value = item.partition(separator)
        if not found or not name.strip():
            raise ConfigError(f"{option} {item!r}: expected NAME{separator}VALUE")
        pairs[name.strip()] = value.strip() if separator == ":" else value
    return pairs


async def _inspect(args: argparse.Namespace, kernel: Kernel) -> int:
    with _quiet_unless_asked(args), _deadline(args.timeout):
        async with _one_server(args, kernel) as client:
            snap = client.get_servers()["server"]
    report: dict[str, Any] = {
        "server": snap.server_info.model_dump(mode="json", exclude_none=True) if snap.server_info else None,
        "protocol_version": snap.protocol_version,
        "instructions": snap.instructions,
        "tools": _dump(snap.tools),
        "resources": _dump(snap.resources),
        "resource_templates": _dump(snap.resource_templates),
        "prompts": _dump(snap.prompts),
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    server = report["server"] or {}
    print(f"{server.get('name', '?')} {server.get('version', '')} (protocol {report['protocol_version']})")
    for section, key in (
        ("tools", "name"),
        ("resources", "uri"),
        ("resource_templates", "uriTemplate"),
        ("prompts", "name"),
    ):
        print(f"{section}: {len(report[section])}")
        for item in report[section]:
            summary = (item.get("description") or "").strip().splitlines()
            print(f"  {item.get(key)}  {summary[0] if summary else ''}")
    return 0


async def _call(args: argparse.Namespace, kernel: Kernel) -> int:
    from toolkernel.errors import ConfigError

    try:
        arguments = json.loads(args.args)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"--args is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    if not isinstance(arguments, dict):
        raise ConfigError(f"--args must be a JSON object, got {type(arguments).__name__}")
    with _quiet_unless_asked(args), _deadline(args.timeout):
        async with _one_server(args, kernel) as client:
            output = await client.call_server_tool("server", args.tool, arguments, raise_on_error=False)
    result = output.result
    if args.json:
        print(result.model_dump_json(by_alias=True, exclude_none=True, indent=2))
    else:
        for block in result.content:
            text = getattr(block, "text", None)
            print(text if text is not None else block.model_dump_json(by_alias=True, exclude_none=True))
        if result.structured_content is not None and not result.content:
            print(json.dumps(result.structured_content))
    return 1 if result.is_error else 0


def _version(args: argparse.Namespace, kernel: Kernel) -> int:
    from importlib.metadata import version

    print(f"toolkernel {version('toolkernel')} (mcp {version('mcp')}, python {sys.version.split()[0]})")
    return 0


def _dump(items: list[Any]) -> list[dict[str, Any]]:
    return [i.model_dump(mode="json", by_alias=True, exclude_none=True) for i in items]
