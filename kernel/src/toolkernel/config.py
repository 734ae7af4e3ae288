"""The kernel's configuration file: which plugins load, and each plugin's settings.

A TOML file (``--config PATH``, else ``TOOLKERNEL_CONFIG``, else ``./toolkernel.toml``
when present)::

    [plugins]
    disable = ["toolkernel-chroma"]   # or: load = ["stdio", "commands", "toolkernel-qdrant"]
    strict = true                      # a plugin that fails to load is fatal

    [plugins.qdrant]                   # settings of the plugin that declared "qdrant"
    path = "/var/lib/vectors"

Environment variables (``TOOLKERNEL_LOAD_PLUGINS``, ``TOOLKERNEL_DISABLE_PLUGINS``,
``TOOLKERNEL_STRICT_PLUGINS``, ``TOOLKERNEL_<NAME>_<FIELD>``) win over the file.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from toolkernel.errors import ConfigError

_RESERVED = ("load", "disable", "strict")


class KernelConfig(BaseModel):
    """What a configuration file may say."""

    model_config = ConfigDict(extra="forbid")

    load: list[str] | None = Field(None, description="Load only these plugins (by name).")
    disable: list[str] = Field(default_factory=list, description="Never load these plugins.")
    strict: bool = Field(False, description="Fail when a plugin cannot be loaded.")
    settings: dict[str, dict[str, Any]] = Field(default_factory=dict, description="Settings per plugin.")


def find_config(path: str | os.PathLike[str] | None = None) -> Path | None:
    """The configuration file to read: ``path``, ``TOOLKERNEL_CONFIG``, or ``./toolkernel.toml``."""
    if path is not None:
        return Path(path)
    if os.environ.get("TOOLKERNEL_CONFIG"):
        return Path(os.environ["TOOLKERNEL_CONFIG"])
    default = Path("toolkernel.toml")
    return default if default.is_file() else None


def load_config(path: str | os.PathLike[str] | None = None) -> KernelConfig:
    """Read and validate the configuration; errors name the file and the field path."""
    found = find_config(path)
    if found is None:
        return KernelConfig()
    try:
        data = tomllib.loads(found.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file {str(found)!r} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {str(found)!r} is not valid TOML: {exc}") from None
    plugins = data.pop("plugins", {})
    if data:
        raise ConfigError(
            f"config file {str(found)!r}: unknown top-level key(s) {sorted(data)}; use [plugins]"
        )
    if not isinstance(plugins, dict):
        raise ConfigError(f"config file {str(found)!r}: [plugins] must be a table")
    fields = {k: plugins[k] for k in _RESERVED if k in plugins}
    settings = {k: v for k, v in plugins.items() if k not in _RESERVED}
    for name, section in settings.items():
        if not isinstance(section, dict):
            raise ConfigError(f"config file {str(found)!r}: plugins.{name} must be a table of settings")
    try:
        return KernelConfig(**fields, settings=settings)
    except ValidationError as exc:
        problems = "; ".join(
            f"plugins.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors(include_url=False)
        )
        raise ConfigError(f"config file {str(found)!r}: {problems}") from None
