"""A damaged Qdrant Edge shard under an embedded knowledge base, met by real ``kb`` processes.

Qdrant Edge does not check its files when it opens a shard: a vector file truncated or
garbled while no writer ran still counts every point, so a count comparison passes, the
writer's searches fail on the truncated vectors or rank the garbled ones, and ``kb stats``
says all is well. Here a real shard file is damaged, then ``kb stats``, ``kb serve``
(searched through MCP) and ``kb ingest`` run as subprocesses: each finds it (or is not
affected), the writer rebuilds the store from the catalog, and afterwards the store holds
the catalog's vectors again and the writer's searches equal those of an undamaged copy.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from toolkernel_rag import KnowledgeBase

from .conftest import build_harbour_kb, harbour_records, make_kernel, stored_vectors, write_records

TOOLKERNEL = str(Path(sys.executable).with_name("toolkernel"))
QUERIES = ["word4", "harbours and beacons", "word17 word3", "Entry 25"]

VICTIMS = {
    "vectors": "segments/*/vector_storage/vectors/chunk_0.mmap",
    "payloads": "segments/*/payload_storage/page_0.dat",
    "point ids": "segments/*/mutable_id_tracker.mappings",
}


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """An embedded knowledge base of 30 documents, never damaged, and its source."""
    return build_harbour_kb(tmp_path_factory.mktemp("edge-damage"))


def _damage(kb_dir: Path, victim: str, how: str) -> Path:
    [path] = (kb_dir / "store" / "kb" / "shard").glob(victim)
    if how == "truncated":
        with path.open("r+b") as out:
            out.truncate(1000)  # inside the first point's record
    else:
        noise = random.Random(21).randbytes(4096)
        with path.open("r+b") as out:
            out.write(noise)
    return path


def _kb(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TOOLKERNEL, "kb", *args], capture_output=True, text=True, timeout=300)


async def _served(kb_dir: Path) -> list[list[str]]:
    """Every query's hybrid top 5 from a ``kb serve`` subprocess, through MCP."""
    from mcp.client import Client

    transport = make_kernel().client_transport([TOOLKERNEL, "kb", "serve", "--kb", str(kb_dir)])
    out: list[list[str]] = []
    async with Client(transport, mode="legacy") as client:
        for query in QUERIES:
            with anyio.fail_after(120):
                result = await client.call_tool("search", {"query": query, "top_k": 5, "mode": "hybrid"})
            assert not result.is_error, result.content
            out.append([h["document_id"] for h in (result.structured_content or {})["results"]])
    return out


async def _writer_dense(kb_dir: Path) -> list[list[tuple[str, float]]]:
    """Every query's dense top 10 as the writer ranks it: through the vector store itself."""
    async with await KnowledgeBase.open(str(kb_dir), kernel=make_kernel(), writable=True) as kb:
        out: list[list[tuple[str, float]]] = []
        for query in QUERIES:
            hits = await kb.search(query, mode="dense", top_k=10)
            out.append([(h.chunk.id, round(h.score, 5)) for h in hits])
        return out


def _no_traceback(done: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert "panicked" not in done.stderr, done.stderr[-3000:]


@pytest.mark.parametrize(
    ("victim", "how"),
    [("vectors", "truncated"), ("vectors", "garbled"), ("payloads", "truncated"), ("point ids", "garbled")],
)
def test_a_damaged_edge_shard_file_is_found_and_rebuilt_from_the_catalog(
    clean: tuple[Path, Path], tmp_path: Path, victim: str, how: str
) -> None:
    clean_dir, source = clean
    kb_dir = tmp_path / "kb"
    shutil.copytree(clean_dir, kb_dir, symlinks=True)  # keeps modification times, like a backup
    chunks = json.loads(_kb("stats", "--kb", str(clean_dir)).stdout)["chunks"]
    expected_served = anyio.run(_served, clean_dir)
    path = _damage(kb_dir, VICTIMS[victim], how)
    repair = f"toolkernel kb repair --kb {kb_dir}"

    # kb stats, a reader, finds it without opening the store: one warning line naming the file.
    done = _kb("stats", "--kb", str(kb_dir))
    _no_traceback(done)
    assert done.returncode == 0, done.stderr
    derived: dict[str, Any] = json.loads(done.stdout)["derived"]
    assert derived["store_files"] == "damaged", derived
    [problem] = derived["problems"]
    assert str(path) in problem
    assert repair in problem
    assert [line for line in done.stderr.splitlines() if line.startswith("warning:")] == [
        f"warning: {problem}"
    ]

    # kb serve ranks the catalog's vectors: its answers are a clean copy's.
    assert anyio.run(_served, kb_dir) == expected_served

    # kb ingest (nothing changed in the source) rebuilds the store from the catalog and says so.
    done = _kb("ingest", str(source), "--kb", str(kb_dir), "--quiet")
    _no_traceback(done)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["unchanged"] == 30
    [said] = [line for line in done.stderr.splitlines() if line.startswith("repaired the vector store")]
    assert str(path) in said
    assert f"{chunks} restored from the catalog" in said

    # Every vector is back: the store is whole again, and the writer's searches through it
    # equal the clean copy's.
    done = _kb("stats", "--kb", str(kb_dir))
    assert json.loads(done.stdout)["derived"] == {
        "sparse_index": "current",
        "store_files": "present",
        "problems": [],
    }
    assert "repaired" not in _kb("ingest", str(source), "--kb", str(kb_dir), "--quiet").stderr
    assert anyio.run(_writer_dense, kb_dir) == anyio.run(_writer_dense, clean_dir)
    assert anyio.run(stored_vectors, kb_dir) == chunks


def test_kb_repair_discards_only_its_own_index_of_a_store_shared_by_path(tmp_path: Path) -> None:
    """``--store-options '{"path": …}'`` may name one directory for several knowledge bases, each
    its own index in it; ``kb repair`` of one removed the whole directory, the others' too."""
    source = write_records(tmp_path / "corpus.jsonl", harbour_records(6))
    shared = tmp_path / "vectors"
    options = json.dumps({"path": str(shared)})
    for name in ("first", "second"):
        done = _kb("ingest", str(source), "--kb", str(tmp_path / name), "--store-options", options, "--quiet")
        assert done.returncode == 0, done.stderr
    before = sorted(p.relative_to(shared) for p in (shared / "second").rglob("*"))

    done = _kb("repair", "--kb", str(tmp_path / "first"))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["repaired"]["vectors"] == 6
    assert sorted(p.relative_to(shared) for p in (shared / "second").rglob("*")) == before
    done = _kb("stats", "--kb", str(tmp_path / "second"))
    assert json.loads(done.stdout)["derived"]["store_files"] == "present", done.stderr
    assert "repaired" not in _kb("ingest", str(source), "--kb", str(tmp_path / "second"), "--quiet").stderr
