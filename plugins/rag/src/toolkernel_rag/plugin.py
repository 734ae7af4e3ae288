"""Hook implementations of toolkernel-rag (cheap imports only; backends load when used)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolkernel import hookimpl

if TYPE_CHECKING:
    from toolkernel.cli import CommandRegistry
    from toolkernel.registries import ChunkerRegistry, ReaderRegistry, SettingsRegistry


@hookimpl
def register_settings(registry: SettingsRegistry) -> None:
    """Declare ``[plugins.rag]``: embedder, store and chunker of new knowledge bases, serving defaults."""
    from toolkernel_rag.settings import RagSettings

    registry.add("rag", RagSettings)


@hookimpl
def register_chunkers(registry: ChunkerRegistry) -> None:
    """Add recursive, character, token, sentence, markdown, html, code and json."""
    from toolkernel_rag.chunking import CHUNKERS, factory

    for kind in CHUNKERS:
        registry.add(kind, factory(kind))


@hookimpl
def register_readers(registry: ReaderRegistry) -> None:
    """Text, markdown, HTML, JSON/JSONL/YAML/TOML/XML/CSV, notebooks, Office, EPUB, PDF, code."""
    from toolkernel_rag.readers.builtin import register_builtin_readers

    register_builtin_readers(registry)


@hookimpl
def register_commands(registry: CommandRegistry) -> None:
    """Add ``toolkernel kb``: ingest, serve, list, stats, delete."""
    from toolkernel_rag.cli import configure, run

    registry.add(
        "kb", configure, run, help="Knowledge bases: ingest documents, serve them over MCP.", pass_kernel=True
    )
