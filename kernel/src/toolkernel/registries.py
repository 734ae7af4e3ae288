"""Typed registries that registration hooks add to.

Each ``register_*`` hook receives one of these. A registry checks what it is given,
rejects a second entry under the same name (naming both plugins), and remembers which
plugin added each entry so ``toolkernel plugins`` can say who provides what.

A factory registered with ``settings="NAME"`` is built with the validated settings of
``[plugins.NAME]`` (declared through ``register_settings``) instead of raw keyword
options; see :meth:`toolkernel.Kernel.settings`.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from toolkernel.errors import RegistrationError

if TYPE_CHECKING:
    from pydantic import BaseModel

    from toolkernel.auth import AuthProviderFactory, ClientAuthFactory
    from toolkernel.chunkers import ChunkerFactory
    from toolkernel.embedders import EmbedderFactory
    from toolkernel.entities import EntityExtractorFactory
    from toolkernel.knowledge import KBExtensionFactory
    from toolkernel.middleware import ToolMiddleware
    from toolkernel.prompts import Prompt
    from toolkernel.readers import Reader, ReaderFunction
    from toolkernel.rerankers import RerankerFactory
    from toolkernel.resources import Resource, ResourceTemplate
    from toolkernel.shared_state import SharedStateFactory
    from toolkernel.tools import Tool
    from toolkernel.transports import ClientTransportFactory, ServerTransportFactory
    from toolkernel.vectors import VectorStoreFactory

__all__ = [
    "AuthProviderRegistry",
    "ChunkerRegistry",
    "ClientAuthRegistry",
    "ClientTransportRegistry",
    "ClientTransportSpec",
    "EmbedderRegistry",
    "EntityExtractorRegistry",
    "Entry",
    "KBExtensionRegistry",
    "MiddlewareRegistry",
    "OriginResolver",
    "PromptRegistry",
    "ReaderRegistry",
    "ReaderSpec",
    "Registry",
    "RerankerRegistry",
    "ResourceRegistry",
    "ServerTransportRegistry",
    "SettingsRegistry",
    "SharedStateRegistry",
    "ToolRegistry",
    "VectorStoreRegistry",
]

T = TypeVar("T")

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-/]*$")

OriginResolver = Callable[[str], "str | None"]
"""Maps a module name to the name of the plugin it belongs to, or ``None``."""


@dataclass(frozen=True, slots=True)
class Entry(Generic[T]):
    """One registered item and the plugin that added it."""

    name: str
    value: T
    origin: str
    settings: str | None = None
    """The settings section the factory is built with (``[plugins.<settings>]``), if any."""


class Registry(Generic[T]):
    """Name → item, duplicates rejected, origin recorded."""

    kind = "item"

    def __init__(self, origin_of: OriginResolver | None = None) -> None:
        self._entries: dict[str, Entry[T]] = {}
        self._origin_of = origin_of
        self._calling: str | None = None
        """The plugin whose registration hook is running (set by the kernel), if known."""

    def _add(self, name: str, value: T, settings: str | None = None) -> None:
        if not isinstance(name, str) or not _NAME.match(name):
            raise RegistrationError(
                f"{self.kind} name {name!r} is not valid: use letters, digits, '_', '-', '.', '/'"
            )
        origin = self._caller_origin()
        if name in self._entries:
            first = self._entries[name].origin
            raise RegistrationError(
                f"{self.kind} {name!r} is registered twice: first by {first}, again by {origin}; "
                "disable one of the two plugins (TOOLKERNEL_DISABLE_PLUGINS)"
            )
        if settings is not None and (not isinstance(settings, str) or not _NAME.match(settings)):
            raise RegistrationError(
                f"{self.kind} {name!r}: settings must be a settings name, got {settings!r}"
            )
        self._entries[name] = Entry(name, value, origin, settings)

    def _caller_origin(self) -> str:
        """The plugin whose code called ``add``: the plugin whose hook is running, else the
        first frame outside this module."""
        if self._calling is not None:
            return self._calling
        frame = sys._getframe(2)
        while frame is not None and frame.f_globals.get("__name__") == __name__:
            frame = frame.f_back  # type: ignore[assignment]
        module = str(frame.f_globals.get("__name__", "?")) if frame is not None else "?"
        if self._origin_of is not None:
            plugin = self._origin_of(module)
            if plugin is not None:
                return plugin
        return module

    def get(self, name: str) -> T:
        """The item registered as ``name``; a :class:`LookupError` lists the known names."""
        try:
            return self._entries[name].value
        except KeyError:
            known = ", ".join(sorted(self._entries)) or "none"
            raise LookupError(f"no {self.kind} named {name!r} (registered: {known})") from None

    def origin(self, name: str) -> str:
        """The plugin that registered ``name``."""
        return self._entries[name].origin

    def settings_of(self, name: str) -> str | None:
        """The settings section factory ``name`` is built with, or ``None`` (it takes raw options)."""
        self.get(name)
        return self._entries[name].settings

    def entries(self) -> list[Entry[T]]:
        """Every entry, in registration order."""
        return list(self._entries.values())

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)


class ServerTransportRegistry(Registry["ServerTransportFactory"]):
    kind = "server transport"

    def add(self, name: str, factory: ServerTransportFactory, *, settings: str | None = None) -> None:
        """Register ``factory(options) -> ServerTransport`` under ``name``.

        With ``settings``, the factory is called ``factory(options, settings_model)``, the
        model validated from ``[plugins.<settings>]`` with ``options.extra`` overriding it.
        """
        _require_callable(self.kind, name, factory)
        self._add(name, factory, settings)


@dataclass(frozen=True, slots=True)
class ClientTransportSpec:
    """A client transport factory and the URL schemes it answers for (none: a command line)."""

    factory: ClientTransportFactory
    schemes: tuple[str, ...]


class ClientTransportRegistry(Registry[ClientTransportSpec]):
    kind = "client transport"

    def add(
        self,
        name: str,
        factory: ClientTransportFactory,
        *,
        schemes: tuple[str, ...] = (),
        settings: str | None = None,
    ) -> None:
        """Register ``factory(target, options)`` under ``name`` for ``schemes`` (empty: stdio).

        With ``settings``, the factory is called ``factory(target, options, settings_model)``.
        """
        _require_callable(self.kind, name, factory)
        self._add(name, ClientTransportSpec(factory, tuple(s.lower() for s in schemes)), settings)

    def for_target(self, target: str) -> str:
        """The name of the transport that reaches ``target`` (a URL or a command line)."""
        scheme = target.split("://", 1)[0].lower() if "://" in target else ""
        for entry in self._entries.values():
            if scheme in entry.value.schemes or (not scheme and not entry.value.schemes):
                return entry.name
        if scheme in ("http", "https"):
            raise LookupError(
                f"no client transport for {scheme}:// URLs is installed: pip install toolkernel-http"
            )
        raise LookupError(f"no client transport reaches {target!r}")


class AuthProviderRegistry(Registry["AuthProviderFactory"]):
    kind = "auth provider"

    def add(self, name: str, factory: AuthProviderFactory, *, settings: str | None = None) -> None:
        """Register ``factory(settings_model) -> AuthProvider`` under ``name``.

        The factory gets the model validated from ``[plugins.<settings>]``, or ``None``
        when registered without ``settings``.
        """
        _require_callable(self.kind, name, factory)
        self._add(name, factory, settings)


class SharedStateRegistry(Registry["SharedStateFactory"]):
    kind = "shared state backend"

    def add(self, scheme: str, factory: SharedStateFactory) -> None:
        """Register ``factory(url) -> SharedState`` for URLs ``scheme://...``."""
        _require_callable(self.kind, scheme, factory)
        self._add(scheme, factory)


class ClientAuthRegistry(Registry["ClientAuthFactory"]):
    kind = "client auth"

    def add(self, name: str, factory: ClientAuthFactory) -> None:
        """Register ``factory(url, settings) -> httpx2.Auth`` for configs whose ``auth.type`` is ``name``."""
        _require_callable(self.kind, name, factory)
        self._add(name, factory)


class VectorStoreRegistry(Registry["VectorStoreFactory"]):
    kind = "vector store"

    def add(self, name: str, factory: VectorStoreFactory, *, settings: str | None = None) -> None:
        """Register ``factory(**options) -> VectorStore`` under ``name``.

        With ``settings``, the factory is called ``factory(settings_model)``, the model
        validated from ``[plugins.<settings>]`` with the call's options overriding it.
        """
        _require_callable(self.kind, name, factory)
        self._add(name, factory, settings)


class EmbedderRegistry(Registry["EmbedderFactory"]):
    kind = "embedder provider"

    def add(self, provider: str, factory: EmbedderFactory, *, settings: str | None = None) -> None:
        """Register ``factory(model, **options) -> Embedder`` for names ``provider/<model>``.

        With ``settings``, the factory is called ``factory(model, settings_model)``, the
        model validated from ``[plugins.<settings>]`` with the call's options overriding it.
        """
        _require_callable(self.kind, provider, factory)
        if "/" in provider:
            raise RegistrationError(f"embedder provider {provider!r} must not contain '/'")
        self._add(provider, factory, settings)


class RerankerRegistry(Registry["RerankerFactory"]):
    kind = "reranker"

    def add(self, name: str, factory: RerankerFactory, *, settings: str | None = None) -> None:
        """Register ``factory(**options) -> Reranker`` under ``name``.

        With ``settings``, the factory is called ``factory(settings_model)``, the model
        validated from ``[plugins.<settings>]`` with the call's options overriding it.
        """
        _require_callable(self.kind, name, factory)
        self._add(name, factory, settings)


class ChunkerRegistry(Registry["ChunkerFactory"]):
    kind = "chunker"

    def add(self, name: str, factory: ChunkerFactory, *, settings: str | None = None) -> None:
        """Register ``factory(**options) -> Chunker`` under ``name``.

        With ``settings``, the factory is called ``factory(settings_model)``, the model
        validated from ``[plugins.<settings>]`` with the call's options overriding it.
        """
        _require_callable(self.kind, name, factory)
        self._add(name, factory, settings)


@dataclass(frozen=True, slots=True)
class ReaderSpec:
    """A registered reader: ``read(path)`` and the file suffixes it answers for."""

    read: ReaderFunction
    suffixes: tuple[str, ...]


class ReaderRegistry(Registry[ReaderSpec]):
    kind = "reader"

    def __init__(self, origin_of: OriginResolver | None = None) -> None:
        super().__init__(origin_of)
        self._by_suffix: dict[str, str] = {}

    def add(self, name: str, reader: Reader | ReaderFunction, *, suffixes: Iterable[str]) -> None:
        """Register ``reader`` (a :class:`~toolkernel.readers.Reader` or a ``read(path)`` function).

        ``suffixes`` are the file suffixes it reads, with their dot (``".docx"``), compared
        without case; ``""`` claims files without a suffix whose content is text. A suffix
        claimed twice is rejected, naming both readers.
        """
        read: ReaderFunction = reader.read if hasattr(reader, "read") else reader
        _require_callable(self.kind, name, read)
        if isinstance(suffixes, str):
            raise RegistrationError(f"reader {name!r}: suffixes must be a list of suffixes, not a string")
        claimed = tuple(s.lower() if isinstance(s, str) else s for s in suffixes)
        for suffix in claimed:
            if not isinstance(suffix, str) or (suffix and not re.match(r"^\.[a-z0-9_.+-]+$", suffix)):
                raise RegistrationError(
                    f"reader {name!r}: suffix {suffix!r} is not valid (a dot then letters or digits, "
                    "e.g. '.docx', or '' for files without one)"
                )
            if suffix in self._by_suffix:
                other = self._by_suffix[suffix]
                raise RegistrationError(
                    f"reader {name!r} claims {suffix or 'files without a suffix'!r}, which reader "
                    f"{other!r} ({self.origin(other)}) already reads; disable one of the two plugins "
                    "(TOOLKERNEL_DISABLE_PLUGINS)"
                )
        self._add(name, ReaderSpec(read, claimed))
        for suffix in claimed:
            self._by_suffix[suffix] = name

    def for_suffix(self, suffix: str) -> str | None:
        """The name of the reader registered for ``suffix`` (``""``: no suffix), or ``None``."""
        return self._by_suffix.get(suffix.lower())

    def suffix_of(self, filename: str) -> str | None:
        """The longest suffix of ``filename`` some reader claims, or ``None``.

        ``"logs.tar.gz"`` tries ``".tar.gz"`` before ``".gz"``, so a reader of a multi-dot
        suffix wins over one of its last part; a name without a suffix (``"README"``,
        ``".bashrc"``) is ``""``.
        """
        name = filename.lower()
        stem = name.lstrip(".")  # a leading dot is a hidden file, not a suffix
        if "." not in stem:
            return "" if "" in self._by_suffix else None
        dots = [i for i, c in enumerate(name) if c == "." and i >= len(name) - len(stem)]
        for i in dots:  # earliest dot first: the longest suffix
            if name[i:] in self._by_suffix:
                return name[i:]
        return None

    def for_filename(self, filename: str) -> str | None:
        """The name of the reader for a file called ``filename`` (see :meth:`suffix_of`), or ``None``."""
        suffix = self.suffix_of(filename)
        return None if suffix is None else self._by_suffix[suffix]

    def suffixes(self) -> list[str]:
        """Every suffix some reader answers for, sorted."""
        return sorted(self._by_suffix)


class KBExtensionRegistry(Registry["KBExtensionFactory"]):
    kind = "knowledge-base extension"

    def add(self, name: str, factory: KBExtensionFactory) -> None:
        """Register ``factory(context) -> KBExtension`` under ``name`` (also its ``--no-<name>`` flag)."""
        _require_callable(self.kind, name, factory)
        if not re.match(r"^[a-z][a-z0-9-]*$", name):
            raise RegistrationError(
                f"knowledge-base extension name {name!r}: use lowercase letters, digits and '-' "
                "(it names a directory and a command-line flag)"
            )
        self._add(name, factory)


class ToolRegistry(Registry["Tool"]):
    kind = "tool"

    def add(self, tool: Tool) -> None:
        """Contribute ``tool`` (made by ``@tool`` or ``create_tool``)."""
        from toolkernel.tools import Tool

        if not isinstance(tool, Tool):
            raise RegistrationError(f"register_tools: expected a toolkernel.Tool, got {type(tool).__name__}")
        self._add(tool.name, tool)


class ResourceRegistry(Registry["Resource | ResourceTemplate"]):
    kind = "resource"

    def add(self, resource: Resource | ResourceTemplate) -> None:
        """Contribute a :class:`~toolkernel.Resource` or :class:`~toolkernel.ResourceTemplate`."""
        from toolkernel.resources import Resource, ResourceTemplate

        if isinstance(resource, Resource):
            key = resource.uri
        elif isinstance(resource, ResourceTemplate):
            key = resource.uri_template
        else:
            raise RegistrationError(
                f"register_resources: expected a Resource or ResourceTemplate, got {type(resource).__name__}"
            )
        if key in self._entries:
            raise RegistrationError(
                f"resource {key!r} is registered twice: first by {self._entries[key].origin}, "
                f"again by {self._caller_origin()}"
            )
        self._entries[key] = Entry(key, resource, self._caller_origin())


class PromptRegistry(Registry["Prompt"]):
    kind = "prompt"

    def add(self, prompt: Prompt) -> None:
        """Contribute ``prompt``; versions of one prompt are told apart by ``prompt.version``."""
        from toolkernel.prompts import Prompt

        if not isinstance(prompt, Prompt):
            raise RegistrationError(
                f"register_prompts: expected a toolkernel.Prompt, got {type(prompt).__name__}"
            )
        # The key may be ``name@version``: Prompt checked the name; '@' is not a registry name character.
        key = prompt.key
        if key in self._entries:
            raise RegistrationError(
                f"prompt {key!r} is registered twice: first by {self._entries[key].origin}, "
                f"again by {self._caller_origin()}; "
                "disable one of the two plugins (TOOLKERNEL_DISABLE_PLUGINS)"
            )
        self._entries[key] = Entry(key, prompt, self._caller_origin())


class MiddlewareRegistry(Registry["ToolMiddleware"]):
    kind = "tool middleware"

    def add(self, middleware: ToolMiddleware, *, name: str | None = None) -> None:
        """Add ``middleware(call, call_next)``; ``name`` defaults to its qualified name."""
        label: str = name or getattr(middleware, "__qualname__", None) or type(middleware).__qualname__
        _require_callable(self.kind, label, middleware)
        self._add(label.replace("<", "").replace(">", ""), middleware)


class EntityExtractorRegistry(Registry["EntityExtractorFactory"]):
    kind = "entity extractor"

    def add(self, name: str, factory: EntityExtractorFactory) -> None:
        """Register ``factory(**options) -> EntityExtractor`` under ``name``."""
        _require_callable(self.kind, name, factory)
        self._add(name, factory)


class SettingsRegistry(Registry["type[BaseModel]"]):
    kind = "settings section"

    def add(self, name: str, model: type[BaseModel]) -> None:
        """Declare that plugin ``name`` reads its settings into ``model`` (a pydantic model)."""
        from pydantic import BaseModel

        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise RegistrationError(f"settings {name!r}: expected a pydantic model class, got {model!r}")
        self._add(name, model)


def _require_callable(kind: str, name: str, value: Any) -> None:
    if not callable(value):
        raise RegistrationError(f"{kind} {name!r}: expected a callable factory, got {type(value).__name__}")
