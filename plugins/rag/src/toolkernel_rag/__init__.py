"""toolkernel-rag: knowledge bases — ingest documents, serve them as MCP tools with hybrid retrieval."""
