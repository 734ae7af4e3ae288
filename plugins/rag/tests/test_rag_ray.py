"""``kb ingest --engine ray``: the same knowledge base as the local pipeline, on a real Ray.

One Ray for the whole module (started once, bound to loopback, its files in a temporary
folder), real files (a SciFact subset as a ``.jsonl`` corpus), both backends (PostgreSQL from
``toolkernel.testing.services``). The embedder is wordllama: a static model whose vector of a
text does not depend on the other texts of its batch (MiniLM pads a batch to its longest text,
which moves the last bits), so rankings from Ray and from one process can be compared exactly.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolkernel_rag import KnowledgeBase, ingest
from toolkernel_rag.ingestion import IngestReport

from .conftest import EMBEDDER, make_kernel, stored_vectors, write_records

ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'toolkernel-rag[ray]')")

pytestmark = [pytest.mark.anyio, pytest.mark.ray, pytest.mark.timeout(600)]

TOOLKERNEL = str(Path(sys.executable).with_name("toolkernel"))
QUERIES = 30
"""SciFact queries compared (those whose relevant abstracts are in the subset)."""
DOCUMENTS = 240
"""Abstracts in the subset: the relevant ones of those queries, then the corpus in order."""


def _scifact() -> Path | None:
    here = Path(__file__).resolve()
    for up in here.parents:
        if (up / "shared" / "datasets" / "scifact").is_dir():
            return up / "shared" / "datasets" / "scifact"
    return None


@pytest.fixture(scope="module")
def ray_address() -> Iterator[str]:
    """One local Ray for the module: loopback only, no dashboard, session files in a temporary folder.

    Three logical CPUs: two embedding actors and the reading tasks (Ray's accounting, not cores).
    """
    folder = tempfile.mkdtemp(prefix="tk-ray-test-", dir="/tmp")
    ray.init(
        num_cpus=3,
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        _temp_dir=folder,
        log_to_driver=False,
        logging_level="ERROR",
    )
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def scifact() -> tuple[list[dict[str, Any]], list[str]]:
    """The subset's records and its queries' texts.

    SciFact when the benchmark datasets sit beside the checkout (``../shared/datasets``; its
    licence keeps it out of the repository). Elsewhere, so these checks never skip, real prose
    that ships with every Python: the paragraphs of the interpreter's own help topics
    (``pydoc_data.topics``), queried by the opening words of every eighth one.
    """
    root = _scifact()
    if root is None:
        return _help_topics()
    queries = [json.loads(line) for line in (root / "queries.jsonl").open(encoding="utf-8")]
    relevant: dict[str, set[str]] = {}
    for line in (root / "qrels.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        query, doc, _ = line.split("\t")
        relevant.setdefault(query, set()).add(doc)
    judged = [q for q in queries if q["id"] in relevant][:QUERIES]
    wanted = set().union(*(relevant[q["id"]] for q in judged))
    corpus = [json.loads(line) for line in (root / "corpus.jsonl").open(encoding="utf-8")]
    chosen = [r for r in corpus if r["id"] in wanted]
    chosen += [r for r in corpus if r["id"] not in wanted][: DOCUMENTS - len(chosen)]
    records = [{"id": r["id"], "title": r["title"], "text": r["text"]} for r in chosen]
    return records, [q["text"] for q in judged]


def _help_topics() -> tuple[list[dict[str, Any]], list[str]]:
    from pydoc_data.topics import topics

    records = [
        {"id": f"{topic}-{n}", "title": topic, "text": paragraph.strip()}
        for topic, body in sorted(topics.items())
        for n, paragraph in enumerate(body.split("\n\n"))
        if len(paragraph.split()) >= 25
    ][:DOCUMENTS]
    assert len(records) == DOCUMENTS
    queries = [" ".join(r["text"].split()[:12]) for r in records[::8]][:QUERIES]
    return records, queries


def _corpus(tmp_path: Path, records: list[dict[str, Any]]) -> Path:
    return write_records(tmp_path / "scifact.jsonl", records)


async def _local(name: str, corpus: Path, home: str) -> IngestReport:
    async with await KnowledgeBase.open(
        name, kernel=make_kernel(), create=True, embedder=EMBEDDER, home=home
    ) as kb:
        return await ingest(kb, [str(corpus)])


async def _on_ray(
    name: str, corpus: Path, home: str, progress: Any = None, batch_size: int = 8, writers: int = 1
) -> IngestReport:
    from toolkernel_rag.cluster.connect import connect
    from toolkernel_rag.cluster.job import RayOptions, ingest_on_ray

    async with await KnowledgeBase.open(
        name, kernel=make_kernel(), create=True, embedder=EMBEDDER, home=home
    ) as kb:
        session = connect(None, 2)
        assert not session.owned  # the module's Ray, joined as it is
        options = RayOptions(actors=2, batch_size=batch_size, writers=writers)
        return await ingest_on_ray(kb, [str(corpus)], session, options, progress=progress)


def _exact_vector_search(url: str, name: str) -> None:
    """Drop the knowledge base's HNSW index, so PostgreSQL ranks by exact distance.

    pgvector's HNSW graph depends on the order rows arrive and on random levels: two local
    ingests of the same corpus can already rank a near tie differently. Exact search compares
    what the two pipelines wrote (the vectors themselves are compared too).
    """
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname = %s AND indexdef LIKE '%%hnsw%%'",
            (f"kb_{name}",),
        ).fetchall()
        for (index,) in rows:
            conn.execute(f'DROP INDEX "kb_{name}"."{index}"')


async def _state(name: str, home: str, queries: list[str]) -> dict[str, Any]:
    """Counts, every chunk (id, text, vector), and the top-10 documents per query in each mode."""
    if home.startswith("postgresql"):
        _exact_vector_search(home, name)
    async with await KnowledgeBase.open(name, kernel=make_kernel(), writable=False, home=home) as kb:
        done, pending, chunks = kb.catalog.counts()
        rows = kb.documents()
        ids = [c.id for c in kb.catalog.document_chunks([r.id for r in rows])]
        stored = kb.catalog.chunks(ids, include_vectors=True)
        rankings = {
            mode: [
                [hit.chunk.document_id for hit in await kb.search(q, top_k=10, mode=mode)] for q in queries
            ]
            for mode in ("dense", "sparse", "hybrid")
        }
    return {
        "counts": (done, pending, chunks),
        "documents": sorted((r.id, r.hash, r.chunk_count) for r in rows),
        "chunks": sorted((c.id, c.text, tuple(c.vector or ())) for c in stored),
        "rankings": rankings,
    }


async def test_ray_builds_the_knowledge_base_the_local_pipeline_builds(
    ray_address: str, scifact: tuple[list[dict[str, Any]], list[str]], home: str, tmp_path: Path
) -> None:
    records, queries = scifact
    corpus = _corpus(tmp_path, records)
    suffix = str(abs(hash(tmp_path)) % 10**6)  # PostgreSQL is shared by the module: names of their own
    local, viaray = f"local{suffix}", f"viaray{suffix}"
    local_report = await _local(local, corpus, home)
    # On PostgreSQL two writer actors commit side by side.
    ray_report = await _on_ray(viaray, corpus, home, writers=2 if home.startswith("postgresql") else 1)
    assert (
        (ray_report.added, ray_report.chunks)
        == (local_report.added, local_report.chunks)
        == (
            len(records),
            local_report.chunks,
        )
    )
    want, got = await _state(local, home, queries), await _state(viaray, home, queries)
    assert got["counts"] == want["counts"] == (len(records), 0, local_report.chunks)
    assert got["documents"] == want["documents"]
    assert got["chunks"] == want["chunks"]
    for mode in ("dense", "sparse", "hybrid"):
        assert got["rankings"][mode] == want["rankings"][mode], mode
    assert all(len(r) == 10 for r in want["rankings"]["hybrid"])
    if not home.startswith("postgresql"):
        assert await stored_vectors(Path(home) / viaray) == local_report.chunks


async def test_every_file_type_is_read_and_chunked_on_the_workers_as_locally(
    ray_address: str, corpus: Path, tmp_path: Path
) -> None:
    # Markdown with front matter, text, HTML, JSON (conftest's corpus) and Python (the code chunker).
    (corpus / "code").mkdir()
    (corpus / "code" / "tool.py").write_text(
        '"""A tool."""\n\n\ndef add(a: int, b: int) -> int:\n    """Add two numbers."""\n    return a + b\n'
        "\n\nclass Store:\n    def get(self, key: str) -> str:\n        return key.upper()\n",
        encoding="utf-8",
    )
    home = str(tmp_path / "home")
    local_report = await _local("local", corpus, home)
    ray_report = await _on_ray("viaray", corpus, home)
    assert ray_report.added == local_report.added == 6
    want, got = (
        await _state("local", home, ["install", "tomatoes"]),
        await _state("viaray", home, ["install"]),
    )
    assert got["documents"] == want["documents"]
    assert got["chunks"] == want["chunks"]  # ids, texts and vectors
    async with await KnowledgeBase.open("viaray", kernel=make_kernel(), writable=False, home=home) as kb:
        kinds = {row.metadata["kind"] for row in kb.documents()}
    assert kinds == {"markdown", "text", "html", "json", "code"}


async def test_a_rerun_on_ray_embeds_only_the_changed_documents(
    ray_address: str, scifact: tuple[list[dict[str, Any]], list[str]], tmp_path: Path, spans: Any
) -> None:
    records, queries = scifact
    home = str(tmp_path / "home")
    corpus = _corpus(tmp_path, records)
    await _on_ray("incremental", corpus, home)
    # The reference takes the same two steps locally: updated documents' chunks go to the end of
    # the catalog, which orders BM25 ties, so a fresh ingest is not the reference for a rerun.
    await _local("reference", corpus, home)
    changed = [dict(r) for r in records]
    for r in changed[:5]:
        r["text"] += " Revised in a later edition."
    removed = changed.pop()
    _corpus(tmp_path, changed)
    spans.clear()
    report = await _on_ray("incremental", corpus, home)
    assert (report.added, report.updated, report.unchanged, report.deleted) == (0, 5, len(changed) - 5, 1)
    traced = {s.name: dict(s.attributes or {}) for s in spans.get_finished_spans()}
    assert traced["kb.ingest"]["kb.engine"] == "ray"
    assert traced["kb.ingest"]["kb.updated"] == 5
    assert traced["kb.write"]["kb.documents"] >= 1
    assert "kb.plan" in traced
    local = await _local("reference", corpus, home)
    assert (local.added, local.updated, local.unchanged, local.deleted) == (0, 5, len(changed) - 5, 1)
    want, got = await _state("reference", home, queries), await _state("incremental", home, queries)
    assert got["documents"] == want["documents"]
    assert got["chunks"] == want["chunks"]
    assert got["rankings"] == want["rankings"]
    ids = {d[0].rsplit("/", 1)[-1]: d[2] for d in got["documents"]}
    assert removed["id"] not in ids
    # Only the five changed documents' chunks were embedded and written.
    assert report.chunks == sum(ids[r["id"]] for r in changed[:5])


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _embedding_actors() -> list[int]:
    """This test process's embedding actors (Ray names an actor's process after its class)."""
    found = []
    for pid in _descendants(os.getpid()):
        try:
            title = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if title.startswith("ray::") and "EmbedActor" in title:
            found.append(pid)
    return found


async def test_a_killed_actor_is_replaced_and_the_result_is_identical(
    ray_address: str, scifact: tuple[list[dict[str, Any]], list[str]], tmp_path: Path
) -> None:
    records, queries = scifact
    home = str(tmp_path / "home")
    corpus = _corpus(tmp_path, records)
    killed: list[tuple[int, int]] = []

    def kill_one_actor(report: IngestReport) -> None:
        if killed or not 0 < report.done < report.total:
            return
        actors = _embedding_actors()
        if actors:
            os.kill(actors[0], signal.SIGKILL)
            killed.append((actors[0], report.done))

    report = await _on_ray("survivor", corpus, home, progress=kill_one_actor, batch_size=2)
    assert killed, "no embedding actor was found midway: nothing was tested"
    assert killed[0][1] < len(records)
    assert report.added == len(records)
    await _local("reference", corpus, home)
    want, got = await _state("reference", home, queries), await _state("survivor", home, queries)
    assert got == want
    assert await stored_vectors(Path(home) / "survivor") == want["counts"][2]


def _ray_of_a_run() -> set[int]:
    """Processes of a Ray that ``kb ingest`` started for itself (its session folder is ``/tmp/tk-ray-*``)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "/tmp/tk-ray-" in line and "tk-ray-test-" not in line:
            found.add(int(entry.name))
    return found


def test_a_killed_driver_resumes_to_a_clean_ingests_counts(
    ray_address: str, scifact: tuple[list[dict[str, Any]], list[str]], tmp_path: Path
) -> None:
    records, queries = scifact
    home = tmp_path / "home"
    corpus = _corpus(tmp_path, records)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLKERNEL_")}
    env["TOOLKERNEL_KB_HOME"] = str(home)
    command = [
        TOOLKERNEL, "kb", "ingest", str(corpus), "--kb", "resumed", "--embedder", EMBEDDER,
        "--engine", "ray", "--actors", "2", "--batch-size", "2",
    ]  # fmt: skip
    before = _ray_of_a_run()
    folders = set(Path("/tmp").glob("tk-ray-*"))
    # The killed run starts a Ray of its own (the default); the rerun joins the module's.
    victim = subprocess.Popen(
        [*command, "--progress", "json", "--progress-every", "0"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert victim.stderr is not None
    seen_done = -1
    deadline = time.monotonic() + 300
    for line in victim.stderr:
        if time.monotonic() > deadline:
            break
        if '"ingest progress"' in line:
            info = json.loads(line)
            if 0 < info["documents"] < info["total"]:
                seen_done = info["documents"]
                break
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=30)
    assert 0 < seen_done < len(records), "the driver was not killed midway: nothing was tested"
    # The Ray the driver started dies with it (its processes share the driver's fate).
    deadline = time.monotonic() + 60
    while _ray_of_a_run() - before and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _ray_of_a_run() - before == set(), "the killed driver's Ray outlived it"
    for folder in set(Path("/tmp").glob("tk-ray-*")) - folders:  # its session files stay behind
        shutil.rmtree(folder, ignore_errors=True)
    rerun = subprocess.run(
        [*command, "--address", ray_address, "--quiet"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    summary = json.loads(rerun.stdout)
    assert summary["unchanged"] > 0  # the documents the killed run finished were not embedded again
    import anyio

    async def compare() -> tuple[dict[str, Any], dict[str, Any]]:
        await _local("clean", corpus, str(home))
        return await _state("clean", str(home), queries), await _state("resumed", str(home), queries)

    want, got = anyio.run(compare)
    assert got["counts"] == want["counts"]
    assert got["chunks"] == want["chunks"]  # every chunk once: no duplicates, none lost
    assert len({c[0] for c in got["chunks"]}) == len(got["chunks"])
    assert got["rankings"] == want["rankings"]


async def test_actors_the_cluster_cannot_place_are_refused_in_one_line(
    ray_address: str, tmp_path: Path
) -> None:
    from toolkernel_rag.cluster.connect import connect
    from toolkernel_rag.cluster.job import RayOptions, ingest_on_ray
    from toolkernel_rag.layout import KBError

    source = write_records(tmp_path / "c.jsonl", [{"id": "1", "text": "one"}])
    async with await KnowledgeBase.open(
        tmp_path / "kb", kernel=make_kernel(), create=True, embedder=EMBEDDER
    ) as kb:
        session = connect(None, 2)
        with pytest.raises(KBError, match=r"^--actors 5: the actors need 5 CPUs and the reading tasks 1"):
            await ingest_on_ray(kb, [str(source)], session, RayOptions(actors=5))
        with pytest.raises(KBError, match=r"^--gpus-per-actor 1 x --actors 2: the Ray cluster has 0 GPUs$"):
            await ingest_on_ray(kb, [str(source)], session, RayOptions(actors=2, gpus_per_actor=1))
        with pytest.raises(KBError, match=r"^--writers 2: only a PostgreSQL home has writer actors"):
            await ingest_on_ray(kb, [str(source)], session, RayOptions(actors=1, writers=2))
        assert kb.catalog.counts() == (0, 0, 0)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--engine", "ray", "--actors", "0"], "--actors must be at least 1, got 0"),
        (["--engine", "ray", "--batch-size", "0"], "--batch-size must be at least 1, got 0"),
        (["--actors", "2"], "--actors needs --engine ray"),
    ],
)
def test_bad_ray_options_are_one_line_and_exit_2(tmp_path: Path, arguments: list[str], message: str) -> None:
    source = write_records(tmp_path / "c.jsonl", [{"id": "1", "text": "one"}])
    run = subprocess.run(
        [TOOLKERNEL, "kb", "ingest", str(source), "--kb", str(tmp_path / "kb"), *arguments],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 2
    assert message in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "kb").exists()


def test_without_the_extra_the_error_says_what_to_install(tmp_path: Path) -> None:
    # Ray hidden: a module named ray that fails to import, first on the path (the extra's absence).
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "ray.py").write_text("raise ImportError('No module named ray')\n")
    source = write_records(tmp_path / "c.jsonl", [{"id": "1", "text": "one"}])
    env = {**os.environ, "PYTHONPATH": str(shadow)}
    run = subprocess.run(
        [TOOLKERNEL, "kb", "ingest", str(source), "--kb", str(tmp_path / "kb"), "--engine", "ray"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert run.returncode == 2
    assert "pip install 'toolkernel-rag[ray]'" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
