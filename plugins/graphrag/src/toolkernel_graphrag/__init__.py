"""GraphRAG for toolkernel knowledge bases: an entity/link graph over chunks, walked by personalized PageRank."""
