"""The built-in sub-commands: serve, plugins, inspect, call, version."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from toolkernel import hookimpl

if TYPE_CHECKING:
    from toolkernel._kernel import Kernel
    from toolkernel.cli import CommandRegistry


@hookimpl
def register_commands(registry: CommandRegistry) -> None:
    """Register the commands every installation has."""
    registry.add("serve", _serve_args, _serve, help="Serve an MCPServer (path/file.py:attr or module:attr).")
    registry.add("plugins", _plugins_args, _plugins, help="List plugins without importing their backends.")
    registry.add(
        "inspect", _inspect_args, _inspect, help="Show a server's info, tools, resources and prompts."
    )
    registry.add("call", _call_args, _call, help="Call one tool on a server and print the result.")
    registry.add("version", lambda p: None, _version, help="Print the toolkernel version.")


# -- serve ------------------------------------------------------------------------------------


def _serve_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="TARGET", help="path/file.py:attr or package.module:attr")
    parser.add_argument(
        "--transport", default="stdio", help="stdio (built in), http or sse (toolkernel-http)"
    )
    parser.add_argument("--host", default="127.0.0.1", help="interface for network transports")
    parser.add_argument("--port", type=int, default=8000, help="port for network transports")
    parser.add_argument("--path", default="/mcp", help="URL path of the MCP endpoint")


def _serve(args: argparse.Namespace, kernel: Kernel) -> Any:
    from pydantic import ValidationError

    from toolkernel._targets import load_server
    from toolkernel.errors import ConfigError
    from toolkernel.transports import ServeOptions

    if args.transport not in kernel.server_transports:
        hint = " (pip install toolkernel-http)" if args.transport in ("http", "sse") else ""
        known = ", ".join(kernel.server_transports) or "none"
        raise ConfigError(f"--transport {args.transport!r} is not installed{hint}; available: {known}")
    try:
        options = ServeOptions(host=args.host, port=args.port, path=args.path)
    except ValidationError as exc:
        raise ConfigError(f"serve: {exc}") from None
    server = load_server(args.target)
    if server._kernel is None:
        server._kernel = kernel
    return server.kernel.serve(server, args.transport, options)


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


# -- inspect / call ---------------------------------------------------------------------------


def _client_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "server", metavar="SERVER", help="a URL, or a command line that starts a stdio server"
    )
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds before giving up (default 30)")
    parser.add_argument("--mode", default="auto", help="protocol era: auto, legacy or 2026-07-28")


def _inspect_args(parser: argparse.ArgumentParser) -> None:
    _client_args(parser)
    parser.add_argument("--json", action="store_true", help="print JSON")


def _call_args(parser: argparse.ArgumentParser) -> None:
    _client_args(parser)
    parser.add_argument("tool", metavar="TOOL")
    parser.add_argument("--args", default="{}", help="tool arguments as a JSON object")
    parser.add_argument("--json", action="store_true", help="print the whole result as JSON")


async def _inspect(args: argparse.Namespace, kernel: Kernel) -> int:
    import anyio

    from toolkernel._connect import connect

    with anyio.fail_after(args.timeout):
        async with connect(kernel, args.server, mode=args.mode) as client:
            info = client.server_info
            caps = client.server_capabilities
            report: dict[str, Any] = {
                "server": info.model_dump(mode="json", exclude_none=True) if info else None,
                "protocol_version": client.protocol_version,
                "instructions": client.instructions,
                "tools": [],
                "resources": [],
                "resource_templates": [],
                "prompts": [],
            }
            if caps.tools is not None:
                report["tools"] = _dump((await client.list_tools()).tools)
            if caps.resources is not None:
                report["resources"] = _dump((await client.list_resources()).resources)
                report["resource_templates"] = _dump(
                    (await client.list_resource_templates()).resource_templates
                )
            if caps.prompts is not None:
                report["prompts"] = _dump((await client.list_prompts()).prompts)
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
    import anyio

    from toolkernel._connect import connect
    from toolkernel.errors import ConfigError

    try:
        arguments = json.loads(args.args)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"--args is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    if not isinstance(arguments, dict):
        raise ConfigError(f"--args must be a JSON object, got {type(arguments).__name__}")
    with anyio.fail_after(args.timeout):
        async with connect(kernel, args.server, mode=args.mode) as client:
            result = await client.call_tool(args.tool, arguments)
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
