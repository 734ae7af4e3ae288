"""Every hook toolkernel calls, in one module.

A plugin is any module or object with functions decorated by :data:`toolkernel.hookimpl`
whose names match the specs below. Plugins are discovered through the ``toolkernel``
entry-point group, or registered directly with :meth:`toolkernel.Kernel.register`.

Hooks are synchronous. Registration hooks receive a typed registry and add factories to
it; the kernel owns every event loop, task group and lifespan. Event hooks may return an
awaitable, which the kernel awaits; an event hook that raises is logged and never fails
the tool call or session it reports on. Around-the-call behaviour (gate, cache,
rate-limit, time) is async *middleware*, registered through
:func:`register_tool_middleware` rather than implemented as a hook wrapper.

The reference with a runnable example for each hook is ``docs/plugins/hooks.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from toolkernel.cli import CommandRegistry
    from toolkernel.events import SessionEvent, ToolEvent
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
        RerankerRegistry,
        ResourceRegistry,
        ServerTransportRegistry,
        SettingsRegistry,
        SharedStateRegistry,
        ToolRegistry,
        VectorStoreRegistry,
    )
    from toolkernel.server import MCPServer

__all__ = [
    "on_server_start",
    "on_server_stop",
    "on_session_start",
    "on_session_stop",
    "on_tool_error",
    "on_tool_input_available",
    "on_tool_input_delta",
    "on_tool_input_start",
    "on_tool_output",
    "register_auth_providers",
    "register_chunkers",
    "register_client_auth",
    "register_client_transports",
    "register_commands",
    "register_embedders",
    "register_entity_extractors",
    "register_kb_extensions",
    "register_prompts",
    "register_readers",
    "register_rerankers",
    "register_resources",
    "register_server_transports",
    "register_settings",
    "register_shared_state",
    "register_tool_middleware",
    "register_tools",
    "register_vector_stores",
]

_spec = pluggy.HookspecMarker("toolkernel")


# ---------------------------------------------------------------------------
# Transports
# ---------------------------------------------------------------------------


@_spec
def register_server_transports(registry: ServerTransportRegistry) -> None:
    """Add server-side transports: how an :class:`~toolkernel.MCPServer` is served.

    :param registry: ``registry.add(name, factory)``; ``factory(options)`` takes
        :class:`~toolkernel.transports.ServeOptions` and returns a
        :class:`~toolkernel.transports.ServerTransport`.

    ``toolkernel serve --transport NAME`` picks the transport by name. The built-in
    ``stdio`` transport is registered through this hook.

    Example: ``docs/examples/hooks/tcp_transport.py`` (run by ``tests/test_docs.py``).

    .. versionadded:: 0.1
    """


@_spec
def register_client_transports(registry: ClientTransportRegistry) -> None:
    """Add client-side transports: how a client reaches a server.

    :param registry: ``registry.add(name, factory, schemes=(...))``; ``factory(target,
        options)`` returns an async context manager yielding the SDK's ``(read, write)``
        stream pair. ``schemes`` lists the URL schemes the transport answers for; an
        empty tuple means a command line (stdio).

    Example: ``docs/examples/hooks/tcp_transport.py`` (run by ``tests/test_docs.py``).

    .. versionadded:: 0.1
    """


@_spec
def register_shared_state(registry: SharedStateRegistry) -> None:
    """Add shared-state backends: where replicas of one server keep what they share.

    :param registry: ``registry.add(scheme, factory)``; ``factory(url)`` returns a
        :class:`~toolkernel.shared_state.SharedState` for URLs ``scheme://...``: an event
        store for resumable streams, a session registry, a broadcast to every replica and
        a task store. ``kernel.shared_state(url)`` builds one; toolkernel-http uses it when
        ``[plugins.http] shared_state`` (``TOOLKERNEL_HTTP_SHARED_STATE``) is set. The
        built-in ``memory`` backend (one process, nothing shared) is registered through
        this hook; toolkernel-redis adds ``redis``. Import the backend's client library
        inside the factory, never at module level.

    Example: ``docs/examples/hooks/register_shared_state.py`` (run by ``tests/test_docs.py``).

    .. versionadded:: 0.3
    """


# ---------------------------------------------------------------------------
# Auth
# ---------------------------------------------------------------------------


@_spec
def register_auth_providers(registry: AuthProviderRegistry) -> None:
    """Add auth providers: objects that turn a bearer token into :class:`~toolkernel.AuthInfo`.

    :param registry: ``registry.add(name, factory, settings=None)``; ``factory(settings)``
        returns an :class:`~toolkernel.auth.AuthProvider`. ``settings`` is the validated
        model of ``[plugins.<settings>]`` (see :func:`register_settings`), or ``None``.

    Example: ``docs/examples/hooks/register_auth_providers.py`` (run by ``tests/test_docs.py``).

    .. versionadded:: 0.1
    """


@_spec
def register_client_auth(registry: ClientAuthRegistry) -> None:
    """Add client auth kinds: how an ``MCPClient`` authorizes to a URL server.

    :param registry: ``registry.add(type, factory)``; ``factory(url, settings)`` takes the
        server's URL and its ``auth`` table (``{"type": type, ...}``, the rest validated by the
        factory) and returns an ``httpx2.Auth`` that the HTTP client transport uses for every
        request to that server.

    Example: ``docs/examples/hooks/register_client_auth.py`` (run by ``tests/test_docs.py``).

    .. versionadded:: 0.2
    """


# ---------------------------------------------------------------------------
# Retrieval backends
# ---------------------------------------------------------------------------


@_spec
def register_vector_stores(registry: VectorStoreRegistry) -> None:
    """Add vector store backends.

    :param registry: ``registry.add(name, factory, settings=None)``; ``factory(**options)``
        returns a :class:`~toolkernel.vectors.VectorStore`; with ``settings="NAME"`` the
        kernel calls ``factory(settings)`` with the validated model of ``[plugins.NAME]``
        instead (see :func:`register_settings`). Import the backend library inside the
        factory, never at module level, so listing plugins stays cheap.

    Example: ``docs/examples/hooks/register_vector_stores.py`` (run by ``tests/test_docs.py``).

    .. versionadded:: 0.1
    """


@_spec
def register_embedders(registry: EmbedderRegistry) -> None:
    """Add embedding providers, addressed as ``provider/model``.

    :param registry: ``registry.add(provider, factory, settings=None)``; ``factory(model,
        **options)`` returns an :class:`~toolkernel.embedders.Embedder`; with
        ``settings="NAME"``, ``factory(model, settings)`` (see :func:`register_settings`).

    Example: ``docs/examples/hooks/register_embedders.py`` (run by ``tests/test_docs.py``).

    .. versionadded:: 0.1
    """


@_spec
def register_rerankers(registry: RerankerRegistry) -> None:
    """Add rerankers: objects that re-score retrieved passages against a query.

    :param registry: ``registry.add(name, factory, settings=None)``; ``factory(**options)``
        returns a :class:`~toolkernel.rerankers.Reranker`; with ``settings="NAME"``,
        ``factory(settings)`` (see :func:`register_settings`).

    Example: ``docs/examples/hooks/register_rerankers.py`` (run by ``tests/test_docs.py``).

    .. versionadded:: 0.1
    """


@_spec
def register_chunkers(registry: ChunkerRegistry) -> None:
    """Add chunkers: objects that split a document's text into passages to embed.

    :param registry: ``registry.add(name, factory)``; ``factory(**options)`` returns a
        :class:`~toolkernel.chunkers.Chunker`. Options a chunker does not know must raise,
        naming them. A knowledge base records the chunker's ``describe()`` in its manifest.

    Example: ``docs/examples/hooks/register_chunkers.py`` (run by ``tests/test_docs.py``).

    .. versionadded:: 0.2
    """


@_spec
def register_readers(registry: ReaderRegistry) -> None:
    """Add readers: what turns a file of some type into documents (text and metadata) to chunk.

    :param registry: ``registry.add(name, reader, suffixes=[".ext", ...])``; ``reader`` is a
        :class:`~toolkernel.readers.Reader` or a function ``read(path)`` yielding
        :class:`~toolkernel.readers.ReadDocument` s. ``kb ingest`` reads each file with the
        reader of its suffix; the suffix ``""`` claims files without one whose content is
        text. A suffix claimed by two readers is rejected, naming both.

    Example: ``docs/examples/hooks/register_readers.py`` (run by ``tests/test_docs.py``).

    .. versionadded:: 0.3
    """


@_spec
def register_kb_extensions(registry: KBExtensionRegistry) -> None:
    """Add knowledge-base extensions: indexes fed by ingestion that add ``search`` modes and tools.

    :param registry: ``registry.add(name, factory)``; ``factory(context)`` takes a
        :class:`~toolkernel.knowledge.KBContext` and returns a
        :class:`~toolkernel.knowledge.KBExtension`. ``name`` (lowercase, digits, ``-``)
        names the extension's directory inside the knowledge base and the
        ``toolkernel kb ingest --no-<name>`` flag that leaves it out of a run.

    Example: ``docs/examples/hooks/register_kb_extensions.py`` (run by ``tests/test_docs.py``).

    .. versionadded:: 0.2
    """


@_spec
def register_entity_extractors(registry: EntityExtractorRegistry) -> None:
    """Add entity extractors: objects that find the names of things in passages.

    :param registry: ``registry.add(name, factory)``; ``factory(**options)`` returns a
        :class:`~toolkernel.entities.EntityExtractor`. A knowledge graph (toolkernel-graphrag)
        links chunks that mention the same entity; it picks its extractor by name and
        normalises what the extractor returns (case, plurals, aliases) itself.

    Example: ``docs/examples/hooks/register_entity_extractors.py`` (run by ``tests/test_docs.py``).

    .. versionadded:: 0.2
    """


# ---------------------------------------------------------------------------
# Tools, resources, prompts
# ---------------------------------------------------------------------------


@_spec
def register_tools(registry: ToolRegistry) -> None:
    """Contribute tools to every :class:`~toolkernel.MCPServer` the kernel serves.

    :param registry: ``registry.add(tool)`` with a :class:`~toolkernel.Tool` (made by
        :func:`~toolkernel.tool` or :func:`~toolkernel.create_tool`). A tool the server
        defines itself wins a name collision, with a warning.

    Example: ``docs/examples/hooks/register_tools.py`` (run by ``tests/test_docs.py``).

    .. versionadded:: 0.1
    """


@_spec
def register_resources(registry: ResourceRegistry) -> None:
    """Contribute resources and resource templates to every served :class:`~toolkernel.MCPServer`.

    :param registry: ``registry.add(resource)`` with a :class:`~toolkernel.Resource` or
        :class:`~toolkernel.ResourceTemplate`.

    Example: ``docs/examples/hooks/register_resources.py`` (run by ``tests/test_docs.py``).

    .. versionadded:: 0.1
    """


@_spec
def register_prompts(registry: PromptRegistry) -> None:
    """Contribute prompts to every served :class:`~toolkernel.MCPServer`.

    :param registry: ``registry.add(prompt)`` with a :class:`~toolkernel.Prompt`.

    Example: ``docs/examples/hooks/register_prompts.py`` (run by ``tests/test_docs.py``).

    .. versionadded:: 0.1
    """


@_spec
def register_tool_middleware(registry: MiddlewareRegistry) -> None:
    """Add async middleware that runs around every tool call.

    :param registry: ``registry.add(middleware)``; ``middleware(call, call_next)`` is an
        async callable taking the :class:`~toolkernel.ToolCall` and the next step, and
        returning a :class:`~toolkernel.ToolOutcome`. Return without calling
        ``call_next`` to gate or answer from a cache; wrap it to time or rate-limit.

    Middleware runs in registration order, outermost first, before the server's own.

    Example: ``docs/examples/hooks/register_tool_middleware.py`` (run by ``tests/test_docs.py``).

    .. versionadded:: 0.1
    """


# ---------------------------------------------------------------------------
# Tool lifecycle events
# ---------------------------------------------------------------------------


@_spec
def on_tool_input_start(event: ToolEvent) -> Any:
    """A tool call began: the tool is known, its arguments are not yet validated.

    :param event: ``event.tool_name``, ``event.call_id``, ``event.context``.
    :return: ``None`` or an awaitable the kernel awaits.

    Example: ``docs/examples/hooks/on_tool_input_start.py`` (run by ``tests/test_docs.py``).

    .. versionadded:: 0.1
    """


@_spec
def on_tool_input_delta(event: ToolEvent) -> Any:
    """A piece of a tool call's argument text arrived.

    :param event: ``event.input_text_delta`` holds the text. A call that arrives whole
        over MCP reports its full JSON arguments as one delta.
    :return: ``None`` or an awaitable the kernel awaits.

    Example: ``docs/examples/hooks/on_tool_input_delta.py`` (run by ``tests/test_docs.py``).

    .. versionadded:: 0.1
    """


@_spec
def on_tool_input_available(event: ToolEvent) -> Any:
    """A tool call's arguments were validated against its input schema.

    :param event: ``event.input`` holds the validated arguments (a model or dict).
    :return: ``None`` or an awaitable the kernel awaits.

    Example: ``docs/examples/hooks/on_tool_input_available.py`` (run by ``tests/test_docs.py``).

    .. versionadded:: 0.1
    """


@_spec
def on_tool_output(event: ToolEvent) -> Any:
    """A tool call returned a result that passed its output schema.

    :param event: ``event.output`` holds what the tool returned; ``event.duration_s``.
    :return: ``None`` or an awaitable the kernel awaits.

    Example: ``docs/examples/hooks/on_tool_output.py`` (run by ``tests/test_docs.py``).

    .. versionadded:: 0.1
    """


@_spec
def on_tool_error(event: ToolEvent) -> Any:
    """A tool call failed: bad input, the tool raised, or its output broke its schema.

    :param event: ``event.error`` holds the exception; ``event.duration_s``.
    :return: ``None`` or an awaitable the kernel awaits.

    Example: ``docs/examples/hooks/on_tool_error.py`` (run by ``tests/test_docs.py``).

    .. versionadded:: 0.1
    """


# ---------------------------------------------------------------------------
# Server and session lifecycle
# ---------------------------------------------------------------------------


@_spec
def on_server_start(server: MCPServer) -> Any:
    """A server is about to accept connections.

    :param server: the :class:`~toolkernel.MCPServer` being served.
    :return: ``None`` or an awaitable the kernel awaits before serving.

    Example: ``docs/examples/hooks/on_server_start.py`` (run by ``tests/test_docs.py``).

    .. versionadded:: 0.1
    """


@_spec
def on_server_stop(server: MCPServer) -> Any:
    """A server stopped serving (normally or not).

    :param server: the :class:`~toolkernel.MCPServer` that stopped.
    :return: ``None`` or an awaitable the kernel awaits.

    Example: ``docs/examples/hooks/on_server_stop.py`` (run by ``tests/test_docs.py``).

    .. versionadded:: 0.1
    """


@_spec
def on_session_start(event: SessionEvent) -> Any:
    """A client connection (an MCP session) opened.

    :param event: ``event.server``, ``event.transport``, ``event.session_id`` (``None``
        on stdio).
    :return: ``None`` or an awaitable the kernel awaits.

    Example: ``docs/examples/hooks/on_session_start.py`` (run by ``tests/test_docs.py``).

    .. versionadded:: 0.1
    """


@_spec
def on_session_stop(event: SessionEvent) -> Any:
    """A client connection closed.

    :param event: as for :func:`on_session_start`.
    :return: ``None`` or an awaitable the kernel awaits.

    Example: ``docs/examples/hooks/on_session_stop.py`` (run by ``tests/test_docs.py``).

    .. versionadded:: 0.1
    """


# ---------------------------------------------------------------------------
# Configuration and the command line
# ---------------------------------------------------------------------------


@_spec
def register_settings(registry: SettingsRegistry) -> None:
    """Declare a plugin's settings as a pydantic model.

    :param registry: ``registry.add(name, Model)``. The kernel validates the table
        ``[plugins.<name>]`` of its configuration file (:mod:`toolkernel.config`) and the
        ``TOOLKERNEL_<NAME>_<FIELD>`` environment variables against ``Model`` at start-up;
        errors name the file, the table and the key. Read the result with
        ``kernel.settings(name)``; a factory registered with ``settings=name`` (stores,
        embedders, rerankers, auth providers, transports) is built with it, the call's
        options overriding it.

    Example: ``docs/examples/hooks/register_settings.py`` (run by ``tests/test_docs.py``).

    .. versionadded:: 0.1
    """


@_spec
def register_commands(registry: CommandRegistry) -> None:
    """Add sub-commands to the ``toolkernel`` command line.

    :param registry: ``registry.add(name, configure, run, help=...)``; ``configure`` adds
        arguments to an :class:`argparse.ArgumentParser` (with ``pass_kernel=True`` it
        also receives the kernel), ``run(args, kernel)`` returns an exit code (or an
        awaitable of one).

    Example: ``docs/examples/hooks/register_commands.py`` (run by ``tests/test_docs.py``).

    .. versionadded:: 0.1
    """
