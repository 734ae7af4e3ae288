"""HTML extraction: page furniture, content kept, cost per page, and what it does to search.

Run from the repository root (a script, not a test; needs Debian's documentation packages)::

    apt-get install python3.11-doc mkdocs-doc rust-doc valgrind libxslt1-dev nodejs
    .venv/bin/python tests/benchmarks/html_extraction.py [--pages 25] [--skip-search]

Part 1, extraction. Real pages from seven generators (Sphinx: the Python 3.11 library
reference; MkDocs: its own manual; rustdoc: the Rust standard library; mdBook: The Rust
Programming Language book; DocBook: the Valgrind manual; Node's own generator: the Node.js API
docs; hand-written: libxslt's pages), a seeded sample of each, go through three
extractors:

* ``before``: the extraction toolkernel-rag had (selectolax, every text block of the page);
* ``trafilatura``: trafilatura alone, with the reader's furniture removal and clean-up;
* ``reader``: what the ``html`` reader does now: the article container of a known layout
  walked block by block, trafilatura for pages with none.

Each output is cut by the markdown chunker (1,000 characters). A chunk is *navigation*
when at least half of its lines are lines of the page's furniture (the text of ``nav``,
``aside``, ``header``, ``footer``, sidebars, "related" bars, DocBook nav headers/footers,
permalink anchors). *Kept* is the share of the article's paragraphs (``p``, ``li``, ``dd`` of
40 characters or more inside the generator's article element) found in the output.
``¶`` counts permalink marks left. Cost is wall-clock milliseconds per page, one process.

Part 2, search (``--skip-search`` leaves it out). Twenty-four pages of the Python 3.11 library
reference are ingested twice with the default embedder: as markdown made by ``before``,
and as HTML through the reader; 24 questions whose answer page is known are asked through
the MCP ``search`` tool (``top_k`` 5) in the default mode and in ``dense``. Reported:
hit@1, hit@5, and how many top-5 passages are navigation (by the rule above).
Writes ``tests/benchmarks/results/html_extraction.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

DOC = Path("/usr/share/doc")
RESULTS = Path(__file__).resolve().parent / "results"


def _cls(name: str) -> str:
    return f"contains(concat(' ', normalize-space(@class), ' '), ' {name} ')"


GENERATORS: dict[str, tuple[str, str]] = {
    # name: (glob under /usr/share/doc, XPath of the article element)
    "sphinx": ("python3.11/html/library/*.html", f"//div[{_cls('body')}]"),
    "mkdocs": ("mkdocs/html/**/*.html", "//*[@role='main']"),
    "rustdoc": ("rust-doc/html/std/*/*.html", "//*[@id='main-content']"),
    "mdbook": ("rust-doc/html/book/*.html", "//main"),
    "docbook": ("valgrind/html/*.html", "//body"),
    "node": ("nodejs/api/*.html", "//*[@id='apicontent']"),
    "hand-written": ("libxslt1-dev/html/*.html", "//body"),
}

FURNITURE = " | ".join(
    [
        "//nav",
        "//aside",
        "//header",
        "//footer",
        "//*[@role='navigation']",
        f"//*[{_cls('sphinxsidebar')}]",
        f"//*[{_cls('related')}]",
        f"//*[{_cls('footer')}]",
        f"//*[{_cls('navheader')}]",
        f"//*[{_cls('navfooter')}]",
        f"//*[{_cls('sidebar')}]",
        f"//*[{_cls('headerlink')}]",
        "//*[@id='column2']",  # Node: the table of contents
        "//*[@id='toc']",
        "//*[@id='sidebar']",
    ]
)


def _norm(text: str) -> str:
    return " ".join(text.split()).strip(" -#|¶").lower()


def furniture_lines(html: bytes) -> set[str]:
    """The texts inside a page's furniture (normalized): every line and every element's words."""
    import lxml.html

    tree = lxml.html.document_fromstring(html)
    lines: set[str] = set()
    for node in tree.xpath(FURNITURE):
        for part in node.iter():
            if isinstance(part.tag, str):
                lines.add(_norm(part.text_content()))
        for line in node.text_content().splitlines():
            lines.add(_norm(line))
    return {line for line in lines if len(line) >= 3}


def is_navigation(chunk: str, furniture: set[str]) -> bool:
    """At least half of the chunk's characters are in lines of furniture text.

    Counted in characters, not lines: an API reference's short entry names are also listed
    in the sidebar's table of contents, while their descriptions are not. Headings are
    judged only in a chunk of headings alone (a table of contents repeats them all).
    """
    lines = [line for line in chunk.splitlines() if line.strip()]
    body = [_norm(line) for line in lines if not line.lstrip().startswith("#")]
    judged = [line for line in (body or [_norm(line) for line in lines]) if line]
    size = sum(len(line) for line in judged)
    return bool(judged) and sum(len(line) for line in judged if line in furniture) * 2 >= size


def article_paragraphs(html: bytes, xpath: str) -> list[str]:
    import lxml.html

    tree = lxml.html.document_fromstring(html)
    found = tree.xpath(xpath)
    if not found:
        return []
    out = []
    for node in found[0].iter("p", "li", "dd"):
        words = " ".join(node.text_content().split())
        if len(words) >= 40 and not any(a.tag in ("li", "dd") for a in node.iterancestors()):
            out.append(words)
    return out


def before(html: bytes) -> str:
    """The extraction toolkernel-rag had before the reader: every text block, selectolax."""
    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser(html)
    for node in tree.css("script, style, noscript, template, svg, head > meta"):
        node.decompose()
    root = tree.body or tree.root
    blocks: list[str] = []
    if root is not None:
        for node in root.css("h1, h2, h3, h4, h5, h6, p, li, pre, td, th, blockquote, dt, dd"):
            if node.parent is not None and node.parent.tag in ("li", "blockquote", "td", "th"):
                continue
            content = node.text(deep=True, separator="", strip=False)
            content = content if node.tag == "pre" else " ".join(content.split())
            if not content.strip():
                continue
            tag = node.tag or ""
            if tag.startswith("h") and tag[1:].isdigit():
                blocks.append("#" * int(tag[1:]) + " " + content)
            elif tag == "li":
                blocks.append("- " + content)
            elif tag == "pre":
                blocks.append("```\n" + content.strip("\n") + "\n```")
            else:
                blocks.append(content)
    return "\n\n".join(blocks)


def trafilatura_only(html: bytes) -> str:
    import lxml.html

    from toolkernel_rag.readers import html as reader

    tree = lxml.html.document_fromstring(html)
    for node in [n for n in tree.iter() if reader._is_furniture(n)]:
        reader._drop(node)
    return reader._tidy(reader._main_content(tree))


def reader_now(html: bytes) -> str:
    from toolkernel_rag.readers.html import html_to_markdown

    return html_to_markdown(html)[0]


EXTRACTORS: dict[str, Callable[[bytes], str]] = {
    "before": before,
    "trafilatura": trafilatura_only,
    "reader": reader_now,
}


def sample(pattern: str, count: int, seed: int = 7) -> list[Path]:
    pages = sorted(p for p in DOC.glob(pattern) if p.stat().st_size < 400_000 and "index" not in p.name)
    random.Random(seed).shuffle(pages)
    return sorted(pages[:count])


def extraction(count: int) -> dict[str, Any]:
    from toolkernel_rag.chunking import ChunkerOptions, MarkdownChunker

    chunker = MarkdownChunker(ChunkerOptions(size=1000))
    out: dict[str, Any] = {}
    for generator, (pattern, article) in GENERATORS.items():
        pages = sample(pattern, count)
        if not pages:
            print(f"{generator}: no pages under {DOC / pattern} (install the package)")
            continue
        row: dict[str, Any] = {"pages": len(pages)}
        loaded = [(p.read_bytes()) for p in pages]
        furniture = [furniture_lines(h) for h in loaded]
        paragraphs = [article_paragraphs(h, article) for h in loaded]
        for name, extract in EXTRACTORS.items():
            chunks = navigation = marks = kept = wanted = 0
            started = time.perf_counter()
            texts = [extract(h) for h in loaded]
            seconds = time.perf_counter() - started
            for text, lines, paras in zip(texts, furniture, paragraphs, strict=True):
                pieces = chunker.chunk(text)
                chunks += len(pieces)
                navigation += sum(is_navigation(c.text, lines) for c in pieces)
                marks += text.count("¶")
                flat = " ".join(text.replace("`", "").split())
                wanted += len(paras)
                kept += sum(p.replace("`", "")[:80] in flat for p in paras)
            row[name] = {
                "chunks": chunks,
                "navigation_chunks": navigation,
                "navigation_share": round(navigation / max(chunks, 1), 4),
                "pilcrows": marks,
                "kept": round(kept / max(wanted, 1), 4),
                "ms_per_page": round(1000 * seconds / len(pages), 2),
            }
        out[generator] = row
        print(f"\n{generator} ({len(pages)} pages)")
        print(f"{'extractor':<12} {'chunks':>7} {'nav':>5} {'nav %':>6} {'¶':>5} {'kept':>6} {'ms/page':>8}")
        for name in EXTRACTORS:
            r = row[name]
            print(
                f"{name:<12} {r['chunks']:>7} {r['navigation_chunks']:>5} "
                f"{100 * r['navigation_share']:>6.1f} {r['pilcrows']:>5} {r['kept']:>6.3f} "
                f"{r['ms_per_page']:>8.2f}",
                flush=True,
            )
    return out


# -- part 2: search ------------------------------------------------------------------------

SEARCH_PAGES = [
    "bisect", "heapq", "secrets", "hashlib", "uuid", "textwrap", "difflib", "copy", "tempfile",
    "shutil", "statistics", "fractions", "functools", "collections", "dataclasses", "enum",
    "pickle", "csv", "subprocess", "contextlib", "zipfile", "itertools", "decimal", "datetime",
]  # fmt: skip
QUESTIONS = [
    ("How do I find the insertion point in a sorted list so that it stays sorted?", "bisect"),
    ("How can I get the n smallest elements from a collection efficiently?", "heapq"),
    ("How do I generate a hard-to-guess token for a password reset URL?", "secrets"),
    ("How do I compute a SHA-256 digest of some bytes?", "hashlib"),
    ("How do I make a random universally unique identifier?", "uuid"),
    ("How do I wrap a long paragraph of text to a fixed line width?", "textwrap"),
    ("How do I show the differences between two lists of lines as a unified diff?", "difflib"),
    ("How can I make a deep copy of a nested object?", "copy"),
    ("How do I create a temporary file that is deleted automatically when closed?", "tempfile"),
    ("How do I copy an entire directory tree recursively?", "shutil"),
    ("How do I compute the median of a list of numbers?", "statistics"),
    ("How do I represent the exact rational number one third?", "fractions"),
    ("How can I cache the results of an expensive function call?", "functools"),
    ("How do I count how many times each item occurs in a list?", "collections"),
    ("How do I define a class whose __init__ and __repr__ are generated from its fields?", "dataclasses"),
    ("How do I define a set of symbolic names bound to unique constant values?", "enum"),
    ("How do I serialize a Python object to a byte stream and restore it later?", "pickle"),
    ("How do I read a comma-separated file into dictionaries keyed by the header row?", "csv"),
    ("How can I run an external command and capture its output?", "subprocess"),
    ("How can I write a context manager with a generator function?", "contextlib"),
    ("How do I read the files inside a ZIP archive?", "zipfile"),
    ("How do I compute running totals of an iterable lazily?", "itertools"),
    ("How do I do exact decimal arithmetic with a set precision for money?", "decimal"),
    ("How do I get the current date and time in UTC?", "datetime"),
]


async def search_quality(work: Path) -> dict[str, Any]:
    import toolkernel
    from toolkernel.testing import connect_in_memory
    from toolkernel_local_embed import plugin as local_embed
    from toolkernel_qdrant import plugin as qdrant
    from toolkernel_rag import KBServerOptions, KnowledgeBase, ingest, kb_server
    from toolkernel_rag import plugin as rag

    library = DOC / "python3.11/html/library"
    pages = {name: (library / f"{name}.html").read_bytes() for name in SEARCH_PAGES}
    furniture: set[str] = set()
    for html in pages.values():
        furniture |= furniture_lines(html)
    html_dir, md_dir = work / "html", work / "before"
    html_dir.mkdir()
    md_dir.mkdir()
    for name, html in pages.items():
        (html_dir / f"{name}.html").write_bytes(html)
        (md_dir / f"{name}.md").write_text(before(html), encoding="utf-8")
    out: dict[str, Any] = {"pages": len(pages), "questions": len(QUESTIONS)}
    for variant, source in (("before", md_dir), ("reader", html_dir)):
        kernel = toolkernel.Kernel(load_entry_points=False, plugins=[rag, qdrant, local_embed])
        started = time.perf_counter()
        async with await KnowledgeBase.open(str(work / f"kb-{variant}"), kernel=kernel, create=True) as kb:
            report = await ingest(kb, [str(source)])
            seconds = time.perf_counter() - started
            server = kb_server(kb, KBServerOptions())
            row: dict[str, Any] = {"chunks": report.chunks, "ingest_seconds": round(seconds, 1)}
            async with connect_in_memory(server) as client:
                for mode in ("hybrid", "dense"):
                    hit1 = hit5 = navigation = 0
                    for question, page in QUESTIONS:
                        result = await client.call_tool(
                            "search", {"query": question, "top_k": 5, "mode": mode}
                        )
                        hits = (result.structured_content or {}).get("results", [])
                        ids = [Path(str(h["document_id"])).stem for h in hits]
                        hit1 += bool(ids) and ids[0] == page
                        hit5 += page in ids[:5]
                        navigation += sum(is_navigation(str(h.get("text", "")), furniture) for h in hits[:5])
                    row[mode] = {"hit_at_1": hit1, "hit_at_5": hit5, "navigation_in_top5": navigation}
        out[variant] = row
    print(f"\nsearch: {len(QUESTIONS)} questions over {len(pages)} Python 3.11 library pages (top_k 5)")
    print(f"{'pages as':<10} {'chunks':>7} {'mode':<7} {'hit@1':>6} {'hit@5':>6} {'nav in top 5':>13}")
    for variant in ("before", "reader"):
        for mode in ("hybrid", "dense"):
            r = out[variant][mode]
            print(
                f"{variant:<10} {out[variant]['chunks']:>7} {mode:<7} {r['hit_at_1']:>6} "
                f"{r['hit_at_5']:>6} {r['navigation_in_top5']:>13}"
            )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=25, help="pages sampled per generator")
    parser.add_argument("--skip-search", action="store_true")
    parser.add_argument("--skip-extraction", action="store_true")
    parser.add_argument("--out", type=Path, default=RESULTS / "html_extraction.json")
    args = parser.parse_args()
    report: dict[str, Any] = {
        "benchmark": "html_extraction",
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "load": os.getloadavg()},
    }
    if not args.skip_extraction:
        report["extraction"] = extraction(args.pages)
    if not args.skip_search:
        import anyio

        with tempfile.TemporaryDirectory() as work:
            report["search"] = anyio.run(search_quality, Path(work))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    sys.exit(main())
