"""Resolve ``path/file.py:attr`` or ``module:attr`` to the MCPServer it names."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from toolkernel.errors import ConfigError

if TYPE_CHECKING:
    from toolkernel.server import MCPServer


def load_server(target: str) -> MCPServer:
    """Import ``target`` and return its :class:`~toolkernel.MCPServer` (or a factory's result)."""
    from toolkernel.server import MCPServer

    where, sep, attr = target.rpartition(":")
    if not sep or not where or not attr:
        raise ConfigError(f"TARGET {target!r} must look like path/file.py:attr or package.module:attr")
    if where.endswith(".py") or "/" in where or "\\" in where:
        path = Path(where).resolve()
        if not path.is_file():
            raise ConfigError(f"TARGET {target!r}: no such file {where!r}")
        module_name = f"_toolkernel_target_{path.stem}"
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            raise ConfigError(f"TARGET {target!r}: cannot import {where!r}")
        module = importlib.util.module_from_spec(spec)
        sys.path.insert(0, str(path.parent))
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            raise ConfigError(
                f"TARGET {target!r}: importing {where!r} raised {type(exc).__name__}: {exc}"
            ) from exc
    else:
        try:
            module = importlib.import_module(where)
        except ImportError as exc:
            raise ConfigError(f"TARGET {target!r}: cannot import module {where!r}: {exc}") from exc
    try:
        obj = getattr(module, attr)
    except AttributeError:
        raise ConfigError(f"TARGET {target!r}: {where!r} has no attribute {attr!r}") from None
    if callable(obj) and not isinstance(obj, MCPServer):
        try:
            obj = obj()
        except Exception as exc:
            raise ConfigError(
                f"TARGET {target!r}: calling {attr!r} to make the server raised {type(exc).__name__}: {exc}"
            ) from exc
    if not isinstance(obj, MCPServer):
        raise ConfigError(f"TARGET {target!r} is a {type(obj).__name__}, not a toolkernel.MCPServer")
    return obj
