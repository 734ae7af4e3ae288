"""Ingestion: every file type, metadata on every chunk, incremental reruns, deletions, bad files."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkernel_rag import KBError, KnowledgeBase, ingest
from toolkernel_rag.layout import read_manifest
from toolkernel_rag.sources import SourceReader

from .conftest import EMBEDDER, make_kernel, write_records

pytestmark = pytest.mark.anyio

# A one-page PDF whose text is "Hello PDF world" (hand-written: no PDF library writes text).
_PDF_CONTENT = b"BT /F1 24 Tf 72 720 Td (Hello PDF world about lighthouses) Tj ET"
_PDF_OBJECTS = [
    b"<< /Type /Catalog /Pages 2 0 R >>",
    b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
    b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
    b"/Resources << /Font << /F1 5 0 R >> >> >>",
    b"<< /Length %d >>\nstream\n" % len(_PDF_CONTENT) + _PDF_CONTENT + b"\nendstream",
    b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
]


def _pdf() -> bytes:
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(_PDF_OBJECTS, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(_PDF_OBJECTS) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(_PDF_OBJECTS) + 1, xref)
    return bytes(out)


async def _open(path: Path, **options: object) -> KnowledgeBase:
    return await KnowledgeBase.open(
        str(path), kernel=make_kernel(), create=True, embedder=EMBEDDER, **options
    )


async def test_every_file_type_goes_in_with_its_metadata(corpus: Path, tmp_path: Path) -> None:
    (corpus / "paper.pdf").write_bytes(_pdf())
    (corpus / "tool.py").write_text('def lighthouse():\n    """Guide ships."""\n    return 1\n')
    async with await _open(tmp_path / "kb") as kb:
        report = await ingest(kb, [str(corpus)])
        assert report.problems == []
        assert report.added == 7
        ids = [d.id for d in kb.documents()]
        assert ids == sorted(
            [
                "corpus/data/config.json",
                "corpus/guide/install.md",
                "corpus/guide/vectors.md",
                "corpus/notes/cooking.txt",
                "corpus/paper.pdf",
                "corpus/tool.py",
                "corpus/web/page.html",
            ]
        )
        done, pending, chunks = kb.catalog.counts()
        assert (done, pending) == (7, 0)
        assert await kb.store.count(kb.index) == chunks

        install = kb.document("corpus/guide/install.md")
        assert install is not None
        row, text = install
        assert text.startswith("# Installing")  # front matter is metadata, not text
        assert row.metadata["tags"] == ["setup", "alpha"]
        assert row.metadata["title"] == "Installing"
        assert row.metadata["version"] == 2
        assert row.metadata["mtime"] == pytest.approx((corpus / "guide/install.md").stat().st_mtime)
        page = kb.document("corpus/web/page.html")
        assert page is not None
        assert page[0].metadata["title"] == "Gardening"
        assert "Aphids eat tomato leaves." in page[1]
        pdf = kb.document("corpus/paper.pdf")
        assert pdf is not None
        assert "lighthouses" in pdf[1]

        # Every chunk carries its document's metadata, and filters see it, in every mode.
        for mode in ("dense", "sparse", "hybrid"):
            hits = await kb.search("install offline wheels", mode=mode, filter={"tags": "alpha"})
            assert hits
            assert {h.chunk.document_id for h in hits} == {"corpus/guide/install.md"}
            assert all(h.chunk.metadata["path"] == "guide/install.md" for h in hits)
        headed = await kb.search("wheels without network", mode="sparse", top_k=1)
        assert headed[0].chunk.metadata["headers"] == ["Installing", "Offline"]


async def test_beir_records_keep_their_ids_after_the_source_key(tmp_path: Path) -> None:
    corpus = write_records(
        tmp_path / "corpus.jsonl",
        [
            {
                "_id": "d1",
                "title": "Lighthouses",
                "text": "A lighthouse guides ships at night.",
                "year": 1990,
            },
            {"id": "42", "title": "", "text": "Bees make honey from nectar."},
        ],
    )
    async with await _open(tmp_path / "kb") as kb:
        report = await ingest(kb, [str(corpus)])
        assert report.added == 2
        [hit] = await kb.search("honey bees", top_k=1, mode="sparse")
        assert hit.chunk.document_id == "corpus.jsonl/42"
        [hit] = await kb.search("ships at night", top_k=1, mode="dense", filter={"year": {"$gte": 90}})
        assert hit.chunk.document_id == "corpus.jsonl/d1"
        assert hit.chunk.text.startswith("Lighthouses\n\nA lighthouse")


async def test_rerun_is_incremental_and_follows_changes_and_deletions(corpus: Path, tmp_path: Path) -> None:
    async with await _open(tmp_path / "kb") as kb:
        first = await ingest(kb, [str(corpus)])
        _, _, chunks = kb.catalog.counts()

        again = await ingest(kb, [str(corpus)])
        assert (again.unchanged, again.added, again.updated, again.deleted, again.chunks) == (5, 0, 0, 0, 0)
        assert kb.catalog.counts()[2] == chunks

        (corpus / "notes/cooking.txt").write_text("Soup needs stock, onions and patience.", encoding="utf-8")
        (corpus / "guide/vectors.md").unlink()
        changed = await ingest(kb, [str(corpus)])
        assert (changed.unchanged, changed.updated, changed.deleted) == (3, 1, 1)
        assert [h.chunk.document_id for h in await kb.search("soup onions", top_k=1, mode="sparse")] == [
            "corpus/notes/cooking.txt"
        ]
        assert await kb.search("bread yeast knead", mode="sparse") == []  # the old text is gone
        assert await kb.search("Qdrant Edge pgvector", mode="sparse") == []  # so is the deleted file
        done, _, chunks_now = kb.catalog.counts()
        assert done == 4
        assert await kb.store.count(kb.index) == chunks_now
        assert await kb.store.count(kb.index, {"document_id": "corpus/guide/vectors.md"}) == 0
        assert first.added == 5


async def test_a_second_source_does_not_delete_the_first(corpus: Path, tmp_path: Path) -> None:
    other = write_records(tmp_path / "more.jsonl", [{"id": "x", "text": "An extra record about owls."}])
    async with await _open(tmp_path / "kb") as kb:
        await ingest(kb, [str(corpus)])
        report = await ingest(kb, [str(other)])
        assert (report.added, report.deleted) == (1, 0)
        assert kb.catalog.counts()[0] == 6


async def test_deletions_and_repeated_ids_are_found_past_a_window_and_a_page(tmp_path: Path) -> None:
    # The ids read are kept on disk and the catalog is asked one window (256 documents) at a
    # time; the documents gone from a source are found by paging its ids (1,024 at a time).
    records = [{"id": f"r{i:04d}", "text": f"Record {i} about tides and harbours."} for i in range(2600)]
    repeated = [*records, {"id": "r0005", "text": "A second record with the id r0005."}]
    source = write_records(tmp_path / "records.jsonl", repeated)
    async with await _open(tmp_path / "kb") as kb:
        first = await ingest(kb, [str(source)])
        assert (first.added, first.deleted) == (2600, 0)
        assert [p.reason for p in first.problems] == ["repeats a document id; the first was kept"]
        kept = records[:100]
        kept[7] = {"id": "r0007", "text": "Record 7, rewritten, about lighthouses."}
        write_records(source, kept)
        again = await ingest(kb, [str(source)])
        assert (again.unchanged, again.updated, again.added, again.deleted) == (99, 1, 0, 2500)
        assert kb.catalog.counts() == (100, 0, 100)
        assert await kb.store.count(kb.index) == 100
        assert kb.catalog.hashes_of(["records.jsonl/r0099", "records.jsonl/r0100"]).keys() == {
            "records.jsonl/r0099"
        }


def test_a_source_is_walked_as_it_is_read(tmp_path: Path) -> None:
    # Counting walks the source without keeping the walk, and reading walks it again one
    # directory at a time: a file added to a directory the walk has not reached yet is read.
    for name in ("a/1.md", "b/2.md"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(f"# {name}\n\nsome text.\n", encoding="utf-8")
    reader = SourceReader(str(tmp_path))
    assert reader.count() == 2
    documents = reader.documents()
    assert next(documents).id == "a/1.md"
    (tmp_path / "b/3.md").write_text("# added while reading\n", encoding="utf-8")
    assert [d.id for d in documents] == ["b/2.md", "b/3.md"]
    assert reader.problems == []


async def test_corrupt_and_unsupported_files_are_reported_and_skipped(corpus: Path, tmp_path: Path) -> None:
    (corpus / "broken.json").write_text("{not json", encoding="utf-8")
    (corpus / "latin1.md").write_bytes("caf\xe9 au lait".encode("latin-1"))
    (corpus / "scan.pdf").write_bytes(b"%PDF-1.4 this is not really a pdf")
    (corpus / "image.png").write_bytes(b"\x89PNG\r\n")
    records = write_records(
        tmp_path / "records.jsonl", [{"id": "ok", "text": "fine"}, {"text": "no id"}, {"id": "t", "text": 3}]
    )
    with records.open("a") as out:
        out.write("{broken\n")
    async with await _open(tmp_path / "kb") as kb:
        report = await ingest(kb, [str(corpus), str(records), str(tmp_path / "missing-dir")])
        reasons = {Path(p.where.split(":")[0]).name: p.reason for p in report.problems}
        assert "not JSON" in reasons["records.jsonl"] or "needs" in reasons["records.jsonl"]
        assert reasons["broken.json"].startswith("JSONDecodeError")
        assert "latin1.md" not in reasons  # Latin-1 is detected, not refused as broken UTF-8
        assert "scan.pdf" in reasons
        assert reasons["corpus"] == "unsupported file types skipped: 1 .png"
        assert reasons["missing-dir"] == "does not exist"
        assert len([p for p in report.problems if "records.jsonl" in p.where]) == 3
        assert report.added == 7  # the five good files, the Latin-1 one and the good record
        latin1 = kb.document("corpus/latin1.md")
        assert latin1 is not None
        assert latin1[1] == "café au lait"


async def test_manifest_records_the_build_and_refuses_another_embedder(corpus: Path, tmp_path: Path) -> None:
    async with await _open(tmp_path / "kb") as kb:
        await ingest(kb, [str(corpus)])
    manifest = read_manifest(tmp_path / "kb")
    assert manifest is not None
    assert manifest.embedder.name == EMBEDDER
    assert manifest.embedder.dimension == 256
    assert manifest.store.name == "qdrant"
    assert manifest.chunker["name"] == "auto"
    with pytest.raises(KBError, match=r"embedded with 'local/wordllama-256'.*'local/minilm-l6-int8'"):
        await KnowledgeBase.open(str(tmp_path / "kb"), kernel=make_kernel(), embedder="local/minilm-l6-int8")
    with pytest.raises(KBError, match="no knowledge base at"):
        await KnowledgeBase.open(str(tmp_path / "nothing"), kernel=make_kernel())
    # Opened without naming an embedder, it uses the recorded one and its search works.
    async with await KnowledgeBase.open(str(tmp_path / "kb"), kernel=make_kernel()) as kb:
        assert (await kb.search("tomatoes", top_k=1))[0].chunk.document_id == "corpus/web/page.html"


async def test_bare_names_live_under_the_data_directory(corpus: Path, tmp_path: Path) -> None:
    async with await _open(Path("handbook")) as kb:
        assert kb.directory == tmp_path / "kb-home" / "handbook"
        assert kb.name == "handbook"
    with pytest.raises(KBError, match="not valid"):
        await KnowledgeBase.open("bad name!", kernel=make_kernel(), create=True)


def _dict_store_plugin() -> object:
    """The dict-backed store of docs/examples: another store plugin, picked by name."""
    import importlib.util

    path = Path(__file__).resolve().parents[3] / "docs/examples/hooks/register_vector_stores.py"
    spec = importlib.util.spec_from_file_location("rag_test_dict_store", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_store_embedder_and_chunker_come_from_the_settings(corpus: Path, tmp_path: Path) -> None:
    from toolkernel import Kernel
    from toolkernel_local_embed import plugin as local_embed
    from toolkernel_rag import plugin as rag

    settings = {
        "rag": {
            "embedder": EMBEDDER,
            "store": "dict",
            "chunker": "recursive",
            "chunk_size": 120,
            "chunk_overlap": 10,
            "chunk_length": "characters",
        }
    }
    plugins = [rag, local_embed, _dict_store_plugin()]
    kernel = Kernel(load_entry_points=False, plugins=plugins, settings=settings)
    async with await KnowledgeBase.open(str(tmp_path / "kb"), kernel=kernel, create=True) as kb:
        await ingest(kb, [str(corpus)])
        assert kb.store.name == "dict"
        assert await kb.store.count(kb.index) == kb.catalog.counts()[2]
        assert all(len(c.text) <= 120 for c in kb.catalog.document_chunks(["corpus/guide/install.md"]))
        assert (await kb.search("tomato pests", top_k=1))[0].chunk.document_id == "corpus/web/page.html"
    manifest = read_manifest(tmp_path / "kb")
    assert manifest is not None
    assert (manifest.embedder.name, manifest.store.name) == (EMBEDDER, "dict")
    assert manifest.chunker == {"name": "recursive", "size": 120, "overlap": 10, "length": "characters"}


async def test_queries_embed_like_documents_on_their_own_thread_setting(tmp_path: Path) -> None:
    kernel = make_kernel()
    async with await KnowledgeBase.open(
        str(tmp_path / "kb"), kernel=kernel, create=True, embedder="local/minilm-l6-int8"
    ) as kb:
        assert kb.query_embedder is not kb.embedder  # two threads that sleep between operators
        [document_side] = await kb.embedder.embed(["where do lighthouses stand"])
        query_side = await kb.embed_query("where do lighthouses stand")
        assert query_side == pytest.approx(document_side, abs=1e-5)
