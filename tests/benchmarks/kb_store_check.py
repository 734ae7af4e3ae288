"""What a writer's store check reads from the catalog on open, the old way against the kept count.

Run from the repository root (a script, not a test)::

    .venv/bin/python tests/benchmarks/kb_store_check.py --chunks 300000
    .venv/bin/python tests/benchmarks/kb_store_check.py --catalog path/to/catalog.sqlite   # a copy

A catalog of ``--chunks`` one-chunk documents (256-dimensional vectors, written through
``Catalog.mark_pending`` and ``commit_documents`` as an ingest writes them) is made in a
temporary directory, or an existing one is read (give a copy: a writer's open adds the kept
count to it). Then, alternating, best of ``--rounds``:

* **before**: every document's hash and state read into a dict to find the pending ones, and
  the done documents' vectors counted with a join over every chunk;
* **now**: the pending documents read from their partial index, and the kept count (one row).

The two must agree; prints a JSON summary with the seconds of each and their ratio.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from toolkernel_rag.catalog import Catalog, StoredChunk


def make_catalog(path: Path, chunks: int) -> None:
    """``chunks`` documents of one chunk each, written 256 at a time as an ingest writes them."""
    catalog = Catalog(path)
    rng = random.Random(7)
    vector = [rng.random() for _ in range(256)]
    for first in range(0, chunks, 256):
        ids = [f"src/d{i:07d}" for i in range(first, min(first + 256, chunks))]
        catalog.mark_pending([(i, "src", "h", {}, "text " * 60, "text") for i in ids])
        catalog.commit_documents(
            ids, [StoredChunk(f"{i}#0", i, 0, 0, 300, "text " * 60, {}, vector, "text") for i in ids]
        )
    catalog.close()


def best(rounds: int, read: Callable[[], tuple[list[str], int]]) -> tuple[float, tuple[list[str], int]]:
    times, result = [], None
    for _ in range(rounds):
        started = time.perf_counter()
        result = read()
        times.append(time.perf_counter() - started)
    assert result is not None
    return min(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=300_000)
    parser.add_argument("--catalog", type=Path, help="an existing catalog (a copy: it gains the kept count)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.catalog or Path(tmp) / "catalog.sqlite"
        made = 0.0
        if args.catalog is None:
            started = time.perf_counter()
            make_catalog(path, args.chunks)
            made = time.perf_counter() - started
        started = time.perf_counter()
        Catalog(path).close()  # a writer's open: an older catalog gets its index, triggers and count
        first_open = time.perf_counter() - started
        catalog = Catalog(path, writable=False)

        def before() -> tuple[list[str], int]:
            pending = sorted(d for d, (_, state) in catalog.hashes().items() if state == "pending")
            return pending, catalog.vector_count(done_only=True)

        def now() -> tuple[list[str], int]:
            return catalog.pending_documents(), catalog.kept_done_vectors()

        old_seconds, old = best(args.rounds, before)
        new_seconds, new = best(args.rounds, now)
        assert old == new, (old[1], new[1])
        print(
            json.dumps(
                {
                    "chunks": catalog.counts()[2],
                    "catalog_made_seconds": round(made, 1),
                    "first_writer_open_seconds": round(first_open, 3),
                    "before_seconds": round(old_seconds, 4),
                    "now_seconds": round(new_seconds, 6),
                    "ratio": round(old_seconds / max(new_seconds, 1e-6)),
                },
                indent=2,
            )
        )
        catalog.close()


if __name__ == "__main__":
    main()
