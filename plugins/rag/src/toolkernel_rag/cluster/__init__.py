"""``kb ingest --engine ray``: the local pipeline's stages run on a Ray cluster.

Reading, extraction and chunking run as Ray Data tasks, embedding in a pool of actors (the
model loads once per actor), and the writes go into the knowledge base in batches: from the
driver for the embedded backend (it holds the writer lock), from actors for PostgreSQL (any
number of writers may commit there at once). The stages are the local pipeline's own
(:mod:`toolkernel_rag.sources`, :func:`~toolkernel_rag.ingestion.chunk_documents`,
:func:`~toolkernel_rag.ingestion.begin_write` / :func:`~toolkernel_rag.ingestion.finish_write`),
so the catalog, content hashes and incremental semantics are the same.

Needs the ``ray`` extra (``pip install 'toolkernel-rag[ray]'``); nothing here imports Ray
until the engine runs.
"""
