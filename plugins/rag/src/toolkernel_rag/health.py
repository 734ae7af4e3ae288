"""What ``kb stats`` says about derived data, read without writing or opening the writer's store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolkernel_rag.layout import SPARSE_DIR
from toolkernel_rag.store_seal import breach

if TYPE_CHECKING:
    from toolkernel_rag.kb import KnowledgeBase


def derived_state(kb: KnowledgeBase) -> dict[str, Any]:
    """``{"sparse_index": …, "store_files": …, "problems": [one line each]}``.

    ``sparse_index``: ``current``, ``stale`` (readers build it in memory until the next
    write saves it), ``missing`` or ``damaged``; ``store_files`` (an embedded store only):
    ``present``, ``missing`` or ``damaged`` (unreadable, or a file changed since its writer
    closed it: :mod:`toolkernel_rag.store_seal`). A problem names the file and the command
    that repairs it.
    """
    from toolkernel_rag.repair import repair_hint

    problems: list[str] = []
    sparse = kb.embedded_sparse.status(kb.catalog.generation())
    if sparse == "damaged":
        problems.append(
            f"the BM25 index {str(kb.directory / SPARSE_DIR)!r} is damaged (searches rebuild it in memory); "
            f"the next ingest saves a new one, or run '{repair_hint(kb)}'"
        )
    state: dict[str, Any] = {"sparse_index": sparse}
    path = kb.manifest.store.options.get("path")
    if kb.embedded_store and isinstance(path, str):
        root = Path(path) if Path(path).is_absolute() else kb.directory / path
        spec = root / kb.index / "toolkernel-index.json"
        damage = breach(kb.directory, root / kb.index)
        try:
            json.loads(spec.read_text(encoding="utf-8"))
            files = "present" if damage is None else "damaged"
        except FileNotFoundError:
            files = "missing" if kb.embedded_catalog.vector_count() else "present"
        except (OSError, ValueError):
            files = "damaged"
        state["store_files"] = files
        if files == "damaged" and damage is not None:
            problems.append(
                f"the vector store {str(root)!r} is damaged: {damage} (readers rank the catalog's "
                f"vectors); the next ingest rebuilds it from the catalog, or run '{repair_hint(kb)}'"
            )
        elif files != "present":
            problems.append(
                f"the vector store {str(root)!r} is {files} (readers rank the catalog's vectors); "
                f"run '{repair_hint(kb)}'"
            )
    state["problems"] = problems
    return state
