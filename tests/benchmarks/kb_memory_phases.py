"""Where an ingest's memory goes, phase by phase: RSS and Python allocations per phase.

Run from the repository root (a script, not a test)::

    .venv/bin/python tests/benchmarks/kb_memory_phases.py [--sizes 300,30000] [--no-tracemalloc]
        [--options=--no-extensions]

Runs ``toolkernel kb ingest`` of ``N`` small notes (the memory test's corpus, ``local/wordllama-256``)
in a child process per size, with the ingestion's steps wrapped: before each step the
process's peak RSS is reset (``/proc/self/clear_refs`` ← 5) and after it the peak (``VmHWM``)
and the resident set (``VmRSS``) are read, with ``RssFile`` (file-backed pages, e.g. Qdrant
Edge's memory-mapped segments) apart, and, unless ``--no-tracemalloc``, tracemalloc's peak
of Python allocations in the step. Prints, per size and phase, the highest peak any call of
that phase reached, the RSS after its last call, and the tracemalloc peak; then the same phase
side by side across sizes. tracemalloc adds its own bookkeeping to the RSS (and slows the run),
so read the RSS columns of a ``--no-tracemalloc`` run for absolute figures.
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
sys.path.insert(0, str(ROOT / "plugins" / "rag"))
from tests.test_rag_memory import notes  # noqa: E402

CHILD = r"""
import functools, inspect, json, sys, time, tracemalloc

TRACE = sys.argv[1] == "1"
OUT = sys.argv[2]
if TRACE:
    tracemalloc.start()


def status():
    fields = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "RssFile", "RssAnon"):
                fields[key] = int(value.split()[0]) / 1024
    return fields


def reset():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    if TRACE:
        tracemalloc.reset_peak()


PHASES = {}
ORDER = []
STACK = []


def record(name, seconds):
    now = status()
    row = PHASES.get(name)
    if row is None:
        row = PHASES[name] = dict.fromkeys(("peak", "rss", "file", "py_peak", "py_after", "seconds"), 0.0)
        row["calls"] = 0
        ORDER.append(name)
    row["calls"] += 1
    row["peak"] = max(row["peak"], now["VmHWM"])
    row["rss"] = now["VmRSS"]
    row["file"] = now["RssFile"]
    row["seconds"] += seconds
    if TRACE:
        current, peak = tracemalloc.get_traced_memory()
        row["py_peak"] = max(row["py_peak"], peak / 2**20)
        row["py_after"] = current / 2**20


def wrap(owner, attribute, name):
    original = getattr(owner, attribute)
    if inspect.iscoroutinefunction(original):
        @functools.wraps(original)
        async def wrapper(*args, **kwargs):
            if STACK:
                return await original(*args, **kwargs)
            STACK.append(name); reset(); t = time.perf_counter()
            try:
                return await original(*args, **kwargs)
            finally:
                record(name, time.perf_counter() - t); STACK.pop()
    else:
        @functools.wraps(original)
        def wrapper(*args, **kwargs):
            if STACK:
                return original(*args, **kwargs)
            STACK.append(name); reset(); t = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                record(name, time.perf_counter() - t); STACK.pop()
    setattr(owner, attribute, wrapper)


from toolkernel_rag import ingestion, catalog, sparse, kb as kbmod, sources

wrap(ingestion, "catch_up_extensions", "extensions (graph build)")
wrap(sparse.SparseIndex, "_save", "BM25 save (segments)")
wrap(catalog.Catalog, "mark_pending", "catalog: mark pending")
wrap(catalog.Catalog, "commit_documents", "catalog: commit chunks")
wrap(catalog.Catalog, "hashes_of", "catalog: a window's hashes")
wrap(ingestion, "finish_source", "deletions (gone from source)")
wrap(kbmod.KnowledgeBase, "aclose", "close (store flush)")

original_write = ingestion._write


async def write(kb, documents, known, report):
    # Embedder and store are reached through the open kb: wrap their instances once.
    if not getattr(kb, "_phases_wrapped", False):
        kb._phases_wrapped = True
        embedder = kb.embedder
        wrap(type(embedder), "embed", "embed")
        if not kb.vectors_in_catalog:
            wrap(type(kb.store), "upsert", "store upsert")
        chunker_factory = kb.chunker

        def chunker(kind, language=None):
            c = chunker_factory(kind, language)
            if not getattr(type(c), "_phases_wrapped", False):
                type(c)._phases_wrapped = True
                wrap(type(c), "chunk", "chunk")
            return c

        kb.chunker = chunker
    return await original_write(kb, documents, known, report)


ingestion._write = write
wrap(sources.SourceReader, "count", "read: count sources")

from toolkernel.cli import main

code = 0
try:
    main(sys.argv[3:])
except SystemExit as exc:
    code = exc.code or 0
final = status()
json.dump({"order": ORDER, "phases": PHASES, "final": final, "code": code}, open(OUT, "w"))
"""


def run(size: int, work: Path, trace: bool, options: list[str]) -> dict:
    source = notes(work / f"n{size}", size)
    out = work / f"phases{size}.json"
    command = ["kb", "ingest", str(source), "--kb", str(work / f"kb{size}"), "--quiet"]
    command += ["--embedder", "local/wordllama-256", *options]
    done = subprocess.run(
        [sys.executable, "-c", CHILD, "1" if trace else "0", str(out), *command],
        capture_output=True,
        text=True,
        timeout=7200,
        env={**os.environ},
    )
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    result = json.loads(out.read_text())
    result["summary"] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="300,30000")
    parser.add_argument("--no-tracemalloc", action="store_true")
    parser.add_argument("--options", default="", help="more kb ingest options, space-separated")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}; tracemalloc {'off' if args.no_tracemalloc else 'on'}")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for size in (int(s) for s in args.sizes.split(",")):
            results[size] = r = run(size, Path(tmp), not args.no_tracemalloc, args.options.split())
            s = r["summary"]
            print(
                f"\n{size} documents, {s['chunks']} chunks, {s['seconds']:.1f} s, "
                f"peak_rss_mb {s['peak_rss_mb']}"
            )
            print(
                f"{'phase':<28} {'calls':>6} {'peak MiB':>9} {'RSS after':>9} {'file-backed':>11} "
                f"{'py peak':>8} {'py after':>8} {'seconds':>8}"
            )
            for name in r["order"]:
                p = r["phases"][name]
                print(
                    f"{name:<28} {p['calls']:>6} {p['peak']:>9.1f} {p['rss']:>9.1f} {p['file']:>11.1f} "
                    f"{p['py_peak']:>8.1f} {p['py_after']:>8.1f} {p['seconds']:>8.1f}"
                )
            f = r["final"]
            print(
                f"{'end of process':<28} {'':>6} {f['VmHWM']:>9.1f} {f['VmRSS']:>9.1f} {f['RssFile']:>11.1f}"
            )
        sizes = sorted(results)
        if len(sizes) > 1:
            low, high = results[sizes[0]], results[sizes[-1]]
            print(f"\nphase peaks side by side ({sizes[0]} → {sizes[-1]} documents, MiB)")
            for name in high["order"]:
                a = low["phases"].get(name, {}).get("peak", 0.0)
                b = high["phases"][name]["peak"]
                print(f"{name:<28} {a:>8.1f} → {b:>8.1f}  (+{b - a:.1f})")


if __name__ == "__main__":
    main()
