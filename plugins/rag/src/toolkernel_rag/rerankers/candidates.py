"""Reranking retrieved candidates: input checks and the reorder itself.

Every reranker implements the kernel's :class:`~toolkernel.rerankers.Reranker` (text in, one score
per passage out). A reranker that also uses what retrieval knew (its scores and order), such as
the weighted one, implements :class:`CandidateScorer` as well; :func:`rerank` picks the richer call
when it is there, so the search tool needs one code path for every reranker.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from toolkernel.rerankers import Reranker


class RerankError(ValueError):
    """Bad input to a reranker, or a reranker that failed or answered wrongly; the message names it."""


@dataclass(frozen=True, slots=True)
class Candidate:
    """One retrieved passage as a reranker sees it: its text and the score retrieval gave it."""

    text: str
    score: float


@runtime_checkable
class CandidateScorer(Protocol):
    """A reranker that scores candidates with their retrieval scores, given best first."""

    async def score_candidates(self, query: str, candidates: Sequence[Candidate]) -> list[float]:
        """One score per candidate, in order; higher is more relevant."""


def check_passages(name: str, query: object, passages: object) -> list[str]:
    """Validate a ``score(query, passages)`` call; return the passages as a list or raise naming the fault."""
    if not isinstance(query, str):
        raise RerankError(f"{name}: query must be a string, got {type(query).__name__}")
    if not query.strip():
        raise RerankError(f"{name}: query is empty")
    if isinstance(passages, str | bytes) or not isinstance(passages, Sequence):
        raise RerankError(f"{name}: passages must be a sequence of strings, got {type(passages).__name__}")
    for index, passage in enumerate(passages):
        if not isinstance(passage, str):
            raise RerankError(f"{name}: passage {index} must be a string, got {type(passage).__name__}")
    return list(passages)


def check_scores(name: str, scores: Sequence[float], expected: int) -> list[float]:
    """Validate what a reranker returned: one finite number per passage."""
    values = list(scores)
    if len(values) != expected:
        raise RerankError(f"{name}: returned {len(values)} scores for {expected} passages")
    for index, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise RerankError(f"{name}: score {index} is {value!r}, not a finite number")
    return [float(v) for v in values]


async def rerank(
    reranker: Reranker, query: str, candidates: Sequence[Candidate], *, top_k: int | None = None
) -> list[tuple[int, float]]:
    """Reorder ``candidates`` (best first as retrieved) by ``reranker``; ``(index, score)`` pairs, best first.

    Ties keep the retrieval order. ``top_k`` cuts the list after reordering.
    """
    name = type(reranker).__name__
    if top_k is not None and top_k < 1:
        raise RerankError(f"{name}: top_k must be at least 1, got {top_k}")
    if not candidates:
        return []
    if isinstance(reranker, CandidateScorer):
        raw = await reranker.score_candidates(query, candidates)
    else:
        raw = await reranker.score(query, [c.text for c in candidates])
    scores = check_scores(name, raw, len(candidates))
    order = sorted(range(len(candidates)), key=lambda i: (-scores[i], i))
    return [(i, scores[i]) for i in order[:top_k]]
