"""``toolkernel kb``: ingest, serve, list, stats, documents, show, remove, migrate, repair, delete."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolkernel._builtin.commands import auth_argument, check_auth_option

if TYPE_CHECKING:
    from toolkernel._kernel import Kernel
    from toolkernel_rag.layout import Manifest


def configure(parser: argparse.ArgumentParser, kernel: Kernel) -> None:
    """Add the ``kb`` actions and their arguments."""
    actions = parser.add_subparsers(dest="kb_action", metavar="ACTION", required=True)

    ingest = actions.add_parser("ingest", help="Add or update documents; remove those gone from a source.")
    ingest.add_argument("sources", metavar="SOURCE", nargs="+", help="directories, files, or .jsonl corpora")
    _kb_argument(ingest)
    ingest.add_argument("--embedder", help="provider/model, at creation (default local/minilm-l6-int8)")
    ingest.add_argument("--store", help="a vector store plugin, at creation (default qdrant, embedded)")
    ingest.add_argument(
        "--store-options", metavar="JSON", help='factory options of the store, e.g. \'{"url": "..."}\''
    )
    ingest.add_argument("--chunker", help="auto (by file type) or a registered chunker, at creation")
    ingest.add_argument("--size", type=int, help="chunk size, at creation (default 250)")
    ingest.add_argument("--overlap", type=int, help="chunk overlap, at creation (default 30)")
    ingest.add_argument("--length", choices=("characters", "tokens"), help="unit of size and overlap")
    ingest.add_argument("--batch", type=int, default=256, help="chunks embedded per batch")
    ingest.add_argument("--no-extensions", action="store_true", help="leave every extension out of this run")
    ingest.add_argument(
        "--engine",
        choices=("local", "ray"),
        default="local",
        help="local: this process (default); ray: a Ray cluster (pip install 'toolkernel-rag[ray]')",
    )
    ingest.add_argument(
        "--address",
        metavar="auto|ray://HOST:PORT",
        help="--engine ray: join this cluster (default: start one here)",
    )
    ingest.add_argument(
        "--actors", type=int, help="--engine ray: embedding actors, each loads the model once (2)"
    )
    ingest.add_argument(
        "--batch-size",
        type=int,
        help="--engine ray: documents per batch an actor embeds and a writer commits (32)",
    )
    ingest.add_argument(
        "--gpus-per-actor", type=float, help="--engine ray: GPUs each embedding actor is scheduled with (0)"
    )
    ingest.add_argument(
        "--writers", type=int, help="--engine ray, PostgreSQL home: writer actors committing side by side (1)"
    )
    for name in kernel.kb_extensions:
        ingest.add_argument(
            f"--no-{name}",
            dest="without",
            action="append_const",
            const=name,
            help=f"leave the {name!r} extension out of this run (caught up on the next run with it)",
        )
    ingest.add_argument(
        "--progress",
        choices=("auto", "bar", "lines", "json", "none"),
        default="auto",
        help="on stderr: a bar on a terminal, a line every few seconds off one (auto); json lines",
    )
    ingest.add_argument(
        "--progress-every", type=float, default=5.0, metavar="SECONDS", help="seconds between lines (5)"
    )
    ingest.add_argument("--quiet", action="store_true", help="no progress (as --progress none)")
    _wait_argument(ingest)

    serve = actions.add_parser("serve", help="Serve a knowledge base as an MCP server.")
    _kb_argument(serve)
    serve.add_argument("--transport", default="stdio", help="stdio (built in), http or sse (toolkernel-http)")
    serve.add_argument("--host", default="127.0.0.1", help="interface for network transports")
    serve.add_argument("--port", type=int, default=8000, help="port for network transports")
    serve.add_argument("--path", default="/mcp", help="URL path of the MCP endpoint")
    auth_argument(serve)
    serve.add_argument("--mandatory-filter", metavar="JSON", help="a filter every search is joined with")
    serve.add_argument("--reranker", help="the reranker 'rerank: true' uses")

    listing = actions.add_parser("list", help="List the knowledge bases in the home (directory or database).")
    _home_argument(listing)

    stats = actions.add_parser(
        "stats", help="Documents, chunks, state of derived data, and what a knowledge base was built with."
    )
    _kb_argument(stats)

    documents = actions.add_parser("documents", help="List a knowledge base's documents, a page at a time.")
    _kb_argument(documents)
    documents.add_argument("--source", help="only this source's documents (its key or its path)")
    documents.add_argument("--where", metavar="JSON", help='a metadata filter, e.g. \'{"tags": "setup"}\'')
    documents.add_argument("--limit", type=int, default=100, help="documents per page (default 100)")
    documents.add_argument("--after", metavar="ID", help="start after this document id (the last of a page)")
    documents.add_argument(
        "--json", action="store_true", help="one JSON object with the page and the next cursor"
    )

    show = actions.add_parser("show", help="One document: metadata, source, hash, chunk count and text.")
    show.add_argument("document", metavar="DOC", help="a document id (see 'kb documents')")
    _kb_argument(show)
    show.add_argument("--chunks", action="store_true", help="its chunks instead of its text")
    show.add_argument("--json", action="store_true", help="as one JSON object")

    remove = actions.add_parser("remove", help="Remove documents (by id, or every one of a source).")
    remove.add_argument("documents", metavar="DOC", nargs="*", help="document ids")
    _kb_argument(remove)
    remove.add_argument("--source", help="remove every document of this source (its key or its path)")
    remove.add_argument("--yes", action="store_true", help="do not ask before removing every document")
    _wait_argument(remove)

    migrate = actions.add_parser(
        "migrate", help="Bring a knowledge base written by an older toolkernel-rag up to date."
    )
    _kb_argument(migrate)
    _wait_argument(migrate)
    repair = actions.add_parser(
        "repair", help="Rebuild the vector store, BM25 index and extensions' state from the catalog."
    )
    _kb_argument(repair)
    _wait_argument(repair)

    delete = actions.add_parser(
        "delete", help="Delete a knowledge base and everything in it (its directory or its schema)."
    )
    _kb_argument(delete)
    delete.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    _wait_argument(delete)


def _kb_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kb", required=True, metavar="NAME_OR_PATH", help="a path (contains '/') or a name in the home"
    )
    _home_argument(parser)


def _home_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--home",
        metavar="DIR_OR_URL",
        help="where named knowledge bases live: a directory or a postgresql:// URL "
        "(default $TOOLKERNEL_KB_HOME, then [plugins.rag] home, then ~/.local/share/toolkernel/kb)",
    )


def _wait_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--wait",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="wait this long for another writer to finish (default: refuse at once)",
    )


def run(args: argparse.Namespace, kernel: Kernel) -> Any:
    """Dispatch to the action."""
    from toolkernel._logging import get_logger

    # Logs go to stderr before any plugin logs: stdout carries only the results (the ingest
    # summary is JSON), and an extension logging through a bare structlog would print there.
    get_logger("toolkernel_rag")
    action = args.kb_action
    if action == "ingest":
        return _ingest(args, kernel)
    if action == "serve":
        return _serve(args, kernel)
    if action == "list":
        return _list(args, kernel)
    if action == "stats":
        return _stats(args, kernel)
    if action == "documents":
        return _documents(args, kernel)
    if action == "show":
        return _show(args, kernel)
    if action == "remove":
        return _remove(args, kernel)
    if action == "migrate":
        return _migrate(args, kernel)
    if action == "repair":
        return _repair(args, kernel)
    return _delete(args, kernel)


def _check_sources(sources: list[str]) -> None:
    """Every source must exist before anything is opened or created (a typo is not 'delete all')."""
    from toolkernel_rag.layout import KBError

    for source in sources:
        if not Path(source).expanduser().exists():
            raise KBError(f"source {source!r} does not exist; nothing was ingested")


def _json_option(value: str | None, flag: str) -> Any:
    from toolkernel.errors import ConfigError

    if value is None:
        return None
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{flag}: not valid JSON: {exc}") from None


async def _ingest(args: argparse.Namespace, kernel: Kernel) -> int:
    from toolkernel.embedders import progress_shown_by_caller
    from toolkernel_rag.ingestion import ingest
    from toolkernel_rag.kb import KnowledgeBase, default_chunker, rag_settings
    from toolkernel_rag.progress import ProgressDisplay

    _check_sources(args.sources)
    ray_options = _ray_options(args)
    chunker: dict[str, Any] | None = None
    if any(v is not None for v in (args.chunker, args.size, args.overlap, args.length)):
        chunker = default_chunker(rag_settings(kernel))
        for key in ("size", "overlap", "length"):
            if getattr(args, key) is not None:
                chunker[key] = getattr(args, key)
        if args.chunker:
            chunker["name"] = args.chunker
        if chunker["length"] == "characters":
            chunker.pop("tokenizer", None)
    without = set(getattr(args, "without", None) or ())
    extensions: Any = False if args.no_extensions else [n for n in kernel.kb_extensions if n not in without]
    kb = await KnowledgeBase.open(
        args.kb,
        kernel=kernel,
        create=True,
        embedder=args.embedder,
        store=args.store,
        store_options=_json_option(args.store_options, "--store-options"),
        chunker=chunker,
        extensions=extensions,
        wait=args.wait,
        home=args.home,
    )
    display = ProgressDisplay("none" if args.quiet else args.progress, sys.stderr, args.progress_every)
    try:
        # The display is the run's one progress report: embedders log none of their own.
        with progress_shown_by_caller():
            async with kb:
                if ray_options is None:
                    report = await ingest(kb, args.sources, batch_chunks=args.batch, progress=display.update)
                else:
                    report = await _ingest_on_ray(kb, args, ray_options, display)
    finally:
        display.close()
    for problem in report.problems:
        print(f"skipped {problem.where}: {problem.reason}", file=sys.stderr)
    if report.peak_rss_mb > report.memory_mb:
        print(
            f"warning: the ingest peaked at {report.peak_rss_mb:.0f} MiB, over ingest_memory_mb "
            f"= {report.memory_mb}: lower --batch or the embedder's batch_tokens",
            file=sys.stderr,
        )
    print(json.dumps({"kb": str(kb.location), **report.summary()}))
    return 0


def _ray_options(args: argparse.Namespace) -> Any:
    """``--engine ray``'s options, checked (and Ray's presence) before anything is opened; else ``None``."""
    from toolkernel.errors import ConfigError

    given = [f"--{k.replace('_', '-')}" for k in RAY_OPTIONS if getattr(args, k) is not None]
    if args.engine != "ray":
        if given:
            raise ConfigError(f"kb ingest: {', '.join(given)} needs --engine ray")
        return None
    from toolkernel_rag.cluster.connect import require_ray

    require_ray()
    from toolkernel_rag.cluster.job import RayOptions

    chosen = {k: getattr(args, k) for k in RAY_OPTIONS if k != "address" and getattr(args, k) is not None}
    options = RayOptions(**chosen)
    options.check()
    return options


RAY_OPTIONS = ("address", "actors", "batch_size", "gpus_per_actor", "writers")


async def _ingest_on_ray(kb: Any, args: argparse.Namespace, options: Any, display: Any) -> Any:
    """Start or join Ray, run the job, leave Ray again.

    On this thread, blocking the loop for the seconds it takes: Ray's processes die with the
    thread that started them, and nothing else runs meanwhile.
    """
    from toolkernel_rag.cluster.connect import connect
    from toolkernel_rag.cluster.job import ingest_on_ray

    session = connect(args.address, options.actors, options.cpus_per_actor)
    try:
        return await ingest_on_ray(kb, args.sources, session, options, progress=display.update)
    finally:
        session.close()


async def _serve(args: argparse.Namespace, kernel: Kernel) -> None:
    from pydantic import ValidationError

    from toolkernel.errors import ConfigError
    from toolkernel.transports import ServeOptions
    from toolkernel_rag.kb import KnowledgeBase, rag_settings
    from toolkernel_rag.server import KBServerOptions, kb_server

    if args.transport not in kernel.server_transports:
        hint = " (pip install toolkernel-http)" if args.transport in ("http", "sse") else ""
        known = ", ".join(kernel.server_transports) or "none"
        raise ConfigError(f"--transport {args.transport!r} is not installed{hint}; available: {known}")
    check_auth_option(kernel, args.transport, args.auth)
    extra = {"auth": args.auth} if args.auth is not None else {}
    try:
        serve_options = ServeOptions(host=args.host, port=args.port, path=args.path, extra=extra)
    except ValidationError as exc:
        raise ConfigError(f"kb serve: {exc}") from None
    settings = rag_settings(kernel)
    options = KBServerOptions(
        mandatory_filter=_json_option(args.mandatory_filter, "--mandatory-filter"),
        reranker=args.reranker or settings.reranker,
        depth=settings.depth,
        rerank_depth=settings.rerank_depth,
        max_query_chars=settings.max_query_chars,
        max_chunk_text_chars=settings.max_chunk_text_chars,
        filter_limits=settings.filter_limits,
    )
    # Read-only: any number of servers run beside one writer, and follow its ingests by themselves.
    async with await KnowledgeBase.open(args.kb, kernel=kernel, writable=False, home=args.home) as kb:
        await kb.embed_query("warm up")  # load the model before the first query
        kb.sparse.warm(lambda line: print(f"{args.kb}: {line}", file=sys.stderr, flush=True))
        import toolkernel._serving  # noqa: F401 - load the protocol layer during set-up

        await kernel.serve(kb_server(kb, options), args.transport, serve_options)


def _list(args: argparse.Namespace, kernel: Kernel) -> int:
    from toolkernel_rag.kb import rag_settings
    from toolkernel_rag.layout import is_database_url, kb_home, read_manifest

    home = kb_home(args.home, rag_settings(kernel).home)
    if is_database_url(home):
        from toolkernel_rag.postgres.connection import Database
        from toolkernel_rag.postgres.schema import list_knowledge_bases, schema_name

        database = Database(home)
        try:
            for found in list_knowledge_bases(database):
                where = f"{database.where} schema {schema_name(found.name)}"
                print(f"{found.name}\t{found.embedder.name}\t{found.store.name}\t{where}")
        finally:
            database.close()
        return 0
    directories = Path(home).expanduser()
    for directory in sorted(directories.iterdir()) if directories.is_dir() else []:
        manifest = read_manifest(directory)
        if manifest is not None:
            print(f"{directory.name}\t{manifest.embedder.name}\t{manifest.store.name}\t{directory}")
    return 0


async def _stats(args: argparse.Namespace, kernel: Kernel) -> int:
    from toolkernel_rag.health import derived_state
    from toolkernel_rag.kb import KnowledgeBase

    async with await KnowledgeBase.open(
        args.kb, kernel=kernel, extensions=False, writable=False, home=args.home
    ) as kb:
        done, pending, chunks = kb.catalog.counts()
        if kb.vectors_in_catalog:
            # One database: vectors, BM25 postings and extension state are tables checked by
            # their transactions, not files that can go missing.
            vectors, derived = await kb.store.count(kb.index), {}
        else:
            if kb.embedded_store:
                vectors = kb.embedded_catalog.vector_count()
            else:
                vectors = await kb.store.count(kb.index)
            derived = derived_state(kb)
        print(
            json.dumps(
                {
                    "kb": str(kb.location),
                    "documents": done,
                    "pending": pending,
                    "chunks": chunks,
                    "vectors": vectors,
                    "generation": kb.catalog.generation(),
                    "derived": derived,
                    "manifest": kb.manifest.model_dump(mode="json"),
                },
                indent=2,
            )
        )
    for problem in derived.get("problems", []):
        print(f"warning: {problem}", file=sys.stderr)
    return 0


async def _repair(args: argparse.Namespace, kernel: Kernel) -> int:
    from toolkernel_rag.kb import KnowledgeBase, rag_settings
    from toolkernel_rag.layout import KBError, resolve_location
    from toolkernel_rag.repair import repair

    if resolve_location(args.kb, args.home, rag_settings(kernel).home).url is not None:
        raise KBError(
            f"kb repair --kb {args.kb}: a knowledge base in PostgreSQL has no derived files to rebuild "
            "(its vectors, BM25 postings and extension state are written in the documents' transactions)"
        )
    async with await KnowledgeBase.open(
        args.kb, kernel=kernel, writable=True, wait=args.wait, repair=True, home=args.home
    ) as kb:
        report = await repair(kb)
    print(json.dumps({"kb": str(kb.location), "repaired": report.summary()}))
    return 0


def _delete(args: argparse.Namespace, kernel: Kernel) -> int:
    from toolkernel_rag.kb import rag_settings
    from toolkernel_rag.layout import KBError, read_manifest, resolve_location
    from toolkernel_rag.locking import WriterLock

    location = resolve_location(args.kb, args.home, rag_settings(kernel).home)
    if location.url is not None:
        from toolkernel_rag.postgres import schema as pg
        from toolkernel_rag.postgres.connection import Database

        database = Database(location.url)
        try:
            schema = pg.schema_name(location.name)
            if pg.read_manifest(database, schema) is None:
                raise KBError(f"no knowledge base {location.name!r} in {database.where}")
            if not _confirmed(args, f"delete the knowledge base {location}?"):
                return 1
            pg.drop(database, schema)
        finally:
            database.close()
        print(f"deleted {location}", file=sys.stderr)
        return 0
    directory = location.directory
    assert directory is not None
    manifest = read_manifest(directory)
    if manifest is None:
        raise KBError(f"no knowledge base at {str(directory)!r}")
    if not _confirmed(args, f"delete the knowledge base at {directory}?"):
        return 1
    lock = WriterLock(directory)
    lock.acquire(args.wait)  # never delete under a running ingest
    try:
        outside = _outside_index(kernel, manifest, directory)
        shutil.rmtree(directory)
    finally:
        lock.release()
    print(f"deleted {directory}{outside}", file=sys.stderr)
    return 0


def _outside_index(kernel: Kernel, manifest: Manifest, directory: Path) -> str:
    """Drop the knowledge base's vector index when its store keeps it outside ``directory`` (a
    ``path`` elsewhere, or a server), which removing the directory would leave behind; what
    was dropped, for the report. Only the index the manifest names goes: other knowledge bases
    may share the store. A store that cannot drop it stops the delete before anything is gone.
    """
    import anyio

    from toolkernel.vectors import IndexNotFoundError
    from toolkernel_rag.layout import KBError

    spec = manifest.store
    options = dict(spec.options)
    path = options.get("path")
    if isinstance(path, str):
        options["path"] = str(directory / path)  # a relative path is the directory's own
        if Path(options["path"]).resolve().is_relative_to(directory.resolve()):
            return ""
    where = f"at {options['path']}" if isinstance(path, str) else "(its server)"

    async def drop() -> None:
        store = kernel.vector_store(spec.name, **options)
        try:
            await store.delete_index(spec.index)
        except IndexNotFoundError:
            pass  # already gone: nothing of this knowledge base is left there
        finally:
            await store.aclose()

    try:
        anyio.run(drop)
    except Exception as exc:
        raise KBError(
            f"kb delete: cannot drop the index {spec.index!r} from the {spec.name} store {where}: "
            f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}; nothing was deleted"
        ) from None
    return f" and the index {spec.index!r} in the {spec.name} store {where}"


def _confirmed(args: argparse.Namespace, question: str) -> bool:
    """``--yes``, or a yes typed on the terminal (no terminal: refused in one line)."""
    from toolkernel_rag.layout import KBError

    if args.yes:
        return True
    if not sys.stdin.isatty():
        raise KBError(f"kb delete --kb {args.kb}: no terminal to confirm on; pass --yes to delete")
    if _confirm(question, "kb delete"):
        return True
    print("not deleted", file=sys.stderr)
    return False


def _confirm(question: str, command: str) -> bool:
    """Ask on the terminal; with no terminal to ask on, refuse in one line (``--yes`` says it)."""
    from toolkernel.errors import ConfigError

    if not sys.stdin.isatty():
        raise ConfigError(f"{command}: no terminal to confirm on ({question[:-1]}); pass --yes to go ahead")
    try:
        answer = input(f"{question} [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


def _document_entry(row: Any) -> dict[str, Any]:
    return {
        "id": row.id,
        "source": row.source,
        "hash": row.hash,
        "chunks": row.chunk_count,
        "metadata": row.metadata,
    }


async def _documents(args: argparse.Namespace, kernel: Kernel) -> int:
    from toolkernel.errors import ConfigError
    from toolkernel_rag.kb import KnowledgeBase
    from toolkernel_rag.layout import KBError

    if args.limit < 1:
        raise ConfigError(f"kb documents: --limit must be at least 1, got {args.limit}")
    where = _json_option(args.where, "--where")
    async with await KnowledgeBase.open(args.kb, kernel=kernel, extensions=False, home=args.home) as kb:
        if args.after is not None and kb.document(args.after) is None:
            raise KBError(
                f"kb documents --after {args.after!r}: knowledge base {kb.name!r} has no such document "
                "(pass the id a previous page ended with)"
            )
        # One more than asked says whether another page follows.
        rows = kb.documents(args.limit + 1, args.after, source=args.source, where=where)
    page, more = rows[: args.limit], len(rows) > args.limit
    following = page[-1].id if more else None
    if args.json:
        print(
            json.dumps(
                {"documents": [_document_entry(r) for r in page], "next": following}, ensure_ascii=False
            )
        )
        return 0
    for row in page:
        print(f"{row.id}\t{row.chunk_count}\t{row.metadata.get('title', '')}")
    if following is not None:
        print(f"more: --after {following!r}", file=sys.stderr)
    return 0


async def _show(args: argparse.Namespace, kernel: Kernel) -> int:
    from toolkernel_rag.kb import KnowledgeBase
    from toolkernel_rag.layout import KBError

    async with await KnowledgeBase.open(args.kb, kernel=kernel, extensions=False, home=args.home) as kb:
        found = kb.document(args.document)
        if found is None:
            raise KBError(
                f"knowledge base {kb.name!r} has no document {args.document!r} "
                f"(list them with 'toolkernel kb documents --kb {args.kb}')"
            )
        row, text = found
        chunks = kb.document_chunks(row.id) if args.chunks else []
    entry: dict[str, Any] = {**_document_entry(row), "state": row.state}
    if args.chunks:
        entry["chunk_list"] = [
            {"id": c.id, "start": c.start, "end": c.end, "text": c.text, "metadata": c.metadata}
            for c in chunks
        ]
    else:
        entry["text"] = text
    if args.json:
        print(json.dumps(entry, ensure_ascii=False))
        return 0
    print(f"id: {row.id}\nsource: {row.source}\nhash: {row.hash}\nchunks: {row.chunk_count}")
    print(f"metadata: {json.dumps(row.metadata, ensure_ascii=False)}\n")
    if args.chunks:
        for c in chunks:
            print(f"--- {c.id} [{c.start}:{c.end}]\n{c.text}")
    else:
        print(text)
    return 0


async def _remove(args: argparse.Namespace, kernel: Kernel) -> int:
    from toolkernel.errors import ConfigError
    from toolkernel_rag.kb import KnowledgeBase

    if bool(args.documents) == bool(args.source):
        raise ConfigError("kb remove: give document ids or --source SOURCE (one of the two)")
    async with await KnowledgeBase.open(
        args.kb, kernel=kernel, writable=True, wait=args.wait, home=args.home
    ) as kb:
        if args.source:
            ids = [row.id for row in kb.documents(source=args.source)]
        else:
            ids = list(dict.fromkeys(args.documents))
            kb.require_documents(ids)  # an unknown id: one line, before anything is asked or removed
        done, _, _ = kb.catalog.counts()
        if ids and len(ids) >= done and not args.yes:
            question = f"remove all {len(ids)} documents of the knowledge base {kb.name!r}?"
            if not _confirm(question, "kb remove"):
                print("nothing removed", file=sys.stderr)
                return 1
        removed = await kb.remove(ids)
    print(json.dumps({"kb": str(kb.location), "removed": removed}))
    return 0


async def _migrate(args: argparse.Namespace, kernel: Kernel) -> int:
    from toolkernel_rag.kb import KnowledgeBase

    async with await KnowledgeBase.open(
        args.kb, kernel=kernel, writable=True, wait=args.wait, home=args.home
    ) as kb:
        documents, _, _ = kb.catalog.counts()
    print(json.dumps({"kb": str(kb.location), "migrated": kb.migrated, "documents": documents}))
    return 0
