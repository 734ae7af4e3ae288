"""``toolkernel plugin new``: write a plugin distribution that installs and passes its own tests.

The files come from ``toolkernel/_template/`` (``common/`` for every kind, one directory
per kind), with ``{{placeholders}}`` filled in: a pyproject with the entry point and a
``test`` extra, a plugin module holding the hooks and a settings model, the
implementation, tests built on toolkernel's testing kit, and a README.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from toolkernel.errors import ConfigError

KINDS = ("store", "embedder", "reranker", "transport", "tools", "reader")
"""What ``--kind`` accepts."""

_NAME = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")


@dataclass(frozen=True, slots=True)
class _Kind:
    description: str
    hooks: str
    toml: str
    usage: str


_KINDS: dict[str, _Kind] = {
    "store": _Kind(
        "The {{name}} vector store.",
        "register_settings, register_vector_stores",
        '[plugins.{{name}}]\nlocation = ":memory:"\ntimeout = 10.0',
        '```python\nstore = kernel.vector_store("{{name}}")\nawait store.create_index("docs", 384)\n```\n\n'
        "The tests run toolkernel's conformance kit (`VectorStoreContract`) on the store.",
    ),
    "embedder": _Kind(
        "The {{name}} embedding provider.",
        "register_embedders, register_settings",
        "[plugins.{{name}}]\ndimension = 64\nlowercase = true",
        '```python\nembedder = kernel.embedder("{{name}}/default")\n'
        'vectors = await embedder.embed(["some text"])\n```',
    ),
    "reranker": _Kind(
        "The {{name}} reranker.",
        "register_rerankers, register_settings",
        "[plugins.{{name}}]\nmin_word_length = 3",
        '```python\nreranker = kernel.reranker("{{name}}")\n'
        "scores = await reranker.score(query, passages)\n```",
    ),
    "transport": _Kind(
        "The {{name}} transport: MCP over TCP, one JSON-RPC message per line.",
        "register_client_transports, register_server_transports, register_settings",
        "[plugins.{{name}}]\nmax_line_bytes = 16777216",
        "```console\n$ toolkernel serve app.py:app --transport {{name}} --port 8765\n"
        '$ toolkernel call {{name}}://127.0.0.1:8765 echo --args \'{"text": "hi"}\'\n```',
    ),
    "reader": _Kind(
        "The {{name}} reader: .{{name}} files (headers, then a body) for toolkernel knowledge bases.",
        "register_readers",
        "",
        "```console\n$ toolkernel kb ingest ./notes --kb notes   # .{{name}} files are read by this plugin\n"
        "```\n\n"
        "The tests run toolkernel's conformance kit (`ReaderContract`) on the reader.",
    ),
    "tools": _Kind(
        "The {{name}} tools, offered by every server toolkernel serves.",
        "register_settings, register_tools",
        '[plugins.{{name}}]\ngreeting = "Hello"',
        '```console\n$ toolkernel call "toolkernel serve app.py:app" greet --args \'{"name": "Ada"}\'\n```',
    ),
}


_CONFIGURE = """Settings come from the `[plugins.{{name}}]` table of `toolkernel.toml`, then from
`TOOLKERNEL_{{ENV}}_<FIELD>` environment variables, then from the options of the call that
builds the {{kind}}; the plugin's pydantic model, `{{Class}}Settings` in
`src/{{package}}/plugin.py`, validates them and errors name the file, the table and the key.

```toml
{{toml}}
```

This example, and the settings tests in `tests/`, follow the template's `{{Class}}Settings`:
when you change that model, update them to match."""

_NO_SETTINGS = """A reader takes no settings: it is registered for the suffixes in `SUFFIXES`
(`src/{{package}}/plugin.py`), and `toolkernel kb ingest` hands it every file that has one."""


def new_plugin(name: str, kind: str, directory: str | Path | None = None) -> list[Path]:
    """Write the ``kind`` plugin ``toolkernel-<name>`` into ``directory``; return the files written.

    :raises ConfigError: the name or kind is not valid, or the directory is not empty.
    """
    if not _NAME.match(name):
        raise ConfigError(
            f"plugin name {name!r} is not valid: lower-case letters and digits, words joined by '-' "
            "(e.g. 'lancedb' or 'my-store')"
        )
    if kind not in KINDS:
        raise ConfigError(f"--kind {kind!r} is not one of {', '.join(KINDS)}")
    target = Path(directory) if directory is not None else Path(f"toolkernel-{name}")
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise ConfigError(f"{str(target)!r} already exists and is not an empty directory")
    package = "toolkernel_" + name.replace("-", "_")
    from importlib.metadata import version

    spec = _KINDS[kind]
    values = {
        "name": name,
        "name_re": re.escape(name),
        "kind": kind,
        "dist": f"toolkernel-{name}",
        "package": package,
        "Class": "".join(part.capitalize() for part in name.split("-")),
        "ENV": name.upper().replace("-", "_"),
        "version": ".".join(version("toolkernel").split(".")[:2]),
        "hooks": spec.hooks,
        "toml": spec.toml,
        "usage": spec.usage,
        "configure": _CONFIGURE if spec.toml else _NO_SETTINGS,
    }
    values["description"] = _fill(spec.description, values)
    implementation = {"tools": "tools"}.get(kind, kind)
    layout = {
        "pyproject.toml": "common/pyproject.toml",
        "README.md": "common/README.md",
        ".gitignore": "common/gitignore",
        f"src/{package}/__init__.py": "common/__init__.py",
        f"src/{package}/plugin.py": f"{kind}/plugin.py",
        f"src/{package}/{implementation}.py": f"{kind}/{implementation}.py",
        f"tests/test_{package.removeprefix('toolkernel_')}_{kind}.py": f"{kind}/test.py",
    }
    templates = resources.files("toolkernel") / "_template"
    written = []
    for relative, source in layout.items():
        path = target / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            _fill((templates / f"{source}.tmpl").read_text(encoding="utf-8"), values), encoding="utf-8"
        )
        written.append(path)
    return written


def _fill(text: str, values: dict[str, str]) -> str:
    """``text`` with every ``{{key}}`` replaced; an unknown key is a bug in the template."""

    def one(match: re.Match[str]) -> str:
        return (
            _fill(values[match.group(1)], values)
            if "{{" in values[match.group(1)]
            else values[match.group(1)]
        )

    return re.sub(r"\{\{(\w+)\}\}", one, text)
