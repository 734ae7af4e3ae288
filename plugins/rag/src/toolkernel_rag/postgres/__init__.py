"""The PostgreSQL backend: a whole knowledge base in one schema of one PostgreSQL database.

Chosen when the knowledge-base home is a ``postgresql://`` URL. Its manifest, documents,
chunks (text, metadata, pgvector embedding), BM25 postings and extension state are tables of
the schema ``kb_<name>``; every write is a transaction, so a reader (a server on the primary
or on a hot standby) sees a document whole or not at all, and a server keeps nothing locally
that it cannot rebuild from the URL.
"""
