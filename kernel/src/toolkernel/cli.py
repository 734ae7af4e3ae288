"""The ``toolkernel`` command line; every sub-command, built-in or not, comes from a plugin.

``main()`` makes a :class:`~toolkernel.Kernel`, asks plugins for their commands through
``register_commands`` and dispatches. A command's ``run(args, kernel)`` returns an exit
code or an awaitable of one. A :class:`~toolkernel.errors.ToolkernelError` prints one line
to stderr and exits with its ``exit_code`` (2 for what the user can fix, 3 for a server
that failed, 4 for a timeout); nothing is written to stdout but results. A usage mistake
caught by the parser is one such line too, and stdout closed early (``| head``) ends the
command with one line rather than a traceback.
"""

from __future__ import annotations

import argparse
import gc
import inspect
import math
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

from toolkernel.registries import Registry

if TYPE_CHECKING:
    from toolkernel._kernel import Kernel

__all__ = [
    "Command",
    "CommandRegistry",
    "Configure",
    "Run",
    "build_parser",
    "main",
    "port_number",
    "positive_seconds",
]

Configure = Callable[..., None]
"""``configure(parser)``, or ``configure(parser, kernel)`` for a command added with ``pass_kernel=True``."""
Run = Callable[[argparse.Namespace, "Kernel"], Any]


@dataclass(frozen=True, slots=True)
class Command:
    """One sub-command: how to add its arguments and how to run it."""

    configure: Configure
    run: Run
    help: str
    pass_kernel: bool = False


class CommandRegistry(Registry[Command]):
    kind = "command"

    def add(
        self, name: str, configure: Configure, run: Run, *, help: str = "", pass_kernel: bool = False
    ) -> None:
        """Add sub-command ``name``; ``configure(parser)`` adds its arguments.

        With ``pass_kernel`` it is called as ``configure(parser, kernel)``, for arguments that
        depend on what plugins provide (``toolkernel kb ingest --no-<extension>``).
        """
        if not callable(configure) or not callable(run):
            from toolkernel.errors import RegistrationError

            raise RegistrationError(f"command {name!r}: configure and run must be callable")
        self._add(name, Command(configure, run, help, pass_kernel))


def port_number(text: str) -> int:
    """An argparse ``type``: a TCP port, 0 (any free one) to 65535."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (0-65535)") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port number (0-65535)")
    return value


def positive_seconds(text: str) -> float:
    """An argparse ``type``: a positive, finite number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive, finite number of seconds")
    return value


class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors are the one ``toolkernel: error:`` line every error is."""

    def error(self, message: str) -> NoReturn:
        command = self.prog.removeprefix("toolkernel").strip()
        where = f"{command}: " if command else ""
        self.exit(2, f"toolkernel: error: {where}{message} (see {self.prog} --help)\n")


def build_parser(kernel: Kernel) -> argparse.ArgumentParser:
    """The argument parser with every registered command."""
    parser = _Parser(prog="toolkernel", description="A plugin-based MCP tooling kernel.")
    parser.add_argument(
        "--log-level", default=None, help="debug, info, warning or error (TOOLKERNEL_LOG_LEVEL)"
    )
    parser.add_argument(
        "--config", default=None, help="TOML configuration (TOOLKERNEL_CONFIG, ./toolkernel.toml)"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for entry in kernel.commands.entries():
        command_parser = sub.add_parser(entry.name, help=entry.value.help, description=entry.value.help)
        if entry.value.pass_kernel:
            entry.value.configure(command_parser, kernel)
        else:
            entry.value.configure(command_parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``toolkernel`` command."""
    from toolkernel._kernel import Kernel
    from toolkernel._logging import configure_logging
    from toolkernel._telemetry import configure_from_env
    from toolkernel.errors import ToolkernelError

    # Start-up builds many long-lived objects (plugins, the SDK's protocol models); cycle
    # collection passes over them cost about 7% of a server's cold start. Collection is
    # paused until the command is set up, then what exists is frozen out of later passes.
    gc.disable()
    try:
        pre = argparse.ArgumentParser(add_help=False)
        pre.add_argument("--config", default=None)
        known, _ = pre.parse_known_args(argv)
        kernel = Kernel.from_config(known.config)
        args = build_parser(kernel).parse_args(argv)
        _check_log_level(args.log_level)
        if args.log_level:
            configure_logging(args.log_level)
        configure_from_env()
        command = kernel.commands.get(args.command)
        try:
            result = command.run(args, kernel)
        finally:
            gc.freeze()
            gc.enable()
        if inspect.isawaitable(result):
            import anyio

            # A command that serves may choose the loop (``serve --loop``).
            uvloop = getattr(args, "loop", None) == "uvloop"
            result = anyio.run(_until_terminated, result, backend_options={"use_uvloop": uvloop})
        sys.stdout.flush()  # here, so a reader that went away is caught below, not at exit
        return int(result or 0)
    except ToolkernelError as exc:
        print(f"toolkernel: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        # The reader of stdout left (``| head``): what is still buffered goes nowhere, and
        # the interpreter's own flush at exit must not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        print("toolkernel: error: stdout was closed before the output was written", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    finally:
        gc.enable()


_TERMINATED = 130
"""The exit status after SIGTERM: the one Ctrl-C gives, since both stop the command the same way."""


async def _until_terminated(awaitable: Any) -> Any:
    """Await a command; SIGTERM cancels it as Ctrl-C does, so a server drains (requests in
    flight finish, sessions close, ``on_server_stop`` runs) instead of dying with -15."""
    import asyncio
    import signal

    import anyio

    loop = asyncio.get_running_loop()
    with anyio.CancelScope() as scope:
        try:
            loop.add_signal_handler(signal.SIGTERM, scope.cancel)
        except (NotImplementedError, RuntimeError, ValueError):  # no signals here (Windows, a thread)
            return await awaitable
        try:
            return await awaitable
        finally:
            loop.remove_signal_handler(signal.SIGTERM)
    return _TERMINATED


def _check_log_level(option: str | None) -> None:
    """Refuse an unknown ``--log-level`` (or ``TOOLKERNEL_LOG_LEVEL``) before anything runs."""
    import logging

    from toolkernel.errors import ConfigError

    given = (("--log-level", option), ("TOOLKERNEL_LOG_LEVEL", os.environ.get("TOOLKERNEL_LOG_LEVEL")))
    for name, level in given:
        if level and not isinstance(logging.getLevelName(level.upper()), int):
            raise ConfigError(f"{name} {level!r}: unknown level; use debug, info, warning or error")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
