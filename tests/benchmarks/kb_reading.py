"""Reading cost of ``kb ingest``: SciFact's corpus.jsonl through the readers, beside the code they replaced.

Run from the repository root (a script, not a test)::

    .venv/bin/python tests/benchmarks/kb_reading.py [--rounds 5]

``kb ingest`` now counts the work first (one pass over every ``.jsonl`` line) and reads each
file through the reader registered for its suffix. This measures what that costs on the
5,183 SciFact abstracts (``shared/datasets/scifact/corpus.jsonl`` beside the checkout), CPU seconds of this
process, contenders alternating from round to round, the median reported:

* ``before``: the record loop ``sources.py`` had (copied below as it was);
* ``readers``: ``SourceReader.count()`` then ``SourceReader.documents()`` through the
  registry, as ingestion runs them now.

Both must yield the same documents (checked). The rest of ingestion (chunking, embedding,
storing) is unchanged by the readers; ``kb_ingest.py`` measures it whole.
Writes ``tests/benchmarks/results/kb_reading.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import beir

CORPUS = beir.DATASETS / "scifact" / "corpus.jsonl"
RESULTS = beir.RESULTS


def before(path: Path) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """The ``.jsonl`` loop of ``SourceReader._records`` before the readers (problems dropped)."""
    from toolkernel_rag.readers.text import is_metadata_value
    from toolkernel_rag.sources import Document

    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if not line.strip():
                continue
            record = json.loads(line)
            if not isinstance(record, dict) or not isinstance(record.get("text"), str):
                continue
            doc_id = record.get("_id", record.get("id"))
            title = record.get("title")
            body = record["text"]
            text = f"{title}\n\n{body}" if isinstance(title, str) and title.strip() else body
            meta = {
                k: v for k, v in record.items() if k not in ("_id", "id", "text") and is_metadata_value(v)
            }
            meta["path"] = path.name
            key = str(path.expanduser().resolve())  # the old ``self.key``, a property read per record
            document = Document(str(doc_id), text, "text", meta, key)  # hashed on creation, as it was
            yield document.id, document.text, document.metadata


def readers(path: Path) -> Iterator[tuple[str, str, dict[str, Any]]]:
    from toolkernel_rag.sources import SourceReader

    reader = SourceReader(str(path))
    reader.count()
    for document in reader.documents():
        yield document.id, document.text, document.metadata


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--out", type=Path, default=RESULTS / "kb_reading.json")
    args = parser.parse_args()
    contenders = {"before": before, "readers": readers}
    assert list(before(args.corpus)) == list(readers(args.corpus)), "the two paths disagree"
    seconds: dict[str, list[float]] = {name: [] for name in contenders}
    documents = sum(1 for _ in before(args.corpus))
    for round_ in range(args.rounds):
        order = list(contenders) if round_ % 2 == 0 else list(reversed(contenders))
        for name in order:
            started = time.process_time()
            for _ in contenders[name](args.corpus):
                pass
            seconds[name].append(time.process_time() - started)
    rows = {
        name: {
            "cpu_s_median": round(statistics.median(values), 4),
            "cpu_us_per_document": round(1e6 * statistics.median(values) / documents, 1),
            "rounds": [round(v, 4) for v in values],
        }
        for name, values in seconds.items()
    }
    ratio = rows["readers"]["cpu_s_median"] / rows["before"]["cpu_s_median"]
    print(f"{documents} documents, {args.rounds} rounds (median CPU)")
    for name, row in rows.items():
        print(f"{name:<8} {row['cpu_s_median']:>8.3f} s  {row['cpu_us_per_document']:>7.1f} us/document")
    print(f"readers / before: {ratio:.2f}x")
    report = {
        "benchmark": "kb_reading",
        "documents": documents,
        "python": platform.python_version(),
        "rows": rows,
        "ratio": round(ratio, 3),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
