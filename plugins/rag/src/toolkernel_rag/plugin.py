"""Hook implementations of toolkernel-rag (cheap imports only; backends load when used)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolkernel import hookimpl

if TYPE_CHECKING:
    from toolkernel.registries import ChunkerRegistry


@hookimpl
def register_chunkers(registry: ChunkerRegistry) -> None:
    """Add recursive, character, token, sentence, markdown, html, code and json."""
    from toolkernel_rag.chunking import CHUNKERS, factory

    for kind in CHUNKERS:
        registry.add(kind, factory(kind))
