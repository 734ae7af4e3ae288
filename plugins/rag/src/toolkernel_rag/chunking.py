"""The chunkers this plugin registers: semantic-text-splitter underneath, sized in characters or tokens.

``recursive``, ``markdown`` and ``code`` are semantic-text-splitter's splitters (Rust, no
dependencies): they cut at the largest semantic unit that fits (sections, paragraphs,
sentences, words) and merge neighbours up to the size. ``html`` extracts the page's main
content with its headings as markdown (:mod:`toolkernel_rag.readers.html`) and chunks
that. ``character``, ``sentence``, ``token`` and ``json`` are the simple fixed-rule
chunkers other frameworks offer, kept small.

Length is counted in characters or in a tokenizer's tokens. A tokenizer is named by an
embedder (``local/minilm-l6-int8``: the tokenizer that model uses) or a path to a
``tokenizer.json``; its truncation and padding are turned off, because the MiniLM file
truncates at 128 tokens and pads, which would make every token count wrong.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import cache, lru_cache
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from toolkernel.chunkers import Chunk
from toolkernel.errors import ConfigError

if TYPE_CHECKING:
    from tokenizers import Tokenizer

Length = Literal["characters", "tokens"]


class ChunkerOptions(BaseModel):
    """Options every chunker here takes; each chunker rejects the ones it cannot honour."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    size: int = Field(1000, gt=0, description="Largest chunk, in `length` units.")
    overlap: int = Field(0, ge=0, description="Units shared by neighbouring chunks; less than size.")
    length: Length = Field("characters", description="Count characters or tokenizer tokens.")
    tokenizer: str | None = Field(
        None,
        description="With length 'tokens': an embedder name (local/minilm-l6-int8) or a tokenizer.json path.",
    )
    separators: list[str] | None = Field(None, description="character chunker: where to cut, in order.")
    language: str | None = Field(None, description="code chunker: a tree-sitter grammar, e.g. python.")

    @model_validator(mode="after")
    def _consistent(self) -> ChunkerOptions:
        if self.overlap >= self.size:
            raise ValueError(f"overlap ({self.overlap}) must be smaller than size ({self.size})")
        if self.length == "tokens" and not self.tokenizer:
            raise ValueError("length 'tokens' needs a tokenizer (an embedder name or a tokenizer.json path)")
        if self.length == "characters" and self.tokenizer:
            raise ValueError("tokenizer applies to length 'tokens' only")
        return self


# ---------------------------------------------------------------------------
# Tokenizers
# ---------------------------------------------------------------------------


def _embedder_tokenizers() -> dict[str, str]:
    """Embedder name -> where its tokenizer.json ships (a package resource)."""
    return {"local/minilm-l6-int8": "toolkernel_local_embed:assets/minilm-l6-tokenizer.json"}


def known_tokenizer(embedder: str) -> bool:
    """Whether the tokenizer of ``embedder`` ships with an installed package."""
    return embedder in _embedder_tokenizers()


@cache
def load_tokenizer(spec: str) -> Tokenizer:
    """A ``tokenizers.Tokenizer`` for an embedder name or a path, with truncation and padding off."""
    import importlib.resources

    from tokenizers import Tokenizer

    known = _embedder_tokenizers()
    try:
        if spec in known:
            package, _, resource = known[spec].partition(":")
            text = (importlib.resources.files(package) / resource).read_text(encoding="utf-8")
            tokenizer = Tokenizer.from_str(text)
        else:
            tokenizer = Tokenizer.from_file(spec)
    except Exception as exc:
        raise ConfigError(
            f"tokenizer {spec!r} cannot be loaded ({type(exc).__name__}: {exc}); give an embedder "
            f"name ({', '.join(known)}) or the path of a tokenizer.json"
        ) from None
    # The shipped MiniLM tokenizer.json truncates at 128 tokens and pads: counts would be capped.
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def encode(tokenizer: Tokenizer, text: str) -> Any:
    """``text``'s encoding (no special tokens), made without holding the GIL.

    ``Tokenizer.encode`` holds the GIL for all its work: a worker thread encoding 400 kB
    kept a server's event loop from running for most of a second (a third of the time at
    best). ``encode_batch`` gives the GIL up while it tokenizes and returns the same encoding.
    """
    return tokenizer.encode_batch([text], add_special_tokens=False)[0]


def _counter(options: ChunkerOptions) -> Callable[[str], int]:
    if options.length == "characters":
        return len
    tokenizer = load_tokenizer(options.tokenizer or "")

    def count(text: str) -> int:
        return len(encode(tokenizer, text).ids)

    return count


# ---------------------------------------------------------------------------
# The chunkers
# ---------------------------------------------------------------------------


class _Base:
    """Name, options and ``describe()`` shared by every chunker here."""

    kind = ""
    accepts: frozenset[str] = frozenset({"size", "overlap", "length", "tokenizer"})

    def __init__(self, options: ChunkerOptions) -> None:
        extra = {f for f in options.model_fields_set if f not in self.accepts}
        if extra:
            raise ConfigError(f"chunker {self.kind!r} does not take option(s) {sorted(extra)}")
        self.options = options
        self._count: Callable[[str], int] | None = None

    def _fits(self, text: str) -> bool:
        if self._count is None:
            self._count = _counter(self.options)
        return self._count(text) <= self.options.size

    @property
    def name(self) -> str:
        return self.kind

    def describe(self) -> dict[str, Any]:
        return {"name": self.kind, **self.options.model_dump(exclude_none=True)}


def _splitter_args(options: ChunkerOptions) -> tuple[Any, dict[str, Any]]:
    """How to build a semantic-text-splitter splitter: the tokenizer (or None) and its keyword arguments."""
    kwargs = {"capacity": options.size, "overlap": options.overlap}
    if options.length == "tokens":
        return load_tokenizer(options.tokenizer or ""), kwargs
    return None, kwargs


def _from_indices(text: str, pieces: list[tuple[int, str]]) -> list[Chunk]:
    return [Chunk(piece, start, start + len(piece)) for start, piece in pieces if piece.strip()]


def _split(splitter: Any, text: str, fits: Callable[[str], bool]) -> list[Chunk]:
    """``splitter``'s chunks of ``text``, or the whole (trimmed) text when it fits in one chunk.

    Counting once is much cheaper than the splitter's search, which counts tokens many times
    over: most passages of a corpus like HotpotQA fit whole.
    """
    if text.strip() and fits(text):
        return [_trimmed(Chunk(text, 0, len(text)))]
    return _from_indices(text, splitter.chunk_indices(text))


@lru_cache(maxsize=16)
def _text_splitter(markdown: bool, tokenizer: str | None, size: int, overlap: int) -> Any:
    """A semantic-text-splitter ``MarkdownSplitter`` or ``TextSplitter``, kept for the next chunker alike.

    Given a tokenizer, the splitter is built from its JSON, parsed again each time while the
    GIL is held (50-70 ms for MiniLM's on an idle machine): a server making a chunker per
    request stalled its event loop that long on every one. Splitters are immutable, so one
    serves every thread.
    """
    from semantic_text_splitter import MarkdownSplitter, TextSplitter

    splitter = MarkdownSplitter if markdown else TextSplitter
    if tokenizer is None:
        return splitter(capacity=size, overlap=overlap)
    return splitter.from_huggingface_tokenizer(load_tokenizer(tokenizer), capacity=size, overlap=overlap)


def _cached_splitter(options: ChunkerOptions, *, markdown: bool) -> Any:
    tokenizer = options.tokenizer if options.length == "tokens" else None
    return _text_splitter(markdown, tokenizer, options.size, options.overlap)


class RecursiveChunker(_Base):
    """Plain text: the largest semantic unit that fits (paragraph, line, sentence, word, grapheme)."""

    kind = "recursive"

    def __init__(self, options: ChunkerOptions) -> None:
        super().__init__(options)
        self._splitter = _cached_splitter(options, markdown=False)

    def chunk(self, text: str) -> list[Chunk]:
        return _split(self._splitter, text, self._fits)


_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$", re.M)


def header_paths(text: str) -> tuple[list[int], list[list[str]]]:
    """Offsets of markdown ATX headings and the header path in force from each one on."""
    offsets: list[int] = []
    paths: list[list[str]] = []
    stack: list[tuple[int, str]] = []
    fenced = False
    position = 0
    for line in text.splitlines(keepends=True):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        match = None if fenced else _HEADING.match(line.rstrip("\n"))
        if match:
            level = len(match.group(1))
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, match.group(2).strip()))
            offsets.append(position)
            paths.append([title for _, title in stack])
        position += len(line)
    return offsets, paths


class MarkdownChunker(_Base):
    """Markdown: never crosses a heading; each chunk's ``headers`` metadata is its header path.

    The text is cut into sections at every heading (headings with no text of their own
    stay with the section after them), and each section is split by semantic-text-splitter's
    markdown splitter, so a chunk's header path is exact.
    """

    kind = "markdown"

    def __init__(self, options: ChunkerOptions) -> None:
        super().__init__(options)
        self._splitter = _cached_splitter(options, markdown=True)

    def chunk(self, text: str) -> list[Chunk]:
        offsets, paths = header_paths(text)
        bounds = [0, *offsets, len(text)]
        out: list[Chunk] = []
        start = 0
        for i in range(len(bounds) - 1):
            end = bounds[i + 1]
            section = text[start:end]
            lines = [line for line in section.splitlines() if line.strip()]
            heading_only = i > 0 and end < len(text) and all(_HEADING.match(line) for line in lines)
            if end <= start or not section.strip() or heading_only:
                continue  # bare headings join the section after them
            path = paths[i - 1] if i > 0 else []
            meta: dict[str, Any] = {"headers": list(path)} if path else {}
            pieces = _split(self._splitter, section, self._fits)
            carry: int | None = None  # where a piece of headings alone began: it joins the next
            for n, piece in enumerate(pieces):
                first = piece.start if carry is None else carry
                headings_only = all(_HEADING.match(line) for line in piece.text.splitlines() if line)
                if n + 1 < len(pieces) and headings_only:
                    carry = first
                    continue
                carry = None
                out.append(Chunk(section[first : piece.end], start + first, start + piece.end, meta))
            start = end
        return out


class HtmlChunker(MarkdownChunker):
    """HTML: the page's main content, headings as markdown, chunked as markdown (offsets into that)."""

    kind = "html"

    def chunk(self, text: str) -> list[Chunk]:
        from toolkernel_rag.readers.html import html_to_markdown

        markdown, _ = html_to_markdown(text)
        return super().chunk(markdown)


class CodeChunker(_Base):
    """Source code: cuts at syntax-tree boundaries (functions, classes, blocks) with a tree-sitter grammar."""

    kind = "code"
    accepts = _Base.accepts | {"language"}

    def __init__(self, options: ChunkerOptions) -> None:
        super().__init__(options)
        import importlib

        from semantic_text_splitter import CodeSplitter

        from toolkernel_rag.readers.code import grammar_module

        language = options.language or "python"
        module_name = grammar_module(language.replace("-", "_"))
        # tree-sitter-typescript holds two grammars: language_typescript and language_tsx.
        function = f"language_{language}" if module_name == "tree_sitter_typescript" else "language"
        try:
            grammar = getattr(importlib.import_module(module_name), function)()
        except ImportError:
            raise ConfigError(
                f"chunker 'code' for {language!r} needs its tree-sitter grammar: "
                f"pip install {module_name.replace('_', '-')}"
            ) from None
        tokenizer, kwargs = _splitter_args(options)
        self._splitter = (
            CodeSplitter.from_huggingface_tokenizer(grammar, tokenizer, **kwargs)
            if tokenizer
            else CodeSplitter(grammar, **kwargs)
        )

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "language": self.options.language or "python"}

    def chunk(self, text: str) -> list[Chunk]:
        return _from_indices(text, self._splitter.chunk_indices(text))


def _pack(text: str, spans: list[tuple[int, int]], options: ChunkerOptions) -> list[Chunk]:
    """Merge consecutive spans of ``text`` into chunks of at most ``size`` units, ``overlap`` units shared.

    A span longer than ``size`` becomes a chunk of its own: the rule-based chunkers never cut inside one.
    """
    count = _counter(options)
    sizes = [count(text[a:b]) for a, b in spans]
    out: list[Chunk] = []
    i = 0
    while i < len(spans):
        j, total = i, 0
        while j < len(spans) and (j == i or total + sizes[j] <= options.size):
            total += sizes[j]
            j += 1
        start, end = spans[i][0], spans[j - 1][1]
        if text[start:end].strip():
            out.append(Chunk(text[start:end], start, end))
        if j >= len(spans):
            break
        # Step back over trailing spans that fit in the overlap, but always move forward.
        back, shared = j, 0
        while back - 1 > i and shared + sizes[back - 1] <= options.overlap:
            back -= 1
            shared += sizes[back]
        i = back
    return out


class CharacterChunker(_Base):
    """Cuts at the first separator found (default: blank line, line, sentence, space); packs to ``size``."""

    kind = "character"
    accepts = _Base.accepts | {"separators"}

    def chunk(self, text: str) -> list[Chunk]:
        separators = self.options.separators or ["\n\n", "\n", ". ", " "]
        separator = next((s for s in separators if s and s in text), "")
        if not separator:
            return _pack(text, [(0, len(text))], self.options) if text.strip() else []
        spans, start = [], 0
        for match in re.finditer(re.escape(separator), text):
            spans.append((start, match.end()))
            start = match.end()
        spans.append((start, len(text)))
        return [_trimmed(c) for c in _pack(text, [s for s in spans if s[1] > s[0]], self.options)]


_SENTENCE_END = re.compile(r"(?<=[.!?…])[\"')\]]*\s+|\n\s*\n")


class SentenceChunker(_Base):
    """Packs whole sentences up to ``size``; ``overlap`` repeats trailing sentences in the next chunk."""

    kind = "sentence"

    def chunk(self, text: str) -> list[Chunk]:
        spans, start = [], 0
        for match in _SENTENCE_END.finditer(text):
            spans.append((start, match.end()))
            start = match.end()
        if start < len(text):
            spans.append((start, len(text)))
        return [_trimmed(c) for c in _pack(text, spans, self.options)]


class TokenChunker(_Base):
    """Fixed windows of ``size`` tokens, ``overlap`` tokens shared, cut at token boundaries."""

    kind = "token"

    def __init__(self, options: ChunkerOptions) -> None:
        if options.length != "tokens":
            raise ConfigError("chunker 'token' counts tokens: give length='tokens' and a tokenizer")
        super().__init__(options)

    def chunk(self, text: str) -> list[Chunk]:
        tokenizer = load_tokenizer(self.options.tokenizer or "")
        offsets = encode(tokenizer, text).offsets
        step = self.options.size - self.options.overlap
        out = []
        for first in range(0, len(offsets), step):
            window = offsets[first : first + self.options.size]
            start, end = window[0][0], window[-1][1]
            out.append(Chunk(text[start:end], start, end))
            if first + self.options.size >= len(offsets):
                break
        return out


class JsonChunker(_Base):
    """JSON: packs whole members of the top-level object or array; a member too big is split the same way."""

    kind = "json"

    def chunk(self, text: str) -> list[Chunk]:
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"chunker 'json': the text is not JSON: {exc}") from None
        count = _counter(self.options)
        pieces = self._pieces(value, (), count)
        # Chunk offsets address the text the chunks were cut from: the pieces joined by newlines.
        out, position = [], 0
        for piece in pieces:
            out.append(Chunk(piece, position, position + len(piece)))
            position += len(piece) + 1
        return out

    def _pieces(self, value: Any, path: tuple[str, ...], count: Callable[[str], int]) -> list[str]:
        whole = json.dumps(_nest(path, value), ensure_ascii=False)
        if count(whole) <= self.options.size or not isinstance(value, dict | list) or not value:
            return [whole]
        items = value.items() if isinstance(value, dict) else enumerate(value)
        out: list[str] = []
        group: dict[str, Any] = {}
        for key, item in items:
            trial = json.dumps(_nest(path, {**group, str(key): item}), ensure_ascii=False)
            if count(trial) <= self.options.size:
                group[str(key)] = item
                continue
            if group:
                out.append(json.dumps(_nest(path, group), ensure_ascii=False))
                group = {}
            single = json.dumps(_nest(path, {str(key): item}), ensure_ascii=False)
            if count(single) <= self.options.size:
                group[str(key)] = item
            else:
                out.extend(self._pieces(item, (*path, str(key)), count))
        if group:
            out.append(json.dumps(_nest(path, group), ensure_ascii=False))
        return out


def _nest(path: tuple[str, ...], value: Any) -> Any:
    for key in reversed(path):
        value = {key: value}
    return value


def _trimmed(chunk: Chunk) -> Chunk:
    stripped = chunk.text.strip()
    start = chunk.start + (len(chunk.text) - len(chunk.text.lstrip()))
    return Chunk(stripped, start, start + len(stripped), chunk.metadata)


CHUNKERS: dict[str, type[_Base]] = {
    c.kind: c
    for c in (
        RecursiveChunker,
        CharacterChunker,
        TokenChunker,
        SentenceChunker,
        MarkdownChunker,
        HtmlChunker,
        CodeChunker,
        JsonChunker,
    )
}
"""Every chunker this plugin registers, by name."""


def factory(kind: str) -> Callable[..., Any]:
    """The ``register_chunkers`` factory for chunker ``kind``: options validated, errors naming the field."""
    cls = CHUNKERS[kind]

    def make(**options: Any) -> Any:
        try:
            parsed = ChunkerOptions(**options)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'options'}: {e['msg']}" for e in exc.errors()
            )
            raise ConfigError(f"chunker {kind!r}: {problems}") from None
        return cls(parsed)

    make.__qualname__ = make.__name__ = f"{kind}_chunker"
    return make


def chunker_for(kind_of_document: str) -> str:
    """Which chunker the ``auto`` setting uses for a document of this kind (HTML arrives as markdown)."""
    return {"markdown": "markdown", "html": "markdown", "json": "json", "code": "code"}.get(
        kind_of_document, "recursive"
    )
