"""Ingestion of SciFact: toolkernel's knowledge base beside LlamaIndex and LangChain, in one run.

Run from the repository root (a script, not a test; llama-index imports nltk, which refuses
uv's hard-linked files, so the bench group is installed with ``UV_LINK_MODE=copy``)::

    UV_LINK_MODE=copy .tools/bin/uv sync --all-packages --all-extras --group bench
    .venv/bin/python tests/benchmarks/kb_ingest.py [--embedder free|minilm] [--rounds N]

The same 5,183 abstracts (``title\\n\\ntext``, as toolkernel reads a BEIR ``corpus.jsonl``) go
through three pipelines, each chunking to 250 MiniLM tokens with 30 of overlap, embedding with
the same function, and storing the vectors:

* ``toolkernel``: ``KnowledgeBase.open(create=True)`` + ``ingest`` (the code behind ``toolkernel
  kb ingest``): chunker, batched embedding, Qdrant Edge on disk, the SQLite catalog (content
  hashes, chunk texts), the BM25 index.
* ``llamaindex``: ``IngestionPipeline([SentenceSplitter, embed_model], vector_store=SimpleVectorStore)``
  with a docstore, so a rerun skips unchanged documents as toolkernel's does.
* ``langchain``: ``RecursiveCharacterTextSplitter`` (token length) + ``InMemoryVectorStore``.

``--embedder minilm`` embeds with all-MiniLM-L6-v2 int8 (``local/minilm-l6-int8``) for all three;
``--embedder free`` (the default on a busy machine) with a hash of the text, which costs
microseconds, so what is left is each pipeline's own time. Beside it, MiniLM's own time is
measured on every 20th toolkernel chunk and scaled to all chunks: the yardstick the pipeline
overhead is a share of. Reported per pipeline: documents/s (wall), CPU ms/document (this process,
all threads: on a shared machine the robust figure), the chunks made, the CPU spent inside the
embedding function and the pipeline's own CPU (chunking, storing, bookkeeping; toolkernel's
wall-clock split into chunk / embed / store / other beside it), the pipeline's own CPU as a share
of what MiniLM needs for that many chunks, and for toolkernel and LlamaIndex a rerun over the
unchanged corpus as a share of the first ingest. Contenders alternate from round to round.
Writes ``tests/benchmarks/results/kb_ingest.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import beir

CHUNK_TOKENS = 250
OVERLAP = 30
DIMENSION = 384
MINILM = "local/minilm-l6-int8"
SAMPLE_EVERY = 20


@dataclass
class Spent:
    """Wall-clock and CPU seconds (this process, all threads) accumulated over some calls."""

    wall: float = 0.0
    cpu: float = 0.0

    @contextlib.contextmanager
    def clock(self) -> Iterator[None]:
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self.wall += time.perf_counter() - wall
            self.cpu += time.process_time() - cpu


class TimedEmbed:
    """The one embedding function every pipeline calls, timing itself."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.spent = Spent()
        self.texts = 0
        self._encoder: Any = None
        if kind == "minilm":
            from toolkernel_local_embed.models import MODELS, load_encoder

            self._encoder = load_encoder(MODELS["minilm-l6-int8"], max_tokens=256, threads=None)

    def reset(self) -> None:
        self.spent, self.texts = Spent(), 0

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        with self.spent.clock():
            return self._embed(texts)

    def _embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts += len(texts)
        if self._encoder is not None:
            vectors = [
                row
                for i in range(0, len(texts), 32)
                for row in self._encoder.encode(list(texts[i : i + 32])).tolist()
            ]
        else:
            vectors = [_hash_vector(t) for t in texts]
        return vectors


def _hash_vector(text: str) -> list[float]:
    """A unit vector that is a fixed function of the text: a free stand-in for a model."""
    seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
    vector = np.random.default_rng(seed).standard_normal(DIMENSION).astype(np.float32)
    return (vector / np.linalg.norm(vector)).tolist()


def minilm_token_count() -> Callable[[str], int]:
    """Length of a text in MiniLM tokens (no special tokens, no truncation): every splitter's ruler."""
    from toolkernel_rag.chunking import load_tokenizer

    tokenizer = load_tokenizer(MINILM)
    return lambda text: len(tokenizer.encode(text, add_special_tokens=False).ids)


def records(corpus: Path) -> list[tuple[str, str, dict[str, Any]]]:
    """``(id, text, metadata)`` per corpus record, the text built as toolkernel builds it."""
    out = []
    for line in corpus.read_text().splitlines():
        record = json.loads(line)
        title, body = record.get("title") or "", record.get("text") or ""
        text = f"{title}\n\n{body}" if title.strip() else body
        out.append((str(record["id"]), text, {"id": str(record["id"]), "title": title}))
    return out


# -- the contenders -----------------------------------------------------------------------------


def run_toolkernel(corpus: Path, embed: TimedEmbed, workdir: Path) -> dict[str, Any]:
    """toolkernel's ingestion into a fresh knowledge base, then a rerun over the unchanged corpus."""
    from toolkernel import Kernel, hookimpl
    from toolkernel_rag.ingest import ingest
    from toolkernel_rag.kb import KnowledgeBase

    class BenchEmbedder:
        name = "bench/timed"
        dimension = DIMENSION

        async def embed(self, texts: Sequence[str]) -> list[list[float]]:
            return await asyncio.to_thread(embed, list(texts))

    class Plugin:
        @hookimpl
        def register_embedders(self, registry: Any) -> None:
            registry.add("bench", lambda model, **options: BenchEmbedder())

    chunker = {
        "name": "auto",
        "size": CHUNK_TOKENS,
        "overlap": OVERLAP,
        "length": "tokens",
        "tokenizer": MINILM,
    }

    async def go() -> dict[str, Any]:
        kernel = Kernel(plugins=[Plugin()])
        kb = await KnowledgeBase.open(
            workdir / "kb", kernel=kernel, create=True, embedder="bench/timed", chunker=chunker
        )
        try:
            first = await ingest(kb, [str(corpus)])
            rerun = Spent()
            with rerun.clock():
                again = await ingest(kb, [str(corpus)])
        finally:
            await kb.aclose()
        other = first.seconds - first.chunk_seconds - first.embed_seconds - first.store_seconds
        return {
            "chunks": first.chunks,
            "breakdown_wall_s": {
                "chunk": round(first.chunk_seconds, 2),
                "embed": round(first.embed_seconds, 2),
                "store": round(first.store_seconds, 2),
                "other": round(other, 2),
            },
            "rerun": rerun,
            "rerun_unchanged": again.unchanged,
        }

    return asyncio.run(go())


def run_llamaindex(corpus: Path, embed: TimedEmbed, workdir: Path) -> dict[str, Any]:
    """LlamaIndex's IngestionPipeline with a docstore (dedup by hash) and its SimpleVectorStore."""
    from llama_index.core import Document
    from llama_index.core.embeddings import BaseEmbedding
    from llama_index.core.ingestion import DocstoreStrategy, IngestionPipeline
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index.core.storage.docstore import SimpleDocumentStore
    from llama_index.core.vector_stores import SimpleVectorStore

    class Embedding(BaseEmbedding):
        def _get_query_embedding(self, query: str) -> list[float]:
            return embed([query])[0]

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return embed([query])[0]

        def _get_text_embedding(self, text: str) -> list[float]:
            return embed([text])[0]

        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return embed(texts)

    from toolkernel_rag.chunking import load_tokenizer

    tokenizer = load_tokenizer(MINILM)
    splitter = SentenceSplitter(
        chunk_size=CHUNK_TOKENS,
        chunk_overlap=OVERLAP,
        tokenizer=lambda text: tokenizer.encode(text, add_special_tokens=False).ids,
    )
    pipeline = IngestionPipeline(
        transformations=[splitter, Embedding(embed_batch_size=32)],
        vector_store=SimpleVectorStore(),
        docstore=SimpleDocumentStore(),
        docstore_strategy=DocstoreStrategy.UPSERTS,
    )

    def documents() -> list[Any]:
        return [Document(text=text, id_=doc_id, metadata=meta) for doc_id, text, meta in records(corpus)]

    nodes = pipeline.run(documents=documents())
    rerun = Spent()
    with rerun.clock():
        again = pipeline.run(documents=documents())
    return {"chunks": len(nodes), "rerun": rerun, "rerun_nodes": len(again)}


def run_langchain(corpus: Path, embed: TimedEmbed, workdir: Path) -> dict[str, Any]:
    """LangChain's RecursiveCharacterTextSplitter (token length) and InMemoryVectorStore."""
    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings
    from langchain_core.vectorstores import InMemoryVectorStore
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    class Embedding(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return embed(texts)

        def embed_query(self, text: str) -> list[float]:
            return embed([text])[0]

    splitter = RecursiveCharacterTextSplitter(
        chunk_size=CHUNK_TOKENS, chunk_overlap=OVERLAP, length_function=minilm_token_count()
    )
    docs = [Document(page_content=text, metadata=meta, id=doc_id) for doc_id, text, meta in records(corpus)]
    chunks = splitter.split_documents(docs)
    store = InMemoryVectorStore(Embedding())
    store.add_documents(chunks)
    return {"chunks": len(chunks)}


CONTENDERS: dict[str, Callable[[Path, TimedEmbed, Path], dict[str, Any]]] = {
    "toolkernel": run_toolkernel,
    "llamaindex": run_llamaindex,
    "langchain": run_langchain,
}


def measure(name: str, corpus: Path, embed: TimedEmbed, documents: int) -> dict[str, Any]:
    """One ingestion by ``name`` in a fresh directory, and its rerun: wall and CPU time of each."""
    embed.reset()
    total = Spent()
    with tempfile.TemporaryDirectory(prefix=f"kb-ingest-{name}-") as tmp, total.clock():
        row = CONTENDERS[name](corpus, embed, Path(tmp))
    rerun: Spent | None = row.pop("rerun", None)
    first = Spent(total.wall - (rerun.wall if rerun else 0), total.cpu - (rerun.cpu if rerun else 0))
    inside = embed.spent  # the rerun embeds nothing: every embedding call belongs to the first run
    row.update(
        contender=name,
        wall_s=round(first.wall, 2),
        cpu_s=round(first.cpu, 2),
        docs_per_s=round(documents / first.wall, 1),
        cpu_ms_per_doc=round(1000 * first.cpu / documents, 2),
        embed_wall_s=round(inside.wall, 2),
        embed_cpu_s=round(inside.cpu, 2),
        pipeline_cpu_s=round(first.cpu - inside.cpu, 2),
    )
    if rerun is not None:
        row.update(
            rerun_wall_s=round(rerun.wall, 2),
            rerun_cpu_s=round(rerun.cpu, 2),
            rerun_share_wall=round(rerun.wall / first.wall, 4),
            rerun_share_cpu=round(rerun.cpu / first.cpu, 4),
        )
    return row


def minilm_own_time(corpus: Path) -> dict[str, float]:
    """MiniLM's own wall and CPU time per chunk, on every SAMPLE_EVERY-th document cut to one chunk."""
    from toolkernel_rag.chunking import load_tokenizer

    tokenizer = load_tokenizer(MINILM)
    texts = []
    for _, text, _ in records(corpus)[::SAMPLE_EVERY]:
        ids = tokenizer.encode(text, add_special_tokens=False).ids[:CHUNK_TOKENS]
        texts.append(tokenizer.decode(ids))
    model = TimedEmbed("minilm")
    model(["warm up"])
    model.reset()
    model(texts)
    return {
        "sampled_chunks": len(texts),
        "wall_ms_per_chunk": round(1000 * model.spent.wall / len(texts), 2),
        "cpu_ms_per_chunk": round(1000 * model.spent.cpu / len(texts), 2),
    }


def import_everything() -> None:
    """Import every pipeline's modules before any clock starts (llama-index alone takes seconds)."""
    import importlib

    for module in (
        "langchain_core.vectorstores",
        "langchain_text_splitters",
        "llama_index.core.ingestion",
        "llama_index.core.vector_stores",
        "toolkernel_rag.ingest",
        "toolkernel_rag.kb",
    ):
        importlib.import_module(module)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--embedder", choices=("free", "minilm"), default="free")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--only", nargs="+", choices=list(CONTENDERS), default=list(CONTENDERS))
    parser.add_argument("--out", type=Path, default=beir.RESULTS / "kb_ingest.json")
    args = parser.parse_args()
    corpus = beir.DATASETS / "scifact" / "corpus.jsonl"
    documents = len(corpus.read_text().splitlines())
    import_everything()
    embed = TimedEmbed(args.embedder)
    rows: list[dict[str, Any]] = []
    for number in range(args.rounds):
        order = args.only[number % len(args.only) :] + args.only[: number % len(args.only)]
        for name in order:
            row = measure(name, corpus, embed, documents)
            row["round"] = number + 1
            rows.append(row)
            print(json.dumps(row), flush=True)
    yardstick = minilm_own_time(corpus) if args.embedder == "free" else None
    print()
    print(
        f"{'pipeline':<11} {'docs/s':>7} {'CPU ms/doc':>10} {'chunks':>7} {'embed CPU s':>11} "
        f"{'own CPU s':>9} {'vs MiniLM':>9} {'rerun':>6}"
    )
    for row in rows:
        own_embedder = (
            row["embed_cpu_s"] if yardstick is None else yardstick["cpu_ms_per_chunk"] * row["chunks"] / 1000
        )
        row["overhead_vs_embedder"] = round(row["pipeline_cpu_s"] / own_embedder, 4)
        rerun = f"{row['rerun_share_cpu']:.1%}" if "rerun_share_cpu" in row else "-"
        print(
            f"{row['contender']:<11} {row['docs_per_s']:>7.1f} {row['cpu_ms_per_doc']:>10.2f} "
            f"{row['chunks']:>7} {row['embed_cpu_s']:>11.2f} {row['pipeline_cpu_s']:>9.2f} "
            f"{row['overhead_vs_embedder']:>9.1%} {rerun:>6}"
        )
    if yardstick:
        print(f"MiniLM's own time per chunk (sampled): {yardstick}")
    report = {
        "benchmark": "kb_ingest",
        "embedder": args.embedder,
        "documents": documents,
        "chunk_tokens": CHUNK_TOKENS,
        "overlap": OVERLAP,
        "minilm_yardstick": yardstick,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "load": os.getloadavg()},
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
