"""Every hook in toolkernel.hookspecs, each implemented by a real plugin and shown to run."""

from __future__ import annotations

import contextlib
import functools
import inspect
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from mcp.client import Client
from mcp.shared.message import SessionMessage
from pydantic import BaseModel, Field

from toolkernel import (
    AuthInfo,
    ConfigError,
    MCPServer,
    Prompt,
    Resource,
    ResourceTemplate,
    ToolOutcome,
    hookimpl,
    hookspecs,
    tool,
)
from toolkernel._app import ServingAppImpl
from toolkernel.cli import build_parser
from toolkernel.embedders import Embedder
from toolkernel.rerankers import Reranker
from toolkernel.testing import connect_in_memory
from toolkernel.testing import connect_sdk_client as connect
from toolkernel.transports import ClientTransportOptions, ServeOptions

MODES = ["legacy", "auto"]


def _echo_server(kernel: Any, name: str = "hooked") -> MCPServer:
    server = MCPServer(name, kernel=kernel)

    @server.tool
    def echo(text: str) -> str:
        """Echo."""
        return text

    @server.tool
    def boom() -> str:
        """Raise."""
        raise RuntimeError("kaput")

    return server


def _memory_pair() -> tuple[Any, Any, Any, Any]:
    to_server_send, to_server_recv = anyio.create_memory_object_stream[SessionMessage | Exception](100)
    to_client_send, to_client_recv = anyio.create_memory_object_stream[SessionMessage | Exception](100)
    return to_server_send, to_server_recv, to_client_send, to_client_recv


def test_every_hookspec_is_covered_here():
    """A new hook must get a test in this module: the list below is checked against hookspecs."""
    specs = sorted(
        name
        for name, fn in vars(hookspecs).items()
        if inspect.isfunction(fn) and hasattr(fn, "toolkernel_spec")
    )
    assert specs == sorted(
        [
            "register_server_transports",
            "register_client_transports",
            "register_auth_providers",
            "register_vector_stores",
            "register_embedders",
            "register_rerankers",
            "register_chunkers",
            "register_readers",
            "register_kb_extensions",
            "register_entity_extractors",
            "register_client_auth",
            "register_tools",
            "register_resources",
            "register_prompts",
            "register_tool_middleware",
            "on_tool_input_start",
            "on_tool_input_delta",
            "on_tool_input_available",
            "on_tool_output",
            "on_tool_error",
            "on_server_start",
            "on_server_stop",
            "on_session_start",
            "on_session_stop",
            "register_settings",
            "register_commands",
            "register_shared_state",
        ]
    )


# ---------------------------------------------------------------------------
# Transports, and server/session lifecycle
# ---------------------------------------------------------------------------


class LoopbackTransportPlugin:
    """A server transport that serves over memory streams and drives one SDK client through it."""

    def __init__(self) -> None:
        self.events: list[Any] = []

    @hookimpl
    def register_server_transports(self, registry):
        registry.add("loopback", functools.partial(LoopbackTransport, self.events))

    @hookimpl
    async def on_server_start(self, server):
        await anyio.lowlevel.checkpoint()
        self.events.append(("server_start", server.name))

    @hookimpl
    async def on_server_stop(self, server):
        await anyio.lowlevel.checkpoint()
        self.events.append(("server_stop", server.name))

    @hookimpl
    def on_session_start(self, event):
        self.events.append(("session_start", event.transport, event.session_id, event.server.name))

    @hookimpl
    async def on_session_stop(self, event):
        await anyio.lowlevel.checkpoint()
        self.events.append(("session_stop", event.transport, event.session_id))


class LoopbackTransport:
    def __init__(self, events: list[Any], options: ServeOptions) -> None:
        self.events = events
        self.options = options

    async def serve(self, app: Any) -> None:
        self.events.append(("serve", self.options.extra["label"], app.server.name))
        to_server_send, to_server_recv, to_client_send, to_client_recv = _memory_pair()

        @contextlib.asynccontextmanager
        async def transport() -> AsyncIterator[Any]:
            yield to_client_recv, to_server_send

        async with anyio.create_task_group() as tg:
            tg.start_soon(
                functools.partial(
                    app.run_session, to_server_recv, to_client_send, transport="loopback", session_id="s-1"
                )
            )
            async with Client(transport(), mode="legacy") as client:  # type: ignore[arg-type]
                result = await client.call_tool("echo", {"text": "over loopback"})
            self.events.append(("result", result.content[0].text))
            tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_register_server_transports_serves_with_kernel_serve_and_fires_lifecycle(kernel_with):
    plugin = LoopbackTransportPlugin()
    kernel = kernel_with(plugin)
    server = _echo_server(kernel)
    with anyio.fail_after(10):
        await kernel.serve(server, "loopback", ServeOptions(extra={"label": "L"}))
    assert plugin.events == [
        ("server_start", "hooked"),
        ("serve", "L", "hooked"),
        ("session_start", "loopback", "s-1", "hooked"),
        ("result", "over loopback"),
        ("session_stop", "loopback", "s-1"),
        ("server_stop", "hooked"),
    ]
    assert kernel.server_transports.origin("loopback") == kernel.plugins()[-1].name


class ForeverTransportPlugin:
    def __init__(self) -> None:
        self.events: list[str] = []

    @hookimpl
    def register_server_transports(self, registry):
        registry.add("forever", lambda options: self)

    async def serve(self, app: Any) -> None:
        self.events.append("serving")
        await anyio.sleep_forever()

    @hookimpl
    async def on_server_stop(self, server):
        await anyio.lowlevel.checkpoint()
        self.events.append("stopped")


@pytest.mark.anyio
async def test_on_server_stop_runs_when_serving_is_cancelled(kernel_with):
    plugin = ForeverTransportPlugin()
    kernel = kernel_with(plugin)
    with anyio.move_on_after(0.2):
        await kernel.serve(_echo_server(kernel), "forever")
    assert plugin.events == ["serving", "stopped"]


@pytest.mark.anyio
async def test_serve_unknown_transport_is_config_error(kernel):
    with pytest.raises(ConfigError) as info:
        await kernel.serve(_echo_server(kernel), "http")
    assert str(info.value) == (
        "--transport 'http' is not installed (pip install toolkernel-http); available: stdio"
    )


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_on_session_start_and_stop_over_the_memory_transport(kernel_with, mode):
    plugin = LoopbackTransportPlugin()
    kernel = kernel_with(plugin)
    async with connect_in_memory(_echo_server(kernel, "sess"), mode=mode) as client:
        assert plugin.events == [("session_start", "memory", None, "sess")]
        await client.call_tool("echo", {"text": "x"})
    assert plugin.events == [("session_start", "memory", None, "sess"), ("session_stop", "memory", None)]


class MemoryClientTransportPlugin:
    """A client transport for mem:// targets that serves a given server in-process."""

    def __init__(self, server: MCPServer) -> None:
        self.server = server
        self.opened: list[tuple[Any, ClientTransportOptions]] = []

    @hookimpl
    def register_client_transports(self, registry):
        registry.add("mem", self.open, schemes=("mem",))

    @contextlib.asynccontextmanager
    async def open(self, target: Any, options: ClientTransportOptions) -> AsyncIterator[Any]:
        self.opened.append((target, options))
        app = ServingAppImpl(self.server, self.server.kernel)
        to_server_send, to_server_recv, to_client_send, to_client_recv = _memory_pair()
        async with anyio.create_task_group() as tg:
            tg.start_soon(functools.partial(app.run_session, to_server_recv, to_client_send, transport="mem"))
            yield to_client_recv, to_server_send
            tg.cancel_scope.cancel()


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_register_client_transports_resolves_targets_and_connects(kernel, kernel_with, mode):
    server = _echo_server(kernel, "remote")
    plugin = MemoryClientTransportPlugin(server)
    client_kernel = kernel_with(plugin)
    assert client_kernel.client_transports.for_target("mem://remote") == "mem"
    assert client_kernel.client_transports.for_target("python -m x") == "stdio"
    with anyio.fail_after(10):
        async with connect(client_kernel, "mem://remote", mode=mode) as client:
            result = await client.call_tool("echo", {"text": "via plugin transport"})
    assert result.content[0].text == "via plugin transport"
    assert [target for target, _ in plugin.opened] == ["mem://remote"]
    assert plugin.opened[0][1] == ClientTransportOptions()


def test_http_target_without_the_http_plugin_names_the_package(kernel_with):
    kernel = kernel_with(disable=["toolkernel-http"])
    with pytest.raises(LookupError) as info:
        kernel.client_transports.for_target("http://127.0.0.1:9/mcp")
    assert str(info.value) == "no client transport for http:// URLs is installed: pip install toolkernel-http"
    with pytest.raises(LookupError, match=r"pip install toolkernel-http"):
        kernel.client_transport("https://example.com/mcp")


# ---------------------------------------------------------------------------
# Auth, vector stores, embedders, rerankers
# ---------------------------------------------------------------------------


class StaticAuth:
    def __init__(self, settings: Any) -> None:
        self.settings = settings

    async def verify(self, token: str) -> AuthInfo | None:
        if token != "let-me-in":
            return None
        return AuthInfo(subject="alice", client_id="cli", scopes=("read",))


class Backends:
    @hookimpl
    def register_auth_providers(self, registry):
        registry.add("static", StaticAuth)

    @hookimpl
    def register_vector_stores(self, registry):
        registry.add("dict-store", lambda **options: {"kind": "dict-store", **options})

    @hookimpl
    def register_embedders(self, registry):
        registry.add("letters", LetterEmbedder)

    @hookimpl
    def register_rerankers(self, registry):
        registry.add("overlap", OverlapReranker)


class LetterEmbedder:
    """Counts a, b, c: a real (if tiny) embedder."""

    def __init__(self, model: str, scale: float = 1.0) -> None:
        self.model = model
        self.scale = scale

    @property
    def name(self) -> str:
        return f"letters/{self.model}"

    @property
    def dimension(self) -> int:
        return 3

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [[t.count(ch) * self.scale for ch in "abc"] for t in texts]


class OverlapReranker:
    def __init__(self, lowercase: bool = True) -> None:
        self.lowercase = lowercase

    async def score(self, query: str, passages: Sequence[str]) -> list[float]:
        words = set(query.lower().split())
        return [float(len(words & set(p.lower().split()))) for p in passages]


@pytest.mark.anyio
async def test_register_auth_providers(kernel_with):
    kernel = kernel_with(Backends())
    provider = kernel.auth_providers.get("static")(None)
    assert await provider.verify("let-me-in") == AuthInfo(subject="alice", client_id="cli", scopes=("read",))
    assert await provider.verify("wrong") is None


def test_register_vector_stores(kernel_with):
    kernel = kernel_with(Backends())
    assert kernel.vector_store("dict-store", dim=3) == {"kind": "dict-store", "dim": 3}
    with pytest.raises(LookupError, match=r"no vector store named 'nope' \(registered: dict-store\)"):
        kernel.vector_store("nope")


@pytest.mark.anyio
async def test_register_embedders_by_provider_and_model(kernel_with):
    kernel = kernel_with(Backends())
    embedder = kernel.embedder("letters/v1", scale=2.0)
    assert isinstance(embedder, Embedder)
    assert embedder.name == "letters/v1"
    assert embedder.dimension == 3
    assert await embedder.embed(["abca", "c"]) == [[4.0, 2.0, 2.0], [0.0, 0.0, 2.0]]
    with pytest.raises(ValueError, match=r"embedder name 'letters' must look like 'provider/model'"):
        kernel.embedder("letters")
    with pytest.raises(LookupError, match=r"no embedder provider named 'other'"):
        kernel.embedder("other/model")


@pytest.mark.anyio
async def test_register_rerankers(kernel_with):
    kernel = kernel_with(Backends())
    reranker = kernel.reranker("overlap")
    assert isinstance(reranker, Reranker)
    assert await reranker.score("red fox", ["a red car", "the red fox", "blue"]) == [1.0, 2.0, 0.0]


class LineChunker:
    """One chunk per non-empty line: a real (if tiny) chunker."""

    name = "lines"

    def describe(self) -> dict[str, Any]:
        return {"name": self.name}

    def chunk(self, text: str) -> list[Any]:
        from toolkernel.chunkers import Chunk

        out, start = [], 0
        for line in text.splitlines(keepends=True):
            if line.strip():
                out.append(Chunk(line.strip(), start + line.index(line.strip()), start + len(line.rstrip())))
            start += len(line)
        return out


class NullExtension:
    """A knowledge-base extension that remembers what it was told."""

    modes = ("nothing",)

    def __init__(self, context: Any) -> None:
        self.context = context
        self.batches: list[Any] = []

    async def on_ingest(self, batch: Any) -> None:
        self.batches.append(batch)

    async def retrieve(self, mode: str, request: Any) -> list[Any]:
        return []

    def tools(self, search: Any) -> list[Any]:
        return []

    async def aclose(self) -> None:
        pass


class RetrievalParts:
    @hookimpl
    def register_chunkers(self, registry):
        registry.add("lines", LineChunker)

    @hookimpl
    def register_kb_extensions(self, registry):
        registry.add("null", NullExtension)


def test_register_chunkers(kernel_with):
    from toolkernel.chunkers import Chunk, Chunker

    kernel = kernel_with(RetrievalParts())
    chunker = kernel.chunker("lines")
    assert isinstance(chunker, Chunker)
    assert chunker.chunk("a b\n\n  c\n") == [Chunk("a b", 0, 3), Chunk("c", 7, 8)]
    assert kernel.chunkers.origin("lines") != "commands"
    with pytest.raises(LookupError, match="no chunker named 'words'"):
        kernel.chunker("words")


class WordsReader:
    """Real (if tiny) readers: a file upper-cased as one document; a record per line of .rec files."""

    @hookimpl
    def register_readers(self, registry):
        from toolkernel.readers import ReadDocument, Skipped

        def shout(path):
            yield ReadDocument(path.read_text().upper(), kind="text", metadata={"loud": True})

        class Records:
            def read(self, path):
                for number, line in enumerate(path.read_text().splitlines(), start=1):
                    if line.strip():
                        yield ReadDocument(line, id=f"line-{number}")
                    else:
                        yield Skipped(f"{path}:{number}", "blank")

        registry.add("shout", shout, suffixes=[".Shout", ""])
        registry.add("records", Records(), suffixes=[".rec"])


def test_register_readers(kernel_with, tmp_path):
    from toolkernel.errors import RegistrationError
    from toolkernel.readers import ReadDocument, Skipped
    from toolkernel.registries import ReaderRegistry

    kernel = kernel_with(WordsReader())
    readers = kernel.readers
    assert list(readers) == ["shout", "records"]
    assert readers.for_suffix(".shout") == "shout"
    assert readers.for_suffix("") == "shout"
    assert readers.for_suffix(".pdf") is None
    assert readers.suffixes() == ["", ".rec", ".shout"]
    note = tmp_path / "note.shout"
    note.write_text("hi there")
    assert list(readers.get("shout").read(note)) == [ReadDocument("HI THERE", "text", {"loud": True})]
    lines = tmp_path / "a.rec"
    lines.write_text("one\n\ntwo\n")
    assert list(readers.get("records").read(lines)) == [
        ReadDocument("one", id="line-1"),
        Skipped(f"{lines}:2", "blank"),
        ReadDocument("two", id="line-3"),
    ]
    with pytest.raises(RegistrationError, match="'shout'"):
        readers.add("again", lambda path: [], suffixes=[".SHOUT"])
    with pytest.raises(RegistrationError, match="not valid"):
        ReaderRegistry().add("bad", lambda path: [], suffixes=["docx"])
    with pytest.raises(RegistrationError, match="not a string"):
        ReaderRegistry().add("bad", lambda path: [], suffixes=".docx")
    with pytest.raises(RegistrationError, match="suffix None is not valid"):
        ReaderRegistry().add("bad", lambda path: [], suffixes=[".ok", None])  # type: ignore[list-item]
    with pytest.raises(RegistrationError, match="callable"):
        ReaderRegistry().add("bad", object(), suffixes=[".x"])


class TenantState:
    """A shared-state backend for ``tenant://NAME``: one in-process state per URL."""

    def __init__(self) -> None:
        self.made: dict[str, Any] = {}

    @hookimpl
    def register_shared_state(self, registry):
        from toolkernel.shared_state import MemorySharedState

        registry.add("tenant", lambda url: self.made.setdefault(url, MemorySharedState(url)))


@pytest.mark.anyio
async def test_register_shared_state(kernel_with):
    from toolkernel.errors import RegistrationError
    from toolkernel.registries import SharedStateRegistry
    from toolkernel.shared_state import SharedState

    plugin = TenantState()
    kernel = kernel_with(plugin)
    assert sorted(kernel.shared_states) == ["memory", "tenant"]
    state = kernel.shared_state("tenant://a")
    assert isinstance(state, SharedState)
    assert state is kernel.shared_state("tenant://a") is plugin.made["tenant://a"]
    assert kernel.shared_state("tenant://b") is not state
    async with state.run():
        assert await state.secret("k") == await state.secret("k")
    with pytest.raises(
        ConfigError, match=r"no installed plugin serves nosuch:// URLs; known: memory://, tenant://"
    ):
        kernel.shared_state("nosuch://x")
    with pytest.raises(ConfigError, match="expected a URL"):
        kernel.shared_state("tenant")
    with pytest.raises(RegistrationError, match="callable"):
        SharedStateRegistry().add("bad", object())


def test_register_kb_extensions(kernel_with):
    from toolkernel.errors import RegistrationError
    from toolkernel.knowledge import KBExtension
    from toolkernel.registries import KBExtensionRegistry

    kernel = kernel_with(RetrievalParts())
    assert list(kernel.kb_extensions) == ["null"]
    extension = kernel.kb_extensions.get("null")(object())
    assert isinstance(extension, KBExtension)
    with pytest.raises(RegistrationError, match="lowercase letters"):
        KBExtensionRegistry().add("Graph RAG", NullExtension)


class CapitalsExtractor:
    """Entities are capitalised words, with an option that the kernel passes through."""

    name = "capitals"

    def __init__(self, min_length: int = 2) -> None:
        self.min_length = min_length

    def describe(self):
        return {"name": self.name, "min_length": self.min_length}

    async def extract(self, texts):
        return [[w for w in text.split() if w[:1].isupper() and len(w) >= self.min_length] for text in texts]


class ExtractorPlugin:
    @hookimpl
    def register_entity_extractors(self, registry):
        registry.add("capitals", CapitalsExtractor)


@pytest.mark.anyio
async def test_register_entity_extractors(kernel_with):
    from toolkernel.entities import EntityExtractor
    from toolkernel.errors import RegistrationError
    from toolkernel.registries import EntityExtractorRegistry

    kernel = kernel_with(ExtractorPlugin())
    extractor = kernel.entity_extractor("capitals", min_length=3)
    assert isinstance(extractor, EntityExtractor)
    assert extractor.describe() == {"name": "capitals", "min_length": 3}
    assert await extractor.extract(["Ada met Bo in Paris", "none here"]) == [["Ada", "Paris"], []]
    with pytest.raises(LookupError, match="nouns"):
        kernel.entity_extractor("nouns")
    with pytest.raises(RegistrationError, match="callable"):
        EntityExtractorRegistry().add("broken", "not a factory")


class HeaderAuth:
    """What a client auth factory returns: an httpx2.Auth-like object, here a fixed header."""

    def __init__(self, url: str, settings: dict) -> None:
        self.url = url
        self.token = settings["token"]


class ClientAuthPlugin:
    @hookimpl
    def register_client_auth(self, registry):
        registry.add("fixed", HeaderAuth)


def test_register_client_auth(kernel_with):
    from toolkernel.errors import RegistrationError
    from toolkernel.registries import ClientAuthRegistry

    kernel = kernel_with(ClientAuthPlugin())
    factory = kernel.client_auth.get("fixed")
    auth = factory("https://mcp.example/mcp", {"type": "fixed", "token": "t"})
    assert (auth.url, auth.token) == ("https://mcp.example/mcp", "t")
    with pytest.raises(LookupError, match="oauth"):
        kernel.client_auth.get("oauth")
    registry = ClientAuthRegistry()
    registry.add("fixed", HeaderAuth)
    with pytest.raises(RegistrationError, match="twice"):
        registry.add("fixed", HeaderAuth)


# ---------------------------------------------------------------------------
# Tools, resources, prompts contributed by plugins
# ---------------------------------------------------------------------------


@tool
def shared() -> str:
    """The plugin's version."""
    return "from plugin"


@tool
def plugin_tool(n: int) -> int:
    """Contributed by a plugin."""
    return n + 1


class Contributions:
    @hookimpl
    def register_tools(self, registry):
        registry.add(plugin_tool)
        registry.add(shared)

    @hookimpl
    def register_resources(self, registry):
        registry.add(Resource("plug://readme", "readme", lambda: "plugin readme", mime_type="text/markdown"))
        registry.add(ResourceTemplate("plug://item/{key}", "item", lambda key: f"item {key}"))

    @hookimpl
    def register_prompts(self, registry):
        registry.add(Prompt("plugin_prompt", lambda topic: f"v1 about {topic}", version="1"))
        registry.add(Prompt("plugin_prompt", lambda topic: f"v2 about {topic}", version="2"))


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_contributed_tools_resources_prompts_reach_clients(kernel_with, mode, log_events):
    kernel = kernel_with()
    plugin_name = kernel.register(Contributions(), name="contrib")
    server = MCPServer("host", kernel=kernel)

    @server.tool
    def shared() -> str:  # collides with the plugin's tool
        """The server's version."""
        return "from server"

    async with connect_in_memory(server, mode=mode) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        plugin_result = await client.call_tool("plugin_tool", {"n": 41})
        shared_result = await client.call_tool("shared", {})
        resources = [r.uri for r in (await client.list_resources()).resources]
        templates = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
        readme = (await client.read_resource("plug://readme")).contents[0]
        item = (await client.read_resource("plug://item/7")).contents[0]
        prompts = {p.name: p for p in (await client.list_prompts()).prompts}
        newest = await client.get_prompt("plugin_prompt", {"topic": "x"})
        first = await client.get_prompt("plugin_prompt", {"topic": "x"}, meta={"toolkernel/version": "1"})

    assert sorted(tools) == ["plugin_tool", "shared"]
    assert tools["shared"].description == "The server's version."
    assert plugin_result.content[0].text == "42"
    assert shared_result.content[0].text == "from server"
    assert resources == ["plug://readme"]
    assert templates == ["plug://item/{key}"]
    assert readme.text == "plugin readme"
    assert readme.mime_type == "text/markdown"
    assert item.text == "item 7"
    assert list(prompts) == ["plugin_prompt"]
    assert prompts["plugin_prompt"].meta == {"toolkernel/versions": ["1", "2"]}
    assert newest.messages[0].content.text == "v2 about x"
    assert first.messages[0].content.text == "v1 about x"
    warnings = {e["event"] for e in log_events if e["log_level"] == "warning"}
    assert warnings == {f"tool 'shared' from plugin {plugin_name} is hidden by the server's own tool"}
    assert kernel.tools.origin("plugin_tool") == "contrib"
    assert kernel.prompts.origin("plugin_prompt@2") == "contrib"


# ---------------------------------------------------------------------------
# Middleware
# ---------------------------------------------------------------------------


class MiddlewarePlugin:
    def __init__(self) -> None:
        self.trace: list[str] = []
        self.calls_seen: list[str] = []
        self.timings: list[tuple[str, float]] = []

    @hookimpl
    def register_tool_middleware(self, registry):
        registry.add(self.timing, name="timing")
        registry.add(self.gate, name="gate")
        registry.add(self.cache, name="cache")

    async def timing(self, call, call_next):
        started = time.perf_counter()
        self.trace.append("timing>")
        outcome = await call_next(call)
        self.trace.append("<timing")
        self.timings.append((call.tool.name, time.perf_counter() - started))
        return outcome

    async def gate(self, call, call_next):
        self.trace.append("gate>")
        if call.tool.name == "forbidden":
            return ToolOutcome.error(f"refused by gate: {call.tool.name}")
        return await call_next(call)

    async def cache(self, call, call_next):
        self.trace.append("cache>")
        if call.arguments.get("text") == "cached":
            return ToolOutcome(content=[], structured={"cached": True}, value="hit")
        return await call_next(call)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_register_tool_middleware_gate_cache_timing_and_order(kernel_with, mode):
    plugin = MiddlewarePlugin()
    kernel = kernel_with(plugin)
    tool_calls: list[str] = []

    async def server_mw(call, call_next):
        plugin.trace.append("server>")
        outcome = await call_next(call)
        plugin.trace.append("<server")
        return outcome

    server = MCPServer("mw", kernel=kernel, middleware=[server_mw])

    @server.tool
    def echo(text: str) -> str:
        """Echo."""
        plugin.trace.append("tool")
        tool_calls.append(text)
        return text

    @server.tool
    def forbidden() -> str:
        """Never runs."""
        tool_calls.append("forbidden")
        return "ran"

    async with connect_in_memory(server, mode=mode) as client:
        plugin.trace.clear()
        ok = await client.call_tool("echo", {"text": "hello"})
        trace_ok = list(plugin.trace)
        plugin.trace.clear()
        refused = await client.call_tool("forbidden", {})
        trace_refused = list(plugin.trace)
        cached = await client.call_tool("echo", {"text": "cached"})

    assert ok.content[0].text == "hello"
    assert trace_ok == ["timing>", "gate>", "cache>", "server>", "tool", "<server", "<timing"]
    assert refused.is_error is True
    assert refused.content[0].text == "refused by gate: forbidden"
    assert trace_refused == ["timing>", "gate>", "<timing"]
    assert cached.is_error is False
    assert cached.content == []
    assert cached.structured_content == {"cached": True}
    assert tool_calls == ["hello"]
    assert [name for name, _ in plugin.timings] == ["echo", "forbidden", "echo"]
    assert all(seconds >= 0 for _, seconds in plugin.timings)
    assert list(kernel.tool_middleware) == ["timing", "gate", "cache"]


@pytest.mark.anyio
async def test_raising_middleware_is_an_error_result(kernel_with):
    class Broken:
        @hookimpl
        def register_tool_middleware(self, registry):
            async def broken(call, call_next):
                raise RuntimeError("middleware broke")

            registry.add(broken, name="broken")

    kernel = kernel_with(Broken())
    async with connect_in_memory(_echo_server(kernel)) as client:
        result = await client.call_tool("echo", {"text": "x"})
    assert result.is_error is True
    assert result.content[0].text == "Tool 'echo' failed in middleware: RuntimeError: middleware broke"


# ---------------------------------------------------------------------------
# Tool lifecycle events
# ---------------------------------------------------------------------------


class EventRecorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    @hookimpl
    def on_tool_input_start(self, event):
        self.events.append(("start", event))

    @hookimpl
    async def on_tool_input_delta(self, event):
        await anyio.lowlevel.checkpoint()
        self.events.append(("delta", event))

    @hookimpl
    def on_tool_input_available(self, event):
        self.events.append(("available", event))

    @hookimpl
    async def on_tool_output(self, event):
        await anyio.sleep(0.01)
        self.events.append(("output", event))

    @hookimpl
    def on_tool_error(self, event):
        self.events.append(("error", event))


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_tool_events_in_order_with_their_payloads(kernel_with, mode):
    recorder = EventRecorder()
    kernel = kernel_with(recorder)
    async with connect_in_memory(_echo_server(kernel), mode=mode) as client:
        await client.list_tools()
        result = await client.call_tool("echo", {"text": "hi"})
        # The async on_tool_output hook was awaited before the result was sent.
        assert [name for name, _ in recorder.events] == ["start", "delta", "available", "output"]
    assert result.content[0].text == "hi"
    by_name = dict(recorder.events)
    call_ids = {e.call_id for _, e in recorder.events}
    assert len(call_ids) == 1
    assert {e.tool_name for _, e in recorder.events} == {"echo"}
    assert by_name["start"].input is None
    assert by_name["start"].input_text_delta is None
    assert by_name["delta"].input_text_delta == '{"text": "hi"}'
    assert by_name["available"].input.text == "hi"
    assert by_name["output"].output == "hi"
    assert by_name["output"].duration_s > 0
    assert by_name["output"].error is None
    assert by_name["start"].context.tool_name == "echo"


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_on_tool_error_for_bad_input_and_raising_tools(kernel_with, mode):
    recorder = EventRecorder()
    kernel = kernel_with(recorder)
    async with connect_in_memory(_echo_server(kernel), mode=mode) as client:
        await client.list_tools()
        await client.call_tool("echo", {"text": 3})
        bad_input = list(recorder.events)
        recorder.events.clear()
        await client.call_tool("boom", {})
        raised = list(recorder.events)
    assert [name for name, _ in bad_input] == ["start", "delta", "error"]
    assert type(bad_input[-1][1].error).__name__ == "ToolInputError"
    assert str(bad_input[-1][1].error) == "text: Input should be a valid string"
    assert [name for name, _ in raised] == ["start", "delta", "available", "error"]
    assert isinstance(raised[-1][1].error, RuntimeError)
    assert str(raised[-1][1].error) == "kaput"
    assert raised[-1][1].duration_s >= 0


@pytest.mark.anyio
async def test_per_tool_callbacks_run_before_kernel_hooks(kernel_with):
    order: list[str] = []

    class Hooks:
        @hookimpl
        def on_tool_input_start(self, event):
            order.append("hook:start")

        @hookimpl
        def on_tool_output(self, event):
            order.append("hook:output")

    async def cb_output(event):
        await anyio.lowlevel.checkpoint()
        order.append("cb:output")

    @tool(on_input_start=lambda e: order.append("cb:start"), on_output=cb_output)
    def watched() -> str:
        """Watched."""
        order.append("tool")
        return "w"

    server = MCPServer("cb", tools=[watched], kernel=kernel_with(Hooks()))
    assert await server.execute_tool("watched") == "w"
    assert order == ["cb:start", "hook:start", "tool", "cb:output", "hook:output"]


# ---------------------------------------------------------------------------
# Settings and commands
# ---------------------------------------------------------------------------


class CacheSettings(BaseModel):
    ttl_s: int = Field(60, ge=0)
    label: str = "default"


class SettingsPlugin:
    @hookimpl
    def register_settings(self, registry):
        registry.add("my-cache", CacheSettings)


def test_register_settings_validated_from_config(kernel_with):
    kernel = kernel_with(SettingsPlugin(), settings={"my-cache": {"ttl_s": "30"}})
    settings = kernel.settings("my-cache")
    assert isinstance(settings, CacheSettings)
    assert settings == CacheSettings(ttl_s=30, label="default")


def test_register_settings_bad_value_names_the_field(kernel_with):
    kernel = kernel_with(SettingsPlugin(), settings={"my-cache": {"ttl_s": -5}})
    with pytest.raises(ConfigError) as info:
        kernel.settings("my-cache")
    assert str(info.value) == (
        "settings of plugin 'my-cache' are invalid: "
        "[plugins.my-cache] ttl_s in Kernel(settings=...): Input should be greater than or equal to 0"
    )
    with pytest.raises(ConfigError, match=r"\[plugins\.my-cache\] ttl_s"):
        kernel.check()


def test_register_settings_from_environment(kernel_with, monkeypatch):
    monkeypatch.setenv("TOOLKERNEL_MY_CACHE_TTL_S", "7")
    monkeypatch.setenv("TOOLKERNEL_MY_CACHE_LABEL", "from-env")
    assert kernel_with(SettingsPlugin()).settings("my-cache") == CacheSettings(ttl_s=7, label="from-env")
    # The environment overrides the configuration section, field by field.
    kernel = kernel_with(SettingsPlugin(), settings={"my-cache": {"label": "from-config", "ttl_s": 1}})
    monkeypatch.delenv("TOOLKERNEL_MY_CACHE_LABEL")
    assert kernel.settings("my-cache") == CacheSettings(ttl_s=7, label="from-config")
    monkeypatch.setenv("TOOLKERNEL_MY_CACHE_TTL_S", "soon")
    with pytest.raises(
        ConfigError,
        match=r"\[plugins\.my-cache\] ttl_s from TOOLKERNEL_MY_CACHE_TTL_S: Input should be a valid integer",
    ):
        kernel_with(SettingsPlugin()).settings("my-cache")


class CommandPlugin:
    def __init__(self) -> None:
        self.ran: list[tuple[str, Any]] = []

    @hookimpl
    def register_commands(self, registry):
        registry.add("greet", self.configure, self.run, help="Greet someone.")

    def configure(self, parser):
        parser.add_argument("who")
        parser.add_argument("--times", type=int, default=1)

    async def run(self, args, kernel):
        await anyio.lowlevel.checkpoint()
        self.ran.append((args.who, args.times))
        print(f"hello {args.who} " * args.times)
        return 3


def test_register_commands_adds_a_runnable_subcommand(kernel_with, capsys):
    plugin = CommandPlugin()
    kernel = kernel_with(plugin)
    parser = build_parser(kernel)
    assert "greet" in parser.format_help()
    assert "Greet someone." in parser.format_help()
    args = parser.parse_args(["greet", "bob", "--times", "2"])
    command = kernel.commands.get(args.command)
    result = command.run(args, kernel)
    assert inspect.isawaitable(result)

    async def wait() -> Any:
        return await result

    assert anyio.run(wait) == 3
    assert plugin.ran == [("bob", 2)]
    assert capsys.readouterr().out == "hello bob hello bob \n"
    assert list(kernel.commands)[:6] == ["serve", "plugins", "plugin", "inspect", "call", "version"]
    assert kernel.commands.origin("greet") != kernel.commands.origin("serve")
    assert kernel.commands.origin("serve") == "commands"


class KernelAwareCommand:
    @hookimpl
    def register_commands(self, registry):
        registry.add("show", self.configure, lambda args, kernel: 0, pass_kernel=True)

    def configure(self, parser, kernel):
        for name in kernel.chunkers:
            parser.add_argument(f"--no-{name}", action="store_true")


def test_register_commands_with_the_kernel_in_configure(kernel_with):
    kernel = kernel_with(KernelAwareCommand(), RetrievalParts())
    args = build_parser(kernel).parse_args(["show", "--no-lines"])
    assert args.no_lines is True


@pytest.mark.anyio
async def test_plugins_registered_or_removed_after_the_first_call_take_effect(kernel):
    server = _echo_server(kernel)
    assert await server.execute_tool("echo", {"text": "before"}) == "before"
    recorder = EventRecorder()
    plugin = MiddlewarePlugin()
    kernel.register(recorder, name="late-recorder")
    kernel.register(plugin, name="late-middleware")
    assert await server.execute_tool("echo", {"text": "after"}) == "after"
    assert [name for name, _ in recorder.events] == ["start", "delta", "available", "output"]
    assert plugin.trace == ["timing>", "gate>", "cache>", "<timing"]
    kernel.unregister("late-middleware")
    kernel.unregister("late-recorder")
    assert await server.execute_tool("echo", {"text": "gone"}) == "gone"
    assert len(recorder.events) == 4
    assert len(plugin.trace) == 4
