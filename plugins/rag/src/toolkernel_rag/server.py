"""A knowledge base as MCP: ``search``, ``fetch_document``, ``chunk_document``, document resources, a prompt.

:func:`mount_kb` adds them to any :class:`~toolkernel.MCPServer`; :func:`kb_server` makes a
server that holds only them (what ``toolkernel kb serve`` serves). Access control lives in
:class:`KBServerOptions`: a **mandatory filter** and the **tenant** filter are joined with the
model's filter by ``$and``, so a model can narrow results and never widen them; only the
settings named in ``meta_overrides`` may be changed per request (through
``_meta["toolkernel/context"]``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

import anyio.to_thread

from toolkernel.context import ToolContext
from toolkernel.filters import FilterLimits, check_filter_limits
from toolkernel.knowledge import RetrievedChunk, ServedSearch
from toolkernel.prompts import Prompt, PromptArgument
from toolkernel.resources import Resource, ResourcePage, ResourceTemplate
from toolkernel.tools import Tool, ToolResult, create_tool, text_block
from toolkernel_rag.kb import Hit, KnowledgeBase
from toolkernel_rag.layout import KBError
from toolkernel_rag.shapes import SearchHit, SearchResults, Source, output_schema, search_input_schema

if TYPE_CHECKING:
    from toolkernel.server import MCPServer


@dataclass(frozen=True)
class TenantScope:
    """Where a tenant's search runs: an extra filter, and/or a knowledge base of its own.

    ``knowledge_base`` replaces the served one for this request (an index per tenant); it
    must have been opened by the caller, and is searched with the same mandatory filter.
    """

    filter: Mapping[str, Any] | None = None
    knowledge_base: KnowledgeBase | None = None


TenantResolver = Callable[[ToolContext], "Mapping[str, Any] | TenantScope | None"]
"""``resolver(ctx)``: the tenant's filter, or a :class:`TenantScope`, for this request (from
``ctx.auth``, ``ctx.values``); ``None`` when no tenant can be resolved."""

OVERRIDABLE = frozenset({"mode", "top_k", "rerank", "depth", "rerank_depth"})
"""Settings ``meta_overrides`` may name."""


@dataclass(frozen=True)
class KBServerOptions:
    """How a knowledge base is exposed: defaults, the filters a model cannot escape, per-request overrides.

    :param mandatory_filter: joined to every search by ``$and`` (e.g. ``{"public": True}``).
    :param tenant: resolves the caller's tenant from the request: a filter joined like the
        mandatory one, or a :class:`TenantScope` that may also pick the tenant's own
        knowledge base; ``None`` from it refuses the search (an unresolved tenant sees
        nothing, rather than everything).
    :param reranker: the reranker ``rerank: true`` uses (a name registered via
        ``register_rerankers``); ``None`` makes ``rerank: true`` an error.
    :param rerank_by_default: rerank when the model does not say.
    :param meta_overrides: settings a request may override through ``_meta["toolkernel/context"]``
        (a subset of :data:`OVERRIDABLE`); others are ignored.
    :param listed_documents: the most documents one ``resources/list`` page shows; the
        client follows ``nextCursor`` for the rest.
    :param max_query_chars: the longest query a search takes; a longer one is refused before
        any work (``[plugins.rag] max_query_chars``).
    :param filter_limits: bounds on the model's filter, checked before it is parsed
        (``[plugins.rag.filter_limits]``); the mandatory and tenant filters are not bound.
    :param max_chunk_text_chars: the longest text ``chunk_document`` splits
        (``[plugins.rag] max_chunk_text_chars``).
    """

    mandatory_filter: Mapping[str, Any] | None = None
    tenant: TenantResolver | None = None
    reranker: str | None = None
    rerank_by_default: bool = False
    default_mode: str = "hybrid"
    default_top_k: int = 10
    max_top_k: int = 100
    depth: int = 100
    rerank_depth: int = 50
    meta_overrides: Collection[str] = field(default_factory=frozenset)
    listed_documents: int = 1000
    max_query_chars: int = 10_000
    filter_limits: FilterLimits = field(default_factory=FilterLimits)
    max_chunk_text_chars: int = 1_000_000

    def __post_init__(self) -> None:
        unknown = set(self.meta_overrides) - OVERRIDABLE
        if unknown:
            raise KBError(
                f"meta_overrides: {sorted(unknown)} cannot be overridden per request; "
                f"choose from {sorted(OVERRIDABLE)}"
            )


def effective_filter(*parts: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Join filters with ``$and``; each part must hold, so no part can widen another."""
    present = [dict(p) for p in parts if p]
    if not present:
        return None
    return present[0] if len(present) == 1 else {"$and": present}


def check_search_input(query: Any, model_filter: Any, options: KBServerOptions, where: str = "") -> None:
    """Refuse a query or a model's filter over the server's limits before any work is done on them.

    :raises KBError: naming the limit, e.g. ``query: 4194304 characters, over max_query_chars (10000)``.
    """
    if isinstance(query, str) and len(query) > options.max_query_chars:
        raise KBError(
            f"{where}query: {len(query)} characters, over max_query_chars ({options.max_query_chars})"
        )
    if model_filter is not None:
        try:
            check_filter_limits(model_filter, options.filter_limits)
        except ValueError as exc:
            raise KBError(f"{where}{exc}") from None


def document_uri(kb: KnowledgeBase, document_id: str) -> str:
    """``kb://NAME/documents/ID`` with the id percent-encoded (ids may hold '/')."""
    return f"kb://{kb.name}/documents/{quote(document_id, safe='')}"


def kb_server(kb: KnowledgeBase, options: KBServerOptions | None = None) -> MCPServer:
    """An MCP server offering ``kb``'s tools, resources and prompt."""
    from toolkernel.server import MCPServer

    server = MCPServer(
        f"kb-{kb.name}",
        "0.1.0",
        description=f"Knowledge base {kb.name!r}: search its documents and read them with their sources.",
        instructions=(
            "Call search to find passages; cite their source URIs. fetch_document or the "
            "kb:// resources return whole documents."
        ),
        kernel=kb.kernel,
    )
    mount_kb(server, kb, options)
    return server


def mount_kb(server: MCPServer, kb: KnowledgeBase, options: KBServerOptions | None = None) -> None:
    """Add ``kb``'s tools (and its extensions'), document resources and prompt to ``server``."""
    opts = options or KBServerOptions()
    for tool in kb_tools(kb, opts):
        server.add_tool(tool)
    served = served_search(kb, opts)
    for extension in kb.extensions.values():
        for tool in extension.tools(served):
            server.add_tool(tool)
    for resource in document_resources(kb, opts):
        server.add_resource(resource)
    server.add_prompt(answer_prompt(kb, opts))


# -- tools ---------------------------------------------------------------------------------------


def kb_tools(kb: KnowledgeBase, options: KBServerOptions) -> list[Tool]:
    """``search``, ``fetch_document`` and ``chunk_document`` for ``kb``."""
    return [_search_tool(kb, options), _fetch_tool(kb), _chunk_tool(kb, options)]


def _search_tool(kb: KnowledgeBase, options: KBServerOptions) -> Tool:
    rerankers = kb.usable_rerankers()  # only those that will work: a model never sees the others
    schema = search_input_schema(
        supported_operators=kb.supported_filter_operators,
        modes=kb.modes,
        rerankers=rerankers,
        default_mode=options.default_mode,
        default_top_k=options.default_top_k,
        max_top_k=options.max_top_k,
        max_query_chars=options.max_query_chars,
    )

    async def execute(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        settings = _request_settings(args, ctx, options)
        target, where = _scope(kb, options, ctx, args.get("filter"))
        hits = await target.search(
            args["query"],
            top_k=settings["top_k"],
            filter=where,
            mode=settings["mode"],
            rerank=_reranker_name(settings["rerank"], options),
            include_vectors=bool(args.get("include_vectors", False)),
            depth=settings["depth"],
            rerank_depth=settings["rerank_depth"],
        )
        results = SearchResults(
            results=[_shape(target, h, bool(args.get("include_sources", True))) for h in hits]
        )
        return ToolResult(content=[text_block(_as_text(results))], structured=results)

    tool = create_tool(
        id="search",
        description=(
            f"Search the knowledge base {kb.name!r} for passages relevant to a query. Returns the best "
            "passages with their document id, score, metadata and source (a kb:// URI to cite or read)."
        ),
        input_schema=schema,
        output_schema=SearchResults,
        execute=execute,
        annotations={"readOnlyHint": True, "openWorldHint": False},
        check_input=lambda args: check_search_input(args.get("query"), args.get("filter"), options),
    )
    # Validated on the way out by the pydantic model (microseconds); listed to clients as the
    # equivalent compact schema, which is what their own per-result validation walks.
    tool.output_schema = output_schema()
    return tool


def _scope(
    kb: KnowledgeBase, options: KBServerOptions, ctx: ToolContext, model_filter: Mapping[str, Any] | None
) -> tuple[KnowledgeBase, dict[str, Any] | None]:
    """The knowledge base a request searches and its effective filter: mandatory, tenant, model's."""
    tenant_filter, target = None, kb
    if options.tenant is not None:
        resolved = options.tenant(ctx)
        if resolved is None:
            raise KBError("no tenant could be resolved for this request; search refused")
        if isinstance(resolved, TenantScope):
            tenant_filter, target = resolved.filter, resolved.knowledge_base or kb
        else:
            tenant_filter = resolved
    return target, effective_filter(options.mandatory_filter, tenant_filter, model_filter)


def served_search(kb: KnowledgeBase, server_options: KBServerOptions) -> ServedSearch:
    """``kb``'s search within the server's mandatory and tenant filters, for extensions' tools."""

    async def search(
        ctx: ToolContext,
        query: str,
        *,
        top_k: int,
        filter: Mapping[str, Any] | None = None,
        mode: str = "hybrid",
        options: Mapping[str, Any] | None = None,
    ) -> list[RetrievedChunk]:
        check_search_input(query, filter, server_options)
        target, where = _scope(kb, server_options, ctx, filter)
        hits = await target.search(
            query, top_k=top_k, filter=where, mode=mode, depth=server_options.depth, options=options
        )
        return [RetrievedChunk(h.chunk.record(False), h.score) for h in hits]

    return search


def _request_settings(args: Mapping[str, Any], ctx: ToolContext, options: KBServerOptions) -> dict[str, Any]:
    """Tool arguments over server defaults, then allowed ``_meta`` overrides over both."""
    settings: dict[str, Any] = {
        "mode": args.get("mode", options.default_mode),
        "top_k": args.get("top_k", options.default_top_k),
        "rerank": args.get("rerank", options.rerank_by_default),
        "depth": options.depth,
        "rerank_depth": options.rerank_depth,
    }
    for key in options.meta_overrides:
        if key in ctx.values:
            settings[key] = ctx.values[key]
    top_k = settings["top_k"]
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= options.max_top_k:
        raise KBError(f"top_k must be an integer from 1 to {options.max_top_k}, got {top_k!r}")
    return settings


def _reranker_name(rerank: Any, options: KBServerOptions) -> str | None:
    if rerank is False or rerank is None:
        return None
    if rerank is True:
        if options.reranker is None:
            raise KBError("rerank: this server has no default reranker; name one (see the rerank enum)")
        return options.reranker
    if isinstance(rerank, str):
        return rerank
    raise KBError(f"rerank must be true, false or a reranker name, got {rerank!r}")


def _shape(kb: KnowledgeBase, hit: Hit, include_sources: bool) -> SearchHit:
    chunk = hit.chunk
    meta = chunk.metadata
    source = (
        Source(
            uri=document_uri(kb, chunk.document_id),
            document_id=chunk.document_id,
            path=str(meta["path"]) if "path" in meta else None,
            title=str(meta["title"]) if "title" in meta else None,
            start=chunk.start,
            end=chunk.end,
        )
        if include_sources
        else None
    )
    return SearchHit(
        id=chunk.id,
        document_id=chunk.document_id,
        score=hit.score,
        text=chunk.text,
        metadata=meta,
        source=source,
        vector=chunk.vector,
    )


def _as_text(results: SearchResults) -> str:
    if not results.results:
        return "No passages found."
    parts = []
    for n, hit in enumerate(results.results, start=1):
        where = hit.source.uri if hit.source else hit.document_id
        title = f" {hit.source.title}" if hit.source and hit.source.title else ""
        parts.append(f"[{n}]{title} ({where}, score {hit.score:.4g})\n{hit.text}")
    return "\n\n".join(parts)


def _fetch_tool(kb: KnowledgeBase) -> Tool:
    schema = {
        "type": "object",
        "properties": {"document_id": {"type": "string", "minLength": 1}},
        "required": ["document_id"],
        "additionalProperties": False,
    }

    async def execute(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        found = kb.document(args["document_id"])
        if found is None:
            raise KBError(f"no document {args['document_id']!r} in knowledge base {kb.name!r}")
        row, text = found
        structured = {"id": row.id, "uri": document_uri(kb, row.id), "metadata": row.metadata, "text": text}
        return ToolResult(content=[text_block(text)], structured=structured)

    return create_tool(
        id="fetch_document",
        description=f"The whole text and metadata of one document of {kb.name!r}, by its document_id.",
        input_schema=schema,
        execute=execute,
        annotations={"readOnlyHint": True, "openWorldHint": False},
    )


def _chunk_tool(kb: KnowledgeBase, options: KBServerOptions) -> Tool:
    names = list(kb.kernel.chunkers)
    schema = {
        "type": "object",
        "properties": {
            "text": {
                "type": "string",
                "maxLength": options.max_chunk_text_chars,
                "description": "The document text to split.",
            },
            "chunker": {"type": "string", "enum": names, "default": "recursive"},
            "size": {"type": "integer", "minimum": 1, "default": 1000},
            "overlap": {"type": "integer", "minimum": 0, "default": 0},
            "length": {
                "type": "string",
                "enum": ["characters", "tokens"],
                "default": "characters",
                "description": f"tokens: counted with the tokenizer of {kb.manifest.embedder.name}.",
            },
        },
        "required": ["text"],
        "additionalProperties": False,
    }

    async def execute(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        options: dict[str, Any] = {
            "size": args.get("size", 1000),
            "overlap": args.get("overlap", 0),
            "length": args.get("length", "characters"),
        }
        if options["length"] == "tokens":
            options["tokenizer"] = kb.manifest.embedder.name
        chunker = kb.kernel.chunker(args.get("chunker", "recursive"), **options)

        def split() -> list[dict[str, Any]]:
            return [
                {"text": c.text, "start": c.start, "end": c.end, "metadata": dict(c.metadata)}
                for c in chunker.chunk(args["text"])
            ]

        # In a worker thread: counting tokens over a long text takes seconds (400 kB: 2.6 s),
        # and the event loop must go on answering other requests meanwhile (the chunkers give
        # the GIL up while they tokenize and split: see toolkernel_rag.chunking.encode).
        chunks = await anyio.to_thread.run_sync(split)
        structured = {"chunker": chunker.describe(), "chunks": chunks}
        return ToolResult(
            content=[text_block(json.dumps(structured, ensure_ascii=False))], structured=structured
        )

    return create_tool(
        id="chunk_document",
        description="Split a text into chunks with one of the installed chunkers (nothing is stored).",
        input_schema=schema,
        execute=execute,
        annotations={"readOnlyHint": True, "openWorldHint": False},
        check_input=lambda args: _check_chunk_text(args.get("text"), options),
    )


def _check_chunk_text(text: Any, options: KBServerOptions) -> None:
    """Refuse a text over ``max_chunk_text_chars`` before any work is done on it."""
    if isinstance(text, str) and len(text) > options.max_chunk_text_chars:
        raise KBError(
            f"text: {len(text)} characters, over max_chunk_text_chars ({options.max_chunk_text_chars})"
        )


# -- resources and the prompt -----------------------------------------------------------------------


def document_resources(kb: KnowledgeBase, options: KBServerOptions) -> list[Resource | ResourceTemplate]:
    """A template that reads any document by id and lists them all, a page at a time.

    ``resources/list`` pages through the catalog by document id (the cursor is the last id
    of a page), so every document is listed however many there are, and documents a live
    server's knowledge base gains or loses show in the next listing.
    """

    def reader(document_id: str) -> Callable[[], str]:
        def read() -> str:
            found = kb.document(document_id)
            if found is None:
                raise KBError(f"no document {document_id!r} in knowledge base {kb.name!r}")
            return found[1]

        return read

    def listing(cursor: str | None, limit: int) -> ResourcePage:
        rows = kb.documents(min(limit, options.listed_documents) + 1, cursor)
        page = rows[: min(limit, options.listed_documents)]
        following = page[-1].id if len(rows) > len(page) else None
        return [
            Resource(
                uri=document_uri(kb, row.id),
                name=row.id,
                title=str(row.metadata.get("title", row.id)),
                mime_type="text/markdown"
                if row.metadata.get("kind") in ("markdown", "html")
                else "text/plain",
                read=reader(row.id),
            )
            for row in page
        ], following

    def read_template(id: str) -> str:
        return reader(unquote(id))()

    return [
        ResourceTemplate(
            uri_template=f"kb://{kb.name}/documents/{{id}}",
            name="document",
            description=f"A document of {kb.name!r} by its (percent-encoded) document id.",
            read=read_template,
            listing=listing,
        )
    ]


def answer_prompt(kb: KnowledgeBase, options: KBServerOptions) -> Prompt:
    """``answer_with_sources``: the question with the top passages, asking for an answer that cites them."""

    async def render(question: str, top_k: str = "5") -> str:
        count = int(top_k) if top_k.isdigit() else 5
        where = effective_filter(options.mandatory_filter)
        if options.tenant is not None:
            raise KBError("answer_with_sources is unavailable when results depend on the caller's tenant")
        hits = await kb.search(question, top_k=max(1, min(count, options.max_top_k)), filter=where)
        passages = "\n\n".join(
            f"[{n}] ({document_uri(kb, h.chunk.document_id)})\n{h.chunk.text}" for n, h in enumerate(hits, 1)
        )
        return (
            "Answer the question using only the passages below. Cite each claim with the passage "
            "number in brackets, and list the sources you cited at the end. If the passages do not "
            f"answer it, say so.\n\nQuestion: {question}\n\nPassages:\n\n{passages or '(none found)'}"
        )

    return Prompt(
        name="answer_with_sources",
        render=render,
        description=f"Answer a question from {kb.name!r}, citing the passages used.",
        arguments=[
            PromptArgument("question", "The question to answer.", required=True),
            PromptArgument("top_k", "How many passages to include (default 5)."),
        ],
    )
