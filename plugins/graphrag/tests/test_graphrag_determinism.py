"""Two ingests of the same corpus by the real CLI (separate processes) give the same graph rankings.

Each ``toolkernel kb ingest`` is a subprocess with the installed plugins (entry points), the
embedded default store and the wordllama embedder (offline, milliseconds); the two runs embed
in batches of different sizes. Both knowledge bases are then searched in ``graph`` mode
through the MCP ``search`` tool, and every ranking — chunk ids and scores — must agree.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import toolkernel
from toolkernel.testing import connect_in_memory
from toolkernel_rag import KnowledgeBase, kb_server

EMBEDDER = "local/wordllama-256"
PEOPLE = ["Ada Lovelace", "Alan Turing", "Grace Hopper", "Edsger Dijkstra", "Barbara Liskov", "Ken Thompson"]
PLACES = ["London", "Manchester", "New York", "Rotterdam", "Boston", "Berkeley", "Zurich", "Princeton"]
QUERIES = [
    "Which city did Grace Hopper visit after meeting Alan Turing?",
    "Who worked with Ada Lovelace in London?",
    "Where was the project that Barbara Liskov started?",
    "Ken Thompson Berkeley",
    "the machine built in Zurich",
]


def write_corpus(path: Path, records: int = 60) -> Path:
    """A BEIR-style corpus whose documents name people, places and each other's titles."""
    rng = random.Random(11)
    titles = [f"Project {chr(65 + i % 26)}{i}" for i in range(records)]
    with path.open("w") as out:
        for i, title in enumerate(titles):
            person, other = rng.sample(PEOPLE, 2)
            text = (
                f"{title} was started by {person} in {rng.choice(PLACES)}. "
                f"{person} later met {other} in {rng.choice(PLACES)} to discuss {rng.choice(titles)}. "
                f"It followed {rng.choice(titles)}, a machine built in {rng.choice(PLACES)}."
            )
            out.write(json.dumps({"id": f"d{i:03d}", "title": title, "text": text}) + "\n")
    return path


def ingest(corpus: Path, kb: Path, batch: int, cwd: Path) -> None:
    toolkernel_cli = str(Path(sys.executable).with_name("toolkernel"))
    command = [toolkernel_cli, "kb", "ingest", str(corpus), "--kb", str(kb), "--embedder", EMBEDDER]
    done = subprocess.run(
        [*command, "--batch", str(batch), "--quiet"], capture_output=True, text=True, timeout=300, cwd=cwd
    )
    assert done.returncode == 0, done.stderr


async def graph_rankings(kb_dir: Path) -> list[list[tuple[str, float]]]:
    """Each query's ``graph``-mode ranking through the ``search`` tool: chunk ids and scores."""
    async with (
        await KnowledgeBase.open(str(kb_dir), kernel=toolkernel.Kernel()) as kb,
        connect_in_memory(kb_server(kb)) as client,
    ):
        assert "graph" in kb.modes
        out = []
        for query in QUERIES:
            result = await client.call_tool("search", {"query": query, "mode": "graph", "top_k": 15})
            assert not result.is_error, result.content
            out.append([(hit["id"], hit["score"]) for hit in result.structured_content["results"]])
        return out


@pytest.mark.anyio
async def test_two_cli_ingests_of_one_corpus_rank_identically_in_graph_mode(tmp_path):
    corpus = write_corpus(tmp_path / "corpus.jsonl")
    ingest(corpus, tmp_path / "first", batch=256, cwd=tmp_path)
    ingest(corpus, tmp_path / "second", batch=7, cwd=tmp_path)
    for kb in ("first", "second"):
        assert list((tmp_path / kb / "extensions" / "graph" / "graph.segments").iterdir())
    first, second = await graph_rankings(tmp_path / "first"), await graph_rankings(tmp_path / "second")
    assert all(len(ranking) == 15 for ranking in first)
    assert first == second


def ingest_killed_in_the_graphs_catch_up(corpus: Path, kb: Path, cwd: Path) -> None:
    """Start ``kb ingest`` and ``kill -9`` it once the graph has two segments (mid catch-up)."""
    toolkernel_cli = str(Path(sys.executable).with_name("toolkernel"))
    command = [
        toolkernel_cli,
        "kb",
        "ingest",
        str(corpus),
        "--kb",
        str(kb),
        "--embedder",
        EMBEDDER,
        "--quiet",
    ]
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    segments = kb / "extensions" / "graph" / "graph.segments"
    deadline = time.monotonic() + 300
    while process.poll() is None and time.monotonic() < deadline:
        if segments.is_dir() and len([p for p in segments.iterdir() if not p.name.startswith(".")]) >= 2:
            os.kill(process.pid, signal.SIGKILL)
            break
        time.sleep(0.01)
    assert process.wait(timeout=60) == -signal.SIGKILL, "the ingest ended before it could be killed"


@pytest.mark.anyio
async def test_an_ingest_killed_while_writing_the_graph_then_rerun_ranks_like_a_clean_one(tmp_path):
    corpus = write_corpus(tmp_path / "corpus.jsonl", records=1500)
    ingest_killed_in_the_graphs_catch_up(corpus, tmp_path / "killed", tmp_path)
    ingest(corpus, tmp_path / "killed", batch=256, cwd=tmp_path)  # the rerun
    ingest(corpus, tmp_path / "clean", batch=256, cwd=tmp_path)
    assert await graph_rankings(tmp_path / "killed") == await graph_rankings(tmp_path / "clean")
