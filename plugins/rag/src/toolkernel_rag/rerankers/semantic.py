"""Semantic scorers the ``weighted`` reranker can use by name; any Reranker object works as well.

``lexical`` (the default) is BM25 computed over the candidates alone: query terms, stemmed, with
their rarity measured among the candidates. It needs no model and costs about 3 ms of CPU for
30 abstracts, and it is a different view of relevance from the dense vectors behind the
retrieval score, which is what a blend needs to add anything.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from toolkernel.rerankers import Reranker
from toolkernel_rag.rerankers.candidates import check_passages

_STOP_WORDS_TEXT = """
a about above after again against all am an and any are as at be because been before being below
between both but by can could did do does doing down during each few for from further had has
have having he her here hers herself him himself his how i if in into is it its itself just me
more most my myself no nor not now of off on once only or other our ours ourselves out over own
same she should so some such than that the their theirs them themselves then there these they
this those through to too under until up very was we were what when where which while who whom
why will with would you your yours yourself yourselves
"""
STOP_WORDS = frozenset(_STOP_WORDS_TEXT.split())
"""English function words the lexical scorer ignores."""
_WORD = re.compile(r"\w+", re.UNICODE)


class LexicalOptions(BaseModel):
    """Options of the ``lexical`` scorer: BM25's two constants and whether to stem."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    k1: float = Field(default=1.2, ge=0, description="Term-frequency saturation.")
    b: float = Field(default=0.75, ge=0, le=1, description="Length normalisation.")
    stem: bool = Field(default=True, description="English Snowball stemming (PyStemmer), if installed.")


class LexicalScorer:
    """BM25 of each passage for the query, with document frequencies counted over the passages given."""

    STEM_CACHE_SIZE = 200_000
    """Words whose stems are remembered; the cache starts afresh when it is full."""

    def __init__(self, options: LexicalOptions) -> None:
        self._options = options
        self._stem: Callable[[list[str]], list[str]] = _stemmer() if options.stem else (lambda words: words)
        self._stems: dict[str, str] = {}

    def terms(self, text: str) -> Counter[str]:
        """Lowercased word tokens without stop words, stemmed, with their counts."""
        words = Counter(w for w in _WORD.findall(text.lower()) if w not in STOP_WORDS)
        unknown = [w for w in words if w not in self._stems]
        if unknown:
            if len(self._stems) + len(unknown) > self.STEM_CACHE_SIZE:
                self._stems.clear()
            self._stems.update(zip(unknown, self._stem(unknown), strict=True))
        counts: Counter[str] = Counter()
        for word, n in words.items():
            counts[self._stems[word]] += n
        return counts

    async def score(self, query: str, passages: Sequence[str]) -> list[float]:
        """One BM25 score per passage (0 when it shares no term with the query)."""
        texts = check_passages("lexical scorer", query, passages)
        wanted = set(self.terms(query))
        counts = [self.terms(text) for text in texts]
        if not counts or not wanted:
            return [0.0] * len(texts)
        lengths = [c.total() for c in counts]
        average = max(sum(lengths) / len(lengths), 1.0)
        n = len(texts)
        idf = {
            t: math.log(1 + (n - df + 0.5) / (df + 0.5))
            for t in wanted
            if (df := sum(t in c for c in counts))
        }
        k1, b = self._options.k1, self._options.b
        return [
            sum(
                weight * c[t] * (k1 + 1) / (c[t] + k1 * (1 - b + b * length / average))
                for t, weight in idf.items()
                if t in c
            )
            for c, length in zip(counts, lengths, strict=True)
        ]


def _stemmer() -> Callable[[list[str]], list[str]]:
    """PyStemmer's English stemmer, or no stemming if it is not installed."""
    try:
        import Stemmer  # type: ignore[import-not-found]
    except ImportError:
        return lambda words: words
    stemmer = Stemmer.Stemmer("english")
    return lambda words: list(stemmer.stemWords(words))


def lexical_scorer(**options: Any) -> LexicalScorer:
    """Make the ``lexical`` scorer from keyword options (see :class:`LexicalOptions`)."""
    return LexicalScorer(LexicalOptions(**options))


def _cross_encoder(**options: Any) -> Reranker:
    from toolkernel_rag.rerankers.cross_encoder import cross_encoder_reranker

    return cross_encoder_reranker(**options)


def _http(**options: Any) -> Reranker:
    from toolkernel_rag.rerankers.http import http_reranker

    return http_reranker(**options)


SCORERS: dict[str, Callable[..., Reranker]] = {
    "lexical": lexical_scorer,
    "cross-encoder": _cross_encoder,
    "http": _http,
}
"""Semantic scorers by name; ``scorer_options`` are passed to the factory."""

DEFAULT_SCORER = "lexical"
