"""``weighted``: Mastra's rerank formula, made safe to apply to any ranking.

``final = semantic·s + vector·v + position·(1 - i/N)`` with Mastra's default weights 0.4 / 0.4 /
0.2, which must sum to 1. ``s`` comes from a pluggable semantic scorer (any
:class:`~toolkernel.rerankers.Reranker`: the cross-encoder, the ``http`` API, your own), ``v`` is
the score retrieval gave the candidate, ``i`` its retrieval position among ``N``.

Mastra adds the raw numbers. Their scales differ (a cosine of 0.3-0.7, an RRF score near 0.016,
an LLM judge's 0-1), so whichever term spreads widest decides the order and the weights mean
nothing; reordering a good ranking by a weaker signal makes it worse. Here ``s`` and ``v`` are
min-max scaled over the candidates first (``normalize="minmax"``, the default; ``"none"`` is
Mastra's arithmetic), so each weight is the share of the decision it claims to be.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from toolkernel.rerankers import Reranker
from toolkernel_rag.rerankers.candidates import Candidate, RerankError, check_passages, check_scores
from toolkernel_rag.rerankers.semantic import DEFAULT_SCORER, SCORERS

WEIGHT_TOLERANCE = 1e-6


class WeightedOptions(BaseModel):
    """Options of the ``weighted`` reranker; the three weights must each be in 0..1 and sum to 1."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    semantic: float = Field(default=0.4, ge=0, le=1, description="Weight of the semantic scorer's score.")
    vector: float = Field(default=0.4, ge=0, le=1, description="Weight of the retrieval score.")
    position: float = Field(default=0.2, ge=0, le=1, description="Weight of the retrieval position, 1 - i/N.")
    normalize: Literal["minmax", "none"] = Field(
        default="minmax", description="Scale semantic and retrieval scores to 0..1 over the candidates first."
    )
    scorer: str | Reranker = Field(
        default=DEFAULT_SCORER,
        description=f"The semantic scorer: a Reranker object or one of {sorted(SCORERS)}.",
    )
    scorer_options: dict[str, Any] = Field(
        default_factory=dict, description="Options for a scorer given by name."
    )

    @model_validator(mode="after")
    def _weights_sum_to_one(self) -> WeightedOptions:
        total = self.semantic + self.vector + self.position
        if abs(total - 1.0) > WEIGHT_TOLERANCE:
            raise ValueError(
                f"weights semantic={self.semantic}, vector={self.vector}, position={self.position} "
                f"sum to {total:g}; they must sum to 1"
            )
        if isinstance(self.scorer, str) and self.scorer not in SCORERS:
            raise ValueError(f"unknown scorer {self.scorer!r}; known: {', '.join(sorted(SCORERS))}")
        if not isinstance(self.scorer, str) and self.scorer_options:
            raise ValueError("scorer_options apply only to a scorer given by name")
        return self


class WeightedReranker:
    """Blends a semantic scorer with the retrieval score and position, Mastra's way, on comparable scales."""

    def __init__(self, options: WeightedOptions) -> None:
        self._options = options
        scorer = options.scorer
        self._scorer: Reranker = (
            SCORERS[scorer](**options.scorer_options) if isinstance(scorer, str) else scorer
        )

    @property
    def name(self) -> str:
        """``weighted:<scorer>``."""
        scorer = self._options.scorer
        return f"weighted:{scorer if isinstance(scorer, str) else type(scorer).__name__}"

    async def score(self, query: str, passages: Sequence[str]) -> list[float]:
        """Final scores for passages given best first, with no retrieval scores: ``v`` follows the order."""
        texts = check_passages(self.name, query, passages)
        count = len(texts)
        return await self.score_candidates(
            query, [Candidate(t, float(count - i)) for i, t in enumerate(texts)]
        )

    async def score_candidates(self, query: str, candidates: Sequence[Candidate]) -> list[float]:
        """Final scores for retrieved candidates given best first, with their retrieval scores."""
        texts = check_passages(self.name, query, [c.text for c in candidates])
        if not texts:
            return []
        retrieval = check_scores(f"{self.name} (retrieval scores)", [c.score for c in candidates], len(texts))
        semantic = check_scores(self._scorer_label, await self._scorer.score(query, texts), len(texts))
        opts = self._options
        if opts.normalize == "minmax":
            semantic, retrieval = _minmax(semantic), _minmax(retrieval)
        count = len(texts)
        return [
            opts.semantic * s + opts.vector * v + opts.position * (1 - i / count)
            for i, (s, v) in enumerate(zip(semantic, retrieval, strict=True))
        ]

    @property
    def _scorer_label(self) -> str:
        return f"{self.name} (semantic scorer)"


def _minmax(values: list[float]) -> list[float]:
    """Scale to 0..1 over the list; all-equal values carry no preference and become 0.5."""
    low, high = min(values), max(values)
    if not math.isfinite(high - low) or high - low <= 0:
        return [0.5] * len(values)
    return [(v - low) / (high - low) for v in values]


def weighted_reranker(**options: Any) -> WeightedReranker:
    """Make the ``weighted`` reranker from keyword options (see :class:`WeightedOptions`)."""
    try:
        return WeightedReranker(WeightedOptions(**options))
    except ValueError as exc:
        raise RerankError(f"weighted reranker: {exc}") from exc
