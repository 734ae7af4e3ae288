"""The MCP face of a knowledge base: tools, schemas, results, filters a model cannot escape, errors."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from toolkernel import AuthInfo, MCPServer
from toolkernel.context import ToolContext
from toolkernel.testing import connect_in_memory
from toolkernel_rag import KBServerOptions, KnowledgeBase, effective_filter, ingest, kb_server, mount_kb

from .conftest import EMBEDDER, make_kernel, write_records

pytestmark = pytest.mark.anyio

TENANTS = ["acme", "globex"]
TOPICS = ["solar panels", "wind turbines", "hydro dams", "battery storage"]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Sixteen records, ingested once: four topics, each for both tenants, public and private."""
    import anyio

    records = [
        {
            "id": f"{tenant}-{n}-{public}",
            "title": f"{topic} for {tenant}",
            "text": f"Notes on {topic}: how {topic} produce and keep energy. Owner {tenant}.",
            "tenant": tenant,
            "public": public,
        }
        for tenant in TENANTS
        for n, topic in enumerate(TOPICS)
        for public in (True, False)
    ]
    root = tmp_path_factory.mktemp("built")
    corpus = write_records(root / "corpus.jsonl", records)

    async def build() -> None:
        async with await KnowledgeBase.open(
            str(root / "kb"), kernel=make_kernel(), create=True, embedder=EMBEDDER
        ) as kb:
            await ingest(kb, [str(corpus)])

    anyio.run(build)
    return root / "kb"


@pytest.fixture
async def kb(built: Path, tmp_path: Path) -> AsyncIterator[KnowledgeBase]:
    """A private copy of the built knowledge base, open."""
    import shutil

    shutil.copytree(built, tmp_path / "kb")
    opened = await KnowledgeBase.open(str(tmp_path / "kb"), kernel=make_kernel())
    yield opened
    await opened.aclose()


async def _search(
    kb: KnowledgeBase, args: dict[str, Any], options: KBServerOptions | None = None, **call: Any
) -> Any:
    async with connect_in_memory(kb_server(kb, options)) as client:
        return await client.call_tool("search", args, **call)


async def test_tools_resources_and_prompt_are_listed(kb: KnowledgeBase) -> None:
    async with connect_in_memory(kb_server(kb)) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        resources = (await client.list_resources()).resources
        templates = (await client.list_resource_templates()).resource_templates
        prompts = (await client.list_prompts()).prompts
    assert set(tools) == {"search", "fetch_document", "chunk_document"}
    assert tools["search"].annotations.read_only_hint is True
    assert len(resources) == 16
    assert str(resources[0].uri).startswith(f"kb://{kb.name}/documents/")
    assert [t.uri_template for t in templates] == [f"kb://{kb.name}/documents/{{id}}"]
    assert [p.name for p in prompts] == ["answer_with_sources"]


async def test_search_schema_lists_exactly_the_store_operators(kb: KnowledgeBase) -> None:
    async with connect_in_memory(kb_server(kb)) as client:
        [search] = [t for t in (await client.list_tools()).tools if t.name == "search"]
    schema = search.input_schema
    condition = set(schema["$defs"]["condition"]["properties"])
    logical = set(schema["$defs"]["filter"]["properties"])
    from toolkernel_qdrant._translate import SUPPORTED_OPERATORS

    # A reader never opens the embedded store, yet offers exactly its operators.
    assert condition | logical == set(kb.supported_filter_operators) == set(SUPPORTED_OPERATORS)
    assert "$regex" not in condition  # Qdrant evaluates every operator but $regex
    assert schema["properties"]["mode"]["enum"] == ["hybrid", "dense", "sparse"]


async def test_search_returns_structured_results_and_text(kb: KnowledgeBase) -> None:
    result = await _search(kb, {"query": "wind turbines energy", "top_k": 3})
    assert not result.is_error
    hits = result.structured_content["results"]
    assert len(hits) == 3
    assert set(hits[0]) == {"id", "document_id", "score", "text", "metadata", "source"}
    assert "wind turbines" in hits[0]["text"]
    assert hits[0]["source"]["uri"] == f"kb://{kb.name}/documents/{quote(hits[0]['document_id'], safe='')}"
    assert hits[0]["metadata"]["tenant"] in TENANTS
    assert result.content[0].text.startswith("[1] wind turbines for ")
    bare = await _search(kb, {"query": "wind", "top_k": 1, "include_sources": False, "include_vectors": True})
    [hit] = bare.structured_content["results"]
    assert "source" not in hit or hit["source"] is None
    assert len(hit["vector"]) == 256


async def test_model_filter_cannot_widen_the_mandatory_filter(kb: KnowledgeBase) -> None:
    options = KBServerOptions(mandatory_filter={"public": True})
    escapes = [
        None,
        {"$or": [{"public": False}, {"public": True}]},
        {"$not": {"public": True}},
        {"public": False},
        {"$nor": [{"public": True}]},
        {"tenant": {"$in": TENANTS}},
    ]
    for escape in escapes:
        args: dict[str, Any] = {"query": "energy", "top_k": 16, "mode": "sparse"}
        if escape is not None:
            args["filter"] = escape
        result = await _search(kb, args, options)
        assert not result.is_error, result.content[0].text
        assert all(h["metadata"]["public"] is True for h in result.structured_content["results"]), escape
    unfiltered = await _search(kb, {"query": "energy", "top_k": 16, "mode": "sparse"}, options)
    assert len(unfiltered.structured_content["results"]) == 8


def _tenant_from_request(ctx: ToolContext) -> dict[str, Any] | None:
    if ctx.auth is not None:
        return {"tenant": ctx.auth.subject}
    tenant = ctx.values.get("tenant")
    return {"tenant": tenant} if isinstance(tenant, str) else None


async def test_tenant_filter_comes_from_the_request_and_cannot_be_escaped(kb: KnowledgeBase) -> None:
    options = KBServerOptions(tenant=_tenant_from_request)
    meta = {"toolkernel/context": {"tenant": "globex"}}
    for model_filter in (None, {"tenant": "acme"}, {"$or": [{"tenant": "acme"}, {"tenant": "globex"}]}):
        args: dict[str, Any] = {"query": "solar", "top_k": 16, "mode": "hybrid"}
        if model_filter:
            args["filter"] = model_filter
        result = await _search(kb, args, options, meta=meta)
        tenants = {h["metadata"]["tenant"] for h in result.structured_content["results"]}
        assert tenants <= {"globex"}, model_filter
    refused = await _search(kb, {"query": "solar"}, options)
    assert refused.is_error
    assert "no tenant could be resolved" in refused.content[0].text


async def test_tenant_from_auth_info(kb: KnowledgeBase) -> None:
    options = KBServerOptions(tenant=_tenant_from_request)
    server = kb_server(kb, options)
    tool = server.all_tools()["search"]
    ctx = ToolContext(
        server=server, tool_name="search", call_id="1", auth=AuthInfo(subject="acme", client_id="c")
    )
    result = await tool.invoke(tool.validate_input({"query": "battery", "top_k": 16}), ctx)
    assert {h.metadata["tenant"] for h in result.structured.results} == {"acme"}


async def test_meta_overrides_only_from_the_allow_list(kb: KnowledgeBase) -> None:
    meta = {"toolkernel/context": {"top_k": 2, "mode": "sparse"}}
    closed = await _search(kb, {"query": "hydro dams", "top_k": 5}, None, meta=meta)
    assert len(closed.structured_content["results"]) == 5  # not on the allow-list: ignored
    opened = await _search(
        kb, {"query": "hydro dams", "top_k": 5}, KBServerOptions(meta_overrides={"top_k"}), meta=meta
    )
    assert len(opened.structured_content["results"]) == 2
    with pytest.raises(Exception, match="cannot be overridden"):
        KBServerOptions(meta_overrides={"filter"})


async def test_an_operator_the_store_lacks_is_an_error_naming_it(kb: KnowledgeBase) -> None:
    result = await _search(kb, {"query": "solar", "filter": {"title": {"$regex": "^solar"}}})
    assert result.is_error
    assert "$regex" in result.content[0].text
    # Through the Python API the store's own check names it too, in every mode.
    from toolkernel.vectors import UnsupportedFilterError

    for mode in ("dense", "sparse", "hybrid"):
        with pytest.raises(
            UnsupportedFilterError, match=r"'qdrant' does not support the filter operator \$regex"
        ):
            await kb.search("solar", mode=mode, filter={"title": {"$regex": "^solar"}})


async def test_a_store_failure_is_an_error_naming_the_cause(kb: KnowledgeBase) -> None:
    directory = kb.directory
    await kb.aclose()
    # The writer's process searches its store: it loses the index under a running server.
    async with await KnowledgeBase.open(str(directory), kernel=make_kernel(), writable=True) as writer:
        await writer.store.delete_index(writer.index)
        result = await _search(writer, {"query": "solar", "mode": "dense"})
    assert result.is_error
    assert f"vector index '{writer.index}' does not exist" in result.content[0].text


async def test_fetch_document_resources_and_prompt(kb: KnowledgeBase) -> None:
    async with connect_in_memory(kb_server(kb)) as client:
        fetched = await client.call_tool("fetch_document", {"document_id": "corpus.jsonl/acme-1-True"})
        missing = await client.call_tool("fetch_document", {"document_id": "nope"})
        read = await client.read_resource(f"kb://{kb.name}/documents/corpus.jsonl%2Facme-2-False")
        prompt = await client.get_prompt("answer_with_sources", {"question": "battery storage", "top_k": "2"})
        chunked = await client.call_tool(
            "chunk_document", {"text": "One. Two. Three.", "chunker": "sentence", "size": 5}
        )
    assert fetched.structured_content["text"].startswith("wind turbines for acme")
    assert fetched.structured_content["metadata"]["tenant"] == "acme"
    assert missing.is_error
    assert "no document 'nope'" in missing.content[0].text
    assert "hydro dams" in read.contents[0].text
    text = prompt.messages[0].content.text
    assert "Question: battery storage" in text
    assert text.count(f"(kb://{kb.name}/documents/") == 2
    assert [c["text"] for c in chunked.structured_content["chunks"]] == ["One.", "Two.", "Three."]


async def test_mount_in_any_server(kb: KnowledgeBase) -> None:
    server = MCPServer("app", kernel=kb.kernel)

    @server.tool
    def ping() -> str:
        """Pong."""
        return "pong"

    mount_kb(server, kb)
    async with connect_in_memory(server) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        result = await client.call_tool("search", {"query": "solar", "top_k": 1})
    assert names == {"ping", "search", "fetch_document", "chunk_document"}
    assert not result.is_error


def test_effective_filter_joins_with_and() -> None:
    assert effective_filter(None, {}, None) is None
    assert effective_filter({"a": 1}) == {"a": 1}
    assert effective_filter({"a": 1}, None, {"$or": [{"b": 2}]}) == {"$and": [{"a": 1}, {"$or": [{"b": 2}]}]}


async def test_served_over_stdio_by_the_command(kb: KnowledgeBase) -> None:
    from mcp.client import Client

    directory = str(kb.directory)
    await kb.aclose()
    toolkernel = str(Path(sys.executable).with_name("toolkernel"))
    transport = make_kernel().client_transport([toolkernel, "kb", "serve", "--kb", directory])
    async with Client(transport, mode="legacy") as client:
        result = await client.call_tool("search", {"query": "hydro dams", "top_k": 2, "mode": "sparse"})
    assert [h["document_id"].split("-")[1] for h in result.structured_content["results"]] == ["2", "2"]


class _PreferAcme:
    """A reranker plugin for the test: passages naming acme first (so reordering is visible)."""

    @staticmethod
    def _factory() -> object:
        class Reranker:
            async def score(self, query: str, passages: list[str]) -> list[float]:
                return [1.0 if "acme" in p else 0.0 for p in passages]

        return Reranker()

    from toolkernel import hookimpl

    @hookimpl
    def register_rerankers(self, registry: Any) -> None:
        registry.add("prefer-acme", self._factory)


async def test_rerank_over_fetches_reorders_and_is_traced(built: Path, tmp_path: Path, spans: Any) -> None:
    import shutil

    shutil.copytree(built, tmp_path / "kb")
    async with await KnowledgeBase.open(str(tmp_path / "kb"), kernel=make_kernel(_PreferAcme())) as kb:
        plain = await kb.search("globex energy", top_k=4, mode="hybrid")
        assert [h.chunk.metadata["tenant"] for h in plain].count("globex") >= 3
        spans.clear()
        options = KBServerOptions(reranker="prefer-acme")
        result = await _search(kb, {"query": "globex energy", "top_k": 4, "rerank": True}, options)
    hits = result.structured_content["results"]
    assert [h["metadata"]["tenant"] for h in hits] == ["acme"] * 4  # found among the 50 over-fetched
    assert all(h["score"] == 1.0 for h in hits)
    recorded = {s.name: dict(s.attributes or {}) for s in spans.get_finished_spans()}
    assert recorded["kb.retrieve"]["kb.mode"] == "hybrid"
    assert recorded["kb.retrieve"]["kb.candidates"] == 16
    assert recorded["kb.fuse"]["kb.sparse"] > 0
    assert recorded["kb.fuse"]["kb.dense"] == 16
    assert recorded["kb.embed"]["kb.texts"] == 1
    assert recorded["kb.rerank"]["kb.reranker"] == "prefer-acme"
    assert recorded["kb.rerank"]["kb.candidates"] == 16
    assert recorded["kb.rerank"]["kb.duration_ms"] >= 0


async def test_tenant_scope_picks_the_tenants_own_knowledge_base(kb: KnowledgeBase, tmp_path: Path) -> None:
    from toolkernel_rag import TenantScope

    corpus = write_records(tmp_path / "own.jsonl", [{"id": "own-1", "text": "Tidal energy from the sea."}])
    own = await KnowledgeBase.open(
        str(tmp_path / "own"), kernel=make_kernel(), create=True, embedder=EMBEDDER
    )
    await ingest(own, [str(corpus)])

    def scope(ctx: ToolContext) -> TenantScope | None:
        tenant = ctx.values.get("tenant")
        if tenant == "initech":
            return TenantScope(knowledge_base=own)
        return TenantScope(filter={"tenant": tenant}) if tenant in TENANTS else None

    options = KBServerOptions(tenant=scope)
    try:
        mine = await _search(
            kb, {"query": "energy", "top_k": 5}, options, meta={"toolkernel/context": {"tenant": "initech"}}
        )
        theirs = await _search(
            kb, {"query": "energy", "top_k": 16}, options, meta={"toolkernel/context": {"tenant": "acme"}}
        )
    finally:
        await own.aclose()
    assert [h["document_id"] for h in mine.structured_content["results"]] == ["own.jsonl/own-1"]
    assert mine.structured_content["results"][0]["source"]["uri"] == "kb://own/documents/own.jsonl%2Fown-1"
    assert {h["metadata"]["tenant"] for h in theirs.structured_content["results"]} == {"acme"}


@pytest.fixture
def no_reranker_models(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Model caches that hold nothing, and no rerank endpoint configured: what a fresh machine has."""
    for var in ("RERANK_BASE_URL", "RERANK_API_KEY", "HF_HOME", "HF_HUB_CACHE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("TOOLKERNEL_MODELS", str(tmp_path / "models"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path / "models"


async def test_search_schema_offers_only_rerankers_and_operators_that_work(
    built: Path, tmp_path: Path, no_reranker_models: Path
) -> None:
    import shutil

    from toolkernel_rag.rerankers import plugin as rerankers

    from .test_rag_rerank_cross_encoder import write_model

    shutil.copytree(built, tmp_path / "kb")
    async with await KnowledgeBase.open(str(tmp_path / "kb"), kernel=make_kernel(rerankers)) as kb:
        async with connect_in_memory(kb_server(kb)) as client:
            [search] = [t for t in (await client.list_tools()).tools if t.name == "search"]
            schema = search.input_schema
            offered = next(o for o in schema["properties"]["rerank"]["anyOf"] if "enum" in o)["enum"]
            # No cross-encoder without its model files, no http without an endpoint.
            assert offered == ["weighted"]
            assert "$regex" not in json.dumps(schema)  # Qdrant has no $regex: not even in an example
            refused = await client.call_tool("search", {"query": "solar", "rerank": "cross-encoder"})
        assert refused.is_error
        assert "rerank" in refused.content[0].text
        assert "ValidationError" not in refused.content[0].text

        # As the server's default it is a clear error naming what is missing, not a pydantic dump.
        for name, missing in (
            ("http", "model: Field required"),
            ("cross-encoder", "is not in a model cache"),
        ):
            result = await _search(kb, {"query": "solar", "rerank": True}, KBServerOptions(reranker=name))
            assert result.is_error
            text = result.content[0].text
            assert f"reranker {name!r} cannot be used here" in text, text
            assert missing in text, text
            assert "validation error" not in text.lower(), text
            assert "\n" not in text, text

        # Once its model is in the cache, the cross-encoder is offered (and works).
        write_model(no_reranker_models / "cross-encoder" / "ms-marco-MiniLM-L-6-v2")
        async with connect_in_memory(kb_server(kb)) as client:
            [search] = [t for t in (await client.list_tools()).tools if t.name == "search"]
            offered = next(o for o in search.input_schema["properties"]["rerank"]["anyOf"] if "enum" in o)
            assert offered["enum"] == ["weighted", "cross-encoder"]
            reranked = await client.call_tool("search", {"query": "solar panels", "rerank": "cross-encoder"})
        assert not reranked.is_error, reranked.content
