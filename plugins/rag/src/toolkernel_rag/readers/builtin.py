"""toolkernel-rag's file readers as registered (cheap: each reader's module loads on its first file)."""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from toolkernel.readers import ReadDocument, Skipped
    from toolkernel.registries import ReaderRegistry


class _Lazy:
    """``read(path)`` that imports ``module:function`` on first use, so parsers load only when needed."""

    def __init__(self, target: str) -> None:
        self.target = target
        self._read: object = None

    def read(self, path: Path) -> Iterable[ReadDocument | Skipped]:
        if self._read is None:
            module, _, function = self.target.partition(":")
            self._read = getattr(importlib.import_module(module), function)
        return self._read(path)  # type: ignore[operator, no-any-return]


def register_builtin_readers(registry: ReaderRegistry) -> None:
    """Add every reader of :data:`toolkernel_rag.readers.BUILTIN`, each loading on first use."""
    from toolkernel_rag.readers import BUILTIN

    for name, (target, suffixes) in BUILTIN.items():
        registry.add(name, _Lazy(target), suffixes=suffixes)
