"""The Kernel: owns the plugin manager, the registries and the async side of hooks.

A Kernel is an ordinary object (no module-global plugin manager, no discovery at
import): tests make a fresh one with ``load_entry_points=False``. Only this module
calls ``pm.hook``; everything else goes through the typed methods here.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Collection, Iterable, Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar

import pluggy

from toolkernel import hookspecs
from toolkernel._loading import LoadPolicy, PluginInfo, describe_entry_point, discover
from toolkernel.errors import ConfigError, PluginLoadError, RegistrationError
from toolkernel.registries import (
    AuthProviderRegistry,
    ChunkerRegistry,
    ClientAuthRegistry,
    ClientTransportRegistry,
    EmbedderRegistry,
    EntityExtractorRegistry,
    KBExtensionRegistry,
    MiddlewareRegistry,
    PromptRegistry,
    ReaderRegistry,
    Registry,
    RerankerRegistry,
    ResourceRegistry,
    ServerTransportRegistry,
    SettingsRegistry,
    SharedStateRegistry,
    ToolRegistry,
    VectorStoreRegistry,
)

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager

    from pydantic import BaseModel

    from toolkernel.auth import AuthProvider
    from toolkernel.chunkers import Chunker
    from toolkernel.cli import CommandRegistry
    from toolkernel.embedders import Embedder
    from toolkernel.entities import EntityExtractor
    from toolkernel.rerankers import Reranker
    from toolkernel.server import MCPServer
    from toolkernel.shared_state import SharedState
    from toolkernel.transports import (
        ClientTransportOptions,
        ServeOptions,
        ServerTransport,
        ServingApp,
        TransportStreams,
    )
    from toolkernel.vectors import VectorStore

R = TypeVar("R", bound=Registry[Any])

EVENT_HOOKS = (
    "on_tool_input_start",
    "on_tool_input_delta",
    "on_tool_input_available",
    "on_tool_output",
    "on_tool_error",
    "on_server_start",
    "on_server_stop",
    "on_session_start",
    "on_session_stop",
)


class Kernel:
    """Loads plugins, fills registries from their hooks, and runs their events.

    :param plugins: extra plugin objects or modules to register (origin "registered").
    :param load_entry_points: discover plugins in the ``toolkernel`` entry-point group.
    :param only: load only plugins with these names (default: ``TOOLKERNEL_LOAD_PLUGINS``).
    :param disable: never load these (default: ``TOOLKERNEL_DISABLE_PLUGINS``).
    :param strict: a plugin failure raises instead of being reported (default:
        ``TOOLKERNEL_STRICT_PLUGINS``).
    :param settings: plugin settings by settings name (the ``[plugins.<name>]`` tables),
        validated against the models plugins declare through ``register_settings``.
    :param config_file: the file ``settings`` were read from, for error messages.
    """

    @classmethod
    def from_config(cls, path: str | os.PathLike[str] | None = None, **overrides: Any) -> Kernel:
        """A kernel configured from a TOML file (see :mod:`toolkernel.config`); env vars win over it."""
        if path is None and not os.environ.get("TOOLKERNEL_CONFIG") and not os.path.isfile("toolkernel.toml"):
            return cls(**overrides)  # no file to read: skip parsing machinery on the start-up path
        from toolkernel.config import load_config

        config = load_config(path)
        env = os.environ
        options: dict[str, Any] = {
            "only": None if env.get("TOOLKERNEL_LOAD_PLUGINS") is not None else config.load,
            "disable": None if env.get("TOOLKERNEL_DISABLE_PLUGINS") is not None else config.disable,
            "strict": None if env.get("TOOLKERNEL_STRICT_PLUGINS") is not None else config.strict,
            "settings": config.settings,
            "config_file": config.file,
        }
        options.update(overrides)
        return cls(**options)

    def __init__(
        self,
        *,
        plugins: Iterable[object] = (),
        load_entry_points: bool = True,
        only: Collection[str] | None = None,
        disable: Collection[str] | None = None,
        strict: bool | None = None,
        settings: Mapping[str, Mapping[str, Any]] | None = None,
        config_file: str | os.PathLike[str] | None = None,
    ) -> None:
        self._pm = pluggy.PluginManager("toolkernel")
        self._pm.add_hookspecs(hookspecs)
        self._policy = LoadPolicy.resolve(only, disable, strict)
        self._infos: dict[str, PluginInfo] = {}
        self._raw_settings = dict(settings or {})
        self._config_file = config_file
        self._validated_settings: dict[str, BaseModel] = {}
        self._event_callers: dict[str, list[tuple[str, Callable[..., Any]]]] = {}
        self._generation = 0
        """Bumped whenever the set of plugins changes, so callers built on it know to rebuild."""

        from toolkernel._builtin import BUILTIN_PLUGINS

        for name, module_name in BUILTIN_PLUGINS:
            # A load-only list names the extra plugins wanted; built-ins go only when disabled by name.
            if name not in self._policy.disable:
                self._register_module(
                    name, module_name, PluginInfo(name=name, origin="built-in", module=module_name)
                )
            else:
                self._infos[name] = PluginInfo(
                    name=name, origin="built-in", module=module_name, status="disabled"
                )
        if load_entry_points:
            for ep in discover():
                info = describe_entry_point(ep)
                if not self._policy.allows(ep.name):
                    info.status = "disabled"
                    self._infos[ep.name] = info
                    continue
                try:
                    obj = ep.load()
                except Exception as exc:
                    self._fail(info, f"import failed: {type(exc).__name__}: {exc}", exc)
                    continue
                self._add(obj, info)
        for plugin in plugins:
            self.register(plugin)

    # -- plugins ------------------------------------------------------------------------

    def register(self, plugin: object, name: str | None = None) -> str:
        """Register a plugin object or module directly; returns its name."""
        pname = (
            name
            or getattr(plugin, "__name__", None)
            or f"{type(plugin).__module__}.{type(plugin).__qualname__}"
        )
        module = getattr(plugin, "__name__", None) or type(plugin).__module__
        if self._pm.has_plugin(pname):
            raise PluginLoadError(f"a plugin named {pname!r} is already registered; pass another name")
        if not self._add(plugin, PluginInfo(name=pname, origin="registered", module=module)):
            raise PluginLoadError(self._infos[pname].error or f"plugin {pname!r} failed to register")
        return pname

    def unregister(self, name: str) -> None:
        """Remove the plugin called ``name``."""
        self._pm.unregister(name=name)
        self._infos.pop(name, None)
        self._invalidate()

    def plugins(self) -> list[PluginInfo]:
        """Every plugin seen, loaded or not, with the hooks each implements."""
        self.check()
        return list(self._infos.values())

    @property
    def settings_tables(self) -> dict[str, dict[str, Any]]:
        """The raw ``[plugins.<name>]`` tables this kernel was given (a copy), so another process
        (a Ray worker, say) can build a kernel configured the same way."""
        return {name: dict(table) for name, table in self._raw_settings.items()}

    def has_plugin(self, name: str) -> bool:
        """Whether a plugin called ``name`` is registered and loaded."""
        return self._pm.has_plugin(name)

    def _register_module(self, name: str, module_name: str, info: PluginInfo) -> None:
        import importlib

        try:
            module = importlib.import_module(module_name)
        except Exception as exc:
            self._fail(info, f"import failed: {type(exc).__name__}: {exc}", exc)
            return
        self._add(module, info)

    def _add(self, plugin: object, info: PluginInfo) -> bool:
        try:
            self._pm.register(plugin, name=info.name)
            unknown = [hook for hook in _implemented_hooks(plugin) if not hasattr(hookspecs, hook)]
            if unknown:
                self._pm.unregister(plugin)
                raise PluginLoadError(f"implements unknown hook(s): {', '.join(unknown)}")
        except Exception as exc:
            self._fail(info, str(exc), exc)
            return False
        info.hooks = sorted(_implemented_hooks(plugin))
        self._infos[info.name] = info
        self._invalidate()
        return True

    def _fail(self, info: PluginInfo, message: str, exc: BaseException) -> None:
        info.status = "failed"
        info.error = message
        self._infos[info.name] = info
        where = f"{info.distribution} {info.version}" if info.distribution else info.origin
        text = f"plugin {info.name!r} ({where}) was not loaded: {message}"
        if self._policy.strict:
            raise PluginLoadError(text) from exc
        from toolkernel._logging import get_logger

        get_logger("toolkernel.plugins").warning(text)

    def _invalidate(self) -> None:
        self._generation += 1
        for attr in _REGISTRY_ATTRS:
            self.__dict__.pop(attr, None)
        self._event_callers.clear()
        self._validated_settings.clear()

    def _origin_of(self, module: str) -> str | None:
        for name, plugin in self._pm.list_name_plugin():
            pmod = getattr(plugin, "__name__", None) or type(plugin).__module__
            if module == pmod or module.startswith(pmod.rsplit(".", 1)[0] + "."):
                return name
        return None

    # -- registries ---------------------------------------------------------------------

    def _collect(self, hook: str, registry: R) -> R:
        """Call ``hook`` plugin by plugin, so one plugin's failure is its own."""
        caller = getattr(self._pm.hook, hook)
        for impl in caller.get_hookimpls():
            others = [p for p in self._pm.get_plugins() if p is not impl.plugin]
            subset = self._pm.subset_hook_caller(hook, remove_plugins=others)
            registry._calling = impl.plugin_name
            try:
                subset(registry=registry)
            except Exception as exc:
                info = self._infos.get(impl.plugin_name) or PluginInfo(
                    name=impl.plugin_name, origin="registered"
                )
                if isinstance(exc, RegistrationError) and not self._policy.strict:
                    self._fail(info, f"{hook}: {exc}", exc)
                elif self._policy.strict:
                    raise PluginLoadError(f"plugin {impl.plugin_name!r} failed in {hook}: {exc}") from exc
                else:
                    self._fail(info, f"{hook} raised {type(exc).__name__}: {exc}", exc)
                self._leave_out(impl.plugin_name, registry)
            finally:
                registry._calling = None
        return registry

    def _leave_out(self, name: str, registry: Registry[Any]) -> None:
        """A plugin reported as failed takes no further part: its hooks and its entries go."""
        if self._pm.has_plugin(name):
            self._pm.unregister(name=name)
        registry._entries = {k: e for k, e in registry._entries.items() if e.origin != name}
        self._invalidate()

    @cached_property
    def server_transports(self) -> ServerTransportRegistry:
        """Server transports by name (``stdio``, and ``http``/``sse`` with toolkernel-http)."""
        return self._collect("register_server_transports", ServerTransportRegistry(self._origin_of))

    @cached_property
    def client_transports(self) -> ClientTransportRegistry:
        """Client transports by name, each with the URL schemes it answers for."""
        return self._collect("register_client_transports", ClientTransportRegistry(self._origin_of))

    @cached_property
    def auth_providers(self) -> AuthProviderRegistry:
        """Auth provider factories by name."""
        return self._collect("register_auth_providers", AuthProviderRegistry(self._origin_of))

    @cached_property
    def client_auth(self) -> ClientAuthRegistry:
        """Client auth factories by ``auth.type`` (``oauth`` with toolkernel-oauth)."""
        return self._collect("register_client_auth", ClientAuthRegistry(self._origin_of))

    @cached_property
    def shared_states(self) -> SharedStateRegistry:
        """Shared-state backend factories by URL scheme (``memory``, ``redis``, ...)."""
        return self._collect("register_shared_state", SharedStateRegistry(self._origin_of))

    @cached_property
    def vector_stores(self) -> VectorStoreRegistry:
        """Vector store factories by name."""
        return self._collect("register_vector_stores", VectorStoreRegistry(self._origin_of))

    @cached_property
    def embedders(self) -> EmbedderRegistry:
        """Embedder factories by provider."""
        return self._collect("register_embedders", EmbedderRegistry(self._origin_of))

    @cached_property
    def rerankers(self) -> RerankerRegistry:
        """Reranker factories by name."""
        return self._collect("register_rerankers", RerankerRegistry(self._origin_of))

    @cached_property
    def chunkers(self) -> ChunkerRegistry:
        """Chunker factories by name."""
        return self._collect("register_chunkers", ChunkerRegistry(self._origin_of))

    @cached_property
    def readers(self) -> ReaderRegistry:
        """File readers by name, each with the suffixes it reads."""
        return self._collect("register_readers", ReaderRegistry(self._origin_of))

    @cached_property
    def kb_extensions(self) -> KBExtensionRegistry:
        """Knowledge-base extension factories by name."""
        return self._collect("register_kb_extensions", KBExtensionRegistry(self._origin_of))

    @cached_property
    def entity_extractors(self) -> EntityExtractorRegistry:
        """Entity extractor factories by name."""
        return self._collect("register_entity_extractors", EntityExtractorRegistry(self._origin_of))

    @cached_property
    def tools(self) -> ToolRegistry:
        """Tools plugins contribute to every served server."""
        return self._collect("register_tools", ToolRegistry(self._origin_of))

    @cached_property
    def resources(self) -> ResourceRegistry:
        """Resources and templates plugins contribute to every served server."""
        return self._collect("register_resources", ResourceRegistry(self._origin_of))

    @cached_property
    def prompts(self) -> PromptRegistry:
        """Prompts plugins contribute to every served server."""
        return self._collect("register_prompts", PromptRegistry(self._origin_of))

    @cached_property
    def tool_middleware(self) -> MiddlewareRegistry:
        """Middleware plugins run around every tool call."""
        return self._collect("register_tool_middleware", MiddlewareRegistry(self._origin_of))

    @cached_property
    def settings_models(self) -> SettingsRegistry:
        """The settings model each plugin declared."""
        return self._collect("register_settings", SettingsRegistry(self._origin_of))

    @cached_property
    def commands(self) -> CommandRegistry:
        """CLI sub-commands, built-in and from plugins."""
        from toolkernel.cli import CommandRegistry

        return self._collect("register_commands", CommandRegistry(self._origin_of))

    def check(self) -> None:
        """Fill every registry and validate every plugin's settings now, not on first use.

        A section that nothing sets (no table, no environment variable) is left for first
        use, so an installed plugin nobody configured does not stop the others; one that is
        set at all must be valid. Also fails when a factory
        was registered with ``settings="NAME"`` but no plugin declared settings ``NAME``.
        """
        for attr in _REGISTRY_ATTRS:
            getattr(self, attr)
        for name in self.settings_models:
            if self._settings_given(name):
                self.settings(name)
        for registry in self._factory_registries():
            for entry in registry.entries():
                if entry.settings is not None and entry.settings not in self.settings_models:
                    raise ConfigError(
                        f"{registry.kind} {entry.name!r} (from {entry.origin}) is built with settings "
                        f"{entry.settings!r}, but no plugin declares them through register_settings"
                    )

    def _settings_given(self, name: str) -> bool:
        """Whether a table or an environment variable sets anything in section ``name``."""
        from toolkernel.config import section_variables

        others = list(self.settings_models)
        return bool(self._raw_settings.get(name)) or bool(section_variables(name, os.environ, others))

    def _factory_registries(self) -> list[Registry[Any]]:
        return [
            self.server_transports,
            self.client_transports,
            self.auth_providers,
            self.vector_stores,
            self.embedders,
            self.rerankers,
            self.chunkers,
        ]

    # -- typed access to what plugins provide -----------------------------------------------

    def settings(self, name: str, /, **options: Any) -> BaseModel:
        """The validated settings section ``name``: ``[plugins.<name>]``, then ``TOOLKERNEL_<NAME>_*``.

        ``options`` override both (as a factory call's options do); without them the
        result is computed once. Errors name the file, the table, the key and where the
        value came from.

        :raises ConfigError: a value is invalid, or a key is not a field of the model.
        :raises LookupError: no plugin declared settings ``name``.
        """
        if not options and name in self._validated_settings:
            return self._validated_settings[name]
        from toolkernel.config import plugin_settings

        model = self.settings_models.get(name)
        validated = plugin_settings(
            name,
            model,
            table=self._raw_settings.get(name),
            file=self._config_file,
            options=options,
            other_sections=list(self.settings_models),
        )
        if not options:
            self._validated_settings[name] = validated
        return validated

    def _factory_settings(self, registry: Registry[Any], name: str, options: Mapping[str, Any]) -> BaseModel:
        """The settings a factory registered with ``settings=...`` is built with, call options winning."""
        section = registry.settings_of(name)
        assert section is not None
        if section not in self.settings_models:
            raise ConfigError(
                f"{registry.kind} {name!r} (from {registry.origin(name)}) is built with settings "
                f"{section!r}, but no plugin declares them through register_settings"
            )
        return self.settings(section, **options)

    def shared_state(self, url: str) -> SharedState:
        """The shared-state backend for ``url`` (``memory://``, ``redis://HOST:PORT/DB``, ...).

        :raises ConfigError: the URL has no scheme, or no installed plugin serves it.
        """
        from toolkernel.shared_state import redact_url

        scheme, sep, _ = url.partition("://")
        if not sep or not scheme:
            raise ConfigError(
                f"shared state {redact_url(url)!r}: expected a URL such as redis://HOST:PORT/DB"
            )
        if scheme not in self.shared_states:
            known = ", ".join(f"{s}://" for s in sorted(self.shared_states)) or "none"
            hint = " (pip install toolkernel-redis)" if scheme in ("redis", "rediss", "unix") else ""
            raise ConfigError(
                f"shared state {redact_url(url)!r}: no installed plugin serves {scheme}:// URLs{hint}; "
                f"known: {known}"
            )
        return self.shared_states.get(scheme)(url)

    def vector_store(self, name: str, **options: Any) -> VectorStore:
        """A vector store from the factory registered as ``name``.

        A factory registered with ``settings=`` gets ``factory(settings_model)``, the model
        validated from its ``[plugins.<settings>]`` table, environment and ``options``;
        any other gets ``factory(**options)``.
        """
        factory = self.vector_stores.get(name)
        if self.vector_stores.settings_of(name) is None:
            return factory(**options)
        return factory(self._factory_settings(self.vector_stores, name, options))

    def embedder(self, name: str, **options: Any) -> Embedder:
        """The embedder ``provider/model``: ``factory(model, settings)`` or ``factory(model, **options)``."""
        from toolkernel.embedders import split_embedder_name

        provider, model = split_embedder_name(name)
        factory = self.embedders.get(provider)
        if self.embedders.settings_of(provider) is None:
            return factory(model, **options)
        return factory(model, self._factory_settings(self.embedders, provider, options))

    def reranker(self, name: str, **options: Any) -> Reranker:
        """A reranker from the factory registered as ``name`` (settings as for :meth:`vector_store`)."""
        factory = self.rerankers.get(name)
        if self.rerankers.settings_of(name) is None:
            return factory(**options)
        return factory(self._factory_settings(self.rerankers, name, options))

    def auth_provider(self, name: str, **options: Any) -> AuthProvider:
        """An auth provider: ``factory(settings_model)``, or ``factory(None)`` when it has no settings."""
        factory = self.auth_providers.get(name)
        if self.auth_providers.settings_of(name) is None:
            if options:
                raise ConfigError(
                    f"auth provider {name!r} takes no settings; got {', '.join(sorted(options))}"
                )
            return factory(None)
        return factory(self._factory_settings(self.auth_providers, name, options))

    def chunker(self, name: str, **options: Any) -> Chunker:
        """A chunker from the factory registered as ``name`` (settings as for :meth:`vector_store`)."""
        factory = self.chunkers.get(name)
        if self.chunkers.settings_of(name) is None:
            return factory(**options)
        return factory(self._factory_settings(self.chunkers, name, options))

    def entity_extractor(self, name: str, **options: Any) -> EntityExtractor:
        """An entity extractor from the factory registered as ``name``."""
        return self.entity_extractors.get(name)(**options)

    def client_transport(
        self,
        target: str | list[str],
        options: ClientTransportOptions | None = None,
        *,
        name: str | None = None,
    ) -> AbstractAsyncContextManager[TransportStreams]:
        """Open a client connection to ``target`` (a URL or a command line) with the right transport."""
        from toolkernel.transports import ClientTransportOptions

        if name is None:
            name = self.client_transports.for_target(target if isinstance(target, str) else "")
        factory: Callable[..., AbstractAsyncContextManager[TransportStreams]] = self.client_transports.get(
            name
        ).factory
        if self.client_transports.settings_of(name) is None:
            return factory(target, options or ClientTransportOptions())
        settings = self._factory_settings(self.client_transports, name, {})
        return factory(target, options or ClientTransportOptions(), settings)

    # -- events ---------------------------------------------------------------------------

    def listens(self, hook: str) -> bool:
        """Whether any plugin implements the event hook ``hook`` (cheap; cached)."""
        return bool(self._callers(hook))

    async def emit(self, hook: str, **kwargs: Any) -> None:
        """Call event hook ``hook`` on every plugin; await awaitables; log, never raise, failures."""
        for plugin_name, caller in self._callers(hook):
            try:
                for result in caller(**kwargs):
                    if inspect.isawaitable(result):
                        await result
            except Exception:
                from toolkernel._logging import get_logger

                get_logger("toolkernel.plugins").exception(
                    "event hook failed; the call goes on", hook=hook, plugin=plugin_name
                )

    def _callers(self, hook: str) -> list[tuple[str, Callable[..., Any]]]:
        callers = self._event_callers.get(hook)
        if callers is None:
            impls = getattr(self._pm.hook, hook).get_hookimpls()
            callers = []
            for impl in impls:
                others = [p for p in self._pm.get_plugins() if p is not impl.plugin]
                callers.append((impl.plugin_name, self._pm.subset_hook_caller(hook, remove_plugins=others)))
            self._event_callers[hook] = callers
        return callers

    # -- serving --------------------------------------------------------------------------

    def serving_app(self, server: MCPServer) -> ServingApp:
        """The handle a transport serves ``server`` through, with this kernel's hooks.

        Transports get one from :meth:`serve`; an application that runs a transport's
        app itself (mounting toolkernel-http's ASGI app, say) gets it here.
        """
        from toolkernel._app import ServingAppImpl

        return ServingAppImpl(server, self)

    def server_transport(self, name: str, options: ServeOptions) -> ServerTransport:
        """The server transport registered as ``name``, built for ``options`` (not yet serving)."""
        factory: Callable[..., ServerTransport] = self.server_transports.get(name)
        if self.server_transports.settings_of(name) is None:
            return factory(options)
        return factory(options, self._factory_settings(self.server_transports, name, options.extra))

    async def serve(
        self, server: MCPServer, transport: str = "stdio", options: ServeOptions | None = None
    ) -> None:
        """Serve ``server`` over the transport registered as ``transport`` until cancelled."""
        from toolkernel.transports import ServeOptions

        if transport not in self.server_transports:
            hint = " (pip install toolkernel-http)" if transport in ("http", "sse") else ""
            known = ", ".join(self.server_transports) or "none"
            raise ConfigError(f"--transport {transport!r} is not installed{hint}; available: {known}")
        self.check()
        from toolkernel._telemetry import configure_from_env

        configure_from_env()
        server_transport = self.server_transport(transport, options or ServeOptions())
        app = self.serving_app(server)
        await self.emit("on_server_start", server=server)
        try:
            await server_transport.serve(app)
        finally:
            import anyio

            # Serving usually ends by cancellation: shield the hooks, or async ones never run.
            with anyio.CancelScope(shield=True):
                tasks = getattr(app, "tasks", None)
                if tasks is not None:
                    await tasks.aclose()  # tools still running as tasks stop with the server
                await self.emit("on_server_stop", server=server)


_REGISTRY_ATTRS = (
    "server_transports",
    "client_transports",
    "auth_providers",
    "client_auth",
    "shared_states",
    "vector_stores",
    "embedders",
    "rerankers",
    "chunkers",
    "readers",
    "kb_extensions",
    "entity_extractors",
    "tools",
    "resources",
    "prompts",
    "tool_middleware",
    "settings_models",
    "commands",
)


def _implemented_hooks(plugin: object) -> list[str]:
    """Names of the functions on ``plugin`` marked with ``toolkernel.hookimpl``."""
    found = []
    for attr in dir(plugin):
        try:
            value = getattr(plugin, attr)
        except Exception:  # pragma: no cover - exotic descriptors
            continue
        if callable(value) and hasattr(value, "toolkernel_impl"):
            found.append(attr)
    return found
