"""Entity normalisation: one key per entity, whatever its case, plural, article or disambiguation.

Two chunks are linked only when their entities get the same key, so this decides what the
graph can find: "The Beatles", "Beatles" and "beatles'" must meet; "Kiss and Tell (1945
film)" as a title must meet "Kiss and Tell" in running text.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from enum import StrEnum

_DISAMBIGUATION = re.compile(r"\s*\([^)]*\)\s*$")
_POSSESSIVE = re.compile(r"(?:'s|’s|'|’)$")  # noqa: RUF001 (typographic apostrophes)
_NON_WORD = re.compile(r"[^\w]+")
_ARTICLES = ("the ", "a ", "an ")
# Word endings that look plural but are not (bus, analysis, virus, Paris, glass).
_NOT_PLURAL = ("ss", "us", "is", "os", "as", "ys")


class Normalisation(StrEnum):
    """How far entity surface forms are folded together (``full`` is the default; the others
    exist so the effect of each step can be measured)."""

    EXACT = "exact"
    """The surface form, whitespace collapsed: "The Beatles" and "Beatles" stay apart."""
    CASE = "case"
    """Unicode case folding and NFKC only."""
    FULL = "full"
    """Case, accents, punctuation, possessives, leading articles, a trailing disambiguation
    in parentheses, the plural of the last word, then the alias table."""


def _singular(word: str) -> str:
    """The singular of an English plural by the regular rules; irregular words pass unchanged."""
    if len(word) <= 3 or word.isdigit():
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("ches", "shes", "xes", "sses", "zes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(_NOT_PLURAL):
        return word[:-1]
    return word


def _strip_accents(text: str) -> str:
    if text.isascii():
        return text
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def normalise(
    surface: str, mode: Normalisation = Normalisation.FULL, aliases: Mapping[str, str] | None = None
) -> str:
    """The key of an entity's surface form under ``mode``; an empty string means "no entity"."""
    if mode is Normalisation.EXACT:
        return " ".join(surface.split())
    ascii_only = surface.isascii()
    text = (surface if ascii_only else unicodedata.normalize("NFKC", surface)).casefold()
    if mode is Normalisation.CASE:
        return " ".join(text.split())
    if text.endswith(")"):
        text = _DISAMBIGUATION.sub("", text)
    if not ascii_only:
        text = _strip_accents(text)
    if text.endswith(("'", "’", "'s", "’s")):  # noqa: RUF001
        text = _POSSESSIVE.sub("", text.rstrip())
    text = " ".join(_NON_WORD.sub(" ", text).split())
    for article in _ARTICLES:
        if text.startswith(article) and len(text) > len(article):
            text = text[len(article) :]
            break
    if not text:
        return ""
    words = text.split(" ")
    words[-1] = _singular(words[-1])
    key = " ".join(words)
    if aliases:
        key = aliases.get(key, key)
    return key


def alias_table(pairs: Mapping[str, str]) -> dict[str, str]:
    """Normalise both sides of user-given aliases (``{"USA": "United States"}``) so they match keys."""
    table: dict[str, str] = {}
    for alias, canonical in pairs.items():
        target = normalise(canonical)
        source = normalise(alias)
        if source and target and source != target:
            table[source] = target
    return table
