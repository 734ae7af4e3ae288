"""Tests of the ``weighted`` reranker (Mastra's formula), its lexical scorer, and the rerank helpers."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from toolkernel.rerankers import Reranker
from toolkernel_rag.rerankers import Candidate, CandidateScorer, RerankError, rerank
from toolkernel_rag.rerankers import plugin as rerank_plugin
from toolkernel_rag.rerankers.semantic import lexical_scorer
from toolkernel_rag.rerankers.weighted import weighted_reranker


class FixedScorer:
    """A semantic scorer with set answers, so the arithmetic can be checked exactly."""

    def __init__(self, scores: dict[str, float]) -> None:
        self.scores = scores
        self.calls: list[tuple[str, list[str]]] = []

    async def score(self, query: str, passages: Sequence[str]) -> list[float]:
        self.calls.append((query, list(passages)))
        return [self.scores[p] for p in passages]


CANDIDATES = [Candidate("a", 0.9), Candidate("b", 0.7), Candidate("c", 0.6), Candidate("d", 0.1)]
SEMANTIC = {"a": 0.2, "b": 1.0, "c": 0.0, "d": 0.5}


@pytest.mark.anyio
async def test_mastra_arithmetic_without_normalisation() -> None:
    reranker = weighted_reranker(scorer=FixedScorer(SEMANTIC), normalize="none")
    scores = await reranker.score_candidates("q", CANDIDATES)
    want = [
        0.4 * SEMANTIC[c.text] + 0.4 * c.score + 0.2 * (1 - i / len(CANDIDATES))
        for i, c in enumerate(CANDIDATES)
    ]
    assert scores == pytest.approx(want)


@pytest.mark.anyio
async def test_minmax_puts_both_scores_on_one_scale() -> None:
    reranker = weighted_reranker(scorer=FixedScorer(SEMANTIC))
    scores = await reranker.score_candidates("q", CANDIDATES)
    retrieval = [(c.score - 0.1) / 0.8 for c in CANDIDATES]
    want = [
        0.4 * SEMANTIC[c.text] + 0.4 * r + 0.2 * (1 - i / 4)
        for i, (c, r) in enumerate(zip(CANDIDATES, retrieval, strict=True))
    ]
    assert scores == pytest.approx(want)


@pytest.mark.anyio
async def test_raw_scales_let_one_term_drown_the_others() -> None:
    """RRF scores span ~0.01: added raw, they barely count; scaled, they hold their 40 %."""
    rrf = [Candidate(t, s) for t, s in (("a", 0.0328), ("b", 0.0160), ("c", 0.0159))]
    semantic = FixedScorer({"a": 0.3, "b": 0.6, "c": 0.0})
    raw = await rerank(weighted_reranker(scorer=semantic, normalize="none"), "q", rrf)
    scaled = await rerank(weighted_reranker(scorer=semantic), "q", rrf)
    assert raw[0][0] == 1  # the semantic scorer alone decides
    assert scaled[0][0] == 0  # retrieval's clear winner keeps its place


@pytest.mark.anyio
async def test_equal_scores_carry_no_preference() -> None:
    reranker = weighted_reranker(scorer=FixedScorer(dict.fromkeys("abcd", 0.3)))
    scores = await reranker.score_candidates("q", [Candidate(t, 0.5) for t in "abcd"])
    assert scores == pytest.approx([0.4 * 0.5 + 0.4 * 0.5 + 0.2 * (1 - i / 4) for i in range(4)])


@pytest.mark.anyio
async def test_plain_score_takes_the_order_as_the_retrieval_ranking() -> None:
    scorer = FixedScorer(SEMANTIC)
    reranker = weighted_reranker(scorer=scorer)
    scores = await reranker.score("q", ["a", "b", "c", "d"])
    assert scores == pytest.approx(
        [0.4 * SEMANTIC[t] + 0.4 * (1 - i / 3) + 0.2 * (1 - i / 4) for i, t in enumerate("abcd")]
    )
    assert scorer.calls == [("q", ["a", "b", "c", "d"])]


@pytest.mark.anyio
async def test_rerank_passes_retrieval_scores_to_a_candidate_scorer() -> None:
    reranker = weighted_reranker(
        scorer=FixedScorer({"x": 0.5, "y": 0.5}), position=0.0, semantic=0.5, vector=0.5
    )
    assert isinstance(reranker, CandidateScorer)
    order = await rerank(reranker, "q", [Candidate("x", 0.1), Candidate("y", 0.9)])
    assert [i for i, _ in order] == [1, 0]  # the scores, not the order they came in, decide


@pytest.mark.anyio
async def test_weights_must_sum_to_one() -> None:
    with pytest.raises(
        RerankError, match=r"weights semantic=0.5, vector=0.4, position=0.2 sum to 1.1; they must sum to 1"
    ):
        weighted_reranker(semantic=0.5)
    with pytest.raises(RerankError, match="semantic"):
        weighted_reranker(semantic=-0.2, vector=1.0, position=0.2)
    with pytest.raises(RerankError, match="unknown scorer 'llm'; known: cross-encoder, http, lexical"):
        weighted_reranker(scorer="llm")
    with pytest.raises(RerankError, match="scorer_options apply only to a scorer given by name"):
        weighted_reranker(scorer=FixedScorer({}), scorer_options={"k1": 1})
    with pytest.raises(RerankError, match="Extra inputs are not permitted"):
        weighted_reranker(topk=3)
    reranker = weighted_reranker(semantic=0.7, vector=0.2, position=0.1)
    assert reranker.name == "weighted:lexical"


@pytest.mark.anyio
async def test_a_scorer_answering_wrongly_is_named() -> None:
    class Short:
        async def score(self, query: str, passages: Sequence[str]) -> list[float]:
            return [1.0]

    class NotANumber:
        async def score(self, query: str, passages: Sequence[str]) -> list[float]:
            return [float("nan")] * len(passages)

    with pytest.raises(
        RerankError, match=r"weighted:Short \(semantic scorer\): returned 1 scores for 2 passages"
    ):
        await weighted_reranker(scorer=Short()).score("q", ["a", "b"])
    with pytest.raises(RerankError, match=r"score 0 is nan, not a finite number"):
        await weighted_reranker(scorer=NotANumber()).score("q", ["a"])
    with pytest.raises(RerankError, match=r"retrieval scores\): score 1 is inf"):
        await weighted_reranker().score_candidates("q", [Candidate("a", 1.0), Candidate("b", float("inf"))])


@pytest.mark.anyio
async def test_a_scorer_by_name_gets_its_options(tmp_path: Path) -> None:
    with pytest.raises(RerankError, match="does not exist"):
        await weighted_reranker(scorer="cross-encoder", scorer_options={"model": str(tmp_path / "x")}).score(
            "q", ["a"]
        )
    lexical = weighted_reranker(
        scorer="lexical", scorer_options={"stem": False}, semantic=1.0, vector=0.0, position=0.0
    )
    assert await lexical.score("foxes", ["fox", "foxes"]) == pytest.approx([0.0, 1.0])


@pytest.mark.anyio
async def test_lexical_scorer_is_bm25_over_the_candidates() -> None:
    scorer = lexical_scorer()
    passages = ["The red foxes run", "a red car", "blue sky", "fox fox fox and the hound"]
    scores = await scorer.score("Where do the red foxes live?", passages)
    # Stemmed terms: red, fox, live ('where', 'do', 'the' are stop words). red is in 2 of 4, fox in 2 of 4.
    idf = __import__("math").log(1 + (4 - 2 + 0.5) / (2 + 0.5))
    lengths = [3, 2, 2, 4]  # terms after stop words: red fox run | red car | blue sky | fox fox fox hound
    average = sum(lengths) / 4

    def bm25(tf: int, length: int) -> float:
        return tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * length / average))

    want = [idf * bm25(1, 3) * 2, idf * bm25(1, 2), 0.0, idf * bm25(3, 4)]
    assert scores == pytest.approx(want)
    assert await scorer.score("the and of", passages) == [0.0] * 4
    assert await scorer.score("x", []) == []


@pytest.mark.anyio
async def test_registered_through_the_kernel(kernel_with: Any) -> None:
    kernel = kernel_with(rerank_plugin)
    assert set(kernel.rerankers) >= {"weighted", "cross-encoder", "http"}
    reranker = kernel.reranker("weighted")
    assert isinstance(reranker, Reranker)
    scores = await reranker.score("red fox", ["blue sky", "a red fox"])
    # blue sky: 0.4 · 0 (no shared term) + 0.4 · 1 (first) + 0.2 · 1; a red fox: 0.4 · 1 + 0 + 0.2 · 0.5
    assert scores == pytest.approx([0.6, 0.5])


@pytest.mark.anyio
async def test_rerank_cuts_keeps_ties_in_order_and_checks_top_k() -> None:
    reranker = weighted_reranker(
        scorer=FixedScorer(dict.fromkeys("abc", 1.0)), semantic=1.0, vector=0.0, position=0.0
    )
    order = await rerank(reranker, "q", [Candidate(t, 0.0) for t in "abc"], top_k=2)
    assert [i for i, _ in order] == [0, 1]
    assert await rerank(reranker, "q", []) == []
    with pytest.raises(RerankError, match="top_k must be at least 1, got 0"):
        await rerank(reranker, "q", [Candidate("a", 0.0)], top_k=0)
