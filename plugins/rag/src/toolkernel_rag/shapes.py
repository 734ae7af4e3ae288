"""The shapes the ``search`` tool takes and returns, and its input schema per store.

``search`` returns ``structuredContent`` ``{"results": [SearchHit, ...]}`` and the same
passages as text for models that read text. Its ``filter`` argument's JSON Schema lists
exactly the operators the configured store evaluates, so a model sees what it may use.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from toolkernel.filters import FIELD_OPERATORS, LOGICAL_OPERATORS

BUILTIN_MODES = ("hybrid", "dense", "sparse")
"""Retrieval modes every knowledge base answers; extensions add more."""


class Source(BaseModel):
    """Where a passage comes from: the document's resource URI, its path and title, the passage's span."""

    model_config = ConfigDict(extra="forbid")

    uri: str = Field(description="kb://NAME/documents/ID: read it for the whole document.")
    document_id: str
    path: str | None = None
    title: str | None = None
    start: int | None = Field(None, description="Character offset of the passage in the document text.")
    end: int | None = None

    @model_serializer(mode="wrap")
    def _absent_not_null(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _without_none(handler(self))


class SearchHit(BaseModel):
    """One passage ``search`` found."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="The chunk id.")
    document_id: str
    score: float = Field(description="Higher is better; the scale depends on mode and reranker.")
    text: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    source: Source | None = Field(None, description="Present unless include_sources is false.")
    vector: list[float] | None = Field(None, description="Only with include_vectors.")

    @model_serializer(mode="wrap")
    def _absent_not_null(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _without_none(handler(self))


def _without_none(data: Any) -> dict[str, Any]:
    """A field with nothing to say is left out rather than sent as null."""
    return {k: v for k, v in data.items() if v is not None}


class SearchResults(BaseModel):
    """What ``search`` returns as structured content."""

    model_config = ConfigDict(extra="forbid")

    results: list[SearchHit]


def filter_schema(supported: Collection[str]) -> dict[str, Any]:
    """A JSON Schema for the Mongo-style filter language restricted to the ``supported`` operators."""
    scalar: dict[str, Any] = {"type": ["string", "number", "boolean"]}
    scalars: dict[str, Any] = {"type": "array", "items": scalar, "minItems": 1}
    operand: dict[str, dict[str, Any]] = {
        "$eq": scalar,
        "$ne": scalar,
        "$gt": {"type": ["string", "number"]},
        "$gte": {"type": ["string", "number"]},
        "$lt": {"type": ["string", "number"]},
        "$lte": {"type": ["string", "number"]},
        "$in": scalars,
        "$nin": scalars,
        "$all": scalars,
        "$exists": {"type": "boolean"},
        "$regex": {"type": "string"},
    }
    field_ops = sorted(op for op in FIELD_OPERATORS if op in supported)
    condition: dict[str, Any] = {
        "type": "object",
        "properties": {op: operand[op] for op in field_ops},
        "additionalProperties": False,
        "minProperties": 1,
    }
    if "$not" in supported:
        condition["properties"]["$not"] = {"$ref": "#/$defs/condition"}
    field_value: dict[str, Any] = {"anyOf": [{"$ref": "#/$defs/condition"}]}
    if "$eq" in supported:
        field_value["anyOf"].append(scalar)
    if "$in" in supported:
        field_value["anyOf"].append(scalars)
    logical = sorted(op for op in LOGICAL_OPERATORS if op in supported)
    properties: dict[str, Any] = {}
    for op in logical:
        properties[op] = (
            {"$ref": "#/$defs/filter"}
            if op == "$not"
            else {"type": "array", "items": {"$ref": "#/$defs/filter"}, "minItems": 1}
        )
    node: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "patternProperties": {"^[^$]": {"$ref": "#/$defs/field"}},
        "additionalProperties": False,
    }
    return {"$defs": {"filter": node, "field": field_value, "condition": condition}, "node": node}


def search_input_schema(
    *,
    supported_operators: Collection[str],
    modes: Sequence[str],
    rerankers: Sequence[str],
    default_mode: str = "hybrid",
    default_top_k: int = 10,
    max_top_k: int = 100,
    max_query_chars: int = 10_000,
) -> dict[str, Any]:
    """The ``search`` tool's input schema for a store, the modes on offer and the rerankers installed."""
    built = filter_schema(supported_operators)
    ops = ", ".join(sorted(supported_operators))
    rerank: dict[str, Any] = {
        "description": "Rerank the passages: true uses the server's reranker, a name picks one, false none.",
        "anyOf": [{"type": "boolean"}] + ([{"type": "string", "enum": list(rerankers)}] if rerankers else []),
    }
    return {
        "type": "object",
        "$defs": built["$defs"],
        "properties": {
            "query": {
                "type": "string",
                "minLength": 1,
                "maxLength": max_query_chars,
                "description": "What to look for, in plain words.",
            },
            "top_k": {
                "type": "integer",
                "minimum": 1,
                "maximum": max_top_k,
                "default": default_top_k,
                "description": "How many passages to return (one per document in dense, sparse and hybrid).",
            },
            "filter": {
                **built["node"],
                "description": (
                    f"Mongo-style metadata filter, e.g. {_filter_example(supported_operators)}. "
                    f"Operators this knowledge base supports: {ops}."
                ),
            },
            "mode": {
                "type": "string",
                "enum": list(modes),
                "default": default_mode,
                "description": "hybrid: dense + BM25 fused by reciprocal rank; dense: vectors only; "
                "sparse: BM25 only" + ("; " + ", ".join(modes[3:]) + ": extensions" if modes[3:] else ""),
            },
            "rerank": rerank,
            "include_vectors": {"type": "boolean", "default": False},
            "include_sources": {"type": "boolean", "default": True},
        },
        "required": ["query"],
        "additionalProperties": False,
    }


def _filter_example(supported: Collection[str]) -> str:
    """An example filter that uses only ``supported`` operators (a model copies what it is shown)."""
    if "$regex" in supported:
        return '{"path": {"$regex": "^docs/"}}'
    if "$in" in supported:
        return '{"kind": {"$in": ["markdown", "html"]}}'
    return '{"kind": "markdown"}'


def output_schema() -> dict[str, Any]:
    """The ``search`` tool's output schema as clients see it: inline, without null alternatives.

    Results leave out fields that have no value instead of sending null, so the schema can
    say ``{"type": "string"}`` where pydantic would write ``anyOf [string, null]``, and the
    ``$defs`` are inlined. A client validates every result against this schema (the SDK's
    client does, with jsonschema), and references and ``anyOf`` multiply that cost.
    """
    schema = SearchResults.model_json_schema()
    defs = schema.pop("$defs", {})

    def simplify(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return simplify(defs[node["$ref"].rsplit("/", 1)[-1]])
            options = node.get("anyOf")
            if isinstance(options, list) and {"type": "null"} in options and len(options) == 2:
                [kept] = [o for o in options if o != {"type": "null"}]
                rest = {k: v for k, v in node.items() if k not in ("anyOf", "default")}
                return simplify({**rest, **kept})
            return {
                k: {name: simplify(p) for name, p in v.items()} if k == "properties" else simplify(v)
                for k, v in node.items()
                if k != "title"  # the annotation; a property named "title" lives under "properties"
            }
        if isinstance(node, list):
            return [simplify(item) for item in node]
        return node

    compact: dict[str, Any] = simplify(schema)
    return compact
