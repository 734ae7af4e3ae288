"""Held-out search over real documentation from seven generators, through the MCP ``search`` tool.

Run from the repository root (a script, not a test)::

    .venv/bin/python tests/benchmarks/docs_search.py [--postgresql DIR] [--docusaurus DIR]

The corpus is real HTML as its generators wrote it, copied into one directory per generator
and ingested together, so every question competes with pages of every generator:

* Sphinx: the Python 3.11 HOWTOs (Debian ``python3.11-doc``; the library reference, which
  the easier set in ``html_extraction.py`` uses, is left out);
* MkDocs: MkDocs' own manual (``mkdocs-doc``);
* rustdoc: the module pages of Rust's ``std`` (``rust-doc``, ``std/*/index.html``);
* mdBook: chapters 4, 8, 9, 11, 12, 16 and 17 of *The Rust Programming Language* (``rust-doc``);
* DocBook: the Valgrind manual's tool and core chapters (``valgrind``);
* DocBook (PostgreSQL's): chapters 5 and 11 and some of 8 and 9 of the PostgreSQL 15 manual
  (``apt-get download postgresql-doc-15 && dpkg -x postgresql-doc-15_*.deb DIR``; pass
  ``--postgresql DIR/usr/share/doc/postgresql-doc-15/html``);
* Docusaurus 3 (preset-classic): nine pages of this repository's ``docs/`` built by
  ``docusaurus_site.py`` (``--docusaurus BUILD_DIR``, by default where that script builds).

The 47 questions below were written from the pages, each with the page (or pages, when two
answer it equally) that answers it, before any ranking was seen. The knowledge base is built
with the real command (``toolkernel kb ingest``, defaults: MiniLM int8, hybrid search) and
``toolkernel kb serve`` runs as a subprocess driven by the ``mcp`` SDK's client over stdio, as
an MCP host would. Each question is asked in the default mode (no ``mode`` argument),
``dense`` and ``sparse``, ``top_k`` 5. Reported per mode and per generator: hit@1, hit@5, and
the top-5 passages made of navigation text (``html_extraction.is_navigation``: at least half
of a passage's characters are lines of the pages' navigation, sidebars, tables of contents,
headers or footers). Writes ``tests/benchmarks/results/docs_search.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from html_extraction import DOC, RESULTS, _norm, furniture_lines, is_navigation

CALL_TIMEOUT = 120.0
TOP_K = 5
MODES: dict[str, dict[str, Any]] = {"default": {}, "dense": {"mode": "dense"}, "sparse": {"mode": "sparse"}}

# generator -> (root, globs under it); sized to about 2,000 chunks in all, so that one run fits
# on a shared 2-core machine (the Valgrind changelogs and the longest HOWTOs are left out).
CORPORA: dict[str, tuple[Path | None, tuple[str, ...]]] = {
    "sphinx": (DOC / "python3.11/html/howto", ("[a-k]*.html", "[m-z]*.html", "logging.html")),
    "mkdocs": (DOC / "mkdocs/html", ("*.html", "user-guide/*.html", "dev-guide/*.html")),
    "rustdoc": (DOC / "rust-doc/html/std", ("*/index.html", "sync/mpsc/index.html")),
    "mdbook": (DOC / "rust-doc/html/book", ("ch04-*.html", "ch08-*.html", "ch09-*.html", "ch11-*.html",
                                            "ch12-*.html", "ch16-*.html", "ch17-*.html")),
    "docbook": (DOC / "valgrind/html", ("*-manual.html", "manual-core.html", "manual-intro.html",
                                        "faq.html")),
    "postgresql": (None, ("ddl*.html", "indexes*.html", "datatype-uuid.html", "datatype-datetime.html",
                          "functions-datetime.html", "functions-string.html")),
    "docusaurus": (None, ("index.html", "*/index.html")),
}  # fmt: skip
SKIP = ("404.html", "search.html", "genindex.html", "logging-cookbook.html", "clinic.html")

# (question, generator, answer pages relative to the generator's root)
QUESTIONS: list[tuple[str, str, tuple[str, ...]]] = [
    ("How do I sort a list of objects by one of their attributes?", "sphinx", ("sorting.html",)),
    ("What does a descriptor's __set_name__ method receive?", "sphinx", ("descriptor.html",)),
    ("How do I make a regular expression match without regard to case?", "sphinx", ("regex.html",)),
    ("How do I fetch a URL while sending a custom User-Agent header?", "sphinx", ("urllib2.html",)),
    ("How can I check whether an IP address belongs to a network?", "sphinx", ("ipaddress.html",)),
    ("Why should a socket server use select to handle several clients?", "sphinx", ("sockets.html",)),
    ("How do I read a function's annotations safely in Python 3.10 and newer?", "sphinx",
     ("annotations.html",)),
    ("How do I normalize Unicode strings so composed and decomposed forms compare equal?", "sphinx",
     ("unicode.html",)),
    ("How do I publish my documentation to GitHub Pages?", "mkdocs",
     ("user-guide/deploying-your-docs.html",)),
    ("How do I set the order of pages in the site's navigation?", "mkdocs",
     ("user-guide/writing-your-docs.html", "user-guide/configuration.html")),
    ("How do I override a block of the theme's template to add my own content?", "mkdocs",
     ("user-guide/customizing-your-theme.html",)),
    ("Which plugin event lets me change a page's markdown before it is rendered?", "mkdocs",
     ("dev-guide/plugins.html",)),
    ("How do I make a theme available in another language?", "mkdocs",
     ("dev-guide/translations.html", "user-guide/localizing-your-theme.html")),
    ("Which command starts the live-reloading development server?", "mkdocs",
     ("getting-started.html", "user-guide/cli.html")),
    ("How do I spawn a new OS thread and wait for it to finish?", "rustdoc",
     ("thread/index.html", "../book/ch16-01-threads.html")),
    ("Which channel type sends values from many producers to one consumer?", "rustdoc",
     ("sync/mpsc/index.html", "../book/ch16-02-message-passing.html")),
    ("How do I read an environment variable of the current process?", "rustdoc",
     ("env/index.html", "../book/ch12-05-working-with-environment-variables.html")),
    ("How do I measure elapsed time with a monotonic clock?", "rustdoc", ("time/index.html",)),
    ("How do I wrap a reader in a buffer to read it line by line?", "rustdoc", ("io/index.html",)),
    ("How can a hash map use a custom hashing algorithm?", "rustdoc",
     ("hash/index.html",)),
    ("How do I join and split file system paths in a platform-independent way?", "rustdoc",
     ("path/index.html",)),
    ("What are the three rules of ownership?", "mdbook", ("ch04-01-what-is-ownership.html",)),
    ("How does the question mark operator propagate errors?", "mdbook",
     ("ch09-02-recoverable-errors-with-result.html",)),
    ("How can one vector hold values of different types?", "mdbook", ("ch08-01-vectors.html",)),
    ("Where do integration tests go and how do they use the library?", "mdbook",
     ("ch11-03-test-organization.html",)),
    ("How does the compiler prevent dangling references?", "mdbook",
     ("ch04-02-references-and-borrowing.html",)),
    ("How do I share a counter between threads with Mutex and Arc?", "mdbook",
     ("ch16-03-shared-state.html",)),
    ("How do trait objects let a collection hold values of different types that share behaviour?",
     "mdbook", ("ch17-02-trait-objects.html",)),
    ("How do I find memory leaks in my C program?", "docbook", ("mc-manual.html",)),
    ("How do I detect data races between threads that use POSIX mutexes?", "docbook",
     ("hg-manual.html", "drd-manual.html")),
    ("How do I find which source lines cause cache misses?", "docbook", ("cg-manual.html",)),
    ("How do I measure how much heap memory my program uses over time?", "docbook", ("ms-manual.html",)),
    ("How do I produce call-graph profile data to view in KCachegrind?", "docbook", ("cl-manual.html",)),
    ("How do I write a suppression file to hide errors coming from system libraries?", "docbook",
     ("manual-core.html",)),
    ("How do I create an index over only some rows of a table?", "postgresql", ("indexes-partial.html",)),
    ("How can an index support case-insensitive lookups with lower(column)?", "postgresql",
     ("indexes-expressional.html",)),
    ("How do I require that a product's price is positive?", "postgresql", ("ddl-constraints.html",)),
    ("How do I split a large table into partitions by date range?", "postgresql",
     ("ddl-partitioning.html",)),
    ("Which data type stores universally unique identifiers?", "postgresql", ("datatype-uuid.html",)),
    ("How do I get the year out of a timestamp?", "postgresql", ("functions-datetime.html",)),
    ("How does a table inherit the columns of a parent table?", "postgresql", ("ddl-inherit.html",)),
    ("How do I serve a knowledge base to an MCP host over stdio?", "docusaurus", ("rag/index.html",)),
    ("What must an embedder's embed method return for an empty list of texts?", "docusaurus",
     ("embedders/index.html",)),
    ("Which operators does the metadata filter language of vector stores support?", "docusaurus",
     ("vector-stores/index.html",)),
    ("How do I export traces of hook calls and MCP requests with OpenTelemetry?", "docusaurus",
     ("observability/index.html",)),
    ("How do I run several server replicas behind a load balancer?", "docusaurus",
     ("deployment/index.html",)),
    ("Which offline embedding models does the local embedder provide?", "docusaurus",
     ("local-embed/index.html",)),
]  # fmt: skip

# Docusaurus's table of contents and doc footer, beside html_extraction's furniture.
EXTRA_FURNITURE = (
    "//*[contains(@class, 'table-of-contents')] | //*[contains(@class, 'theme-doc-footer')] "
    "| //*[contains(@class, 'theme-doc-toc-mobile')]"
)


def gather(corpus: Path, roots: dict[str, Path], cost: dict[str, Any]) -> dict[str, set[str]]:
    """Copy every page of every generator found under ``corpus/<generator>/``; their furniture lines.

    ``cost`` gets each generator's pages, megabytes and the ``html`` reader's milliseconds per page
    (its ``html_to_markdown``, the median of three passes over the pages, wall clock).
    """
    import statistics

    import lxml.html

    from toolkernel_rag.readers.html import html_to_markdown

    furniture: dict[str, set[str]] = {}
    for generator, (default_root, patterns) in CORPORA.items():
        root = roots.get(generator, default_root)
        if root is None or not root.is_dir():
            print(f"  {generator}: not found, left out", flush=True)
            continue
        pages = sorted({p for pattern in patterns for p in root.glob(pattern) if p.name not in SKIP})
        lines: set[str] = set()
        for page in pages:
            target = corpus / generator / page.relative_to(root)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(page, target)
            html = page.read_bytes()
            lines |= furniture_lines(html)
            tree = lxml.html.document_fromstring(html)
            for node in tree.xpath(EXTRA_FURNITURE):
                lines |= {_norm(line) for line in node.text_content().splitlines()}
                lines |= {_norm(part.text_content()) for part in node.iter() if isinstance(part.tag, str)}
        furniture[generator] = {line for line in lines if len(line) >= 3}
        passes = []
        for _ in range(3):
            started = time.perf_counter()
            for page in pages:
                html_to_markdown(page.read_bytes())
            passes.append(time.perf_counter() - started)
        cost[generator] = {
            "pages": len(pages),
            "mb": round(sum(p.stat().st_size for p in pages) / 1e6, 2),
            "reader_ms_per_page": round(1000 * statistics.median(passes) / max(1, len(pages)), 1),
        }
        print(f"  {generator}: {len(pages)} pages from {root}: {cost[generator]}", flush=True)
    return furniture


def answer_ids(generator: str, pages: tuple[str, ...]) -> set[str]:
    """The document ids of a question's answer pages (``corpus/<generator>/<page>``)."""
    out = set()
    for page in pages:
        if page.startswith("../book/"):  # the Rust book answers some std questions too
            out.add(f"corpus/mdbook/{page.removeprefix('../book/')}")
        else:
            out.add(f"corpus/{generator}/{page}")
    return out


def ingest(corpus: Path, kb: Path) -> dict[str, Any]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "toolkernel", "kb", "ingest", str(corpus), "--kb", str(kb), "--quiet"],
        capture_output=True, text=True, timeout=3 * 3600, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"kb ingest failed ({done.returncode}):\n{done.stderr[-3000:]}")
    report = json.loads(done.stdout.strip().splitlines()[-1])
    report["wall_seconds"] = round(time.perf_counter() - started, 1)
    return report


async def ask(
    kb: Path, questions: list[tuple[str, str, tuple[str, ...]]], furniture: set[str]
) -> dict[str, Any]:
    """Every question in every mode through one ``kb serve``; hits and navigation passages."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "toolkernel", "kb", "serve", "--kb", str(kb)]
    )
    rows: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
    with open(os.devnull, "w") as devnull:  # noqa: ASYNC230 (once, before any call)
        async with Client(stdio_client(params, errlog=devnull), mode="legacy") as client:
            for number, (question, generator, pages) in enumerate(questions):
                wanted = answer_ids(generator, pages)
                names = list(MODES)
                for shift in range(len(names)):  # rotate so machine noise lands on all modes alike
                    mode = names[(number + shift) % len(names)]
                    with anyio.fail_after(CALL_TIMEOUT):
                        result = await client.call_tool(
                            "search", {"query": question, "top_k": TOP_K, **MODES[mode]}
                        )
                    if result.is_error:
                        raise RuntimeError(f"search failed for {question!r}: {result.content}")
                    hits = (result.structured_content or {}).get("results", [])
                    ids = [str(h["document_id"]) for h in hits]
                    texts = [str(h.get("text", "")) for h in hits[:TOP_K]]
                    navigation = [text for text in texts if is_navigation(text, furniture)]
                    rows[mode].append(
                        {
                            "question": question,
                            "generator": generator,
                            "hit_at_1": bool(ids) and ids[0] in wanted,
                            "hit_at_5": bool(wanted & set(ids[:TOP_K])),
                            "navigation": navigation,
                            "top": ids[:TOP_K],
                        }
                    )
    return rows


def summarize(rows: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for mode, answers in rows.items():
        per: dict[str, dict[str, int]] = {}
        for row in answers:
            for key in ("all", row["generator"]):
                cell = per.setdefault(
                    key, {"questions": 0, "hit_at_1": 0, "hit_at_5": 0, "navigation_in_top5": 0}
                )
                cell["questions"] += 1
                cell["hit_at_1"] += row["hit_at_1"]
                cell["hit_at_5"] += row["hit_at_5"]
                cell["navigation_in_top5"] += len(row["navigation"])
        out[mode] = per
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--postgresql", type=Path, help="PostgreSQL 15's HTML manual (postgresql-doc-15)")
    parser.add_argument(
        "--docusaurus",
        type=Path,
        default=Path(__file__).resolve().parent / ".cache" / "docusaurus" / "build",
        help="a Docusaurus build of this repository's docs/ (default: docusaurus_site.py's)",
    )
    parser.add_argument("--work", type=Path, help="keep the corpus and knowledge base here (default: temp)")
    parser.add_argument("--out", type=Path, default=RESULTS / "docs_search.json")
    args = parser.parse_args()
    given = (("postgresql", args.postgresql), ("docusaurus", args.docusaurus))
    roots = {k: v for k, v in given if v is not None}
    report: dict[str, Any] = {
        "benchmark": "docs_search",
        "top_k": TOP_K,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "load": os.getloadavg()},
    }
    with tempfile.TemporaryDirectory() as scratch:
        work = args.work or Path(scratch)
        corpus, kb = work / "corpus", work / "kb"
        if corpus.exists():
            shutil.rmtree(corpus)
        report["pages"] = {}
        furniture_by_generator = gather(corpus, roots, report["pages"])
        furniture = set().union(*furniture_by_generator.values())
        questions = [q for q in QUESTIONS if q[1] in furniture_by_generator]
        report["ingest"] = ingest(corpus, kb)
        print(f"  ingested: {report['ingest']}", flush=True)
        rows = anyio.run(ask, kb, questions, furniture)
    report["questions"] = len(questions)
    report["summary"] = summarize(rows)
    report["answers"] = rows
    report["machine"]["load_end"] = os.getloadavg()
    print(f"\n{len(questions)} questions, top_k {TOP_K}: hit@1 / hit@5 / navigation passages in the top 5")
    generators = ["all", *furniture_by_generator]
    print(f"{'generator':<12} {'n':>3} " + " ".join(f"{mode:>16}" for mode in MODES))
    for generator in generators:
        cells = [report["summary"][mode].get(generator) for mode in MODES]
        n = cells[0]["questions"] if cells[0] else 0
        print(
            f"{generator:<12} {n:>3} "
            + " ".join(
                f"{c['hit_at_1']:>6} {c['hit_at_5']:>4} {c['navigation_in_top5']:>4}" for c in cells if c
            )
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
