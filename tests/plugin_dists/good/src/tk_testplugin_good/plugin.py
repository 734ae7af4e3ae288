"""A well-behaved third-party plugin: a tool, an event hook and a CLI command."""

import json
import os

from toolkernel import hookimpl, tool


@tool
def plugin_echo(text: str) -> str:
    """Echo from a plugin."""
    return f"plugin:{text}"


@hookimpl
def register_tools(registry):
    registry.add(plugin_echo)


@hookimpl
def on_tool_output(event):
    path = os.environ.get("TK_TESTPLUGIN_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"tool": event.tool_name, "output": event.output}) + "\n")


@hookimpl
def register_commands(registry):
    registry.add("hello", lambda parser: parser.add_argument("name"), _hello, help="Say hello.")


def _hello(args, kernel):
    print(f"hello {args.name} from a plugin")
    return 0
