"""The writer's store check on open costs what changed: the catalog keeps its count of the
vectors the store must hold (triggers, in the transaction of each change) and finds pending
documents through an index of them, instead of reading every chunk and every document."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest

from toolkernel_rag import KnowledgeBase, ingest
from toolkernel_rag.catalog import Catalog, StoredChunk

from .conftest import EMBEDDER, build_harbour_kb, make_kernel, stored_vectors, write_records


def chunk(document_id: str, seq: int, vector: bool = True) -> StoredChunk:
    return StoredChunk(
        f"{document_id}#{seq}", document_id, seq, 0, 4, "text", {}, [0.5, 0.5] if vector else None, "text"
    )


def pending(*document_ids: str) -> list[tuple[str, str, str, dict[str, Any], str, str]]:
    return [(d, "src", "h", {}, "text", "text") for d in document_ids]


def test_the_kept_count_follows_every_change_of_the_catalog(tmp_path: Path) -> None:
    catalog = Catalog(tmp_path / "catalog.sqlite")

    def agrees() -> int:
        kept = catalog.kept_done_vectors()
        assert kept == catalog.vector_count(done_only=True)
        return kept

    assert agrees() == 0
    catalog.mark_pending(pending("a", "b", "c"))
    catalog.commit_documents(["a", "b"], [chunk("a", 0), chunk("a", 1), chunk("b", 0, vector=False)])
    assert agrees() == 2  # c is pending, b's chunk has no vector
    catalog.commit_documents(["c"], [chunk("c", 0), chunk("c", 1), chunk("c", 2)])
    assert agrees() == 5
    catalog.mark_pending(pending("a"))  # a re-ingest begins: a's chunks no longer count
    assert agrees() == 3
    catalog.commit_documents(["a"], [chunk("a", 0)])
    assert agrees() == 4
    catalog.delete_documents(["c"])
    assert agrees() == 1
    # The id migration renames documents first, then their chunks.
    catalog.qualify_ids({"src": "s1"}, [("a", "s1/a"), ("b", "s1/b")])
    assert agrees() == 1
    assert catalog.pending_documents() == []
    catalog.mark_pending(pending("s1/b", "d"))
    assert (catalog.pending_documents(), agrees()) == (["d", "s1/b"], 1)
    catalog.close()


def test_a_catalog_made_before_the_count_is_counted_once_when_a_writer_opens_it(tmp_path: Path) -> None:
    catalog = Catalog(tmp_path / "catalog.sqlite")
    catalog.mark_pending(pending("a", "b"))
    catalog.commit_documents(["a", "b"], [chunk("a", 0), chunk("b", 0), chunk("b", 1)])
    catalog.close()
    with sqlite3.connect(tmp_path / "catalog.sqlite") as db:  # as an older version left it
        for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
            db.execute(f"DROP TRIGGER {name}")
        db.execute("DELETE FROM settings WHERE key = 'done_vectors'")
    assert Catalog(tmp_path / "catalog.sqlite", writable=False).kept_done_vectors() == -1
    catalog = Catalog(tmp_path / "catalog.sqlite")
    assert catalog.kept_done_vectors() == 3
    catalog.delete_documents(["a"])
    assert catalog.kept_done_vectors() == 2
    catalog.close()


class Counted:
    """Records the catalog reads that grow with its size (every chunk counted, every document read)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[str] = []
        for name in ("vector_count", "hashes"):
            monkeypatch.setattr(Catalog, name, self._counted(name, getattr(Catalog, name)))

    def _counted(self, name: str, method: Any) -> Any:
        def call(catalog: Catalog, *args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            return method(catalog, *args, **kwargs)

        return call


async def _open_writer(kb_dir: Path) -> None:
    async with await KnowledgeBase.open(str(kb_dir), kernel=make_kernel(), writable=True):
        pass


def test_a_writer_whose_store_agrees_reads_no_chunk_to_check_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # It built a dict of every document's hash and state and counted the done documents' chunks
    # with a join over every chunk: about 1.2 s at 300,000 chunks on every writer's open.
    kb_dir, _ = build_harbour_kb(tmp_path)
    chunks = Catalog(kb_dir / "catalog.sqlite", writable=False).vector_count(done_only=True)
    counted = Counted(monkeypatch)
    anyio.run(_open_writer, kb_dir)
    assert counted.calls == []
    # A kept count in doubt (not the store's) is counted again and corrected; the store, which
    # agrees with the catalog, is left alone.
    with sqlite3.connect(kb_dir / "catalog.sqlite") as db:
        db.execute("UPDATE settings SET value = '7' WHERE key = 'done_vectors'")
    anyio.run(_open_writer, kb_dir)
    assert counted.calls == ["vector_count"]
    assert "repaired" not in capsys.readouterr().err
    assert Catalog(kb_dir / "catalog.sqlite", writable=False).kept_done_vectors() == chunks


def test_a_killed_runs_pending_documents_are_left_out_and_lost_vectors_restored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = write_records(tmp_path / "notes.jsonl", [{"id": f"n{i}", "text": f"note {i}"} for i in range(6)])
    kb_dir = tmp_path / "kb"

    async def build() -> None:
        async with await KnowledgeBase.open(
            str(kb_dir), kernel=make_kernel(), create=True, embedder=EMBEDDER
        ) as kb:
            await ingest(kb, [str(source)])
            # A run killed between marking two documents pending and writing them.
            kb.catalog.mark_pending(pending("notes.jsonl/n0", "notes.jsonl/n9"))

    anyio.run(build)
    assert Catalog(kb_dir / "catalog.sqlite", writable=False).pending_documents() == [
        "notes.jsonl/n0",
        "notes.jsonl/n9",
    ]
    # The store holds the five done documents' vectors, as the catalog counts, and pending n0's.
    anyio.run(_open_writer, kb_dir)
    assert "repaired" not in capsys.readouterr().err

    async def lose_vectors() -> None:
        store = make_kernel().vector_store("qdrant", path=str(kb_dir / "store"))
        await store.delete("kb", filter={"document_id": {"$in": ["notes.jsonl/n1", "notes.jsonl/n2"]}})
        await store.aclose()

    anyio.run(lose_vectors)
    (kb_dir / "store.seal.json").unlink()  # as a killed writer leaves it: checked by the counts alone
    anyio.run(_open_writer, kb_dir)
    assert "it held 3 of the catalog's 5 vectors; 5 restored" in capsys.readouterr().err
    assert anyio.run(stored_vectors, kb_dir) == 6
