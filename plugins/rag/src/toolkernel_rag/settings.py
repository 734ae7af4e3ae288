"""``[plugins.rag]``: what a new knowledge base is built with, and how it is served.

Every field has the embedded default, so nothing needs configuring. The build fields
(``embedder``, ``store``, ``chunker`` and its sizes) apply when a knowledge base is created;
afterwards its manifest decides, and a mismatch is an error::

    [plugins.rag]
    embedder = "openai/text-embedding-3-small"
    store = "pgvector"
    store_options = { dsn = "postgresql://localhost/rag" }
    reranker = "cross-encoder"
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from toolkernel.filters import FilterLimits


class RagSettings(BaseModel):
    """The settings of toolkernel-rag (``[plugins.rag]``, ``TOOLKERNEL_RAG_<FIELD>``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    home: str | None = Field(
        None,
        description="Where knowledge bases named by --kb live: a directory or a postgresql:// URL "
        "(--home and $TOOLKERNEL_KB_HOME take precedence).",
    )
    embedder: str = Field("local/minilm-l6-int8", description="provider/model of a new knowledge base.")
    embedder_options: dict[str, Any] = Field(default_factory=dict, description="Options of the embedder.")
    store: str = Field("qdrant", description="Vector store of a new knowledge base (a registered name).")
    store_options: dict[str, Any] = Field(
        default_factory=dict,
        description="Factory options of the store; for qdrant the default keeps it on disk under the KB.",
    )
    chunker: str = Field("auto", description="'auto' (markdown/json/recursive by file type) or a chunker.")
    chunk_size: int = Field(250, gt=0, description="In `chunk_length` units.")
    chunk_overlap: int = Field(30, ge=0)
    chunk_length: Literal["characters", "tokens"] = Field(
        "tokens", description="tokens: counted with the embedder's own tokenizer when one is known."
    )
    query_embedder_options: dict[str, Any] = Field(
        default_factory=dict,
        description="Options of the embedder for queries only (the local provider: threads=1 unless set).",
    )
    reranker: str | None = Field(None, description="The reranker `rerank: true` uses when serving.")
    depth: int = Field(100, gt=0, description="Documents dense and sparse each give the fusion.")
    rerank_depth: int = Field(50, gt=0, description="Documents a reranker re-scores.")
    ingest_memory_mb: int = Field(
        1024,
        gt=0,
        description=(
            "Peak memory (RSS, MiB) an ingest is sized for: a batch holds at most 1/32 of it in "
            "document text, and the summary reports the peak against it."
        ),
    )
    max_query_chars: int = Field(
        10_000, gt=0, description="Longest query a served search takes (longer ones are refused)."
    )
    max_chunk_text_chars: int = Field(
        1_000_000, gt=0, description="Longest text the chunk_document tool splits (longer ones are refused)."
    )
    filter_limits: FilterLimits = Field(
        default_factory=FilterLimits,
        description="Bounds on a model's filter: max_depth, max_nodes, max_branches, max_values, max_string.",
    )
