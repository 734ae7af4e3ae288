"""Derived data (BM25 index, vector store) damaged or missing: detected, rebuilt from the catalog, or
refused with one line naming the file and ``kb repair``; a missing catalog is an error, never empty."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import anyio
import pytest

from toolkernel.cli import main
from toolkernel_rag import KnowledgeBase
from toolkernel_rag.layout import KBError

from .conftest import build_harbour_kb, make_kernel, stored_vectors


@pytest.fixture
def built(tmp_path: Path) -> tuple[Path, Path]:
    """A knowledge base of 30 documents, and its source."""
    return build_harbour_kb(tmp_path)


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, "\n".join(line for line in err.splitlines() if not line.startswith("DEBUG"))


async def _sparse_top(kb_dir: Path, query: str) -> list[str]:
    async with await KnowledgeBase.open(str(kb_dir), kernel=make_kernel()) as kb:
        return [
            h.chunk.document_id.rsplit("/", 1)[-1] for h in await kb.search(query, mode="sparse", top_k=3)
        ]


async def _dense_top(kb_dir: Path, writable: bool) -> str:
    async with await KnowledgeBase.open(str(kb_dir), kernel=make_kernel(), writable=writable) as kb:
        return (await kb.search("word4", mode="dense", top_k=1))[0].chunk.document_id.rsplit("/", 1)[-1]


def _truncate_bm25(kb_dir: Path) -> Path:
    [victim] = (kb_dir / "sparse").glob("segment-*/chunk_terms.bin")
    victim.write_bytes(victim.read_bytes()[:40])
    return victim


def test_a_truncated_bm25_file_is_reported_served_around_and_rebuilt_by_the_next_write(
    built: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    kb_dir, source = built
    victim = _truncate_bm25(kb_dir)
    damaged = victim.read_bytes()

    code, out, err = _run(capsys, "kb", "stats", "--kb", str(kb_dir))
    assert code == 0
    assert json.loads(out)["derived"]["sparse_index"] == "damaged"
    assert f"toolkernel kb repair --kb {kb_dir}" in err

    # A reader builds the index in memory, answers correctly, and leaves the file alone.
    assert anyio.run(_sparse_top, kb_dir, "word7")[0] == "doc-7"
    assert victim.read_bytes() == damaged

    # The next writer rebuilds it (an ingest with nothing to do), from the catalog.
    code, out, err = _run(capsys, "kb", "ingest", str(source), "--kb", str(kb_dir), "--quiet")
    assert code == 0, err
    assert json.loads(out)["unchanged"] == 30
    code, out, _ = _run(capsys, "kb", "stats", "--kb", str(kb_dir))
    assert json.loads(out)["derived"]["sparse_index"] == "current"
    assert anyio.run(_sparse_top, kb_dir, "word7")[0] == "doc-7"


def test_a_missing_catalog_is_an_error_for_every_command_and_is_not_recreated(
    built: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    kb_dir, source = built
    for name in ("catalog.sqlite", "catalog.sqlite-wal", "catalog.sqlite-shm"):
        (kb_dir / name).unlink(missing_ok=True)
    for args in (
        ("kb", "serve", "--kb", str(kb_dir)),
        ("kb", "stats", "--kb", str(kb_dir)),
        ("kb", "ingest", str(source), "--kb", str(kb_dir), "--quiet"),
        ("kb", "repair", "--kb", str(kb_dir)),
    ):
        code, _, err = _run(capsys, *args)
        assert code == 2, args
        [line] = err.splitlines()
        assert line.startswith("toolkernel: error: knowledge base ")
        assert "catalog.sqlite is missing" in line
        assert not (kb_dir / "catalog.sqlite").exists()
    with pytest.raises(KBError, match=r"catalog\.sqlite is missing"):
        anyio.run(KnowledgeBase.open, str(kb_dir))


def test_a_damaged_catalog_is_a_one_line_error_naming_it(
    built: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    kb_dir, _ = built
    for name in ("catalog.sqlite-wal", "catalog.sqlite-shm"):
        (kb_dir / name).unlink(missing_ok=True)
    (kb_dir / "catalog.sqlite").write_bytes(b"not a database at all" * 100)
    code, _, err = _run(capsys, "kb", "stats", "--kb", str(kb_dir))
    assert code == 2
    [line] = err.splitlines()
    assert "catalog.sqlite is damaged or not a catalog" in line


def test_a_store_missing_vectors_is_repaired_by_the_next_ingest(
    built: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Today a rerun said 'unchanged' and left the store short of the vectors the catalog holds."""
    kb_dir, source = built
    chunks = json.loads(_run(capsys, "kb", "stats", "--kb", str(kb_dir))[1])["chunks"]

    async def lose_vectors() -> None:
        store = make_kernel().vector_store("qdrant", path=str(kb_dir / "store"))
        await store.delete(
            "kb", filter={"document_id": {"$in": [f"corpus.jsonl/doc-{i}" for i in range(0, 30, 3)]}}
        )
        await store.aclose()

    anyio.run(lose_vectors)
    assert anyio.run(stored_vectors, kb_dir) < chunks

    code, out, err = _run(capsys, "kb", "ingest", str(source), "--kb", str(kb_dir), "--quiet")
    assert code == 0, err
    assert json.loads(out)["unchanged"] == 30
    assert "repaired the vector store at" in err
    assert anyio.run(stored_vectors, kb_dir) == chunks


def test_a_deleted_store_is_rebuilt_and_a_damaged_one_refused_until_kb_repair(
    built: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Refused: a store damaged without a seal (a killed writer leaves none) that cannot be opened.
    One damaged while sealed is rebuilt by the next writer (``test_rag_store_damage.py``)."""
    kb_dir, source = built
    chunks = json.loads(_run(capsys, "kb", "stats", "--kb", str(kb_dir))[1])["chunks"]
    shutil.rmtree(kb_dir / "store")
    # Readers do not need the store: they rank the catalog's vectors.
    assert anyio.run(_dense_top, kb_dir, False) == "doc-4"
    code, _, err = _run(capsys, "kb", "ingest", str(source), "--kb", str(kb_dir), "--quiet")
    assert code == 0, err
    assert anyio.run(stored_vectors, kb_dir) == chunks

    (kb_dir / "store.seal.json").unlink()
    (kb_dir / "store" / "kb" / "toolkernel-index.json").write_text("{garbled")
    code, out, err = _run(capsys, "kb", "stats", "--kb", str(kb_dir))
    assert json.loads(out)["derived"]["store_files"] == "damaged"
    code, _, err = _run(capsys, "kb", "ingest", str(source), "--kb", str(kb_dir), "--quiet")
    assert code == 2
    [line] = err.splitlines()
    assert "store' is damaged" in line or "cannot be opened" in line
    assert line.endswith(f"run 'toolkernel kb repair --kb {kb_dir}'")

    code, out, err = _run(capsys, "kb", "repair", "--kb", str(kb_dir))
    assert code == 0, err
    assert json.loads(out)["repaired"]["vectors"] == chunks
    assert anyio.run(stored_vectors, kb_dir) == chunks
    assert anyio.run(_dense_top, kb_dir, True) == "doc-4"  # the writer searches the rebuilt store
