"""Chroma vector store for toolkernel: a ``chroma run`` server or an embedded persistent database."""

from __future__ import annotations

from toolkernel_chroma.settings import ChromaSettings as ChromaSettings
from toolkernel_chroma.settings import create_store as create_store

__all__ = ["ChromaSettings", "create_store"]
