"""The graph inside a real knowledge base: built by ingestion, queried through the MCP ``search`` tool.

The knowledge base is toolkernel-rag's embedded default (Qdrant Edge on disk) with the
wordllama embedder, which needs no model download and embeds in milliseconds.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

import toolkernel
from toolkernel.testing import connect_in_memory
from toolkernel_graphrag import plugin as graphrag
from toolkernel_graphrag.extension import GraphExtension
from toolkernel_local_embed import plugin as local_embed
from toolkernel_qdrant import plugin as qdrant
from toolkernel_rag import KBServerOptions, KnowledgeBase, kb_server
from toolkernel_rag import plugin as rag
from toolkernel_rag.ingestion import ingest
from toolkernel_rag.layout import KBError

PAGES = {
    "kiss.md": "# Kiss and Tell\n\nKiss and Tell is a 1945 comedy film starring Shirley Temple "
    "as Corliss Archer.\n",
    "temple.md": "# Shirley Temple\n\nShirley Temple Black was an actress who later served as "
    "United States Ambassador to Ghana and to Czechoslovakia.\n",
    "ghana.md": "# Ghana\n\nGhana is a country in West Africa. See [the film](kiss.md).\n",
    "bananas.md": "# Bananas\n\nBananas are grown in Ecuador and in Costa Rica.\n",
    "ecuador.md": "# Ecuador\n\nEcuador exports bananas, shrimp and oil.\n",
}
QUESTION = "What government position was held by the woman who portrayed Corliss Archer in Kiss and Tell?"


def kernel() -> toolkernel.Kernel:
    return toolkernel.Kernel(load_entry_points=False, plugins=[rag, qdrant, local_embed, graphrag])


def write_pages(root: Path) -> Path:
    docs = root / "docs"
    docs.mkdir()
    for name, text in PAGES.items():
        (docs / name).write_text(text)
    return docs


async def ingested(tmp_path: Path) -> str:
    """A knowledge base of the pages, with its graph, at ``tmp_path/kb`` (closed again)."""
    docs = write_pages(tmp_path)
    where = str(tmp_path / "kb")
    async with await KnowledgeBase.open(
        where, kernel=kernel(), create=True, embedder="local/wordllama-256"
    ) as kb:
        await ingest(kb, [str(docs)])
    return where


async def search(where: str, arguments: dict[str, object], **options: object) -> list[str]:
    """Document ids ``search`` returns, less their source key ``docs/``, through an in-memory MCP client."""
    async with await KnowledgeBase.open(where, kernel=kernel()) as kb:
        server = kb_server(kb, KBServerOptions(**options))  # type: ignore[arg-type]
        async with connect_in_memory(server) as client:
            result = await client.call_tool("search", {"top_k": 5, **arguments})
    assert not result.is_error, result.content
    return [hit["document_id"].removeprefix("docs/") for hit in result.structured_content["results"]]


@pytest.mark.anyio
async def test_ingestion_builds_the_graph_and_search_walks_it(tmp_path):
    docs = write_pages(tmp_path)
    where = str(tmp_path / "kb")
    async with await KnowledgeBase.open(
        where, kernel=kernel(), create=True, embedder="local/wordllama-256"
    ) as kb:
        await ingest(kb, [str(docs)])
        assert kb.modes == ["hybrid", "dense", "sparse", "graph", "mastra"]
    assert list((tmp_path / "kb" / "extensions" / "graph" / "graph.segments").iterdir())
    found = await search(where, {"query": QUESTION, "mode": "graph"})
    assert found[:2] == ["kiss.md", "temple.md"]
    # Mastra's walk is seeded by the query: the same call ranks the same way.
    first = await search(where, {"query": QUESTION, "mode": "mastra"})
    assert first == await search(where, {"query": QUESTION, "mode": "mastra"})
    assert set(first) <= set(PAGES)


@pytest.mark.anyio
async def test_graph_mode_never_crosses_the_mandatory_filter(tmp_path):
    where = await ingested(tmp_path)
    hidden = {"path": {"$ne": "temple.md"}}
    for mode in ("graph", "mastra"):
        found = await search(where, {"query": QUESTION, "mode": mode}, mandatory_filter=hidden)
        assert found
        assert "temple.md" not in found
        narrowed = await search(
            where, {"query": QUESTION, "mode": mode, "filter": {"path": "kiss.md"}}, mandatory_filter=hidden
        )
        assert narrowed == ["kiss.md"]


@pytest.mark.anyio
async def test_edits_and_deletions_rank_like_a_fresh_ingest(tmp_path):
    docs = write_pages(tmp_path)
    updated = str(tmp_path / "updated")
    async with await KnowledgeBase.open(
        updated, kernel=kernel(), create=True, embedder="local/wordllama-256"
    ) as kb:
        await ingest(kb, [str(docs)])
        (docs / "bananas.md").unlink()
        (docs / "ghana.md").write_text(
            "# Ghana\n\nGhana's capital is Accra; Shirley Temple was ambassador.\n"
        )
        await ingest(kb, [str(docs)])
    fresh = str(tmp_path / "fresh")
    async with await KnowledgeBase.open(
        fresh, kernel=kernel(), create=True, embedder="local/wordllama-256"
    ) as kb:
        await ingest(kb, [str(docs)])
    for query in (QUESTION, "Which country exports bananas?", "Who was ambassador to Ghana?"):
        arguments = {"query": query, "mode": "graph"}
        assert await search(updated, arguments) == await search(fresh, arguments)
    assert "bananas.md" not in await search(updated, {"query": "bananas", "mode": "graph"})


@pytest.mark.anyio
async def test_graph_modes_on_a_knowledge_base_ingested_without_the_graph_say_so(tmp_path):
    docs = write_pages(tmp_path)
    where = str(tmp_path / "kb")
    async with await KnowledgeBase.open(
        where, kernel=kernel(), create=True, embedder="local/wordllama-256", extensions=False
    ) as kb:
        await ingest(kb, [str(docs)])
    async with (
        await KnowledgeBase.open(where, kernel=kernel()) as kb,
        connect_in_memory(kb_server(kb)) as client,
    ):
        results = [
            await client.call_tool("search", {"query": QUESTION, "mode": "graph"}),
            await client.call_tool("search", {"query": QUESTION, "mode": "mastra"}),
            await client.call_tool("graph_rag", {"queryText": QUESTION}),
        ]
    for result in results:
        assert result.is_error
        assert "re-ingest them with toolkernel-graphrag installed" in result.content[0].text


@pytest.mark.anyio
async def test_graph_settings_come_from_the_toolkernel_toml_the_knowledge_base_was_opened_with(tmp_path):
    config = tmp_path / "toolkernel.toml"
    config.write_text(
        "[plugins.graphrag.walk]\nseeds = 7\nfusion = 'pagerank'\n\n"
        "[plugins.graphrag.mastra]\nrandomWalkSteps = 30\n"
    )
    configured = toolkernel.Kernel.from_config(
        config, load_entry_points=False, plugins=[rag, qdrant, local_embed, graphrag]
    )
    async with await KnowledgeBase.open(
        str(tmp_path / "kb"), kernel=configured, create=True, embedder="local/wordllama-256"
    ) as kb:
        extension = kb.extensions["graph"]
        assert isinstance(extension, GraphExtension)
        assert (extension.walk.seeds, extension.walk.fusion) == (7, "pagerank")
        assert extension.mastra.random_walk_steps == 30


@pytest.mark.anyio
async def test_graph_rag_tool_takes_mastras_arguments_within_the_mandatory_filter(tmp_path):
    where = await ingested(tmp_path)
    hidden = {"path": {"$ne": "temple.md"}}
    async with (
        await KnowledgeBase.open(where, kernel=kernel()) as kb,
        connect_in_memory(kb_server(kb, KBServerOptions(mandatory_filter=hidden))) as client,
    ):
        assert "graph_rag" in [t.name for t in (await client.list_tools()).tools]
        call = {"queryText": QUESTION, "topK": 4, "randomWalkSteps": 50, "restartProb": 0.3}
        result = await client.call_tool("graph_rag", call)
        assert not result.is_error, result.content
        answer = result.structured_content
        found = [s["document_id"] for s in answer["sources"]]
        assert len(found) == 4
        assert "docs/temple.md" not in found
        assert [c["text"] for c in answer["relevantContext"]] == [s["text"] for s in answer["sources"]]
        assert (await client.call_tool("graph_rag", call)).structured_content == answer
        # Mastra passes the filter as a JSON string; it narrows within the mandatory filter.
        narrowed = await client.call_tool("graph_rag", {**call, "filter": '{"path": "kiss.md"}'})
        assert [s["document_id"] for s in narrowed.structured_content["sources"]] == ["docs/kiss.md"]
        # With no pair above the threshold there are no edges: every walk stays at its seed,
        # so the order is the dense order and each score the seed's cosine similarity.
        alone = await client.call_tool("graph_rag", {**call, "threshold": 1.0})
        dense = await client.call_tool("search", {"query": QUESTION, "top_k": 4, "mode": "dense"})
        assert [s["id"] for s in alone.structured_content["sources"]] == [
            h["id"] for h in dense.structured_content["results"]
        ]
        bad = await client.call_tool("graph_rag", {**call, "filter": "{not json"})
        assert bad.is_error
        assert "filter: not valid JSON" in bad.content[0].text


@pytest.mark.anyio
async def test_search_options_reach_an_extensions_mode_and_no_built_in_one(tmp_path):
    docs = write_pages(tmp_path)
    async with await KnowledgeBase.open(
        str(tmp_path / "kb"), kernel=kernel(), create=True, embedder="local/wordllama-256"
    ) as kb:
        await ingest(kb, [str(docs)])
        with pytest.raises(KBError, match="'hybrid' takes no options"):
            await kb.search(QUESTION, mode="hybrid", options={"threshold": 0.5})
        with pytest.raises(ValidationError, match="randomWalkSteps"):
            await kb.search(QUESTION, mode="mastra", options={"randomWalkSteps": 0})
        walked = await kb.search(QUESTION, mode="mastra", top_k=3, options={"threshold": 1.0})
        dense = await kb.search(QUESTION, mode="dense", top_k=3)
        assert [h.chunk.id for h in walked] == [h.chunk.id for h in dense]


@pytest.mark.anyio
async def test_an_ingest_appends_only_what_it_changed_and_rewrites_nothing(tmp_path):
    from toolkernel_graphrag import segments
    from toolkernel_graphrag.settings import GraphSettings

    where = await ingested(tmp_path)
    folder = tmp_path / "kb" / "extensions" / "graph" / "graph.segments"
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    (tmp_path / "docs" / "accra.md").write_text("# Accra\n\nAccra is the capital of Ghana.\n")
    async with await KnowledgeBase.open(where, kernel=kernel(), writable=True) as kb:
        await ingest(kb, [str(tmp_path / "docs")])
    after = {p.name: p.read_bytes() for p in folder.iterdir()}
    # The graph was not saved again whole: the earlier segment is untouched, the new one holds
    # the new document alone.
    assert {name: after[name] for name in before} == before
    [new] = [data for name, data in after.items() if name not in before]
    lines = segments.decode(new, GraphSettings(), "new").lines
    assert [line.document_id for line in lines] == ["docs/accra.md"]
    assert "accra.md" in await search(where, {"query": "What is the capital of Ghana?", "mode": "graph"})


@pytest.mark.anyio
async def test_a_running_reader_follows_a_writer_processes_new_segments_within_seconds(tmp_path):
    import subprocess
    import sys
    import time

    import anyio

    where = await ingested(tmp_path)
    (tmp_path / "docs" / "accra.md").write_text("# Accra\n\nAccra is the capital of Ghana.\n")
    query = {"query": "What is the capital of Ghana?", "mode": "graph", "top_k": 5}
    async with await KnowledgeBase.open(where, kernel=kernel()) as reader:
        server = kb_server(reader, KBServerOptions())
        async with connect_in_memory(server) as client:

            async def found() -> list[str]:
                result = await client.call_tool("search", query)
                assert not result.is_error, result.content
                return [h["document_id"] for h in result.structured_content["results"]]

            assert "docs/accra.md" not in await found()
            extension = reader.extensions["graph"]
            assert isinstance(extension, GraphExtension)
            graph, read = extension.graph, extension._sequence
            cli = str(Path(sys.executable).with_name("toolkernel"))
            done = await anyio.to_thread.run_sync(
                lambda: subprocess.run(
                    [cli, "kb", "ingest", str(tmp_path / "docs"), "--kb", where, "--quiet"],
                    capture_output=True,
                    text=True,
                    timeout=300,
                )
            )
            assert done.returncode == 0, done.stderr
            finished = time.monotonic()
            while "docs/accra.md" not in await found():
                assert time.monotonic() - finished < 5, "the reader did not see the new segment within 5 s"
                await anyio.sleep(0.1)
            # The server kept its extension and its graph, and applied the new segment to it: it
            # did not open the extension again and read every segment back.
            assert reader.extensions["graph"] is extension
            assert extension.graph is graph
            assert extension._sequence > read


@pytest.mark.anyio
async def test_a_running_reader_opens_the_graph_again_after_kb_repair_reset_it(tmp_path):
    import subprocess
    import sys
    import time

    import anyio

    where = await ingested(tmp_path)
    query = {"query": "What is the capital of Ghana?", "mode": "graph", "top_k": 5}
    async with await KnowledgeBase.open(where, kernel=kernel()) as reader:
        server = kb_server(reader, KBServerOptions())
        async with connect_in_memory(server) as client:
            result = await client.call_tool("search", query)
            assert not result.is_error, result.content
            before = result.structured_content["results"]
            extension = reader.extensions["graph"]
            cli = str(Path(sys.executable).with_name("toolkernel"))
            done = await anyio.to_thread.run_sync(
                lambda: subprocess.run(
                    [cli, "kb", "repair", "--kb", where], capture_output=True, text=True, timeout=300
                )
            )
            assert done.returncode == 0, done.stderr
            # The graph's segments were written again from 1: a reader that kept its extension
            # would look for segments after the last one it read and never see the new graph.
            finished = time.monotonic()
            while reader.extensions["graph"] is extension:
                assert time.monotonic() - finished < 5, "the reader did not open the rebuilt graph within 5 s"
                result = await client.call_tool("search", query)
                assert not result.is_error, result.content
                await anyio.sleep(0.1)
            result = await client.call_tool("search", query)
            assert not result.is_error, result.content
            assert result.structured_content["results"] == before
