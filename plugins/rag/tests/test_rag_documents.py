"""Managing documents: ids qualified by their source, listing, showing, removing, and older catalogs."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from toolkernel.cli import main
from toolkernel.knowledge import IngestBatch
from toolkernel_rag import KnowledgeBase, ingest
from toolkernel_rag.layout import KBError

from .conftest import EMBEDDER, Recording, RecordingPlugin, make_kernel, write_records

pytestmark = pytest.mark.anyio

TOOLKERNEL = str(Path(sys.executable).with_name("toolkernel"))


def _page(title: str, body: str) -> str:
    return f"<html><head><title>{title}</title></head><body><h1>{title}</h1><p>{body}</p></body></html>"


def _two_sources(root: Path) -> tuple[Path, Path]:
    """``a/errors.html`` and ``b/tutorial/errors.html``: equal file names, different documents."""
    (root / "a").mkdir(parents=True)
    (root / "b" / "tutorial").mkdir(parents=True)
    (root / "a" / "errors.html").write_text(_page("Errors", "The reference lists every built-in exception."))
    (root / "b" / "tutorial" / "errors.html").write_text(
        _page("Errors and Exceptions", "The tutorial shows how to handle a ZeroDivisionError.")
    )
    return root / "a", root / "b"


async def _open(where: Path) -> KnowledgeBase:
    return await KnowledgeBase.open(str(where), kernel=make_kernel(), create=True, embedder=EMBEDDER)


async def test_equal_paths_under_two_sources_are_two_documents(tmp_path: Path) -> None:
    a, b = _two_sources(tmp_path / "docs")
    async with await _open(tmp_path / "kb") as kb:
        await ingest(kb, [str(a)])
        report = await ingest(kb, [str(b)])
        assert (report.added, report.deleted) == (1, 0)
        assert [d.id for d in kb.documents()] == ["a/errors.html", "b/tutorial/errors.html"]
        [hit] = await kb.search("ZeroDivisionError", top_k=1, mode="sparse")
        assert hit.chunk.document_id == "b/tutorial/errors.html"
        [hit] = await kb.search("built-in exception reference", top_k=1, mode="sparse")
        assert hit.chunk.document_id == "a/errors.html"
        assert await kb.store.count(kb.index) == kb.catalog.counts()[2]


async def test_a_source_keeps_its_key_however_its_path_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, _ = _two_sources(tmp_path / "docs")
    elsewhere = tmp_path / "x" / "a"  # another source of the same name gets the next key
    elsewhere.mkdir(parents=True)
    (elsewhere / "errors.html").write_text(_page("Other", "Another page entirely."))
    single = tmp_path / "notes.md"
    single.write_text("# Notes\n\nA single file is one document named after its source.\n")
    async with await _open(tmp_path / "kb") as kb:
        monkeypatch.chdir(tmp_path / "docs")
        assert (await ingest(kb, ["a"])).added == 1
        monkeypatch.chdir(tmp_path)
        assert (await ingest(kb, ["docs/a/"])).unchanged == 1
        assert (await ingest(kb, [str(a)])).unchanged == 1
        monkeypatch.chdir(tmp_path / "x")
        assert (await ingest(kb, ["./a", "../notes.md"])).added == 2
        assert [(s.key, s.location, s.documents) for s in kb.sources()] == [
            ("a", str(a), 1),
            ("a-2", str(elsewhere), 1),
            ("notes.md", str(single), 1),
        ]
        ids = [d.id for d in kb.documents()]
        assert ids == ["a-2/errors.html", "a/errors.html", "notes.md"]


async def test_list_filter_show_and_remove_through_the_python_api(corpus: Path, tmp_path: Path) -> None:
    records = write_records(
        tmp_path / "more.jsonl",
        [{"id": f"r{i}", "text": f"Record {i} is about owls and {i} mice.", "n": i} for i in range(5)],
    )
    async with await _open(tmp_path / "kb") as kb:
        await ingest(kb, [str(corpus), str(records)])
        first = kb.documents(3)
        second = kb.documents(3, first[-1].id)
        rest = kb.documents(after=second[-1].id)
        assert [d.id for d in first + second + rest] == [d.id for d in kb.documents()]
        assert len(first + second + rest) == 10
        assert [d.id for d in kb.documents(source="more.jsonl", where={"n": {"$gte": 3}})] == [
            "more.jsonl/r3",
            "more.jsonl/r4",
        ]
        assert [d.id for d in kb.documents(1, source=str(records), where={"n": {"$gte": 3}})] == [
            "more.jsonl/r3"
        ]
        assert [d.id for d in kb.documents(where={"tags": "setup"})] == ["corpus/guide/install.md"]
        with pytest.raises(KBError, match="no source 'nowhere'"):
            kb.documents(source="nowhere")

        with pytest.raises(KBError, match=r"has no document 'corpus/nope\.md'"):
            await kb.remove(["corpus/guide/install.md", "corpus/nope.md"])
        assert kb.document("corpus/guide/install.md") is not None  # nothing removed
        assert await kb.remove(["corpus/guide/install.md"]) == 1
        assert kb.document("corpus/guide/install.md") is None
        assert await kb.store.count(kb.index, {"document_id": "corpus/guide/install.md"}) == 0
        assert not [
            h for h in await kb.search("pip install", top_k=10, mode="sparse") if "install" in h.chunk.id
        ]
        assert await kb.remove_source("more.jsonl") == 5
        assert [s.key for s in kb.sources()] == ["corpus"]
        assert await kb.store.count(kb.index) == kb.catalog.counts()[2]
        # A removed document comes back on the next ingest of its source.
        assert (await ingest(kb, [str(corpus)])).added == 1


def _sent(batches: list[IngestBatch]) -> tuple[list[str], list[str]]:
    """``(upserted document ids, deleted document ids)`` over ``batches``, sorted."""
    upserted = sorted(d.document_id for b in batches for d in b.upserted)
    return upserted, sorted(d for b in batches for d in b.deleted)


async def test_a_removal_sends_extensions_its_deletions_and_not_the_documents_they_missed(
    home: str, tmp_path: Path
) -> None:
    """Removing one document costs what it removes: documents ingested with the extensions left
    out wait for the next ingest's catch-up instead of being sent by the removal (which made a
    one-document ``kb remove`` feed an extension the whole knowledge base)."""
    name = f"rm-{tmp_path.name[-12:].lower().replace('_', '-')}"
    kernel = make_kernel(RecordingPlugin())
    few = write_records(tmp_path / "few.jsonl", [{"id": f"f{i}", "text": f"Few {i} owls."} for i in range(3)])
    many = write_records(
        tmp_path / "many.jsonl", [{"id": f"m{i}", "text": f"Many {i} mice."} for i in range(20)]
    )
    Recording.batches.clear()
    async with await KnowledgeBase.open(name, kernel=kernel, home=home, create=True, embedder=EMBEDDER) as kb:
        await ingest(kb, [str(few)])
    assert _sent(Recording.batches) == ([f"few.jsonl/f{i}" for i in range(3)], [])
    async with await KnowledgeBase.open(
        name, kernel=kernel, home=home, extensions=False, writable=True
    ) as kb:
        await ingest(kb, [str(many)])

    Recording.batches.clear()
    async with await KnowledgeBase.open(name, kernel=kernel, home=home, writable=True) as kb:
        assert await kb.remove(["few.jsonl/f1"]) == 1
        assert _sent(Recording.batches) == ([], ["few.jsonl/f1"])
        Recording.batches.clear()
        assert await kb.remove(["many.jsonl/m0"]) == 1  # never sent: nothing to tell the extension
        assert Recording.batches == []
        report = await ingest(kb, [str(few)])  # the next ingest catches the extension up
    assert (report.added, report.unchanged) == (1, 2)  # the removed f1 comes back
    caught_up = sorted(["few.jsonl/f1", *(f"many.jsonl/m{i}" for i in range(1, 20))])
    assert _sent(Recording.batches) == (caught_up, [])


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_documents_show_and_remove_commands(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kb = str(tmp_path / "kb")
    assert _cli(capsys, "kb", "ingest", str(corpus), "--kb", kb, "--embedder", EMBEDDER, "--quiet")[0] == 0

    code, out, err = _cli(capsys, "kb", "documents", "--kb", kb, "--limit", "2", "--json")
    page = json.loads(out)
    assert code == 0
    assert [d["id"] for d in page["documents"]] == [
        "corpus/data/config.json",
        "corpus/guide/install.md",
    ]
    assert page["next"] == "corpus/guide/install.md"
    code, out, err = _cli(capsys, "kb", "documents", "--kb", kb, "--after", page["next"])
    assert [line.split("\t")[0] for line in out.splitlines()] == [
        "corpus/guide/vectors.md",
        "corpus/notes/cooking.txt",
        "corpus/web/page.html",
    ]
    assert out.splitlines()[-1].split("\t")[2] == "Gardening"
    code, out, err = _cli(
        capsys, "kb", "documents", "--kb", kb, "--where", '{"kind": "html"}', "--source", "corpus", "--json"
    )
    assert [d["id"] for d in json.loads(out)["documents"]] == ["corpus/web/page.html"]

    code, out, err = _cli(capsys, "kb", "show", "corpus/guide/install.md", "--kb", kb, "--json")
    shown = json.loads(out)
    assert shown["metadata"]["title"] == "Installing"
    assert shown["source"] == str(corpus)
    assert len(shown["hash"]) == 64
    assert shown["chunks"] >= 1
    assert shown["text"].startswith("# Installing")
    code, out, err = _cli(capsys, "kb", "show", "corpus/guide/install.md", "--kb", kb, "--chunks")
    assert out.startswith("id: corpus/guide/install.md\nsource: ")
    assert "--- corpus/guide/install.md#0 [" in out

    for args in (("show", "corpus/nope.md"), ("remove", "corpus/nope.md", "corpus/guide/install.md")):
        code, out, err = _cli(capsys, "kb", *args, "--kb", kb)
        assert code == 2
        assert len(err.strip().splitlines()) == 1, err
        assert "has no document 'corpus/nope.md'" in err
    # Why: an unknown --after printed nothing and exited 0, like the end of the list.
    code, out, err = _cli(capsys, "kb", "documents", "--after", "corpus/nope.md", "--kb", kb)
    assert (code, out) == (2, "")
    [line] = err.strip().splitlines()
    assert "--after 'corpus/nope.md'" in line
    assert "no such document" in line
    code, out, err = _cli(capsys, "kb", "remove", "corpus/guide/install.md", "--kb", kb)
    assert code == 0
    assert json.loads(out)["removed"] == 1
    code, out, err = _cli(capsys, "kb", "stats", "--kb", kb)
    stats = json.loads(out)
    assert (stats["documents"], stats["vectors"]) == (4, stats["chunks"])


def test_removing_everything_asks_and_refuses_without_a_terminal(corpus: Path, tmp_path: Path) -> None:
    kb = str(tmp_path / "kb")
    run = [TOOLKERNEL, "kb", "ingest", str(corpus), "--kb", kb, "--embedder", EMBEDDER, "--quiet"]
    assert subprocess.run(run, capture_output=True, timeout=120).returncode == 0
    for args in (["remove", "--source", "corpus"], ["delete"]):
        done = subprocess.run(
            [TOOLKERNEL, "kb", *args, "--kb", kb],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 2, done.stderr
        [line] = done.stderr.strip().splitlines()
        assert "no terminal to confirm on" in line
        assert "--yes" in line
        assert "Traceback" not in done.stderr
    done = subprocess.run(
        [TOOLKERNEL, "kb", "remove", "--source", str(corpus), "--kb", kb, "--yes"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["removed"] == 5


async def _old_knowledge_base(tmp_path: Path, corpus: Path, single: Path) -> Path:
    """A knowledge base as the older toolkernel-rag left it: ids relative to their source.

    Ingested with today's code, then written back the older way: the store with the old ids
    (point ids ``<relative id>#<n>``, ``document_id`` payloads), the catalog's documents and
    chunks with them too, and no source keys nor id-scheme flag, as that code wrote.
    """
    where = tmp_path / "old-kb"
    async with await _open(where) as kb:
        await ingest(kb, [str(corpus), str(single)])
        old = {
            row.id: row.id.split("/", 1)[1] if row.id != "notes.md" else "notes.md" for row in kb.documents()
        }
        chunks = [c for batch in kb.catalog.chunk_batches(100) for c in batch]
        await kb.store.delete_index(kb.index)
        await kb.store.create_index(kb.index, kb.manifest.embedder.dimension, "cosine")
        await kb.store.upsert(
            kb.index,
            [f"{old[c.document_id]}#{c.seq}" for c in chunks],
            [c.vector or [] for c in chunks],
            metadata=[{**c.metadata, "document_id": old[c.document_id]} for c in chunks],
        )
    db = sqlite3.connect(where / "catalog.sqlite")
    with db:
        for new, before in old.items():
            db.execute("UPDATE documents SET id = ? WHERE id = ?", (before, new))
            db.execute(
                "UPDATE chunks SET document_id = ?1, id = ?1 || '#' || seq, "
                "metadata = json_set(metadata, '$.document_id', ?1) WHERE document_id = ?2",
                (before, new),
            )
        db.execute("DELETE FROM sources")
        db.execute("DELETE FROM settings WHERE key = 'document_ids'")
    db.close()
    return where


def test_a_knowledge_base_with_relative_ids_is_refused_by_readers_and_migrated_by_writers(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    single = tmp_path / "notes.md"
    single.write_text("# Notes\n\nLighthouses guide ships at night.\n")
    where = asyncio.run(_old_knowledge_base(tmp_path, corpus, single))
    with pytest.raises(KBError, match=r"migrate it once: 'toolkernel kb migrate --kb .*old-kb'"):
        asyncio.run(KnowledgeBase.open(str(where), kernel=make_kernel()))
    capsys.readouterr()
    code, out, err = _cli(capsys, "kb", "documents", "--kb", str(where))
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert "toolkernel kb migrate --kb" in err

    code, out, err = _cli(capsys, "kb", "migrate", "--kb", str(where))
    assert code == 0
    assert json.loads(out)["migrated"] is True
    assert json.loads(out)["documents"] == 6
    asyncio.run(_check_migrated(where, corpus, single))
    code, out, err = _cli(capsys, "kb", "migrate", "--kb", str(where))
    assert json.loads(out)["migrated"] is False


async def _check_migrated(where: Path, corpus: Path, single: Path) -> None:
    """The migrated knowledge base: new ids everywhere, the same answers, nothing to re-embed."""
    async with await KnowledgeBase.open(str(where), kernel=make_kernel(), writable=True) as kb:
        assert [d.id for d in kb.documents()] == [
            "corpus/data/config.json",
            "corpus/guide/install.md",
            "corpus/guide/vectors.md",
            "corpus/notes/cooking.txt",
            "corpus/web/page.html",
            "notes.md",
        ]
        assert all(c.id.startswith("corpus/") for c in kb.document_chunks("corpus/web/page.html"))
        # The store holds the new ids only: no vector under an old id is left behind.
        assert await kb.store.count(kb.index) == kb.catalog.counts()[2]
        assert await kb.store.count(kb.index, {"document_id": "web/page.html"}) == 0
        for mode in ("dense", "sparse", "hybrid"):
            [hit] = await kb.search("lighthouses ships", top_k=1, mode=mode)
            assert hit.chunk.document_id == "notes.md"
            assert hit.chunk.metadata["document_id"] == "notes.md"
        # A rerun of the ingest finds every document unchanged: nothing is re-embedded.
        report = await ingest(kb, [str(corpus), str(single)])
        assert (report.unchanged, report.added, report.deleted) == (6, 0, 0)


async def test_an_ingest_migrates_an_older_knowledge_base(corpus: Path, tmp_path: Path) -> None:
    single = tmp_path / "notes.md"
    single.write_text("# Notes\n\nLighthouses guide ships at night.\n")
    where = await _old_knowledge_base(tmp_path, corpus, single)
    async with await KnowledgeBase.open(str(where), kernel=make_kernel(), writable=True) as kb:
        assert kb.migrated
        report = await ingest(kb, [str(corpus)])
        assert (report.unchanged, report.added) == (5, 0)
        assert await kb.store.count(kb.index) == kb.catalog.counts()[2]


async def test_kb_serve_lists_every_document_past_a_thousand_with_cursors(tmp_path: Path) -> None:
    from mcp.client import Client

    from toolkernel_rag.server import document_uri

    records = write_records(
        tmp_path / "many.jsonl",
        [{"id": f"d{i:04d}", "text": f"Note {i} on topic {i % 7}."} for i in range(1205)],
    )
    async with await _open(tmp_path / "kb") as kb:
        await ingest(kb, [str(records)])
        expected = [document_uri(kb, d.id) for d in kb.documents()]
    transport = make_kernel().client_transport([TOOLKERNEL, "kb", "serve", "--kb", str(tmp_path / "kb")])
    pages: list[list[str]] = []
    async with Client(transport, mode="legacy") as client:
        cursor = None
        while True:
            result = await client.list_resources(cursor=cursor)
            pages.append([str(r.uri) for r in result.resources])
            cursor = result.next_cursor
            if cursor is None:
                break
        last = await client.read_resource(pages[-1][-1])
    assert [len(p) for p in pages] == [1000, 205]
    assert [uri for page in pages for uri in page] == expected
    assert last.contents[0].text == "Note 1204 on topic 0."
