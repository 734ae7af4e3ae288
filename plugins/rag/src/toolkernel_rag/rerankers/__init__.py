"""Rerankers for knowledge-base search: a weighted blend, an ONNX cross-encoder, and a /rerank HTTP API.

Importing this package is cheap; each reranker's backend loads when one is made.
"""

from __future__ import annotations

from toolkernel_rag.rerankers.candidates import Candidate as Candidate
from toolkernel_rag.rerankers.candidates import CandidateScorer as CandidateScorer
from toolkernel_rag.rerankers.candidates import RerankError as RerankError
from toolkernel_rag.rerankers.candidates import rerank as rerank

__all__ = ["Candidate", "CandidateScorer", "RerankError", "rerank"]
