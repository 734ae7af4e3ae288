"""The ids of the documents an ingest has read from a source, kept on disk instead of in memory.

An ingest must know every id it read from a source to find repeated ids and, at the end, the
documents gone from it. A Python set of them grew with the corpus (about 130 bytes an id);
this keeps them in a private temporary SQLite database: an unnamed file SQLite deletes when
it is closed (or its process dies), with its page cache capped, so what the ingest holds is
the same for 300 documents and for 300,000. Private to one process: nothing else opens it.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

CACHE_KIB = 512
"""The page cache of the temporary database (SQLite's default is 2 MiB)."""


class SeenIds:
    """A set of document ids on disk: :meth:`add` one at a time, :meth:`unseen` a page at a time."""

    def __init__(self) -> None:
        self._db = sqlite3.connect("", isolation_level=None, check_same_thread=False)
        self._db.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
        self._db.execute("PRAGMA journal_mode=OFF")
        self._db.execute("PRAGMA synchronous=OFF")
        self._db.execute("CREATE TABLE seen (id TEXT PRIMARY KEY) WITHOUT ROWID")

    def add(self, document_id: str) -> bool:
        """Record ``document_id``; ``False`` when it was recorded before (a repeated id)."""
        return self._db.execute("INSERT OR IGNORE INTO seen VALUES (?)", (document_id,)).rowcount == 1

    def unseen(self, document_ids: Sequence[str]) -> list[str]:
        """Those of ``document_ids`` never recorded, in the order given."""
        rows = self._db.execute(
            "SELECT value FROM json_each(?) WHERE value NOT IN (SELECT id FROM seen)",
            (json.dumps(list(document_ids)),),
        )
        return [r[0] for r in rows]

    def close(self) -> None:
        """Drop the ids (SQLite deletes the file)."""
        self._db.close()
