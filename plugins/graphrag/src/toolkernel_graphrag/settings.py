"""Settings of the graph: how it is built (fixed per knowledge base) and how it is walked (per query).

Each default says in its description how it was chosen; ``docs/plugins/graphrag.md`` has the
measurements behind them.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from toolkernel_graphrag.normalise import Normalisation, alias_table


class GraphSettings(BaseModel):
    """How the graph is built. Changing one of these means rebuilding the graph (re-ingest)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    extractor: str = Field(
        default="phrases",
        description="Entity extractor, by the name it was registered under (register_entity_extractors).",
    )
    normalisation: Normalisation = Field(
        default=Normalisation.FULL,
        description="How entity surface forms fold into keys; see docs/plugins/graphrag.md.",
    )
    aliases: dict[str, str] = Field(
        default_factory=dict, description='Extra aliases, alias -> canonical name: {"USA": "United States"}.'
    )
    subphrases: bool = Field(
        default=True,
        description="Also link a phrase under its shorter capitalised runs ('President Richard Nixon').",
    )
    title_weight: float = Field(
        default=3.0,
        ge=1,
        description="Edges through a document's title count this many times an ordinary entity's "
        "(a title mention is an explicit reference); chosen on the development split.",
    )
    knn: int = Field(
        default=5,
        ge=0,
        le=100,
        description="Similarity neighbours per chunk (weak edges); 0 builds none and needs no vectors.",
    )
    knn_weight: float = Field(
        default=0.1,
        ge=0,
        description="Weight of a similarity edge per unit of cosine, against an entity edge's IDF (2-8).",
    )

    @cached_property
    def _aliases(self) -> dict[str, str]:
        return alias_table(self.aliases)

    def alias_keys(self) -> dict[str, str]:
        """The alias table with both sides normalised."""
        return self._aliases

    def graph_identity(self) -> dict[str, Any]:
        """What a persisted graph records, so a graph is never read with other build settings."""
        return self.model_dump(mode="json")


class WalkSettings(BaseModel):
    """How a query walks the graph."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    damping: float = Field(
        default=0.7,
        gt=0,
        lt=1,
        description="Probability of following an edge rather than restarting at the seeds "
        "(0.5 in HippoRAG 2; 0.7 measured better on the development split).",
    )
    seeds: int = Field(default=100, gt=0, le=1000, description="Seed chunks taken from the hybrid ranking.")
    entity_seed_share: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description="Share of the restart mass on entities named in the query (the rest on seed chunks).",
    )
    fusion: Literal["pagerank", "rrf"] = Field(
        default="rrf",
        description="Fuse the walk's order with the seed order by reciprocal rank (keeps single-hop "
        "collections at the seeds' quality), or rank by the walk's scores alone (stronger on multi-hop "
        "questions, 1.5 nDCG points below the seeds on SciFact).",
    )
    fusion_k: int = Field(default=60, gt=0, description="Reciprocal-rank-fusion constant (the usual 60).")


class MastraSettings(BaseModel):
    """Mastra's GraphRAG parameters (``mode="mastra"``), under Mastra's names; defaults are Mastra's."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    random_walk_steps: int = Field(default=100, gt=0, le=100_000, alias="randomWalkSteps")
    restart_prob: float = Field(default=0.15, gt=0, lt=1, alias="restartProb")
    threshold: float = Field(
        default=0.7, ge=-1, le=1, description="Cosine above which two chunks are joined."
    )


class GraphRAGSettings(BaseModel):
    """``[plugins.graphrag]``: how knowledge-base graphs are built and walked.

    ``[plugins.graphrag.build]`` holds :class:`GraphSettings`, ``[plugins.graphrag.walk]``
    :class:`WalkSettings`, ``[plugins.graphrag.mastra]`` :class:`MastraSettings`.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    build: GraphSettings = Field(default_factory=GraphSettings)
    walk: WalkSettings = Field(default_factory=WalkSettings)
    mastra: MastraSettings = Field(default_factory=MastraSettings)
