"""Peak memory of ``toolkernel kb ingest``, measured from outside as the child's peak RSS.

Run from the repository root (a script, not a test)::

    .venv/bin/python tests/benchmarks/kb_memory.py [--sizes 300,30000] [--html DIR]

* **Corpus size.** ``N`` small markdown notes (a heading and 60 words, 1,000 to a directory)
  ingested with ``local/wordllama-256``, a fast embedder, so the pipeline and the store are
  what is measured; one run per size, side by side, and the ratio of the peaks. Installed
  knowledge-base extensions (GraphRAG's graph) run as ``kb ingest`` runs them; pass
  ``--options=--no-extensions`` to leave them out.
* **MiniLM on real HTML** (``--html DIR``, e.g. a copy of 32 pages of Debian's
  ``python3.11-doc`` under ``/usr/share/doc/python3.11/html``): the default embedder with its
  model calls bounded at ``batch_tokens`` = 2,048, beside the same ingest with the bound lifted
  (``TOOLKERNEL_LOCAL_BATCH_TOKENS=1000000``: 32 texts a call, as before the bound).

Each ingest runs in a child of a small wrapper whose only child it is, so ``RUSAGE_CHILDREN``
is exactly that process's peak (``wait4``). Writes nothing; prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOOLKERNEL = str(ROOT / ".venv" / "bin" / "toolkernel")
# The corpus and the peak-RSS wrapper are the memory test's own, so both measure the same thing.
sys.path.insert(0, str(ROOT / "plugins" / "rag"))
from tests.test_rag_memory import MEASURE, notes  # noqa: E402


def ingest_peak(
    source: Path, kb: Path, *options: str, env: dict[str, str] | None = None
) -> tuple[float, dict]:
    """Peak RSS (MiB) and summary of one ``kb ingest`` run in a child process."""
    peak_file = kb.with_suffix(".peak")
    command = [
        TOOLKERNEL,
        "kb",
        "ingest",
        str(source),
        "--kb",
        str(kb),
        "--quiet",
        *options,
    ]
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, str(peak_file), *command],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=3600,
    )
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    return int(peak_file.read_text()) / 1024, json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="300,30000", help="corpus sizes, comma-separated")
    parser.add_argument("--html", type=Path, help="a directory of HTML pages to ingest with MiniLM")
    parser.add_argument("--options", default="", help="more kb ingest options, space-separated")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        peaks: dict[int, float] = {}
        for size in (int(s) for s in args.sizes.split(",")):
            peak, summary = ingest_peak(
                notes(work / f"n{size}", size),
                work / f"kb{size}",
                "--embedder",
                "local/wordllama-256",
                *args.options.split(),
            )
            peaks[size] = peak
            print(
                f"wordllama  {size:>7} documents  {summary['chunks']:>7} chunks  peak {peak:7.0f} MiB  "
                f"{summary['seconds']:7.1f} s"
            )
        if len(peaks) > 1:
            low, high = min(peaks), max(peaks)
            print(f"ratio of peaks, {high} / {low} documents: {peaks[high] / peaks[low]:.2f}")
        if args.html:
            for label, env in (
                ("bounded (2,048 tokens a call)", {}),
                ("unbounded (32 texts a call)", {"TOOLKERNEL_LOCAL_BATCH_TOKENS": "1000000"}),
            ):
                peak, summary = ingest_peak(
                    args.html, work / f"kb-html-{len(env)}", *args.options.split(), env=env
                )
                print(
                    f"MiniLM {label:<30} {summary['documents']:>4} pages  {summary['chunks']:>6} chunks  "
                    f"peak {peak:7.0f} MiB  {summary['seconds']:7.1f} s"
                )


if __name__ == "__main__":
    main()
