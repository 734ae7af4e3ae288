"""HTML to markdown: the page's main content with its headings, without the page's furniture.

trafilatura finds the main content (its scoring drops navigation bars, sidebars, headers,
footers and link lists). Before it runs, the furniture documentation generators put
*inside* the article is removed by selector: Sphinx/MkDocs/Docusaurus permalink anchors
(``¶``, ``#``), rustdoc's "source" links and toggles, "Edit on GitHub" buttons. After it,
trafilatura's markdown escapes are undone (``borrow\\_mut`` must index as ``borrow_mut``)
and any leftover permalink mark is dropped. A page too short for trafilatura to judge
falls back to every text block of ``<body>`` minus the same furniture.

The title is the page's ``<title>``, else its first ``<h1>``. When the extracted text does
not begin with a top heading, the ``<h1>`` (else the title) is put first, so every chunk's
header path starts at the page.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from toolkernel.readers import ReadDocument

if TYPE_CHECKING:
    from lxml.html import HtmlElement  # type: ignore[import-untyped]

# Furniture inside the article that main-content scoring keeps: permalink marks, source
# links, toggle labels, edit buttons, skip links, copy buttons, search boxes.
_FURNITURE = " | ".join(
    [
        "//script",
        "//style",
        "//noscript",
        "//template",
        "//svg",
        "//form",
        "//button",
        "//nav",
        "//aside",
        "//*[@role='navigation' or @role='search' or @role='banner' or @role='contentinfo']",
        "//a[contains(concat(' ', normalize-space(@class), ' '), ' headerlink ')]",
        "//a[contains(concat(' ', normalize-space(@class), ' '), ' hash-link ')]",
        "//a[contains(concat(' ', normalize-space(@class), ' '), ' anchor ')]",
        "//a[contains(concat(' ', normalize-space(@class), ' '), ' anchorjs-link ')]",
        "//a[contains(concat(' ', normalize-space(@class), ' '), ' srclink ')]",
        "//a[contains(concat(' ', normalize-space(@class), ' '), ' src ')]",
        "//*[contains(concat(' ', normalize-space(@class), ' '), ' rightside ')]",
        "//*[contains(concat(' ', normalize-space(@class), ' '), ' out-of-band ')]",
        "//*[contains(concat(' ', normalize-space(@class), ' '), ' since ')]",
        "//summary[contains(concat(' ', normalize-space(@class), ' '), ' hideme ')]",
        "//*[contains(concat(' ', normalize-space(@class), ' '), ' sphinxsidebar ')]",
        "//*[contains(concat(' ', normalize-space(@class), ' '), ' related ')]",
        "//*[contains(concat(' ', normalize-space(@class), ' '), ' breadcrumbs ')]",
        "//*[contains(concat(' ', normalize-space(@class), ' '), ' pagination-nav ')]",
        "//*[contains(concat(' ', normalize-space(@class), ' '), ' md-source-file ')]",
        "//*[contains(concat(' ', normalize-space(@class), ' '), ' edit-this-page ')]",
        "//*[contains(concat(' ', normalize-space(@class), ' '), ' navheader ')]",
        "//*[contains(concat(' ', normalize-space(@class), ' '), ' navfooter ')]",
        "//*[@id='searchbox' or @id='sidebar' or @id='toc' or @id='rustdoc-vars']",
    ]
)

# Permalink marks left at the end of a heading or a definition line.
_PERMALINK = re.compile(r"[ \t]*[¶§🔗][ \t]*$", re.M)
# trafilatura escapes markdown's special characters; for search they are noise.
_ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!<>|~])")
# A heading inside a heading (rustdoc's <summary><h3>) becomes "## ### impl ...".
_NESTED_HEADING = re.compile(r"^(?:#{1,6} )+(?=#{1,6} )", re.M)


def html_to_markdown(html: str | bytes) -> tuple[str, str | None]:
    """The main content of an HTML page as markdown (headings kept), and the page's title."""
    import lxml.html  # type: ignore[import-untyped]

    try:
        tree = lxml.html.document_fromstring(html)
    except Exception:  # an empty or bodyless document
        return "", None
    heading = _text_of(tree, "//h1")
    title = _text_of(tree, "//title") or heading
    for node in tree.xpath(_FURNITURE):
        _drop(node)
    text = _tidy(_main_content(tree) or _all_blocks(tree))
    top = heading or title
    if top and text and not text.startswith("# "):
        text = f"# {top}\n\n{text}"
    return text, title


def _text_of(tree: HtmlElement, xpath: str) -> str | None:
    """The words of the first element ``xpath`` finds that has any (permalink marks removed)."""
    for node in tree.xpath(xpath):
        words = _PERMALINK.sub("", " ".join(node.text_content().split())).strip()
        if words:
            return words
    return None


def _drop(node: HtmlElement) -> None:
    """Remove ``node`` but keep the text that follows it (its tail)."""
    parent = node.getparent()
    if parent is None:
        return
    tail = node.tail
    if tail:
        previous = node.getprevious()
        if previous is not None:
            previous.tail = (previous.tail or "") + tail
        else:
            parent.text = (parent.text or "") + tail
    parent.remove(node)


def _main_content(tree: HtmlElement) -> str:
    import trafilatura

    extracted = trafilatura.extract(
        tree,
        output_format="markdown",
        include_formatting=True,
        include_links=False,
        include_images=False,
        include_comments=False,
        include_tables=True,
        favor_recall=True,
        deduplicate=False,
        with_metadata=False,
    )
    return extracted or ""


def _all_blocks(tree: HtmlElement) -> str:
    """Every text block of ``<body>``: for pages too short for main-content scoring."""
    blocks: list[str] = []
    body = tree.find("body")
    root = body if body is not None else tree
    for node in root.iter("h1", "h2", "h3", "h4", "h5", "h6", "p", "li", "pre", "td", "th", "dt", "dd"):
        if any(a.tag in ("li", "td", "th", "pre") for a in node.iterancestors()):
            continue  # the enclosing block already holds this text
        content = node.text_content()
        content = content if node.tag == "pre" else " ".join(content.split())
        if not content.strip():
            continue
        tag = str(node.tag)
        if tag[0] == "h":
            blocks.append("#" * int(tag[1]) + " " + content)
        elif tag == "li":
            blocks.append("- " + content)
        elif tag == "pre":
            blocks.append("```\n" + content.strip("\n") + "\n```")
        else:
            blocks.append(content)
    if not blocks:
        blocks.append(" ".join(root.text_content().split()))
    return "\n\n".join(blocks)


def _tidy(text: str) -> str:
    # Undo escapes outside code fences only: code keeps its backslashes.
    parts = re.split(r"(^```.*?^```[ \t]*$)", text, flags=re.M | re.S)
    text = "\n\n".join(
        p.strip("\n") if p.startswith("```") else _PERMALINK.sub("", _ESCAPE.sub(r"\1", p)) for p in parts
    )
    text = _NESTED_HEADING.sub("", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def read_html(path: Path) -> Iterator[ReadDocument]:
    """An HTML page: its main content as markdown, titled by its ``<title>`` or first ``<h1>``."""
    text, title = html_to_markdown(path.read_bytes())
    yield ReadDocument(text, "markdown", {"title": title} if title else {})
