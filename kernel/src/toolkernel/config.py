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

:func:`plugin_settings` merges one plugin's table, its environment variables and a
call's options (in that order of precedence, lowest first) and validates them against
the plugin's model; its errors name the file, the table, the key and where the value
came from.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from toolkernel.errors import ConfigError

__all__ = [
    "KernelConfig",
    "env_prefix",
    "find_config",
    "load_config",
    "plugin_settings",
    "section_variables",
]

_RESERVED = ("load", "disable", "strict")

# Kernel variables that a plugin's TOOLKERNEL_<NAME>_ prefix could otherwise claim.
_KERNEL_VARIABLES = frozenset(
    {
        "TOOLKERNEL_CONFIG",
        "TOOLKERNEL_LOAD_PLUGINS",
        "TOOLKERNEL_DISABLE_PLUGINS",
        "TOOLKERNEL_STRICT_PLUGINS",
    }
)

M = TypeVar("M", bound=BaseModel)


class KernelConfig(BaseModel):
    """What a configuration file may say."""

    model_config = ConfigDict(extra="forbid")

    load: list[str] | None = Field(None, description="Load only these plugins (by name).")
    disable: list[str] = Field(default_factory=list, description="Never load these plugins.")
    strict: bool = Field(False, description="Fail when a plugin cannot be loaded.")
    settings: dict[str, dict[str, Any]] = Field(default_factory=dict, description="Settings per plugin.")
    file: Path | None = Field(None, description="The file this configuration was read from.")


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
        return KernelConfig(**fields, settings=settings, file=found)
    except ValidationError as exc:
        problems = "; ".join(
            f"plugins.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors(include_url=False)
        )
        raise ConfigError(f"config file {str(found)!r}: {problems}") from None


def env_prefix(name: str) -> str:
    """``TOOLKERNEL_<NAME>_``: the prefix of settings section ``name``'s environment variables."""
    return f"TOOLKERNEL_{name.upper().replace('-', '_').replace('.', '_').replace('/', '_')}_"


def plugin_settings(
    name: str,
    model: type[M],
    *,
    table: Mapping[str, Any] | None = None,
    file: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
    options: Mapping[str, Any] | None = None,
    other_sections: Collection[str] = (),
) -> M:
    """Settings section ``name`` validated against ``model``: table, then environment, then options.

    :param table: the ``[plugins.<name>]`` table (from ``file``, or given in Python when ``file``
        is ``None``).
    :param environ: where ``TOOLKERNEL_<NAME>_<FIELD>`` variables are read (default
        ``os.environ``); a value starting with ``[`` or ``{`` is read as JSON.
    :param options: explicit values that win over both (a factory call's options).
    :param other_sections: the other declared sections, so a variable of a longer name
        (``TOOLKERNEL_LOCAL_EMBED_*`` beside ``local``) is left to its own section.
    :raises ConfigError: keys the model does not have, or values it rejects, all in one
        message naming the table, each key and where its value came from (file, variable or
        option).
    """
    env = os.environ if environ is None else environ
    table_name = f"[plugins.{name}]"
    file_label = f"config file {str(file)!r}" if file is not None else "Kernel(settings=...)"
    data: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for key, value in (table or {}).items():
        data[key], sources[key] = value, f"in {file_label}"
    prefix = env_prefix(name)
    for var, value in section_variables(name, env, other_sections).items():
        key = var[len(prefix) :].lower()
        data[key], sources[key] = _env_value(value), f"from {var}"
    for key, value in (options or {}).items():
        data[key], sources[key] = value, "from the call's options"

    # Every mistake is reported at once: unknown keys, then what the model rejects in the rest.
    problems: list[str] = []
    unknown: list[str] = []
    if model.model_config.get("extra") != "allow":
        known = _field_names(model)
        unknown = sorted(k for k in data if k not in known)
        if unknown:
            listed = ", ".join(sorted(model.model_fields)) or "none"
            typos = "; ".join(f"{table_name} {k} {sources[k]}: unknown key" for k in unknown)
            problems.append(f"{typos} (known keys: {listed})")
    try:
        settings = model.model_validate({k: v for k, v in data.items() if k not in unknown})
    except ValidationError as exc:
        problems += [
            _describe(e["loc"], e["msg"], table_name, sources, str(file or "toolkernel.toml"), prefix)
            for e in exc.errors(include_url=False)
        ]
    if problems:
        raise ConfigError(f"settings of plugin {name!r} are invalid: {'; '.join(problems)}")
    return settings


def section_variables(
    name: str, environ: Mapping[str, str], other_sections: Collection[str] = ()
) -> dict[str, str]:
    """The ``TOOLKERNEL_<NAME>_*`` variables of section ``name``, less those of a longer section name."""
    prefix = env_prefix(name)
    longer = [env_prefix(o) for o in other_sections if o != name and env_prefix(o).startswith(prefix)]
    return {
        var: value
        for var, value in environ.items()
        if var.startswith(prefix)
        and var not in _KERNEL_VARIABLES
        and not any(var.startswith(p) for p in longer)
    }


def _env_value(value: str) -> Any:
    """An environment value as given, or parsed as JSON when it looks like a list or a table."""
    if value.lstrip()[:1] in ("[", "{"):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value  # the model's error will name the variable
    return value


def _field_names(model: type[BaseModel]) -> set[str]:
    names = set()
    for field_name, info in model.model_fields.items():
        names.add(field_name)
        if info.alias:
            names.add(info.alias)
        if isinstance(info.validation_alias, str):
            names.add(info.validation_alias)
    return names


def _describe(
    loc: tuple[int | str, ...], msg: str, table: str, sources: Mapping[str, str], file: str, prefix: str
) -> str:
    if not loc:
        return f"{table}: {msg}"
    key = str(loc[0])
    path = ".".join(str(p) for p in loc)
    if key in sources:
        return f"{table} {path} {sources[key]}: {msg}"
    return f"{table} {path}: {msg} (set it in {file} or as {prefix}{key.upper()})"
