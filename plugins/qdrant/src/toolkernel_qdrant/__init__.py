"""Qdrant vector store for toolkernel: a Qdrant server, Qdrant Cloud, or Qdrant embedded in-process."""

from __future__ import annotations

from toolkernel_qdrant.settings import QdrantSettings as QdrantSettings
from toolkernel_qdrant.settings import create_store as create_store

__all__ = ["QdrantSettings", "create_store"]
