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
header path starts at the page; a lower heading of the same words opening the text (DocBook
titles a page with an ``<h2>``) becomes that top heading rather than a repeat of it.
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
# links, toggle labels, edit buttons, sidebars, navigation bars, search boxes. One pass over
# the tree matches tags, classes, ids and roles (an XPath per rule costs a tree walk each).
_FURNITURE_TAGS = frozenset(
    {"script", "style", "noscript", "template", "svg", "form", "button", "nav", "aside", "iframe"}
)
_FURNITURE_CLASSES = frozenset(
    {
        "headerlink",  # Sphinx, MkDocs
        "hash-link",  # Docusaurus
        "anchorjs-link",
        "srclink",  # rustdoc
        "rightside",
        "test-arrow",
        "out-of-band",
        "since",
        "hideme",
        "sphinxsidebar",  # Sphinx
        "related",
        "breadcrumbs",
        "pagination-nav",  # Docusaurus
        "theme-doc-footer",
        "theme-doc-toc-mobile",
        "theme-doc-toc-desktop",
        "table-of-contents",
        "md-source-file",  # Material for MkDocs
        "edit-this-page",
        "navheader",  # DocBook
        "navfooter",
    }
)
_FURNITURE_IDS = frozenset({"searchbox", "sidebar", "toc", "rustdoc-vars"})
_FURNITURE_ROLES = frozenset({"navigation", "search", "banner", "contentinfo"})
_PERMALINK_TEXT = frozenset({"#", "¶", "§", "🔗", "link", "permalink"})


def _is_furniture(node: HtmlElement) -> bool:
    tag = node.tag
    if not isinstance(tag, str):
        return False
    if tag in _FURNITURE_TAGS:
        return True
    classes = node.get("class")
    if classes and not _FURNITURE_CLASSES.isdisjoint(classes.split()):
        return True
    if node.get("id") in _FURNITURE_IDS or node.get("role") in _FURNITURE_ROLES:
        return True
    # A permalink: a link to an anchor of the page whose text is only a mark.
    return (
        tag == "a"
        and (node.get("href") or "").startswith("#")
        and node.text_content().strip().lower() in _PERMALINK_TEXT
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
    title = _text_of(tree, "//title") or _text_of(tree, "//h1")
    for node in [n for n in tree.iter() if _is_furniture(n)]:
        _drop(node)
    main = _main_container(tree)
    if main is not None:
        heading = _text_of(main, ".//h1")
        text = _tidy(_blocks(main), escaped=False)
    else:
        heading = _text_of(tree, "//h1")
        body = tree.find("body")
        text = _tidy(_main_content(tree)) or _tidy(_blocks(body if body is not None else tree), escaped=False)
    top = heading or title
    if top and text and not text.startswith("# "):
        first, _, rest = text.partition("\n")
        if re.fullmatch(r"#{2,6} " + re.escape(top), first):  # DocBook's <h2> page title
            text = f"# {top}\n{rest}"
        else:
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


# Where documentation generators put the article: rustdoc, DocBook, Sphinx, MkDocs and
# Node (role=main), Docusaurus, mdBook (<main>, <article>), Material for MkDocs.
_MAIN = (
    "//*[@id='main-content']",
    # DocBook XSL: the chapter, section or reference entry between the nav header and footer.
    "/html/body/div[contains(' book part chapter appendix preface article sect1 section refentry "
    "reference glossary set ', concat(' ', normalize-space(@class), ' '))]",
    "//*[@role='main']",
    # Docusaurus: the rendered markdown, without the doc's footer and table-of-contents column.
    "//*[contains(concat(' ', normalize-space(@class), ' '), ' theme-doc-markdown ')]",
    "//main",
    "//article",
    "//*[contains(concat(' ', normalize-space(@class), ' '), ' md-content ')]",
)
_HEADINGS = {"h1", "h2", "h3", "h4", "h5", "h6"}
_LEAVES = {"p", "dt", "dd", "li", "figcaption", "caption", "summary", "td", "th"}
_BLOCKS = _HEADINGS | _LEAVES | {
    "pre", "ul", "ol", "dl", "table", "thead", "tbody", "tfoot", "tr", "blockquote", "div",
    "section", "article", "main", "details", "figure", "header", "footer", "hr", "center",
}  # fmt: skip


def _main_container(tree: HtmlElement) -> HtmlElement | None:
    """The element a known documentation layout puts the article in, if the page has one."""
    for xpath in _MAIN:
        found = tree.xpath(xpath)
        if found and " ".join(found[0].text_content().split()):
            return found[0]
    return None


def _blocks(root: HtmlElement) -> str:
    """Every block of ``root`` in document order, as markdown: headings, paragraphs, lists, code, tables."""
    out: list[str] = []
    _walk(root, out)
    if not out:
        out.append(" ".join(root.text_content().split()))
    return "\n\n".join(out)


def _has_blocks(node: HtmlElement) -> bool:
    return any(isinstance(child.tag, str) and child.tag in _BLOCKS for child in node)


def _walk(node: HtmlElement, out: list[str]) -> None:
    tag = node.tag if isinstance(node.tag, str) else ""
    if tag in _HEADINGS:
        words = " ".join(node.text_content().split())
        if words:
            out.append("#" * int(tag[1]) + " " + words)
        return
    if tag == "pre":
        code = _pre_text(node).strip("\n")
        if code.strip():
            out.append("```\n" + code + "\n```")
        return
    if tag == "tr":
        cells = [" ".join(c.text_content().split()) for c in node if c.tag in ("td", "th")]
        if any(cells):
            out.append(" | ".join(cells))
        return
    if tag in _LEAVES and not _has_blocks(node):
        words = " ".join(node.text_content().split())
        if words:
            out.append(("- " if tag == "li" else "") + words)
        return
    loose = [node.text or ""]
    for child in node:
        if isinstance(child.tag, str) and child.tag in _BLOCKS:
            _flush(loose, out)
            _walk(child, out)
            loose = [child.tail or ""]
        else:
            loose.append(child.text_content() if isinstance(child.tag, str) else "")
            loose.append(child.tail or "")
    _flush(loose, out)


def _pre_text(node: HtmlElement) -> str:
    """A code block's text with its line breaks: highlighters (Docusaurus's Prism) put each line
    in a ``<div>`` or end it with ``<br>``, and ``text_content`` would run the lines together."""
    parts: list[str] = [node.text or ""]
    for child in node:
        if isinstance(child.tag, str):
            if child.tag == "br":
                parts.append("\n")
            else:
                inner = _pre_text(child)
                parts.append(inner)
                if child.tag in ("div", "p") and not inner.endswith("\n"):
                    parts.append("\n")
        parts.append(child.tail or "")
    return "".join(parts)


def _flush(loose: list[str], out: list[str]) -> None:
    """Text that sits between blocks (DocBook and hand-written pages have it) as a paragraph."""
    words = " ".join("".join(loose).split())
    if words:
        out.append(words)


def _tidy(text: str, escaped: bool = True) -> str:
    # Undo trafilatura's escapes outside code fences only: code keeps its backslashes.
    parts = re.split(r"(^```.*?^```[ \t]*$)", text, flags=re.M | re.S)
    text = "\n\n".join(
        p.strip("\n") if p.startswith("```") else _PERMALINK.sub("", _ESCAPE.sub(r"\1", p) if escaped else p)
        for p in parts
    )
    text = _NESTED_HEADING.sub("", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def read_html(path: Path) -> Iterator[ReadDocument]:
    """An HTML page: its main content as markdown, titled by its ``<title>`` or first ``<h1>``."""
    text, title = html_to_markdown(path.read_bytes())
    yield ReadDocument(text, "markdown", {"title": title} if title else {})
