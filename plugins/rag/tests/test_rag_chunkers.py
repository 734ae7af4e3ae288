"""The registered chunkers: offsets, sizes in characters and in real MiniLM tokens, header paths, errors."""

from __future__ import annotations

import itertools
import json
import sys
import threading

import pytest

from toolkernel import Kernel
from toolkernel.chunkers import Chunker
from toolkernel.errors import ConfigError
from toolkernel_rag.chunking import load_tokenizer

PROSE = " ".join(
    f"Sentence number {i} talks about topic {i % 7}, with a few more words to make it longer."
    for i in range(120)
)
MARKDOWN = (
    "# Guide\n\nIntro paragraph.\n\n## Install\n\n"
    + "pip install things. " * 40
    + "\n\n### Offline\n\nCopy wheels.\n\n## Use\n\nCall it.\n\n```\n# not a heading\n```\n"
)


def test_every_chunker_is_registered(rag_kernel: Kernel) -> None:
    assert set(rag_kernel.chunkers) >= {
        "recursive",
        "character",
        "token",
        "sentence",
        "markdown",
        "html",
        "code",
        "json",
    }


@pytest.mark.parametrize("name", ["recursive", "character", "sentence", "markdown"])
def test_offsets_point_at_the_chunk_text(rag_kernel: Kernel, name: str) -> None:
    chunker = rag_kernel.chunker(name, size=200, overlap=40)
    assert isinstance(chunker, Chunker)
    chunks = chunker.chunk(PROSE)
    assert len(chunks) > 5
    for chunk in chunks:
        assert PROSE[chunk.start : chunk.end] == chunk.text
    assert chunks[0].start == 0
    assert chunks[-1].end == len(PROSE.rstrip())


def test_recursive_chunks_fit_in_embedder_tokens(rag_kernel: Kernel) -> None:
    chunker = rag_kernel.chunker(
        "recursive", size=100, overlap=10, length="tokens", tokenizer="local/minilm-l6-int8"
    )
    tokenizer = load_tokenizer("local/minilm-l6-int8")
    chunks = chunker.chunk(PROSE)
    counts = [len(tokenizer.encode(c.text, add_special_tokens=False).ids) for c in chunks]
    assert max(counts) <= 100
    assert min(counts[:-1]) > 60  # filled, not cut short


def test_the_shipped_minilm_tokenizer_neither_truncates_nor_pads() -> None:
    # The tokenizer.json inside the package truncates at 128 and pads: a count would be capped at 128.
    tokenizer = load_tokenizer("local/minilm-l6-int8")
    assert len(tokenizer.encode(PROSE, add_special_tokens=False).ids) > 1000
    assert len(tokenizer.encode("short text").ids) == 4  # [CLS] short text [SEP], no padding


def test_token_chunker_windows_and_overlap(rag_kernel: Kernel) -> None:
    chunker = rag_kernel.chunker(
        "token", size=50, overlap=10, length="tokens", tokenizer="local/minilm-l6-int8"
    )
    tokenizer = load_tokenizer("local/minilm-l6-int8")
    chunks = chunker.chunk(PROSE)
    counts = [len(tokenizer.encode(c.text, add_special_tokens=False).ids) for c in chunks]
    assert all(abs(n - 50) <= 2 for n in counts[:-1])  # re-tokenizing a cut text may merge a piece
    for first, second in itertools.pairwise(chunks):
        assert second.start < first.end  # the windows overlap


@pytest.mark.parametrize("name", ["token", "sentence"])
def test_counting_tokens_gives_up_the_gil(rag_kernel: Kernel, name: str) -> None:
    """Tokenizing a long text lets other threads run meanwhile: a server chunks in a worker thread
    and its event loop must go on. ``Tokenizer.encode`` held the GIL throughout (400 kB: most of a
    second with no ping answered). With forced switches off, this thread runs again only when the
    chunking thread gives the GIL up; it must find the chunking still under way."""
    load_tokenizer("local/minilm-l6-int8")  # loaded beforehand: reading the file gives the GIL up too
    chunker = rag_kernel.chunker(name, size=50, length="tokens", tokenizer="local/minilm-l6-int8")
    text = "word " * 40_000  # no sentence end: the sentence chunker counts it whole
    started, finished = threading.Event(), threading.Event()

    def work() -> None:
        started.set()
        chunker.chunk(text)
        finished.set()

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1_000.0)
    try:
        worker = threading.Thread(target=work)
        worker.start()
        assert started.wait(timeout=60)
        ran_while_chunking = not finished.is_set()
        worker.join(timeout=60)
    finally:
        sys.setswitchinterval(interval)
    assert ran_while_chunking
    assert finished.is_set()


def test_splitters_with_a_tokenizer_are_built_once_per_options(rag_kernel: Kernel) -> None:
    """Building one parses the tokenizer's JSON holding the GIL (50-70 ms): a server that makes a
    chunker per request stalled on each. Chunkers with the same options share the splitter."""

    def splitter(kind: str, size: int) -> object:
        chunker = rag_kernel.chunker(kind, size=size, length="tokens", tokenizer="local/minilm-l6-int8")
        return chunker._splitter  # type: ignore[attr-defined]

    assert splitter("recursive", 100) is splitter("recursive", 100)
    assert splitter("recursive", 100) is not splitter("recursive", 120)
    assert splitter("markdown", 100) is splitter("markdown", 100)
    assert splitter("markdown", 100) is not splitter("recursive", 100)


def test_markdown_header_path_goes_into_metadata(rag_kernel: Kernel) -> None:
    chunks = rag_kernel.chunker("markdown", size=300).chunk(MARKDOWN)
    by_text = {c.text.split("\n")[0]: c.metadata.get("headers") for c in chunks}
    assert by_text["# Guide"] == ["Guide"]
    assert ["Guide", "Install", "Offline"] in by_text.values()
    assert by_text.get("## Use") == ["Guide", "Use"]
    assert all(MARKDOWN[c.start : c.end] == c.text for c in chunks)
    # A '#' line inside a code fence is not a heading.
    assert not any("not a heading" in str(h) for h in by_text.values())


def test_html_chunker_keeps_headings(rag_kernel: Kernel) -> None:
    html = (
        "<html><body><h1>Fruit</h1><p>Apples are red.</p><h2>Pears</h2><p>Pears are green.</p></body></html>"
    )
    chunks = rag_kernel.chunker("html", size=30).chunk(html)
    assert [c.metadata.get("headers") for c in chunks] == [["Fruit"], ["Fruit", "Pears"]]
    assert "<p>" not in "".join(c.text for c in chunks)


def test_code_chunker_cuts_at_definitions(rag_kernel: Kernel) -> None:
    source = "\n\n".join(f"def f{i}(x):\n    return x + {i}\n" for i in range(20))
    chunks = rag_kernel.chunker("code", size=80, language="python").chunk(source)
    assert all(c.text.startswith("def f") for c in chunks)
    assert all(source[c.start : c.end] == c.text for c in chunks)


def test_json_chunker_keeps_members_whole(rag_kernel: Kernel) -> None:
    value = {f"key{i}": {"name": f"item {i}", "tags": ["a", "b"]} for i in range(30)}
    chunks = rag_kernel.chunker("json", size=120).chunk(json.dumps(value))
    assert len(chunks) > 3
    merged: dict[str, object] = {}
    for chunk in chunks:
        assert len(chunk.text) <= 120
        merged.update(json.loads(chunk.text))
    assert merged == value


def test_character_chunker_uses_separators(rag_kernel: Kernel) -> None:
    text = "alpha beta|gamma delta|epsilon"
    chunks = rag_kernel.chunker("character", size=12, separators=["|"]).chunk(text)
    assert [c.text for c in chunks] == ["alpha beta|", "gamma delta|", "epsilon"]


def test_options_are_checked_by_name(rag_kernel: Kernel) -> None:
    with pytest.raises(ConfigError, match=r"chunker 'recursive'.*overlap"):
        rag_kernel.chunker("recursive", size=10, overlap=10)
    with pytest.raises(ConfigError, match="separators"):
        rag_kernel.chunker("markdown", separators=["x"])
    with pytest.raises(ConfigError, match="tokenizer"):
        rag_kernel.chunker("recursive", length="tokens")
    with pytest.raises(ConfigError, match="tokenizer 'nope/model' cannot be loaded"):
        rag_kernel.chunker("recursive", length="tokens", tokenizer="nope/model").chunk("x")
    with pytest.raises(ConfigError, match="tree-sitter-cobol"):
        rag_kernel.chunker("code", language="cobol")


def test_markdown_headings_never_make_a_chunk_of_their_own():
    """Why: a section's headings cut off by the splitter were indexed as a passage of their own."""
    from toolkernel_rag.chunking import ChunkerOptions, MarkdownChunker

    text = "# Title\n\n## Section\n\n" + "Lighthouses guide ships home. " * 6
    chunks = MarkdownChunker(ChunkerOptions(size=60)).chunk(text)
    assert chunks[0].text.startswith("# Title\n\n## Section\n\nLighthouses guide ships home.")
    assert all(c.text == text[c.start : c.end] for c in chunks)
    assert all(not c.text.lstrip().startswith("#") or "Lighthouses" in c.text for c in chunks)
    assert {tuple(c.metadata["headers"]) for c in chunks} == {("Title", "Section")}
