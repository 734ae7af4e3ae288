"""The default entity extractor: proper-noun phrases, quoted titles and symbol-like terms, by rule.

No model, no download, thousands of texts per second: it finds what links passages in
encyclopaedic and technical text — names ("Shirley Temple", "Bank of America"), titles of
works in quotes ("Kiss and Tell"), and identifiers such as gene or product names ("BRCA1",
"IL-6", "p53"). It does not find common-noun concepts; an extractor registered through the
``register_entity_extractors`` hook can.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import anyio.to_thread

from toolkernel_graphrag.stopwords import STOPWORDS

_CONNECTORS = frozenset(
    {"of", "and", "the", "de", "del", "da", "di", "du", "von", "van", "der", "den", "la", "le", "&"}
)
_UPPER = "A-ZÀ-ÖØ-ÞΑ-Ω"
_WORD = rf"[{_UPPER}][\w'’\-&]*(?:\.[\w'’\-&]+)*"  # noqa: RUF001 (typographic apostrophes)
# A run of capitalised words (numbers may follow one: "Apollo 11"), joined by spaces and by
# connectors ("Bank of America", "Dawn of the Dead"). Compiled once; the regex engine does the scan.
_PHRASE = re.compile(
    rf"(?<![\w'’\-.])(?P<phrase>{_WORD}"  # noqa: RUF001
    rf"(?:[ \t]+(?:(?:{'|'.join(sorted(_CONNECTORS))})[ \t]+)*(?:{_WORD}|\d+\b))*)"
)
_QUOTED = re.compile(r"[\"“]([^\"“”\n]{2,80})[\"”]")
_SYMBOL = re.compile(r"(?<![\w\-])(?=[\w\-]*\d|[\w\-]+[A-Z])[^\W_][\w\-]*[^\W_](?![\w\-])")
_ORDINAL = re.compile(r"^\d+(?:st|nd|rd|th|s)?$")
_SENTENCE_BEFORE = re.compile(r"(?:^|[.!?;:]\s*|\n\s*)$")
# A dense word list reads better than one word a line.
# fmt: off
_MONTHS = frozenset(
    [
        "january", "february", "march", "april", "may", "june", "july", "august", "september",
        "october", "november", "december",
    ]
)
# fmt: on
INLINE_BATCH = 16
"""Batches shorter than this (a query) are extracted on the event loop: a thread hop costs more."""
_MAX_PHRASE = 8
"""Longest phrase kept, in words: longer runs of capitals are headlines, not names."""


def _clean(words: list[str], sentence_start: bool) -> str | None:
    """A phrase without leading/trailing connectors and stop words, or ``None`` if nothing is left.

    A lone capitalised word opening a sentence is dropped ("Importantly", "Using"): capitals
    there say nothing. So is a date ("July 16 1966"): dates link passages that share nothing.
    """
    while words and (words[0].lower() in _CONNECTORS or words[0].lower() in STOPWORDS):
        words = words[1:]
        sentence_start = False
    while words and (words[-1].lower() in _CONNECTORS or words[-1].rstrip(".") == ""):
        words = words[:-1]
    if not words or len(words) > _MAX_PHRASE:
        return None
    if len(words) == 1 and (len(words[0]) < 2 or sentence_start):
        return None
    if words[0].lower() in _MONTHS and all(w.isdigit() for w in words[1:]):
        return None
    return " ".join(words).rstrip(".")


def extract_phrases(text: str) -> list[str]:
    """Entity surface forms in ``text``, in order of first appearance, each once."""
    found: dict[str, int] = {}
    for match in _PHRASE.finditer(text):
        start = match.start()
        sentence_start = _SENTENCE_BEFORE.search(text, max(0, start - 3), start) is not None
        phrase = _clean(match.group("phrase").split(), sentence_start)
        if phrase is not None:
            found.setdefault(phrase, start)
    for match in _QUOTED.finditer(text):
        words = match.group(1).split()
        if len(words) <= _MAX_PHRASE:
            phrase = _clean(words, False)
            if phrase is not None:
                found.setdefault(phrase, match.start())
    for match in _SYMBOL.finditer(text):
        token = match.group()
        if not _ORDINAL.match(token) and any(c.isalpha() for c in token):
            found.setdefault(token, match.start())
    return sorted(found, key=found.__getitem__)


def sub_phrases(surface: str) -> list[str]:
    """``surface`` and every shorter run of its words that starts and ends with a capitalised word
    or an identifier: "Local H and For Against" gives "Local H", "For Against", "H", ...

    Only runs that another chunk also names become links, so the extra keys cost little.
    """
    words = surface.split()
    if len(words) < 2 or len(words) > _MAX_PHRASE:
        return [surface]
    ends = [
        i for i, w in enumerate(words) if (w[0].isupper() or w[0].isdigit()) and w.lower() not in _CONNECTORS
    ]
    out = [surface]
    for a in ends:
        for b in ends:
            if a <= b and (a, b) != (0, len(words) - 1):
                span = words[a : b + 1]
                if not (len(span) == 1 and span[0].lower() in STOPWORDS):
                    out.append(" ".join(span))
    return out


class PhraseExtractor:
    """``phrases``: the built-in extractor, registered through ``register_entity_extractors``."""

    name = "phrases"

    def describe(self) -> dict[str, Any]:
        """The extractor's name (it has no options)."""
        return {"name": self.name}

    async def extract(self, texts: Sequence[str]) -> list[list[str]]:
        """Entity surface forms per text (:func:`extract_phrases`); long batches run in a thread."""
        if len(texts) < INLINE_BATCH:
            return [extract_phrases(text) for text in texts]
        return await anyio.to_thread.run_sync(lambda: [extract_phrases(text) for text in texts])
