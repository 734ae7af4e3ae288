"""``graph_rag``: Mastra's ``createGraphRAGTool`` as an MCP tool on a knowledge base's server.

Same arguments as Mastra's tool (``queryText``, ``topK``, ``filter``) plus its graph options
(``randomWalkSteps``, ``restartProb``, ``threshold``) per call, defaulting to
``[plugins.graphrag.mastra]``; the same answer shape (``relevantContext``, ``sources``). It
runs ``search`` with ``mode="mastra"`` through the server's own search, so the server's
mandatory and tenant filters hold here exactly as they do for ``search``. It is here for
parity and comparison: ``search`` with ``mode="graph"`` is the stronger method.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from toolkernel.tools import Tool, ToolResult, create_tool, text_block

if TYPE_CHECKING:
    from toolkernel.context import ToolContext
    from toolkernel.knowledge import ServedSearch
    from toolkernel_graphrag.settings import MastraSettings

MAX_TOP_K = 100
OPTIONS = ("randomWalkSteps", "restartProb", "threshold")


class GraphRAGSource(BaseModel):
    """One retrieved chunk, as Mastra's ``sources`` lists them (plus the document it came from)."""

    id: str
    document_id: str
    score: float
    text: str
    metadata: dict[str, Any]


class GraphRAGResult(BaseModel):
    """Mastra's answer shape: each chunk's metadata with its text, and the scored sources."""

    relevantContext: list[dict[str, Any]] = Field(
        description="Each retrieved chunk's metadata with its text, best first."
    )
    sources: list[GraphRAGSource]


def input_schema(defaults: MastraSettings) -> dict[str, Any]:
    """Mastra's tool arguments; the graph options default to ``[plugins.graphrag.mastra]``."""
    return {
        "type": "object",
        "properties": {
            "queryText": {"type": "string", "minLength": 1, "description": "What to search for."},
            "topK": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_TOP_K,
                "default": 10,
                "description": "How many chunks to return (and to build the graph over).",
            },
            "filter": {
                "type": ["object", "string"],
                "description": "A metadata filter (Mongo-style operators), as an object or a JSON "
                "string as Mastra passes it; it narrows what the server allows, never widens it.",
            },
            "randomWalkSteps": {
                "type": "integer",
                "minimum": 1,
                "maximum": 100_000,
                "default": defaults.random_walk_steps,
                "description": "Steps of each random walk.",
            },
            "restartProb": {
                "type": "number",
                "exclusiveMinimum": 0,
                "exclusiveMaximum": 1,
                "default": defaults.restart_prob,
                "description": "Probability of jumping back to the walk's start at each step.",
            },
            "threshold": {
                "type": "number",
                "minimum": -1,
                "maximum": 1,
                "default": defaults.threshold,
                "description": "Cosine similarity above which two chunks are joined.",
            },
        },
        "required": ["queryText"],
        "additionalProperties": False,
    }


def _filter(value: Any) -> dict[str, Any] | None:
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as error:
            raise ValueError(f"filter: not valid JSON ({error.msg} at position {error.pos})") from None
    if not isinstance(value, dict):
        raise ValueError(f"filter must be an object (or a JSON object string), got {type(value).__name__}")
    return value


def graph_rag_tool(search: ServedSearch, defaults: MastraSettings) -> Tool:
    """The ``graph_rag`` tool over a knowledge base's served search."""

    async def execute(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        options = {name: args[name] for name in OPTIONS if name in args}
        found = await search(
            ctx,
            args["queryText"],
            top_k=int(args.get("topK", 10)),
            filter=_filter(args.get("filter")),
            mode="mastra",
            options=options,
        )
        result = GraphRAGResult(
            relevantContext=[{**hit.chunk.metadata, "text": hit.chunk.text} for hit in found],
            sources=[
                GraphRAGSource(
                    id=hit.chunk.id,
                    document_id=hit.chunk.document_id,
                    score=hit.score,
                    text=hit.chunk.text,
                    metadata=dict(hit.chunk.metadata),
                )
                for hit in found
            ],
        )
        text = "\n\n".join(f"[{s.document_id}] {s.text}" for s in result.sources) or "No results."
        return ToolResult(content=[text_block(text)], structured=result)

    return create_tool(
        id="graph_rag",
        description=(
            "Mastra-compatible GraphRAG: the topK chunks most similar to queryText, reordered by "
            "random walks over a graph joining chunks whose similarity exceeds threshold. Returns "
            "relevantContext and sources."
        ),
        input_schema=input_schema(defaults),
        output_schema=GraphRAGResult,
        execute=execute,
        annotations={"readOnlyHint": True, "openWorldHint": False},
    )
