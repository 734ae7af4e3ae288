"""GraphRAG for toolkernel knowledge bases: an entity and link graph over chunks, walked by PageRank."""
