"""The documentation is complete and its examples run.

Two kinds of test live here (datasette's ``tests/test_docs.py`` is the model):

* completeness: every hook in :mod:`toolkernel.hookspecs` has a section in
  ``docs/plugins/hooks.md`` with its exact signature and an example, in the spec's order
  and banner groups, and a behaviour test below named ``test_hook_<name>``; every CLI
  command is documented in ``docs/cli.md``; every Python block in the docs is a verbatim
  copy of (part of) a file under ``docs/examples/``, and every example file appears whole
  in the docs, so docs and code cannot drift;
* behaviour: each example is imported, registered with ``kernel_with(...)`` or served
  through ``connect_in_memory`` and the effect the docs describe is asserted.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import inspect
import itertools
import json
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import anyio
import pytest
from pydantic import BaseModel

import toolkernel
from toolkernel import MCPServer
from toolkernel import hookspecs as hookspecs_module
from toolkernel.testing import connect_in_memory

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
EXAMPLES = DOCS / "examples"
HOOKS_MD = DOCS / "plugins" / "hooks.md"
# The documents this suite owns; plugin pages (docs/plugins/<name>.md) are checked by their owners.
OWNED_DOCS = [
    DOCS / "index.md",
    DOCS / "quickstart.md",
    DOCS / "tools.md",
    DOCS / "server.md",
    DOCS / "observability.md",
    DOCS / "cli.md",
    DOCS / "plugins" / "guide.md",
    HOOKS_MD,
]
# Documents that include example files whole, without owning every python block they show.
DOCS_WITH_EXAMPLES = [*OWNED_DOCS, DOCS / "vector-stores.md"]

# The 2025-era features the docs describe (logging, sampling, ping, resources/subscribe) warn as deprecated.
pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

_counter = itertools.count()


@pytest.fixture(autouse=True)
def _no_ambient_configuration(monkeypatch):
    """The developer's own plugin selection or config file must not change what the docs show."""
    for var in (
        "TOOLKERNEL_CONFIG",
        "TOOLKERNEL_LOAD_PLUGINS",
        "TOOLKERNEL_DISABLE_PLUGINS",
        "TOOLKERNEL_STRICT_PLUGINS",
        "TOOLKERNEL_LOG_LEVEL",
        "OTEL_TRACES_EXPORTER",
    ):
        monkeypatch.delenv(var, raising=False)


def load_example(relative: str) -> ModuleType:
    """Import ``docs/examples/<relative>`` as a fresh module (its module-level state starts empty)."""
    return load_module(EXAMPLES / relative)


def load_module(path: Path) -> ModuleType:
    """Import the file at ``path`` as a fresh module."""
    name = f"docs_example_{path.stem}_{next(_counter)}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def hook_names() -> list[str]:
    """Every hook spec, in declaration order (functions marked by ``HookspecMarker("toolkernel")``)."""
    return [
        name
        for name, fn in vars(hookspecs_module).items()
        if inspect.isfunction(fn) and hasattr(fn, "toolkernel_spec")
    ]


def spec_signatures() -> dict[str, str]:
    """``name -> "def name(params) -> ret"`` exactly as written in hookspecs.py."""
    tree = ast.parse(text(Path(hookspecs_module.__file__)))
    out = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and any(
            isinstance(d, ast.Name) and d.id == "_spec" for d in node.decorator_list
        ):
            returns = f" -> {ast.unparse(node.returns)}" if node.returns is not None else ""
            out[node.name] = f"def {node.name}({ast.unparse(node.args)}){returns}"
    return out


def spec_banners() -> list[tuple[str, list[str]]]:
    """The banner groups of hookspecs.py and the hooks under each, in order."""
    groups: list[tuple[str, list[str]]] = []
    lines = text(Path(hookspecs_module.__file__)).splitlines()
    for i, line in enumerate(lines):
        if line.startswith("# ----") and i + 2 < len(lines) and lines[i + 2].startswith("# ----"):
            groups.append((lines[i + 1].lstrip("# ").strip(), []))
        match = re.match(r"def (\w+)\(", line)
        if match and groups and match.group(1) in hook_names():
            groups[-1][1].append(match.group(1))
    return groups


def sections(markdown: str) -> list[tuple[int, str, str]]:
    """``(level, title, body)`` for every ``#``-heading outside code blocks."""
    out: list[tuple[int, str, list[str]]] = []
    fenced = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        heading = None if fenced else re.match(r"^(#{1,6}) (.+)$", line)
        if heading:
            out.append((len(heading.group(1)), heading.group(2).strip().strip("`"), []))
        elif out:
            out[-1][2].append(line)
    return [(level, title, "\n".join(body)) for level, title, body in out]


def code_blocks(markdown: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", markdown, flags=re.S | re.M)


def example_files() -> list[Path]:
    return sorted(
        p
        for p in EXAMPLES.rglob("*")
        if p.is_file()
        and p.suffix in (".py", ".toml")
        and "__pycache__" not in p.parts
        and p.name != "__init__.py"
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ---------------------------------------------------------------------------
# Completeness
# ---------------------------------------------------------------------------


def test_hookspecs_are_found():
    names = hook_names()
    assert names == list(spec_signatures()), "every @_spec function carries toolkernel_spec, in order"
    assert "register_tools" in names
    assert len(names) == len(set(names))


@pytest.mark.parametrize("hook", hook_names())
def test_hook_is_documented_with_signature_and_example(hook):
    found = [body for level, title, body in sections(text(HOOKS_MD)) if level in (2, 3) and title == hook]
    assert found, f"docs/plugins/hooks.md has no '### {hook}' section"
    body = found[0]
    signature = spec_signatures()[hook]
    assert signature in body, f"the {hook} section must show its signature: {signature}"
    examples = [b for b in code_blocks(body, "python") if "@hookimpl" in b and f"def {hook}(" in b]
    assert examples, f"the {hook} section needs a python example with @hookimpl def {hook}(...)"


def test_hook_sections_follow_the_spec_order_and_banners():
    headings = [(level, title) for level, title, _ in sections(text(HOOKS_MD))]
    documented = []
    current_group = None
    for level, title in headings:
        if level == 2:
            current_group = title
        elif level == 3 and title in hook_names():
            documented.append((current_group, title))
    expected = [(group, hook) for group, hooks in spec_banners() for hook in hooks]
    assert documented == expected


def test_hook_reference_is_generated_from_the_hookspec_docstrings(monkeypatch):
    hookref = load_module(DOCS / "hookref.py")
    current = text(HOOKS_MD)
    assert hookref.rewrite(current) == current, "hooks.md is stale: run python docs/hookref.py"
    # The check bites: a docstring edited in hookspecs.py makes the page stale.
    specs = hookref.hook_specs()
    signature, docstring = specs["register_tools"]
    specs["register_tools"] = (signature, docstring.replace("Contribute tools", "Add tools"))
    monkeypatch.setattr(hookref, "hook_specs", lambda: specs)
    assert "Add tools to every" in hookref.rewrite(current)
    assert hookref.rewrite(current) != current


@pytest.mark.parametrize("hook", hook_names())
def test_hook_has_a_behaviour_test(hook):
    assert f"test_hook_{hook}" in globals(), f"tests/test_docs.py needs test_hook_{hook}"


@pytest.mark.parametrize("path", example_files(), ids=lambda p: str(p.relative_to(EXAMPLES)))
def test_example_file_appears_whole_in_the_docs(path):
    source = text(path)
    where = [doc.name for doc in DOCS_WITH_EXAMPLES if source in text(doc)]
    assert where, f"{path.relative_to(ROOT)} is not included verbatim in any document"


@pytest.mark.parametrize("doc", OWNED_DOCS, ids=lambda p: str(p.relative_to(DOCS)))
def test_python_blocks_are_copies_of_example_files(doc):
    sources = [text(p) for p in example_files()]
    for block in code_blocks(text(doc), "python"):
        assert any(block in source for source in sources), (
            f"{doc.relative_to(ROOT)}: this python block is not (part of) a file in docs/examples/:\n{block}"
        )


def anchors(markdown: str) -> set[str]:
    """GitHub-style anchors of the headings in ``markdown``."""
    return {re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-") for _, title, _ in sections(markdown)}


@pytest.mark.parametrize("doc", DOCS_WITH_EXAMPLES, ids=lambda p: str(p.relative_to(DOCS)))
def test_relative_links_resolve(doc):
    for target, anchor in re.findall(r"\]\(([^)#\s]*)(?:#([^)\s]*))?\)", text(doc)):
        if "://" in target or target.startswith("mailto:"):
            continue
        path = doc.parent / target if target else doc
        assert path.exists(), f"{doc.relative_to(ROOT)} links to missing {target}"
        if anchor and path.suffix == ".md":
            where = f"{doc.relative_to(ROOT)} links to missing #{anchor} in {path.name}"
            assert anchor in anchors(text(path)), where


def test_every_cli_command_and_option_is_documented(capsys):
    from toolkernel.cli import build_parser, main

    with pytest.raises(SystemExit):
        main(["--help"])
    help_text = capsys.readouterr().out
    commands = re.search(r"\{([^}]*)\}", help_text)
    listed = (
        commands.group(1).split(",") if commands else re.findall(r"^    (\w[\w-]*)\s", help_text, flags=re.M)
    )
    assert "serve" in listed
    cli_md = text(DOCS / "cli.md")
    titles = {title for level, title, _ in sections(cli_md) if level in (2, 3)}
    for command in listed:
        assert f"toolkernel {command}" in titles, f"docs/cli.md needs a '## toolkernel {command}' section"

    kernel = toolkernel.Kernel(load_entry_points=False)
    parser = build_parser(kernel)
    for option in parser._actions:  # global options
        for flag in option.option_strings:
            assert flag in cli_md or flag in ("-h", "--help"), flag
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for command, sub in subparsers.choices.items():
        body = next(b for level, t, b in sections(cli_md) if t == f"toolkernel {command}")
        for action in sub._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help"):
                    assert flag in body, f"docs/cli.md: 'toolkernel {command}' does not mention {flag}"
            if not action.option_strings and action.metavar:
                assert action.metavar in body, f"'toolkernel {command}' does not mention {action.metavar}"


def test_index_links_every_owned_document():
    index = text(DOCS / "index.md")
    for doc in OWNED_DOCS:
        if doc.name != "index.md":
            assert str(doc.relative_to(DOCS)) in index, f"docs/index.md does not link {doc.name}"


# ---------------------------------------------------------------------------
# Hook examples: docs/plugins/hooks.md
# ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_hook_register_server_transports(kernel_with):
    from mcp.client import Client

    from toolkernel.transports import ServeOptions

    plugin = load_example("hooks/tcp_transport.py")
    sessions = load_example("hooks/on_session_start.py")
    kernel = kernel_with(plugin, sessions)
    assert kernel.server_transports.origin("tcp") == plugin.__name__
    server = load_example("echo_server.py").app
    port = free_port()
    async with anyio.create_task_group() as tg:
        tg.start_soon(kernel.serve, server, "tcp", ServeOptions(port=port))
        for _ in range(100):
            try:
                await (await anyio.connect_tcp("127.0.0.1", port)).aclose()
                break
            except OSError:
                await anyio.sleep(0.02)
        transport = kernel.client_transport(f"tcp://127.0.0.1:{port}")
        async with Client(transport, mode="legacy") as client:
            result = await client.call_tool("echo", {"text": "over tcp"})
        tg.cancel_scope.cancel()
    assert result.content[0].text == "over tcp"
    assert set(sessions.opened) == {("echo", "tcp", None)}  # the readiness probe is a session too


@pytest.mark.anyio
async def test_hook_register_client_transports(kernel_with):
    plugin = load_example("hooks/tcp_transport.py")
    kernel = kernel_with(plugin)
    assert kernel.client_transports.for_target("tcp://127.0.0.1:1") == "tcp"
    assert kernel.client_transports.for_target("python server.py") == "stdio"
    from toolkernel.transports import ClientTransportOptions

    with pytest.raises(OSError):
        async with kernel.client_transport(
            f"tcp://127.0.0.1:{free_port()}", ClientTransportOptions(connect_timeout=2)
        ):
            pass


@pytest.mark.anyio
async def test_hook_register_shared_state(kernel_with):
    from toolkernel.errors import ConfigError
    from toolkernel.shared_state import SessionRecord, SharedState

    kernel = kernel_with(load_example("hooks/register_shared_state.py"))
    state = kernel.shared_state("tenant://a")
    assert isinstance(state, SharedState)
    assert kernel.shared_state("tenant://a") is state
    assert kernel.shared_state("tenant://b") is not state
    assert isinstance(kernel.shared_state("memory://"), SharedState)  # the built-in backend
    record = SessionRecord("s1", None, "address:127.0.0.1", {"protocolVersion": "2025-11-25"})
    async with state.run():
        await state.sessions.save(record, ttl_s=60)
        assert await kernel.shared_state("tenant://a").sessions.load("s1") == record
        heard = []
        state.broadcast.subscribe(heard.append)
        await state.broadcast.publish({"t": "hello"})
        assert heard == [{"t": "hello"}]
        await state.sessions.drop("s1")
        assert await state.sessions.load("s1") is None
    with pytest.raises(
        ConfigError, match=r"no installed plugin serves nats:// URLs; known: memory://, tenant://"
    ):
        kernel.shared_state("nats://127.0.0.1")


@pytest.mark.anyio
async def test_hook_register_auth_providers(kernel_with):
    plugin = load_example("hooks/register_auth_providers.py")
    kernel = kernel_with(plugin, settings={"api-keys": {"keys": {"s3cret": "ada"}}})
    provider = kernel.auth_provider("api-keys")
    info = await provider.verify("s3cret")
    assert info == toolkernel.AuthInfo(subject="ada", client_id="api-key", scopes=("tools",))
    assert await provider.verify("wrong") is None
    override = kernel.auth_provider("api-keys", keys={"other": "bob"})  # call options win
    assert await override.verify("s3cret") is None
    assert (await override.verify("other")).subject == "bob"


@pytest.mark.anyio
async def test_hook_register_client_auth(kernel_with):
    import httpx2
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    from toolkernel.client import MCPClient
    from toolkernel.errors import MCPClientError

    kernel = kernel_with(load_example("hooks/register_client_auth.py"))
    factory = kernel.client_auth.get("api-key")

    async def echo_key(request):
        return PlainTextResponse(request.headers.get("x-api-key", ""))

    app = Starlette(routes=[Route("/mcp", echo_key)])
    auth = factory("http://test/mcp", {"type": "api-key", "key": "k1"})
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), auth=auth) as http:
        assert (await http.get("http://test/mcp")).text == "k1"
    with pytest.raises(ValueError, match="needs `key`"):
        factory("http://test/mcp", {"type": "api-key"})
    config = {
        "servers": {"s": {"url": "http://127.0.0.1:9/mcp", "auth": {"type": "api-key"}}},
        "throw_on_load_error": True,
    }
    with pytest.raises(MCPClientError, match=r"servers\.s\.auth: auth type api-key needs `key`"):
        async with MCPClient(config, kernel=kernel, persist=False):
            pass


@pytest.mark.anyio
async def test_hook_register_vector_stores(kernel_with):
    from toolkernel.vectors import IndexNotFoundError, VectorStore

    kernel = kernel_with(load_example("hooks/register_vector_stores.py"))
    store = kernel.vector_store("dict")
    assert isinstance(store, VectorStore)
    await store.create_index("docs", dimension=2)
    await store.upsert(
        "docs",
        ["a", "b", "c"],
        [[1, 0], [0, 1], [1, 1]],
        metadata=[{"lang": "en"}, {"lang": "pt"}, {"lang": "en"}],
    )
    hits = await store.query("docs", [1, 0.1], top_k=2)
    assert [h.id for h in hits] == ["a", "c"]
    assert [h.id for h in await store.query("docs", [0, 1], filter={"lang": "en"})] == ["c", "a"]
    assert await store.count("docs", {"lang": {"$ne": "en"}}) == 1
    await store.delete("docs", filter={"lang": "pt"})
    assert (await store.describe_index("docs")).count == 2
    await store.delete_index("docs")
    with pytest.raises(IndexNotFoundError):
        await store.count("docs")


@pytest.mark.anyio
async def test_hook_register_embedders(kernel_with):
    from toolkernel.embedders import Embedder

    kernel = kernel_with(load_example("hooks/register_embedders.py"))
    embedder = kernel.embedder("hashing/16")
    assert isinstance(embedder, Embedder)
    vectors = await embedder.embed(["the cat", "the cat", "a dog"])
    assert embedder.name == "hashing/16"
    assert embedder.dimension == 16
    assert vectors[0] == vectors[1] != vectors[2]
    assert abs(sum(x * x for x in vectors[0]) - 1) < 1e-9
    with pytest.raises(ValueError, match="hashing/64"):
        kernel.embedder("hashing/big")


@pytest.mark.anyio
async def test_hook_register_rerankers(kernel_with):
    kernel = kernel_with(load_example("hooks/register_rerankers.py"))
    reranker = kernel.reranker("word-overlap")
    scores = await reranker.score("red apple", ["A red car", "red apple pie", "bananas"])
    assert scores == [0.5, 1.0, 0.0]


def test_hook_register_chunkers(kernel_with):
    from toolkernel.chunkers import Chunk, Chunker

    kernel = kernel_with(load_example("hooks/register_chunkers.py"))
    chunker = kernel.chunker("paragraph")
    assert isinstance(chunker, Chunker)
    assert chunker.chunk("One.\n\nTwo\nlines.") == [Chunk("One.", 0, 4), Chunk("Two\nlines.", 6, 16)]
    assert kernel.chunker("paragraph", min_chars=5).chunk("One.\n\nTwo\nlines.") == [
        Chunk("Two\nlines.", 6, 16)
    ]
    assert chunker.describe() == {"name": "paragraph", "min_chars": 1}


@pytest.mark.anyio
async def test_hook_register_readers(tmp_path):
    from toolkernel.errors import RegistrationError
    from toolkernel_local_embed import plugin as local_embed
    from toolkernel_qdrant import plugin as qdrant
    from toolkernel_rag import KnowledgeBase, ingest
    from toolkernel_rag import plugin as rag

    plugin = load_example("hooks/register_readers.py")
    talk = tmp_path / "talk.vtt"
    talk.write_text("WEBVTT\n\n1\n00:00:00.000 --> 00:00:02.000\nHello there.\n", encoding="utf-8")
    kernel = toolkernel.Kernel(load_entry_points=False, plugins=[rag, qdrant, local_embed, plugin])
    assert kernel.readers.for_suffix(".VTT") == "subtitles"
    assert kernel.readers.origin("subtitles") == plugin.__name__
    async with await KnowledgeBase.open(
        str(tmp_path / "talks"), kernel=kernel, create=True, embedder="local/wordllama-256"
    ) as kb:
        report = await ingest(kb, [str(talk)])
        found = kb.document("talk.vtt")
    assert report.problems == []
    assert report.added == 1
    assert found is not None
    row, text = found
    assert text == "Hello there."
    assert row.metadata["kind"] == "subtitles"
    assert row.metadata["cues"] == 1
    # A second reader for the same suffix is refused, naming the reader that has it.
    with pytest.raises(RegistrationError, match="'subtitles'"):
        kernel.readers.add("other", lambda path: [], suffixes=[".vtt"])


@pytest.mark.anyio
async def test_hook_register_kb_extensions(tmp_path):
    from toolkernel_local_embed import plugin as local_embed
    from toolkernel_qdrant import plugin as qdrant
    from toolkernel_rag import KBServerOptions, KnowledgeBase, ingest, kb_server
    from toolkernel_rag import plugin as rag

    plugin = load_example("hooks/register_kb_extensions.py")
    docs = tmp_path / "docs"
    docs.mkdir()
    pages = [("quick.md", "Quickstart guide"), ("ref.md", "Reference"), ("old.md", "Quickstart notes")]
    for name, title in pages:
        (docs / name).write_text(f"# {title}\n\nSome text about {name}.\n")

    def kernel():
        return toolkernel.Kernel(load_entry_points=False, plugins=[rag, qdrant, local_embed, plugin])

    where = str(tmp_path / "kb")
    # Ingested without the extension first: opening it later catches it up.
    async with await KnowledgeBase.open(
        where, kernel=kernel(), create=True, embedder="local/wordllama-256", extensions=False
    ) as kb:
        await ingest(kb, [str(docs)])
    assert not (tmp_path / "kb" / "extensions" / "titles" / "titles.json").exists()
    (docs / "old.md").unlink()
    async with await KnowledgeBase.open(where, kernel=kernel(), writable=True) as kb:
        await ingest(kb, [str(docs)])
        assert kb.modes == ["hybrid", "dense", "sparse", "title"]
        server = kb_server(kb, KBServerOptions(mandatory_filter={"path": {"$ne": "ref.md"}}))
        async with connect_in_memory(server) as client:
            [search] = [t for t in (await client.list_tools()).tools if t.name == "search"]
            found = await client.call_tool("search", {"query": "quickstart reference", "mode": "title"})
    assert "title" in search.input_schema["properties"]["mode"]["enum"]
    # old.md was deleted (the extension heard of it), ref.md is outside the mandatory filter.
    assert [h["document_id"] for h in found.structured_content["results"]] == ["docs/quick.md"]


@pytest.mark.anyio
async def test_hook_register_entity_extractors(kernel_with):
    from toolkernel.entities import EntityExtractor

    plugin = load_example("hooks/register_entity_extractors.py")
    kernel = kernel_with(plugin)
    extractor = kernel.entity_extractor("acronyms")
    assert isinstance(extractor, EntityExtractor)
    assert await extractor.extract(["NASA and the ESA", "no names"]) == [["NASA", "ESA"], []]
    assert await kernel.entity_extractor("acronyms", min_length=4).extract(["NASA and the ESA"]) == [["NASA"]]
    assert extractor.describe() == {"name": "acronyms", "min_length": 2}
    assert kernel.entity_extractors.origin("acronyms") == plugin.__name__


@pytest.mark.anyio
async def test_hook_register_tools(kernel_with):
    plugin = load_example("hooks/register_tools.py")
    server = load_example("echo_server.py").app
    async with connect_in_memory(server, kernel=kernel_with(plugin)) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        result = await client.call_tool("server_time", {})
    assert set(tools) == {"echo", "server_time"}
    assert tools["server_time"].annotations.read_only_hint is True
    assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00$", result.content[0].text)


@pytest.mark.anyio
async def test_hook_register_resources(kernel_with, monkeypatch):
    import mcp_types as types

    monkeypatch.setenv("TK_DOCS_COLOUR", "teal")
    plugin = load_example("hooks/register_resources.py")
    async with connect_in_memory(MCPServer("env"), kernel=kernel_with(plugin)) as client:
        names = await client.read_resource("env://names")
        colour = await client.read_resource("env://var/TK_DOCS_COLOUR")
        templates = await client.list_resource_templates()
        completion = await client.complete(
            types.ResourceTemplateReference(type="ref/resource", uri="env://var/{name}"),
            {"name": "name", "value": "TK_DOCS_C"},
        )
    assert "TK_DOCS_COLOUR" in names.contents[0].text.splitlines()
    assert colour.contents[0].text == "teal"
    assert [t.uri_template for t in templates.resource_templates] == ["env://var/{name}"]
    assert completion.completion.values == ["TK_DOCS_COLOUR"]


@pytest.mark.anyio
async def test_hook_register_prompts(kernel_with):
    plugin = load_example("hooks/register_prompts.py")
    async with connect_in_memory(MCPServer("review"), kernel=kernel_with(plugin)) as client:
        listed = (await client.list_prompts()).prompts
        newest = await client.get_prompt("review", {"diff": "-a\n+b", "focus": "style"})
        first = await client.get_prompt("review", {"diff": "-a\n+b"}, meta={"toolkernel/version": "1"})
    assert [(p.name, p.meta) for p in listed] == [("review", {"toolkernel/versions": ["1", "2"]})]
    assert [a.name for a in listed[0].arguments] == ["diff", "focus"]
    assert [m.role for m in newest.messages] == ["assistant", "user"]
    assert newest.messages[0].content.text == "I review for style."
    assert first.messages[0].content.text == "Review this diff:\n\n-a\n+b"


@pytest.mark.anyio
async def test_hook_register_tool_middleware(kernel_with, log_events):
    plugin = load_example("hooks/register_tool_middleware.py")
    server = MCPServer("files")

    @server.tool(annotations={"destructiveHint": True})
    def delete_everything() -> str:
        """Do not."""
        return "gone"

    @server.tool
    def ping() -> str:
        """Answer pong."""
        return "pong"

    kernel = kernel_with(plugin)
    assert list(kernel.tool_middleware) == ["refuse_destructive", "timer"]
    async with connect_in_memory(server, kernel=kernel) as client:
        refused = await client.call_tool("delete_everything", {})
        ok = await client.call_tool("ping", {})
    assert refused.is_error is True
    assert "destructive" in refused.content[0].text
    assert ok.content[0].text == "pong"
    timed = [e for e in log_events if e["event"] == "tool timed"]
    assert [e["tool"] for e in timed] == ["ping"]


async def _call_echo_and_fail(kernel, values=None):
    server = load_example("echo_server.py").app

    @server.tool
    def fail(reason: str) -> str:
        """Always fails."""
        raise RuntimeError(reason)

    meta = {"toolkernel/context": values} if values else None
    async with connect_in_memory(server, kernel=kernel) as client:
        ok = await client.call_tool("echo", {"text": "hi"}, meta=meta)
        bad_input = await client.call_tool("echo", {"text": 3})
        raised = await client.call_tool("fail", {"reason": "boom"})
    return ok, bad_input, raised


@pytest.mark.anyio
async def test_hook_on_tool_input_start(kernel_with):
    plugin = load_example("hooks/on_tool_input_start.py")
    await _call_echo_and_fail(kernel_with(plugin))
    assert plugin.calls == {"echo": 2, "fail": 1}


@pytest.mark.anyio
async def test_hook_on_tool_input_delta(kernel_with):
    plugin = load_example("hooks/on_tool_input_delta.py")
    await _call_echo_and_fail(kernel_with(plugin))
    assert sorted(plugin.argument_sizes.values()) == sorted(
        len(json.dumps(a)) for a in ({"text": "hi"}, {"text": 3}, {"reason": "boom"})
    )


@pytest.mark.anyio
async def test_hook_on_tool_input_available(kernel_with):
    plugin = load_example("hooks/on_tool_input_available.py")
    await _call_echo_and_fail(kernel_with(plugin), values={"user": "ada"})
    # The call with bad input never reaches this step.
    assert plugin.audit == [("ada", "echo", {"text": "hi"}), ("anonymous", "fail", {"reason": "boom"})]


@pytest.mark.anyio
async def test_hook_on_tool_output(kernel_with):
    plugin = load_example("hooks/on_tool_output.py")
    started = time.perf_counter()
    ok, _, _ = await _call_echo_and_fail(kernel_with(plugin))
    around = time.perf_counter() - started
    assert ok.content[0].text == "hi"
    [(name, seconds, tags)] = plugin.durations
    assert name == "tool.duration_s"
    assert tags == {"tool": "echo"}
    assert 0 <= seconds <= around, "seconds, and no longer than the calls it was measured within"


@pytest.mark.anyio
async def test_hook_on_tool_error(kernel_with):
    plugin = load_example("hooks/on_tool_error.py")
    _, bad_input, raised = await _call_echo_and_fail(kernel_with(plugin))
    assert bad_input.is_error
    assert raised.is_error
    assert "Invalid input for tool 'echo': text: Input should be a valid string" in bad_input.content[0].text
    assert raised.content[0].text == "Tool 'fail' failed: RuntimeError: boom"
    assert list(plugin.recent_errors["fail"]) == ["RuntimeError: boom"]
    assert next(iter(plugin.recent_errors["echo"])).startswith("ToolInputError: text:")


class _OnceTransport:
    """A server transport that serves one in-memory session and returns."""

    def __init__(self, options):
        self.options = options

    async def serve(self, app):
        pass


class _OncePlugin:
    @toolkernel.hookimpl
    def register_server_transports(self, registry):
        registry.add("once", _OnceTransport)


@pytest.mark.anyio
async def test_hook_on_server_start(kernel_with):
    plugin = load_example("hooks/on_server_start.py")
    kernel = kernel_with(plugin, _OncePlugin())
    await kernel.serve(MCPServer("warm"), "once")
    assert plugin.opened == ["warm"]


@pytest.mark.anyio
async def test_hook_on_server_stop(kernel_with):
    plugin = load_example("hooks/on_server_stop.py")

    class Broken:
        def __init__(self, options):
            pass

        async def serve(self, app):
            raise OSError("address in use")

    class BrokenPlugin:
        @toolkernel.hookimpl
        def register_server_transports(self, registry):
            registry.add("broken", Broken)

    kernel = kernel_with(plugin, _OncePlugin(), BrokenPlugin())
    await kernel.serve(MCPServer("a"), "once")
    with pytest.raises(OSError, match="address in use"):
        await kernel.serve(MCPServer("b"), "broken")
    assert plugin.closed == ["a", "b"]


@pytest.mark.anyio
async def test_hook_on_session_start(kernel_with, log_events):
    plugin = load_example("hooks/on_session_start.py")
    async with connect_in_memory(MCPServer("s"), kernel=kernel_with(plugin)) as client:
        await client.send_ping()
        assert plugin.opened == [("s", "memory", None)]
    assert any(e["event"] == "session opened" and e["transport"] == "memory" for e in log_events)


@pytest.mark.anyio
async def test_hook_on_session_stop(kernel_with):
    plugin = load_example("hooks/on_session_stop.py")
    async with connect_in_memory(MCPServer("s"), kernel=kernel_with(plugin)) as client:
        await client.send_ping()
        assert plugin.closed == []
    assert plugin.closed == [("s", "memory")]


def test_hook_register_settings(kernel_with, monkeypatch):
    plugin = load_example("hooks/register_settings.py")
    kernel = kernel_with(plugin)
    assert kernel.settings("greeter").greeting == "Hello"

    monkeypatch.setenv("TOOLKERNEL_GREETER_EXCLAIM", "3")
    kernel = kernel_with(plugin, settings={"greeter": {"greeting": "Hey"}})
    server = MCPServer("g", kernel=kernel)
    assert anyio.run(server.execute_tool, "greet", {"name": "Ada"}) == "Hey, Ada!!!"

    monkeypatch.setenv("TOOLKERNEL_GREETER_EXCLAIM", "9")
    with pytest.raises(toolkernel.ConfigError) as caught:
        kernel_with(plugin).check()
    assert str(caught.value) == (
        "settings of plugin 'greeter' are invalid: [plugins.greeter] exclaim from "
        "TOOLKERNEL_GREETER_EXCLAIM: Input should be less than or equal to 5"
    )


def test_hook_register_commands(kernel_with, capsys):
    from toolkernel.cli import build_parser

    plugin = load_example("hooks/register_commands.py")
    embedders = load_example("hooks/register_embedders.py")
    stores = load_example("hooks/register_vector_stores.py")
    kernel = kernel_with(plugin, embedders, stores)
    args = build_parser(kernel).parse_args(["backends", "--kind", "embedders"])
    assert kernel.commands.get("backends").run(args, kernel) == 0
    assert capsys.readouterr().out == f"embedders: hashing (from {embedders.__name__})\n"
    args = build_parser(kernel).parse_args(["backends"])
    kernel.commands.get("backends").run(args, kernel)
    assert f"stores: dict (from {stores.__name__})" in capsys.readouterr().out


# ---------------------------------------------------------------------------
# The plugin author's guide: docs/plugins/guide.md
# ---------------------------------------------------------------------------

HELLO = EXAMPLES / "plugin"


@pytest.fixture
def hello_installed(tmp_path, monkeypatch):
    """toolkernel-hello as if pip-installed: importable, with its entry point's dist-info."""
    import tomllib

    project = tomllib.loads(text(HELLO / "pyproject.toml"))["project"]
    entry_points = project["entry-points"]["toolkernel"]
    dist_info = tmp_path / f"toolkernel_hello-{project['version']}.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n"
    )
    (dist_info / "entry_points.txt").write_text(
        "[toolkernel]\n" + "".join(f"{k} = {v}\n" for k, v in entry_points.items())
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.syspath_prepend(str(HELLO / "src"))
    for name in [m for m in sys.modules if m.startswith("toolkernel_hello")]:
        monkeypatch.delitem(sys.modules, name)
    for var in ("TOOLKERNEL_LOAD_PLUGINS", "TOOLKERNEL_DISABLE_PLUGINS", "TOOLKERNEL_STRICT_PLUGINS"):
        monkeypatch.delenv(var, raising=False)
    importlib.invalidate_caches()
    return project


def test_guide_pyproject_declares_the_entry_point(hello_installed):
    assert hello_installed["entry-points"]["toolkernel"] == {"toolkernel-hello": "toolkernel_hello.plugin"}


def test_guide_plugin_is_discovered_through_its_entry_point(hello_installed):
    kernel = toolkernel.Kernel(only=["stdio", "commands", "toolkernel-hello"])
    info = {p.name: p for p in kernel.plugins()}["toolkernel-hello"]
    assert (info.origin, info.status, info.distribution, info.version) == (
        "entry point",
        "loaded",
        "toolkernel-hello",
        "0.1.0",
    )
    assert info.hooks == ["register_settings", "register_tools"]
    assert kernel.tools.origin("hello") == "toolkernel-hello"


def test_guide_disable_and_load_only_by_name(hello_installed, monkeypatch):
    monkeypatch.setenv("TOOLKERNEL_DISABLE_PLUGINS", "toolkernel-hello")
    infos = {p.name: p for p in toolkernel.Kernel().plugins()}
    assert infos["toolkernel-hello"].status == "disabled"
    monkeypatch.delenv("TOOLKERNEL_DISABLE_PLUGINS")
    monkeypatch.setenv("TOOLKERNEL_LOAD_PLUGINS", "stdio,commands,toolkernel-hello")
    infos = {p.name: p for p in toolkernel.Kernel().plugins()}
    assert infos["toolkernel-hello"].status == "loaded"
    builtins = ("stdio", "commands", "memory-state")
    assert all(i.status == "disabled" for n, i in infos.items() if n not in (*builtins, "toolkernel-hello"))


def test_guide_broken_plugin_is_reported_and_strict_mode_makes_it_fatal(
    hello_installed, monkeypatch, tmp_path, log_events
):
    broken = tmp_path / "toolkernel_broken.py"
    broken.write_text("raise ImportError('needs libfoo')\n")
    dist_info = tmp_path / "toolkernel_broken-2.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: toolkernel-broken\nVersion: 2.0\n")
    (dist_info / "entry_points.txt").write_text("[toolkernel]\ntoolkernel-broken = toolkernel_broken\n")
    importlib.invalidate_caches()
    only = ["stdio", "commands", "toolkernel-hello", "toolkernel-broken"]
    infos = {p.name: p for p in toolkernel.Kernel(only=only).plugins()}
    assert infos["toolkernel-broken"].status == "failed"
    assert infos["toolkernel-broken"].error == "import failed: ImportError: needs libfoo"
    assert infos["toolkernel-hello"].status == "loaded"
    assert any("toolkernel-broken 2.0" in e["event"] for e in log_events)
    monkeypatch.setenv("TOOLKERNEL_STRICT_PLUGINS", "1")
    with pytest.raises(toolkernel.PluginLoadError, match=r"toolkernel-broken 2\.0"):
        toolkernel.Kernel(only=only)


def test_guide_two_plugins_one_name(kernel_with, log_events):
    first = load_example("hooks/register_tools.py")
    second = load_example("hooks/register_tools.py")
    kernel = kernel_with(first, second)
    assert kernel.tools.origin("server_time") == first.__name__
    infos = {p.name: p for p in kernel.plugins()}
    assert infos[second.__name__].status == "failed"
    assert infos[second.__name__].error == (
        f"register_tools: tool 'server_time' is registered twice: first by {first.__name__}, "
        f"again by {second.__name__}; disable one of the two plugins (TOOLKERNEL_DISABLE_PLUGINS)"
    )


def test_guide_settings_from_the_environment(hello_installed, monkeypatch):
    monkeypatch.setenv("TOOLKERNEL_HELLO_GREETING", "Olá")
    kernel = toolkernel.Kernel(only=["toolkernel-hello"])
    server = MCPServer("s", kernel=kernel)
    assert anyio.run(server.execute_tool, "hello", {"name": "Ada"}) == "Olá, Ada!"


def test_guide_missing_optional_backend_says_what_to_install(hello_installed, monkeypatch):
    monkeypatch.setitem(sys.modules, "emoji", None)  # not installed
    kernel = toolkernel.Kernel(only=["toolkernel-hello"], settings={"hello": {"emoji": True}})
    with pytest.raises(toolkernel.ToolExecutionError, match=r"pip install 'toolkernel-hello\[emoji\]'"):
        anyio.run(MCPServer("s", kernel=kernel).execute_tool, "hello", {"name": "Ada"})


def test_guide_configuration_file(hello_installed):
    from toolkernel.config import load_config

    path = HELLO / "toolkernel.toml"
    config = load_config(path)
    assert (config.disable, config.strict, config.settings) == (
        ["toolkernel-chroma"],
        True,
        {"hello": {"greeting": "Hi"}},
    )
    kernel = toolkernel.Kernel.from_config(path, only=["toolkernel-hello"])
    assert anyio.run(MCPServer("s", kernel=kernel).execute_tool, "hello", {"name": "Ada"}) == "Hi, Ada!"


@pytest.mark.anyio
async def test_guide_settings_build_a_factory(monkeypatch):
    plugin = load_example("settings/keyword_boost.py")
    path = EXAMPLES / "settings" / "toolkernel.toml"
    kernel = toolkernel.Kernel.from_config(path, load_entry_points=False, plugins=[plugin])
    reranker = kernel.reranker("keyword-boost")
    assert isinstance(reranker, plugin.KeywordBoost)
    assert (reranker.keywords, reranker.weight) == (["pgvector", "hnsw"], 2.5)
    passages = ["HNSW in pgvector", "a pgvector index", "bananas"]
    assert await reranker.score("index", passages) == [5.0, 3.5, 0.0]
    assert kernel.reranker("keyword-boost", weight=1).weight == 1  # the call's options win
    monkeypatch.setenv("TOOLKERNEL_KEYWORD_BOOST_KEYWORDS", '["bananas"]')
    kernel = toolkernel.Kernel.from_config(path, load_entry_points=False, plugins=[plugin])
    assert kernel.reranker("keyword-boost").keywords == ["bananas"]
    monkeypatch.setenv("TOOLKERNEL_KEYWORD_BOOST_WEIGHT", "0")
    kernel = toolkernel.Kernel.from_config(path, load_entry_points=False, plugins=[plugin])
    with pytest.raises(toolkernel.ConfigError) as caught:
        kernel.check()
    assert str(caught.value) == (
        "settings of plugin 'keyword-boost' are invalid: [plugins.keyword-boost] weight from "
        "TOOLKERNEL_KEYWORD_BOOST_WEIGHT: Input should be greater than 0"
    )
    # Built directly, without a kernel, from a model the caller makes.
    assert plugin.KeywordBoost(plugin.BoostSettings(weight=2)).weight == 2


def test_guide_bad_settings_stop_serve(hello_installed, monkeypatch, capsys):
    from toolkernel.cli import main

    monkeypatch.setenv("TOOLKERNEL_LOAD_PLUGINS", "stdio,commands,toolkernel-hello")
    monkeypatch.setenv("TOOLKERNEL_HELLO_EMOJI", "maybe")
    monkeypatch.delenv("TOOLKERNEL_CONFIG", raising=False)
    monkeypatch.chdir(ROOT)
    assert main(["serve", "docs/examples/echo_server.py:app"]) == 2
    assert capsys.readouterr().err == (
        "toolkernel: error: settings of plugin 'hello' are invalid: [plugins.hello] emoji from "
        "TOOLKERNEL_HELLO_EMOJI: Input should be a valid boolean, unable to interpret input\n"
    )


def test_guide_plugin_own_tests_pass(hello_installed, kernel_with):
    spec = importlib.util.spec_from_file_location(
        "docs_example_test_hello_plugin", HELLO / "tests" / "test_hello_plugin.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.test_the_plugin_lists_its_hooks(kernel_with)
    anyio.run(module.test_hello_is_offered_by_every_server, kernel_with)
    anyio.run(module.test_the_greeting_is_a_setting, kernel_with)


def test_guide_plugin_module_is_cheap_to_import():
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import toolkernel_hello.plugin; "
        "heavy = [m for m in ('mcp', 'emoji', 'opentelemetry.sdk') if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(HELLO / "src")], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


# ---------------------------------------------------------------------------
# Quickstart and the command line: docs/quickstart.md, docs/cli.md
# ---------------------------------------------------------------------------


def test_quickstart_serve_and_call_over_stdio_with_console_tracing(capfd, monkeypatch):
    from toolkernel.cli import main

    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("TOOLKERNEL_LOAD_PLUGINS", "stdio,commands")  # skip unrelated installed plugins
    # The server process exports its spans to stderr, as `OTEL_TRACES_EXPORTER=console` does.
    server = (
        "env OTEL_TRACES_EXPORTER=console OTEL_SERVICE_NAME=docs-quickstart "
        f"{sys.executable} -m toolkernel serve docs/examples/echo_server.py:app"
    )
    assert main(["call", server, "echo", "--args", '{"text": "hello"}']) == 0
    out, err = capfd.readouterr()
    assert out == "hello\n"
    spans = [json.loads(s) for s in re.findall(r"^\{\n.*?^\}$", err, flags=re.S | re.M)]
    assert {"tools/call echo", "execute_tool echo"} <= {s["name"] for s in spans}
    assert {s["resource"]["attributes"]["service.name"] for s in spans} == {"docs-quickstart"}


@pytest.mark.anyio
async def test_quickstart_echo_server_in_memory(kernel):
    app = load_example("echo_server.py").app
    async with connect_in_memory(app, kernel=kernel) as client:
        info = client.server_info
        result = await client.call_tool("echo", {"text": "hi"})
    assert (info.name, info.version) == ("echo", "1.0.0")
    assert result.content[0].text == "hi"


def test_cli_errors_the_user_can_fix_exit_2(capsys):
    from toolkernel.cli import main

    assert main(["serve", "docs/examples/nowhere.py:app"]) == 2
    assert capsys.readouterr().err == (
        "toolkernel: error: TARGET 'docs/examples/nowhere.py:app': no such file 'docs/examples/nowhere.py'\n"
    )
    assert main(["serve", "--transport", "carrier-pigeon", "x.py:app"]) == 2
    assert "--transport 'carrier-pigeon' is not installed; available: stdio" in capsys.readouterr().err


def test_cli_plugins_json(capsys, monkeypatch):
    from toolkernel.cli import main

    monkeypatch.setenv("TOOLKERNEL_LOAD_PLUGINS", "stdio,commands")
    assert main(["plugins", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [p["name"] for p in listed if p["status"] == "loaded"] == ["stdio", "commands", "memory-state"]
    assert set(listed[0]) == {
        "name",
        "origin",
        "module",
        "distribution",
        "version",
        "hooks",
        "status",
        "error",
    }


# ---------------------------------------------------------------------------
# The tool model: docs/tools.md
# ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_tools_decorator_schemas_and_annotations(kernel):
    module = load_example("tools/decorator.py")
    async with connect_in_memory(module.app, kernel=kernel) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        added = await client.call_tool("add", {"a": 2})
        weather = await client.call_tool("forecast", {"city": "Lisbon"})
        too_far = await client.call_tool("forecast", {"city": "Lisbon", "days": 9})
        extra = await client.call_tool("add", {"a": 1, "c": 2})
    add, forecast = tools["add"], tools["forecast"]
    assert add.description == "Add two integers."
    assert add.input_schema["required"] == ["a"]
    assert add.input_schema["properties"]["b"]["default"] == 0
    assert add.input_schema["additionalProperties"] is False
    assert forecast.title == "Weather forecast"
    assert forecast.annotations.read_only_hint is True
    assert forecast.annotations.open_world_hint is True
    assert forecast.meta == {"example.com/cost": "free"}
    assert forecast.input_schema["properties"]["city"]["description"] == "City name, e.g. Lisbon"
    assert forecast.output_schema["required"] == ["city", "celsius", "sky"]
    assert added.content[0].text == "2"
    assert added.structured_content is None
    assert weather.structured_content == {"city": "Lisbon", "celsius": 21.5, "sky": "clear"}
    assert json.loads(weather.content[0].text) == weather.structured_content
    assert too_far.is_error
    assert "days: Input should be less than or equal to 7" in too_far.content[0].text
    assert extra.is_error
    assert "c: Extra inputs are not permitted" in extra.content[0].text


@pytest.mark.anyio
async def test_tools_create_tool(kernel):
    module = load_example("tools/create_tool.py")
    async with connect_in_memory(module.app, kernel=kernel) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        found = await client.call_tool("search", {"text": "x", "limit": 2})
        resized = await client.call_tool("resize", {"width": 3, "height": 4})
        bad = await client.call_tool("resize", {"width": 0, "height": 4})
    assert tools["search"].output_schema["required"] == ["hits"]
    assert found.structured_content == {"hits": ["x result 1", "x result 2"]}
    assert resized.content[0].text == "resized to 3x4"
    assert resized.structured_content == {"width": 3, "height": 4}
    assert resized.meta == {"example.com/cached": False}
    assert bad.is_error
    assert "width: 0 is less than the minimum of 1" in bad.content[0].text


class Out(BaseModel):
    n: int


@pytest.mark.anyio
async def test_tools_output_schema_is_enforced(kernel):
    server = MCPServer("s")

    @server.tool
    def wrong() -> Out:
        """Returns the wrong shape."""
        return {"n": "many"}

    async with connect_in_memory(server, kernel=kernel) as client:
        result = await client.call_tool("wrong", {})
    assert result.is_error
    assert result.content[0].text.startswith("tool 'wrong' returned output that breaks its output schema: n:")


@pytest.mark.anyio
async def test_tools_callbacks(kernel):
    module = load_example("tools/callbacks.py")
    async with connect_in_memory(module.app, kernel=kernel) as client:
        await client.call_tool("shout", {"text": "hey"})
    assert [s[1:] for s in module.seen] == [
        (None, None, None),
        ('{"text": "hey"}', None, None),
        (None, module.shout.input_model(text="hey"), None),
        (None, None, "HEY"),
    ]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_tools_context_values_progress_and_log(kernel, mode):
    module = load_example("tools/context.py")
    progress, logs = [], []

    async def on_progress(value, total, message):
        progress.append((value, total, message))

    async def on_log(params):
        logs.append((params.level, params.logger, params.data))

    async with connect_in_memory(module.app, kernel=kernel, mode=mode, logging_callback=on_log) as client:
        result = await client.call_tool(
            "build_report",
            {"pages": 2},
            progress_callback=on_progress,
            meta={"toolkernel/context": {"user": "ada"}},
        )
    assert result.content[0].text == "2 pages for ada (caller None, session None)"
    assert progress == [(1, 2, "page 1 of 2"), (2, 2, "page 2 of 2")]
    if mode == "legacy":  # the 2026-07-28 era deprecates logging: see the docs
        assert logs == [("info", "build_report", {"message": "building report", "pages": 2, "user": "ada"})]


@pytest.mark.anyio
async def test_tools_log_messages_below_the_clients_level_are_not_sent(kernel):
    module = load_example("tools/context.py")
    logs = []

    async def on_log(params):
        logs.append(params.level)

    async with connect_in_memory(module.app, kernel=kernel, logging_callback=on_log) as client:
        await client.set_logging_level("warning")
        result = await client.call_tool("build_report", {"pages": 1})
    assert not result.is_error
    assert logs == []


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize("action", ["accept", "decline"])
async def test_tools_elicit_and_sample(kernel, mode, action):
    import mcp_types as types

    module = load_example("tools/elicit.py")
    asked = []

    async def on_elicit(ctx, params):
        asked.append(params.message)
        return types.ElicitResult(action=action, content={"confirm": True} if action == "accept" else None)

    async def on_sample(ctx, params):
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="Faster."), model="m"
        )

    async with connect_in_memory(
        module.app, kernel=kernel, mode=mode, elicitation_callback=on_elicit, sampling_callback=on_sample
    ) as client:
        result = await client.call_tool("deploy", {"service": "api"})
    assert asked == ["Deploy api to production?"]
    expected = "api: deployed. Faster." if action == "accept" else "api: not deployed (decline)"
    assert result.content[0].text == expected


@pytest.mark.anyio
async def test_tools_elicit_needs_a_client(kernel):
    module = load_example("tools/elicit.py")
    module.app._kernel = kernel
    with pytest.raises(toolkernel.ToolExecutionError, match=r"ctx.elicit\(\) needs a client"):
        await module.app.execute_tool("deploy", {"service": "api"})


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_tools_cancellation(kernel, mode):
    module = load_example("tools/cancel.py")
    async with connect_in_memory(module.app, kernel=kernel, mode=mode) as client:
        with anyio.move_on_after(0.3):
            await client.call_tool("wait_for", {"seconds": 10})
        for _ in range(50):
            if module.cleaned_up:
                break
            await anyio.sleep(0.02)
        primes = await client.call_tool("count_primes", {"limit": 100})
        with anyio.move_on_after(0.3):
            await client.call_tool("count_primes", {"limit": 10**9})
        for _ in range(100):
            if module.stopped_at:
                break
            await anyio.sleep(0.02)
    assert module.cleaned_up == [True]
    assert primes.content[0].text == "25"
    assert module.stopped_at
    assert module.stopped_at[0] < 10**9


@pytest.mark.anyio
async def test_tools_server_middleware(kernel):
    module = load_example("tools/middleware.py")
    async with connect_in_memory(module.app, kernel=kernel) as client:
        first = await client.call_tool("lookup", {"word": "kernel"})
        second = await client.call_tool("lookup", {"word": "kernel"})
    assert first.content[0].text == second.content[0].text == "kernel: a word"
    assert module.lookups == ["kernel"]


@pytest.mark.anyio
async def test_tools_plugin_middleware_runs_outside_server_middleware(kernel_with):
    order = []

    class Outer:
        @toolkernel.hookimpl
        def register_tool_middleware(self, registry):
            async def plugin_mw(call, call_next):
                order.append("plugin")
                return await call_next(call)

            registry.add(plugin_mw)

    async def server_mw(call, call_next):
        order.append("server")
        return await call_next(call)

    server = load_example("echo_server.py").app
    server.middleware.append(server_mw)
    server._kernel = kernel_with(Outer())
    assert await server.execute_tool("echo", {"text": "x"}) == "x"
    assert order == ["plugin", "server"]


# ---------------------------------------------------------------------------
# MCPServer: docs/server.md
# ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_server_agents_and_workflows(kernel):
    module = load_example("server/agents_workflows.py")
    async with connect_in_memory(module.app, kernel=kernel) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        answer = await client.call_tool("ask_echo", {"message": "hi"})
        receipt = await client.call_tool("run_billing", {"customer": "acme", "amount": 10})
    assert tools["ask_echo"].description == "Ask agent 'echo': Repeats what you say, politely."
    assert tools["ask_echo"].input_schema["required"] == ["message"]
    assert tools["run_billing"].description == "Bill a customer and return the receipt."
    assert answer.content[0].text == "You said: hi"
    assert receipt.structured_content == {"number": "R-ACM", "total": 12.0}


@pytest.mark.anyio
async def test_server_resources_templates_and_subscriptions(kernel):
    import mcp_types as types

    module = load_example("server/resources.py")
    updates = []

    async def on_message(message):
        if isinstance(message, types.ResourceUpdatedNotification):
            updates.append(str(message.params.uri))

    async with connect_in_memory(module.app, kernel=kernel, message_handler=on_message) as client:
        listed = await client.list_resources()
        index = await client.read_resource("notes://index")
        note = await client.read_resource("notes://note/todo")
        completion = await client.complete(
            types.ResourceTemplateReference(type="ref/resource", uri="notes://note/{name}"),
            {"name": "name", "value": "g"},
        )
        await client.subscribe_resource("notes://note/todo")
        await client.subscribe_resource("notes://index")
        await client.call_tool("write_note", {"name": "todo", "text": "test docs"})
        await client.call_tool("write_note", {"name": "ideas", "text": "more plugins"})
        await client.send_ping()
        with pytest.raises(Exception, match="Resource not found"):
            await client.read_resource("notes://elsewhere")
    assert [r.uri for r in listed.resources] == ["notes://index"]
    assert index.contents[0].text == "groceries\ntodo"
    assert (note.contents[0].text, note.contents[0].mime_type) == ("write docs", "text/markdown")
    assert completion.completion.values == ["groceries"]
    assert updates == ["notes://note/todo", "notes://index"]


@pytest.mark.anyio
async def test_server_list_changed_notification(kernel):
    import mcp_types as types

    seen = []

    async def on_message(message):
        if isinstance(message, types.ToolListChangedNotification):
            seen.append("tools")

    server = MCPServer("s")

    @server.tool
    async def refresh(ctx: toolkernel.ToolContext) -> str:
        """Tell clients the tool list changed."""
        await ctx.server.notify_list_changed("tools")
        return "ok"

    async with connect_in_memory(server, kernel=kernel, message_handler=on_message) as client:
        await client.call_tool("refresh", {})
        await client.send_ping()
    assert seen == ["tools"]


@pytest.mark.anyio
async def test_server_2026_era_subscriptions_listen(kernel):
    from mcp.shared.subscriptions import ResourceUpdated

    module = load_example("server/resources.py")
    async with connect_in_memory(module.app, kernel=kernel, mode="auto") as client:
        assert client.protocol_version == "2026-07-28"
        async with client.listen(resource_subscriptions=["notes://index"]) as events:
            await client.call_tool("write_note", {"name": "fresh-2026", "text": "hi"})
            with anyio.fail_after(10):
                event = await events.__anext__()
    assert event == ResourceUpdated(uri="notes://index")


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_server_prompts_versions_and_completion(kernel, mode):
    import mcp_types as types

    module = load_example("server/prompts.py")
    async with connect_in_memory(module.app, kernel=kernel, mode=mode) as client:
        listed = {p.name: p for p in (await client.list_prompts()).prompts}
        explained = await client.get_prompt("explain", {"code": "x = 1"})
        latest = await client.get_prompt("summarize", {"text": "t"})
        older = await client.get_prompt("summarize", {"text": "t"}, meta={"toolkernel/version": "2024-01"})
        completion = await client.complete(
            types.PromptReference(type="ref/prompt", name="explain"), {"name": "language", "value": "r"}
        )
        with pytest.raises(Exception, match="missing required argument"):
            await client.get_prompt("summarize", {})
        with pytest.raises(Exception, match="has no version '1999'"):
            await client.get_prompt("summarize", {"text": "t"}, meta={"toolkernel/version": "1999"})
    assert listed["explain"].description == "Explain a piece of code."
    assert [(a.name, a.required) for a in listed["explain"].arguments] == [
        ("code", True),
        ("language", False),
    ]
    assert listed["summarize"].meta == {"toolkernel/versions": ["2024-01", "2025-06"]}
    assert explained.messages[0].content.text == "Explain this python code:\n\nx = 1"
    assert latest.messages[0].content.text == "Summarize in three bullets:\nt"
    assert older.messages[0].content.text == "Summarize: t"
    assert completion.completion.values == ["rust"]


@pytest.mark.anyio
async def test_server_registry_metadata_and_management_api(kernel):
    module = load_example("server/registry.py")
    app = module.app
    app._kernel = kernel
    assert app.get_server_info() == {
        "id": "acme-search",
        "name": "acme-search",
        "version": "1.4.0",
        "description": "Full-text search over Acme's handbook.",
        "repository": {"url": "https://github.com/acme/search-mcp", "source": "github"},
        "version_detail": {"version": "1.4.0", "release_date": "2026-11-01", "is_latest": True},
    }
    detail = app.get_server_detail()
    assert detail["packages"] == [{"registryName": "pypi", "name": "acme-search-mcp", "version": "1.4.0"}]
    assert detail["remotes"] == [
        {"transportType": "streamable-http", "url": "https://mcp.acme.example/search"}
    ]
    assert [t["id"] for t in app.get_tool_list_info()["tools"]] == ["search"]
    assert app.get_tool_info("search")["inputSchema"]["required"] == ["query"]
    assert app.get_tool_info("nope") is None
    assert await app.execute_tool("search", {"query": "leave"}) == ["Handbook section about leave"]
    with pytest.raises(toolkernel.ToolExecutionError, match="query: Field required"):
        await app.execute_tool("search", {})
    with pytest.raises(LookupError):
        await app.execute_tool("nope")
    async with connect_in_memory(app, kernel=kernel, mode="auto") as client:
        info = client.server_info
        instructions = client.instructions
    assert (info.name, info.title, info.website_url) == (
        "acme-search",
        "Acme search",
        "https://acme.example/search",
    )
    assert instructions == "Call search before answering questions about Acme policies."


# ---------------------------------------------------------------------------
# Observability: docs/observability.md
# ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_observability_spans_per_request_and_tool_call(kernel_with, spans):
    plugin = load_example("hooks/on_tool_input_start.py")
    app = load_example("echo_server.py").app
    async with connect_in_memory(app, kernel=kernel_with(plugin)) as client:
        await client.call_tool("echo", {"text": "hi"})
    finished = {s.name: s for s in spans.get_finished_spans()}
    request, call = finished["tools/call echo"], finished["execute_tool echo"]
    assert request.kind.name == "SERVER"
    assert request.attributes["mcp.method.name"] == "tools/call"
    assert request.attributes["gen_ai.tool.name"] == "echo"
    assert request.attributes["gen_ai.operation.name"] == "execute_tool"
    assert "jsonrpc.request.id" in request.attributes
    assert "mcp.protocol.version" in request.attributes
    assert call.parent.span_id == request.context.span_id
    assert call.attributes["gen_ai.tool.call.id"] == request.attributes["jsonrpc.request.id"]
    assert [e.name for e in call.events] == ["on_tool_input_start"]


@pytest.mark.anyio
async def test_observability_tool_error_marks_the_request_span(kernel, spans):
    server = MCPServer("s")

    @server.tool
    def fail() -> str:
        """Fails."""
        raise RuntimeError("no")

    async with connect_in_memory(server, kernel=kernel) as client:
        await client.call_tool("fail", {})
    request = next(s for s in spans.get_finished_spans() if s.name == "tools/call fail")
    assert request.attributes["error.type"] == "tool_error"
    assert request.status.status_code.name == "ERROR"


@pytest.mark.anyio
async def test_observability_protocol_errors_and_trace_context(kernel, spans):
    app = load_example("echo_server.py").app
    async with connect_in_memory(app, kernel=kernel) as client:
        with pytest.raises(Exception, match="Unknown tool: 'nope'"):
            await client.call_tool("nope", {})
        await client.call_tool("echo", {"text": "hi"})
    finished = {s.name: s for s in spans.get_finished_spans()}
    failed = finished["tools/call nope"]
    assert failed.status.status_code.name == "ERROR"
    assert failed.attributes["error.type"] == "-32602"
    # The SDK client sends W3C trace context in _meta; the server's span joins the client's trace.
    sent, served = finished["MCP send tools/call echo"], finished["tools/call echo"]
    assert served.parent.span_id == sent.context.span_id
    assert served.context.trace_id == sent.context.trace_id


@pytest.mark.anyio
async def test_observability_no_provider_no_spans(kernel_with, spans, monkeypatch):
    from opentelemetry import trace

    from toolkernel import _telemetry

    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)  # as in a process that never set one up
    assert _telemetry.tracing_enabled() is False
    plugin = load_example("hooks/on_tool_input_start.py")
    async with connect_in_memory(load_example("echo_server.py").app, kernel=kernel_with(plugin)) as client:
        result = await client.call_tool("echo", {"text": "hi"})
    assert result.content[0].text == "hi"
    assert plugin.calls == {"echo": 1}
    assert [s.name for s in spans.get_finished_spans() if not s.name.startswith("MCP ")] == []


def test_observability_logs_are_json_on_stderr_with_level_from_env(monkeypatch, capsys):
    import io
    import logging

    import structlog

    from toolkernel import _logging

    stderr = io.StringIO()  # not a terminal: JSON lines
    monkeypatch.setattr(sys, "stderr", stderr)
    monkeypatch.setenv("TOOLKERNEL_LOG_LEVEL", "warning")
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    try:
        _logging.configure_logging()
        log = _logging.get_logger("demo")
        log.info("hidden")
        log.warning("shown", n=1)
    finally:
        structlog.reset_defaults()
        root.handlers[:] = saved_handlers
        root.setLevel(saved_level)
    assert capsys.readouterr().out == ""
    [line] = stderr.getvalue().splitlines()
    event = json.loads(line)
    assert (event["event"], event["level"], event["n"]) == ("shown", "warning", 1)
    assert "timestamp" in event


def test_observability_log_lines_carry_trace_ids(spans):
    from opentelemetry import trace

    from toolkernel._logging import _add_trace_ids

    with trace.get_tracer("docs").start_as_current_span("work") as span:
        event = _add_trace_ids(None, "info", {"event": "x"})
    assert event["trace_id"] == format(span.get_span_context().trace_id, "032x")
    assert event["span_id"] == format(span.get_span_context().span_id, "016x")


def test_observability_bad_exporter_name(monkeypatch):
    from toolkernel import _telemetry

    monkeypatch.setattr(_telemetry, "tracing_enabled", lambda: False)
    with pytest.raises(ValueError, match="use console, otlp or none"):
        _telemetry.configure_from_env({"OTEL_TRACES_EXPORTER": "jaeger"})
    assert _telemetry.configure_from_env({"OTEL_TRACES_EXPORTER": "none"}) is False


# ---------------------------------------------------------------------------
# Writing a store: docs/vector-stores.md
# ---------------------------------------------------------------------------

STORES = EXAMPLES / "stores"


def doc_line_after(doc: Path, prompt: str) -> str:
    """The line a ``>>>`` example in ``doc`` shows as the result of ``prompt``."""
    lines = text(doc).splitlines()
    return lines[next(i for i, line in enumerate(lines) if line.startswith(prompt)) + 1]


def test_vector_stores_parsed_filter_is_as_shown():
    from toolkernel.filters import parse_filter

    parsed = parse_filter({"tags": "ai", "year": {"$gte": 2020}, "$not": {"draft": True}})
    assert repr(parsed) == doc_line_after(DOCS / "vector-stores.md", ">>> parse_filter(")


def test_vector_stores_sqlite_translation_is_as_shown():
    from toolkernel.filters import parse_filter

    sqlite_store = load_example("stores/sqlite_store.py")
    sql = sqlite_store.translate(parse_filter({"tags": "ai", "year": {"$gte": 2020}}).root)
    assert repr(sql) == doc_line_after(DOCS / "vector-stores.md", ">>> translate(")


def test_vector_stores_sqlite_example_passes_the_kit():
    done = subprocess.run(
        [
            sys.executable,
            *("-m", "pytest", str(STORES / "test_sqlite_store.py"), "-q"),
            *("-p", "no:cacheprovider", "-o", f"pythonpath={STORES}"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert done.returncode == 0, done.stdout[-4000:]
    assert re.search(r"\b35 passed\b", done.stdout), done.stdout[-1000:]


@pytest.mark.anyio
async def test_vector_stores_sqlite_example_configured_from_toml(tmp_path):
    sqlite_store = load_example("stores/sqlite_store.py")
    config = tmp_path / "toolkernel.toml"
    config.write_text(f'[plugins.sqlite]\npath = "{tmp_path / "vectors.db"}"\n')
    kernel = toolkernel.Kernel.from_config(config, load_entry_points=False, plugins=[sqlite_store])
    store = kernel.vector_store("sqlite")
    assert store.settings.path == str(tmp_path / "vectors.db")
    await store.create_index("docs", 2)
    await store.upsert("docs", ["a", "b"], [[1, 0], [0, 1]], metadata=[{"tags": ["ai", "db"]}, {"tags": "x"}])
    await store.aclose()
    reopened = kernel.vector_store("sqlite")  # the file keeps what the first store wrote
    assert [h.id for h in await reopened.query("docs", [1, 0], filter={"tags": "db"})] == ["a"]
    await reopened.aclose()
    in_memory = kernel.vector_store("sqlite", path=":memory:")  # the call's options win
    assert await in_memory.list_indexes() == []
    await in_memory.aclose()


# -- tasks, roots and sampling parameters, pagination ---------------------------------------------

TASKS = "io.modelcontextprotocol/tasks"


async def _raw_2026(app, method, params, *, tasks=True):
    """One 2026-07-28 request to ``app`` served by toolkernel-http's ASGI app (raw JSON-RPC)."""
    import httpx

    capabilities = {"elicitation": {}, **({"extensions": {TASKS: {}}} if tasks else {})}
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    }
    name = params.get("name") or params.get("taskId") or params.get("uri")
    headers = {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": method,
        **({"mcp-name": name} if name else {}),
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    http = app._http_app
    async with httpx.AsyncClient(transport=httpx.ASGITransport(http), base_url="http://127.0.0.1") as client:
        response = await client.post("/mcp", json=body, headers=headers)
    data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
    reply = json.loads([d for d in data if d][-1]) if data else response.json()
    return reply["result"]


@pytest.mark.anyio
async def test_tools_tasks_example(kernel):
    from toolkernel_http import asgi_app

    module = load_example("tools/tasks.py")
    module.app._kernel = kernel
    http = asgi_app(module.app, json_response=True)
    module.app._http_app = http
    async with http.lifespan():
        created = await _raw_2026(
            module.app, "tools/call", {"name": "build_report", "arguments": {"pages": 3}}
        )
        assert created["resultType"] == "task"
        assert created["status"] == "working"
        for _ in range(200):
            task = await _raw_2026(module.app, "tasks/get", {"taskId": created["taskId"]})
            if task["status"] == "completed":
                break
            await anyio.sleep(0.02)
        assert task["result"]["content"][0]["text"] == "report of 3 pages"
        assert task["statusMessage"] == "page 3 of 3"
        # Without the extension the same tool answers inside the request.
        plain = await _raw_2026(
            module.app, "tools/call", {"name": "build_report", "arguments": {"pages": 1}}, tasks=False
        )
        assert plain["content"][0]["text"] == "report of 1 pages"
        # archive asks inside the request (input_required), then detaches into a task.
        asked = await _raw_2026(
            module.app, "tools/call", {"name": "archive", "arguments": {"folder": "logs"}}
        )
        assert asked["resultType"] == "input_required"
        (key,) = asked["inputRequests"]
        retry = {
            "name": "archive",
            "arguments": {"folder": "logs"},
            "inputResponses": {key: {"action": "accept", "content": {"go": True}}},
            "requestState": asked["requestState"],
        }
        detached = await _raw_2026(module.app, "tools/call", retry)
        assert detached["resultType"] == "task"
        for _ in range(200):
            task = await _raw_2026(module.app, "tasks/get", {"taskId": detached["taskId"]})
            if task["status"] == "completed":
                break
            await anyio.sleep(0.02)
        assert task["result"]["content"][0]["text"] == "logs archived"


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_tools_roots_and_sampling_parameters(kernel, mode):
    import mcp_types as types

    module = load_example("tools/roots_sampling.py")
    sampled = []

    async def on_roots(ctx):
        return types.ListRootsResult(roots=[types.Root(uri="file:///src", name="src")])

    async def on_sample(ctx, params):
        sampled.append(params)
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="A source tree."), model="m"
        )

    async with connect_in_memory(
        module.app, kernel=kernel, mode=mode, list_roots_callback=on_roots, sampling_callback=on_sample
    ) as client:
        result = await client.call_tool("summarize_workspace", {})
    assert result.content[0].text == "A source tree."
    (params,) = sampled
    assert params.messages[0].content.text == "Summarize a workspace holding: file:///src"
    assert (params.max_tokens, params.stop_sequences, params.include_context) == (100, ["\n\n"], "thisServer")
    assert params.model_preferences.speed_priority == 0.8
    assert params.model_preferences.hints[0].name == "claude"


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_server_pagination(kernel, mode):
    from mcp.shared.exceptions import MCPError

    module = load_example("server/pagination.py")
    pages = []
    async with connect_in_memory(module.app, kernel=kernel, mode=mode) as client:
        cursor = None
        while True:
            page = await client.list_prompts(cursor=cursor)
            pages.append([p.name for p in page.prompts])
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        with pytest.raises(MCPError) as bad:
            await client.list_prompts(cursor="not-a-cursor")
    assert pages == [["template_0", "template_1"], ["template_2", "template_3"], ["template_4"]]
    assert bad.value.code == -32602


@pytest.mark.anyio
async def test_server_skills_example(kernel):
    import hashlib

    from toolkernel_http import asgi_app

    module = load_example("server/skills.py")
    module.app._kernel = kernel
    http = asgi_app(module.app, json_response=True)
    module.app._http_app = http
    folder = EXAMPLES / "server" / "skills" / "release-notes"
    async with http.lifespan():
        listed = await _raw_2026(module.app, "skills/list", {})
        (entry,) = listed["skills"]
        got = await _raw_2026(module.app, "skills/get", {"uri": "skill://release-notes/SKILL.md"})
        manifest = await _raw_2026(module.app, "resources/read", {"uri": "skill://release-notes/SKILL.md"})
        children = await _raw_2026(module.app, "resources/directory/read", {"uri": "skill://release-notes"})
    assert entry["uri"] == "skill://release-notes/SKILL.md"
    assert entry["frontmatter"] == {
        "name": "release-notes",
        "description": "Write release notes from a list of merged changes",
    }
    style = (folder / "STYLE.md").read_bytes()
    assert {
        "uri": "skill://release-notes/STYLE.md",
        "digest": "sha256:" + hashlib.sha256(style).hexdigest(),
        "size": len(style),
    } in entry["resources"]
    assert got["skill"] == entry
    assert manifest["contents"][0]["text"] == (folder / "SKILL.md").read_text()
    assert manifest["contents"][0]["mimeType"] == "text/markdown"
    assert sorted(c["uri"] for c in children["resources"]) == [
        "skill://release-notes/SKILL.md",
        "skill://release-notes/STYLE.md",
    ]
