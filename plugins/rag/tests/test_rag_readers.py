"""The built-in readers on real files: written by the libraries that make them, or real pages.

Office files come from python-docx, python-pptx and openpyxl, notebooks from nbformat, PDFs
from reportlab, CSV from the csv module. The EPUB is assembled with zipfile by the EPUB 3
rules (container.xml, an OPF package with a spine, XHTML chapters): no permissively
licensed EPUB writer exists on PyPI (EbookLib is AGPL). The HTML pages under
``data/html`` are real pages from Debian's documentation packages (see its README).
"""

from __future__ import annotations

import csv
import json
import sys
import zipfile
from pathlib import Path

import pytest

from toolkernel.testing.readers import ReaderContract
from toolkernel_rag import KnowledgeBase, ingest
from toolkernel_rag.sources import Document, SourceReader

from .conftest import EMBEDDER, make_kernel

HTML = Path(__file__).parent / "data" / "html"

pytestmark = pytest.mark.anyio


def read(path: Path) -> tuple[list[Document], list[str]]:
    """The documents of ``path`` and the problems reported, one line each."""
    reader = SourceReader(str(path))
    docs = list(reader.documents())
    return docs, [f"{p.where}: {p.reason}" for p in reader.problems]


def one(path: Path) -> Document:
    docs, problems = read(path)
    assert problems == []
    assert len(docs) == 1
    return docs[0]


# -- HTML: real pages of five generators ------------------------------------------------------

FURNITURE = ("Next topic", "Previous topic", "This Page", "Show Source", "Quick search", "Report a Bug",
             "Edit on GitHub", "Expand description", "¶", "Edit this page",
             "Built with Docusaurus")  # fmt: skip

# Where each generator puts the article, and its furniture (navigation, sidebars, tables of
# contents, headers and footers), as XPath over the real page.
ARTICLE = {
    "sphinx-python-venv.html": "//div[@class='body']",
    "mkdocs-getting-started.html": "//*[@role='main']",
    "rustdoc-tostring.html": "//*[@id='main-content']",
    "docbook-xsltproc.html": "/html/body/div[@class='refentry']",
    "docbook-postgresql-indexes-partial.html": "/html/body/div[@class='sect1']",
    "docusaurus-embedders.html": "//div[contains(@class, 'theme-doc-markdown')]",
    "mkdocs-material-local-embed.html": "//article",
    "sphinx-furo-vectors.html": "//article",
}
PAGE_FURNITURE = (
    "//nav | //aside | //header[not(ancestor::article)] | //footer | //*[@role='navigation'] "
    "| //*[contains(@class, 'sphinxsidebar') or contains(@class, 'related') or contains(@class, 'navheader') "
    "or contains(@class, 'navfooter') or contains(@class, 'table-of-contents') or contains(@class, 'toc')]"
)


def _words(text: str) -> str:
    """Whitespace and backquotes evened out, the permalink glyph a heading ends with removed."""
    return " ".join(text.replace("`", "").split()).rstrip("¶#\u200b\uf0c1 ")


@pytest.mark.parametrize("page", sorted(ARTICLE))
def test_html_pages_keep_every_paragraph_and_heading_and_no_furniture(page):
    """Judged on the real page itself: every heading and paragraph of its article element is in
    the text, and no line of its navigation, sidebars, tables of contents or footers is."""
    import lxml.html

    tree = lxml.html.document_fromstring((HTML / page).read_bytes())
    [article] = tree.xpath(ARTICLE[page])
    text = _words(one(HTML / page).text)
    headings = [_words(h.text_content()) for h in article.iter("h2", "h3", "h4")]
    blocks = ".//p | .//div | .//ul | .//ol | .//dl | .//pre | .//table"
    paragraphs = [_words(p.text_content()) for p in article.iter("p", "dd", "li") if not p.xpath(blocks)]
    assert headings
    assert paragraphs
    for words in headings + [p for p in paragraphs if len(p) >= 20]:
        assert words in text, f"{page} lost {words!r}"
    kept = {_words(node.text_content()) for node in article.iter() if isinstance(node.tag, str)}
    furniture = {
        _words(line)
        for node in tree.xpath(PAGE_FURNITURE)
        for line in [node.text_content(), *(n.text_content() for n in node.iter() if isinstance(n.tag, str))]
    }
    for words in furniture - kept:
        if len(words) >= 25:  # short labels ("Next", a module name) may be words of the article too
            assert words not in text, f"{page} keeps furniture {words!r}"


@pytest.mark.parametrize(
    ("page", "title", "first_heading", "must_have"),
    [
        (
            "sphinx-python-venv.html",
            "12. Virtual Environments and Packages — Python 3.11.2 documentation",
            "# 12. Virtual Environments and Packages",
            "```\npython3 -m venv tutorial-env\n```",
        ),
        (
            "mkdocs-getting-started.html",
            "Getting Started - MkDocs",
            "# Getting Started with MkDocs",
            "mkdocs new my-project",
        ),
        (
            "rustdoc-tostring.html",
            "ToString in std::string - Rust",
            "# Trait std::string::ToString",
            "A trait for converting a value to a String.",
        ),
        ("docbook-xsltproc.html", "xsltproc", "# xsltproc", "command line XSLT processor"),
        (
            "docusaurus-embedders.html",
            "Embedders | toolkernel",
            "# Embedders",
            "```\nclass Embedder(Protocol):\n    @property\n    def name(self) -> str: ...",
        ),
        (
            "mkdocs-material-local-embed.html",
            "Local embedder - toolkernel",
            "# toolkernel-local-embed — offline embedders",
            "Nothing is ever downloaded at run time",
        ),
        (
            "sphinx-furo-vectors.html",
            "Vectors and embedders - toolkernel documentation",
            "# Vectors and embedders",
            '```\nembedder = kernel.embedder("local/minilm-l6-int8", batch_size=64)\nvectors = await',
        ),
        (
            "docbook-postgresql-indexes-partial.html",
            "11.8. Partial Indexes",
            "# 11.8. Partial Indexes",
            "CREATE INDEX orders_unbilled_index ON orders (order_nr)",
        ),
        (
            "handwritten-libxslt.html",
            "The XSLT C library for GNOME",
            "# The XSLT C library for GNOME",
            "Libxslt is the XSLT C library developed for the GNOME project.",
        ),
    ],
)
def test_html_pages_come_out_as_their_article(page, title, first_heading, must_have):
    doc = one(HTML / page)
    assert doc.metadata["title"] == title
    assert doc.metadata["kind"] == "html"
    assert doc.kind == "markdown"
    assert doc.text.startswith(first_heading + "\n")
    assert must_have in doc.text
    for furniture in FURNITURE:
        assert furniture not in doc.text, f"{page} keeps {furniture!r}"
    assert "<script" not in doc.text
    assert "function(" not in doc.text
    second = [line for line in doc.text.splitlines() if line.startswith("#")][1:2]
    assert second != ["#" + first_heading], f"{page} repeats its title as a heading"


async def test_sphinx_chunks_carry_their_heading_path_and_no_navigation(tmp_path):
    """Why: 'Next topic' sidebars were indexed as passages, and headings kept their ¶ marks."""
    async with await KnowledgeBase.open(
        str(tmp_path / "kb"), kernel=make_kernel(), create=True, embedder=EMBEDDER
    ) as kb:
        await ingest(kb, [str(HTML / "sphinx-python-venv.html")])
        chunks = kb.catalog.document_chunks(["sphinx-python-venv.html"])
        hits = await kb.search("Next topic previous topic", mode="sparse", top_k=5)
    assert chunks
    assert all(c.metadata["headers"][0] == "12. Virtual Environments and Packages" for c in chunks)
    assert any(c.metadata["headers"][1:] == ["12.2. Creating Virtual Environments"] for c in chunks)
    assert not any("Next topic" in c.text or "¶" in c.text for c in chunks)
    assert not any("Next topic" in h.chunk.text for h in hits)


# -- Office files, written by the libraries that make them ------------------------------------


def test_docx_headings_lists_and_tables(tmp_path):
    import docx

    document = docx.Document()
    document.core_properties.title = "Field guide"
    document.core_properties.author = "Ada"
    document.add_heading("Birds", level=1)
    document.add_paragraph("Herons wade in shallow water.")
    document.add_paragraph("Grey heron", style="List Bullet")
    document.add_heading("Counts", level=2)
    table = document.add_table(rows=2, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "species", "count"
    table.cell(1, 0).text, table.cell(1, 1).text = "heron", "12"
    document.save(tmp_path / "guide.docx")
    doc = one(tmp_path / "guide.docx")
    assert doc.text == (
        "## Birds\n\nHerons wade in shallow water.\n\n- Grey heron\n\n### Counts\n\nspecies: heron; count: 12"
    )
    assert doc.metadata["title"] == "Field guide"
    assert doc.metadata["author"] == "Ada"
    assert doc.kind == "markdown"
    assert doc.metadata["kind"] == "docx"


def test_pptx_slides_tables_and_notes(tmp_path):
    from pptx import Presentation
    from pptx.util import Inches

    deck = Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "Quarterly review"
    slide.placeholders[1].text_frame.text = "Revenue grew in every region."
    slide.notes_slide.notes_text_frame.text = "Mention the new office."
    second = deck.slides.add_slide(deck.slide_layouts[5])
    second.shapes.title.text = "Numbers"
    shape = second.shapes.add_table(2, 2, Inches(1), Inches(2), Inches(4), Inches(1))
    for (r, c), value in {(0, 0): "region", (0, 1): "sales", (1, 0): "north", (1, 1): "40"}.items():
        shape.table.cell(r, c).text = value
    deck.save(tmp_path / "review.pptx")
    doc = one(tmp_path / "review.pptx")
    assert doc.text == (
        "## Slide 1: Quarterly review\n\nRevenue grew in every region.\n\nNotes: Mention the new office."
        "\n\n## Slide 2: Numbers\n\nregion: north; sales: 40"
    )
    assert doc.metadata["slides"] == 2


def test_xlsx_sheets_keep_rows_with_their_header(tmp_path):
    import openpyxl

    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Staff"
    sheet.append(["name", "team", "start"])
    sheet.append(["Ada", "engines", 1843])
    sheet.append(["Grace", None, 1944])
    other = book.create_sheet("Empty")
    other.append([])
    book.save(tmp_path / "staff.xlsx")
    doc = one(tmp_path / "staff.xlsx")
    assert doc.text == "## Staff\n\nname: Ada; team: engines; start: 1843\nname: Grace; start: 1944"
    assert doc.metadata["sheets"] == ["Staff", "Empty"]


def test_office_files_without_the_extra_say_what_to_install(tmp_path, monkeypatch):
    import docx

    docx.Document().save(tmp_path / "a.docx")
    monkeypatch.setitem(sys.modules, "docx", None)  # as if python-docx were not installed
    docs, problems = read(tmp_path / "a.docx")
    assert docs == []
    assert problems == [
        f"{tmp_path / 'a.docx'}: reading .docx files needs python-docx: pip install 'toolkernel-rag[office]'"
    ]


# -- Other formats ---------------------------------------------------------------------------------


def test_csv_rows_keep_their_header(tmp_path):
    with (tmp_path / "people.csv").open("w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerows([["name", "city"], ["Ada", "London"], ["Zoë, Jr.", "Zürich"]])
    doc = one(tmp_path / "people.csv")
    assert doc.text == "name: Ada; city: London\nname: Zoë, Jr.; city: Zürich"
    assert doc.metadata["columns"] == ["name", "city"]
    assert doc.metadata["rows"] == 2


def test_notebook_cells(tmp_path):
    import nbformat

    notebook = nbformat.v4.new_notebook()
    notebook.metadata["language_info"] = {"name": "python"}
    notebook.cells = [
        nbformat.v4.new_markdown_cell("# Loading data\n\nRead the CSV first."),
        nbformat.v4.new_code_cell("import csv\nrows = list(csv.reader(open('a.csv')))"),
    ]
    notebook.cells[1].outputs = [nbformat.v4.new_output("stream", text="LARGE OUTPUT")]
    nbformat.write(notebook, tmp_path / "load.ipynb")
    doc = one(tmp_path / "load.ipynb")
    assert doc.text == (
        "# Loading data\n\nRead the CSV first.\n\n"
        "```python\nimport csv\nrows = list(csv.reader(open('a.csv')))\n```"
    )
    assert doc.metadata["title"] == "Loading data"
    assert doc.metadata["cells"] == 2


def test_epub_chapters_in_spine_order(tmp_path):
    path = tmp_path / "book.epub"
    with zipfile.ZipFile(path, "w") as book:
        book.writestr("mimetype", "application/epub+zip", compress_type=zipfile.ZIP_STORED)
        book.writestr(
            "META-INF/container.xml",
            '<?xml version="1.0"?><container version="1.0" '
            'xmlns="urn:oasis:names:tc:opendocument:xmlns:container">'
            '<rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
            "</rootfiles></container>",
        )
        book.writestr(
            "OEBPS/content.opf",
            '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0" '
            'unique-identifier="id">'
            '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:identifier id="id">x</dc:identifier>'
            "<dc:title>Sea Stories</dc:title><dc:creator>A. Sailor</dc:creator><dc:language>en</dc:language>"
            '</metadata><manifest><item id="c2" href="text/two.xhtml" media-type="application/xhtml+xml"/>'
            '<item id="c1" href="text/one.xhtml" media-type="application/xhtml+xml"/></manifest>'
            '<spine><itemref idref="c1"/><itemref idref="c2"/></spine></package>',
        )
        for name, heading, body in (
            ("one", "The Harbour", "Boats rest here."),
            ("two", "The Storm", "Waves rise."),
        ):
            book.writestr(
                f"OEBPS/text/{name}.xhtml",
                f'<html xmlns="http://www.w3.org/1999/xhtml"><head><title>{heading}</title></head>'
                f"<body><h1>{heading}</h1><p>{body}</p></body></html>",
            )
    doc = one(path)
    assert doc.text == "# The Harbour\n\nBoats rest here.\n\n# The Storm\n\nWaves rise."
    assert doc.metadata["title"] == "Sea Stories"
    assert doc.metadata["author"] == "A. Sailor"
    assert doc.metadata["chapters"] == 2


def test_xml_yaml_toml(tmp_path):
    (tmp_path / "feed.xml").write_text(
        '<?xml version="1.0"?><!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
        '<catalog><book id="b1"><title>Dune</title><note>&x;</note></book></catalog>',
        encoding="utf-8",
    )
    (tmp_path / "conf.yaml").write_text("server:\n  port: 8000\n", encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\n', encoding="utf-8")
    xml = one(tmp_path / "feed.xml")
    assert xml.text == 'book id="b1"\ntitle: Dune'  # the external entity is not resolved
    assert xml.metadata["root"] == "catalog"
    assert one(tmp_path / "conf.yaml").text == "server:\n  port: 8000\n"
    assert one(tmp_path / "pyproject.toml").metadata["kind"] == "toml"


@pytest.mark.parametrize(
    ("encoding", "text"),
    [
        ("latin-1", "Le café est très chaud, déjà servi à la crème."),
        ("cp1252", "naïve résumé \u2013 déjà vu"),
        ("utf-16", "Grüße aus Köln"),
        ("shift_jis", "日本語のテキストです。これはテストです。"),
        ("cp1251", "Привет, мир! Это тест кодировки."),
        ("utf-8-sig", "with a byte-order mark"),
    ],
)
def test_plain_text_in_any_common_encoding(tmp_path, encoding, text):
    (tmp_path / "note.txt").write_bytes(text.encode(encoding))
    assert one(tmp_path / "note.txt").text == text


def test_files_without_a_suffix_go_in_when_they_are_text(tmp_path):
    (tmp_path / "README").write_text("Read me first.\n", encoding="utf-8")
    (tmp_path / "blob").write_bytes(b"\x7fELF\x00\x01\x02binary")
    docs, problems = read(tmp_path)
    assert [(d.id, d.text) for d in docs] == [("README", "Read me first.\n")]
    assert problems == [f"{tmp_path / 'blob'}: blob holds binary data (NUL bytes), not text"]


SOURCES = {
    "app.js": ("javascript", "function greet(name) {\n  return `hi ${name}`;\n}\n"),
    "app.ts": ("typescript", "export function add(a: number, b: number): number {\n  return a + b;\n}\n"),
    "view.tsx": ("tsx", "export const View = () => <div>hello</div>;\n"),
    "main.go": ("go", 'func main() {\n\tprintln("hi")\n}\n'),
    "lib.rs": ("rust", "pub fn area(w: u32, h: u32) -> u32 {\n    w * h\n}\n"),
    "Main.java": ("java", "class Main {\n  public static void main(String[] a) {}\n}\n"),
    "util.c": ("c", "int twice(int x) {\n  return 2 * x;\n}\n"),
    "util.hpp": ("cpp", "template <typename T> T twice(T x) { return 2 * x; }\n"),
}


async def test_source_code_is_cut_by_its_language_grammar(tmp_path):
    for name, (_, code) in SOURCES.items():
        (tmp_path / "src").mkdir(exist_ok=True)
        (tmp_path / "src" / name).write_text(code * 40, encoding="utf-8")
    docs, problems = read(tmp_path / "src")
    assert problems == []
    assert {d.id: (d.kind, d.metadata["language"]) for d in docs} == {
        name: ("code", language) for name, (language, _) in SOURCES.items()
    }
    async with await KnowledgeBase.open(
        str(tmp_path / "kb"), kernel=make_kernel(), create=True, embedder=EMBEDDER
    ) as kb:
        report = await ingest(kb, [str(tmp_path / "src")])
        assert report.problems == []
        assert report.added == len(SOURCES)
        for name, (language, code) in SOURCES.items():
            chunks = kb.catalog.document_chunks([f"src/{name}"])
            assert len(chunks) > 1
            assert all(c.metadata["language"] == language for c in chunks)
            # The grammar cuts between whole definitions: every chunk is a run of whole copies.
            assert all((c.text.strip("\n") + "\n").replace(code, "").strip() == "" for c in chunks)
        assert set(kb._chunkers) == {f"code:{language}" for language, _ in SOURCES.values()}


async def test_pdf_chunks_know_their_pages(tmp_path):
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    pdf = canvas.Canvas(str(tmp_path / "report.pdf"), pagesize=A4)
    pdf.setTitle("Annual report")
    topics = ["lighthouses guide ships", "tides follow the moon", "gulls nest on cliffs"]
    for topic in topics:
        for line in range(40):
            pdf.drawString(40, 800 - 18 * line, f"{topic} {line}")
        pdf.showPage()
    pdf.save()
    doc = one(tmp_path / "report.pdf")
    assert doc.metadata["pages"] == 3
    assert doc.metadata["title"] == "Annual report"
    async with await KnowledgeBase.open(
        str(tmp_path / "kb"), kernel=make_kernel(), create=True, embedder=EMBEDDER
    ) as kb:
        await ingest(kb, [str(tmp_path / "report.pdf")])
        chunks = kb.catalog.document_chunks(["report.pdf"])
    assert len(chunks) > 3
    for chunk in chunks:
        pages = {topics.index(t) + 1 for t in topics if t in chunk.text}
        assert pages == set(range(chunk.metadata["page"], chunk.metadata["last_page"] + 1))


async def test_a_corrupt_file_of_each_type_is_skipped_with_a_one_line_reason(tmp_path):
    import docx
    import openpyxl
    from pptx import Presentation

    good, bad = tmp_path / "docs", tmp_path / "docs"
    good.mkdir()
    docx_doc = docx.Document()
    docx_doc.add_paragraph("A good letter.")
    docx_doc.save(good / "letter.docx")
    Presentation().save(good / "deck-empty.pptx")  # no slides: no text, reported as such
    book = openpyxl.Workbook()
    book.active.append(["k", "v"])
    book.active.append(["a", "1"])
    book.save(good / "sheet.xlsx")
    (good / "good.csv").write_text("a,b\n1,2\n", encoding="utf-8")
    corrupt = {
        "broken.docx": b"PK\x03\x04 not really a zip",
        "broken.pptx": b"not a presentation",
        "broken.xlsx": b"\x00\x01\x02",
        "broken.epub": b"PK\x05\x06" + b"\x00" * 18,
        "broken.pdf": b"%PDF-1.4 truncated",
        "broken.ipynb": b'{"cells": 3',
        "broken.xml": b"<a><b></a>",
        "broken.yaml": b"key: [unclosed",
        "broken.toml": b"= no key",
        "broken.json": b"{nope",
        "broken.csv": b"\n\n",
        "broken.html": b"",
    }
    for name, data in corrupt.items():
        (bad / name).write_bytes(data)
    async with await KnowledgeBase.open(
        str(tmp_path / "kb"), kernel=make_kernel(), create=True, embedder=EMBEDDER
    ) as kb:
        report = await ingest(kb, [str(good)])
        ids = sorted(d.id for d in kb.documents())
    reasons = {Path(p.where).name: p.reason for p in report.problems}
    assert ids == ["docs/good.csv", "docs/letter.docx", "docs/sheet.xlsx"]
    assert set(reasons) == {*corrupt, "deck-empty.pptx"}
    assert reasons["deck-empty.pptx"] == "no text"
    for name, reason in reasons.items():
        assert "\n" not in reason, (name, reason)
        assert 0 < len(reason) <= 300, (name, reason)
    assert reasons["broken.json"].startswith("JSONDecodeError")
    assert reasons["broken.xml"].startswith("ValueError: not well-formed XML")
    assert reasons["broken.epub"] == "ValueError: not an EPUB: no META-INF/container.xml"
    assert reasons["broken.docx"] == "BadZipFile: File is not a zip file"


def test_jsonl_records_still_go_in_one_by_one(tmp_path):
    (tmp_path / "c.jsonl").write_text(
        json.dumps({"_id": "d1", "title": "T", "text": "body", "year": 2020}) + "\n{oops\n", encoding="utf-8"
    )
    docs, problems = read(tmp_path / "c.jsonl")
    assert [(d.id, d.text, d.metadata) for d in docs] == [
        ("d1", "T\n\nbody", {"title": "T", "year": 2020, "path": "c.jsonl"})
    ]
    assert len(problems) == 1
    assert problems[0].startswith(f"{tmp_path / 'c.jsonl'}:2: not JSON")


def test_a_multi_dot_suffix_finds_its_reader(tmp_path):
    """Why: readers registered for ``.tar.gz``-style suffixes never matched (lookups used the last suffix)."""
    import gzip

    from toolkernel.readers import ReadDocument
    from toolkernel.registries import ReaderRegistry
    from toolkernel_rag.readers.builtin import register_builtin_readers

    def read_gzipped_log(path: Path):
        yield ReadDocument(gzip.decompress(path.read_bytes()).decode(), "text", {"gzipped": True})

    registry = ReaderRegistry()
    register_builtin_readers(registry)
    registry.add("gzipped-log", read_gzipped_log, suffixes=[".log.gz"])
    (tmp_path / "server.log.gz").write_bytes(gzip.compress(b"disk full on node 7"))
    (tmp_path / "notes.v2.txt").write_text("a dotted name, plain text")
    (tmp_path / "README").write_text("no suffix at all")
    (tmp_path / "photo.gz").write_bytes(gzip.compress(b"not a log"))
    reader = SourceReader(str(tmp_path), readers=registry)
    docs = {d.id: d for d in reader.documents()}
    assert sorted(docs) == ["README", "notes.v2.txt", "server.log.gz"]
    assert docs["server.log.gz"].text == "disk full on node 7"
    assert docs["server.log.gz"].metadata["kind"] == "gzipped-log"
    assert docs["notes.v2.txt"].metadata["kind"] == "text"
    assert [f"{p.where}: {p.reason}" for p in reader.problems] == [
        f"{tmp_path}: unsupported file types skipped: 1 .gz"
    ]
    assert registry.suffix_of("Server.LOG.GZ") == ".log.gz"
    assert registry.suffix_of(".bashrc") == ""


# -- The built-in readers pass the reader conformance kit ---------------------------------------


class TestDocxReaderContract(ReaderContract):
    suffixes = (".docx",)
    expected_text = ("## Plan", "Ship it.")

    @pytest.fixture
    def reader(self):
        from toolkernel_rag.readers.office import read_docx

        return read_docx

    @pytest.fixture
    def sample(self, tmp_path):
        import docx

        document = docx.Document()
        document.add_heading("Plan", level=1)
        document.add_paragraph("Ship it.")
        document.save(tmp_path / "plan.docx")
        return tmp_path / "plan.docx"

    @pytest.fixture
    def corrupt(self, tmp_path):
        (tmp_path / "bad.docx").write_bytes(b"PK\x03\x04broken")
        return tmp_path / "bad.docx"


class TestRecordsReaderContract(ReaderContract):
    suffixes = (".jsonl",)
    expected_text = ("first", "second")

    @pytest.fixture
    def reader(self):
        from toolkernel_rag.readers.structured import read_records

        return read_records

    @pytest.fixture
    def sample(self, tmp_path):
        lines = [{"id": "a", "text": "first", "year": 2001}, {"id": "b", "text": "second"}, {"text": "no id"}]
        (tmp_path / "c.jsonl").write_text("\n".join(json.dumps(r) for r in lines), encoding="utf-8")
        return tmp_path / "c.jsonl"

    @pytest.fixture
    def corrupt(self, tmp_path):
        (tmp_path / "bad.jsonl").write_text("{oops\n[1, 2]\n", encoding="utf-8")
        return tmp_path / "bad.jsonl"


class TestPdfReaderContract(ReaderContract):
    suffixes = (".pdf",)
    expected_text = ("page one text", "page two text")

    @pytest.fixture
    def reader(self):
        from toolkernel_rag.readers.pdf import read_pdf

        return read_pdf

    @pytest.fixture
    def sample(self, tmp_path):
        from reportlab.pdfgen import canvas

        pdf = canvas.Canvas(str(tmp_path / "two.pdf"))
        for words in ("page one text", "page two text"):
            pdf.drawString(50, 750, words)
            pdf.showPage()
        pdf.save()
        return tmp_path / "two.pdf"

    @pytest.fixture
    def corrupt(self, tmp_path):
        (tmp_path / "bad.pdf").write_bytes(b"%PDF-1.4 nothing more")
        return tmp_path / "bad.pdf"
