"""Hook implementations that register the knowledge-base rerankers: ``weighted``, ``cross-encoder``, ``http``.

A second entry point of toolkernel-rag, so reranking can be loaded (or disabled) by name on its
own. Backend libraries (onnxruntime, httpx) are imported only when a reranker is made.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from toolkernel import hookimpl

if TYPE_CHECKING:
    from toolkernel.registries import RerankerRegistry
    from toolkernel.rerankers import Reranker


def _weighted(**options: Any) -> Reranker:
    from toolkernel_rag.rerankers.weighted import weighted_reranker

    return weighted_reranker(**options)


def _cross_encoder(**options: Any) -> Reranker:
    from toolkernel_rag.rerankers.cross_encoder import cross_encoder_reranker

    return cross_encoder_reranker(**options)


def _http(**options: Any) -> Reranker:
    from toolkernel_rag.rerankers.http import http_reranker

    return http_reranker(**options)


@hookimpl
def register_rerankers(registry: RerankerRegistry) -> None:
    """Add ``weighted`` (Mastra's formula), ``cross-encoder`` (ONNX) and ``http`` (a /rerank API)."""
    registry.add("weighted", _weighted)
    registry.add("cross-encoder", _cross_encoder)
    registry.add("http", _http)
