"""Faults: kill -9 during ingestion, then a rerun ends exactly where a clean run does."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import anyio

from toolkernel_rag import KnowledgeBase, ingest

from .conftest import EMBEDDER, make_kernel, stored_vectors, write_records

WORDS = [
    "river",
    "stone",
    "cloud",
    "maple",
    "orbit",
    "lantern",
    "copper",
    "meadow",
    "signal",
    "harbor",
    "velvet",
    "prism",
]


def _records(n: int) -> list[dict[str, object]]:
    return [
        {
            "id": f"doc-{i}",
            "title": f"Record {i}",
            # Long enough for two or three chunks, so a document is half-written when killed.
            "text": " ".join(f"{WORDS[(i * 7 + j) % len(WORDS)]}{j % 13}" for j in range(250)),
        }
        for i in range(n)
    ]


def _done(kb_dir: Path) -> int:
    try:
        with sqlite3.connect(kb_dir / "catalog.sqlite", timeout=5) as db:
            return int(db.execute("SELECT COUNT(*) FROM documents WHERE state = 'done'").fetchone()[0])
    except sqlite3.OperationalError:
        return 0


def _ingest_command(corpus: Path, kb_dir: Path) -> list[str]:
    toolkernel = str(Path(sys.executable).with_name("toolkernel"))
    return [
        toolkernel,
        "kb",
        "ingest",
        str(corpus),
        "--kb",
        str(kb_dir),
        "--embedder",
        EMBEDDER,
        "--batch",
        "8",
        "--quiet",
    ]


async def _snapshot(kb_dir: Path) -> tuple[int, int, int, list[str]]:
    async with await KnowledgeBase.open(str(kb_dir), kernel=make_kernel()) as kb:
        done, pending, chunks = kb.catalog.counts()
        vectors = await stored_vectors(kb_dir)
        ids = sorted(c for d in kb.documents() for c in kb.catalog.chunk_ids(d.id))
        return done, pending, chunks, [str(vectors), *ids]


def test_kill_9_during_ingest_then_rerun_matches_a_clean_ingest(tmp_path: Path) -> None:
    total = 600
    corpus = write_records(tmp_path / "corpus.jsonl", _records(total))
    killed_dir, clean_dir = tmp_path / "killed", tmp_path / "clean"

    process = subprocess.Popen(_ingest_command(corpus, killed_dir), stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while _done(killed_dir) < 40:
        assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""
        assert time.monotonic() < deadline, "ingestion made no progress"
        time.sleep(0.01)
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    at_kill = _done(killed_dir)
    assert 0 < at_kill < total, "the kill must land midway"

    rerun = subprocess.run(_ingest_command(corpus, killed_dir), capture_output=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr.decode()

    async def clean_ingest() -> None:
        kernel = make_kernel()
        async with await KnowledgeBase.open(
            str(clean_dir), kernel=kernel, create=True, embedder=EMBEDDER
        ) as kb:
            await ingest(kb, [str(corpus)])

    anyio.run(clean_ingest)

    killed, clean = anyio.run(_snapshot, killed_dir), anyio.run(_snapshot, clean_dir)
    assert killed[:3] == clean[:3]
    assert killed[0] == total
    assert killed[1] == 0
    # Same chunk ids, and the store holds exactly one vector per chunk: nothing lost, nothing doubled.
    assert killed[3] == clean[3]
    assert int(killed[3][0]) == killed[2]
