"""The embedded vector store's seal: its files as the writer left them, so damage done while
no writer held them is found on open without reading a vector.

Qdrant Edge does not check its memory-mapped files when it opens a shard: a truncated vector
file still counts every point and fails only when a search reads it, and garbled bytes are
ranked as vectors. So when the writer closes the store cleanly it records the size and
modification time of every file of its index (``store.seal.json`` beside the catalog), and
the next writer removes that record before opening the store: a file changed, truncated,
removed or added in between was not written by a writer, and the store is rebuilt from the
catalog. Without a seal (a writer was killed, or the knowledge base predates it) the store is
checked by its vector count alone. Damage that changes neither a file's size nor its
modification time (failing media) is not found this way.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

SEAL = "store.seal.json"

Files = dict[str, tuple[int, int]]
"""Path relative to the index directory -> (size in bytes, modification time in ns)."""


def _files(index_dir: Path) -> Files:
    out: Files = {}
    for path in index_dir.rglob("*"):
        try:
            stat = path.lstat()
        except FileNotFoundError:
            continue
        if path.is_file():
            out[path.relative_to(index_dir).as_posix()] = (stat.st_size, stat.st_mtime_ns)
    return out


def _read(directory: Path) -> Files | None:
    try:
        raw = json.loads((directory / SEAL).read_text(encoding="utf-8"))
        return {name: (int(size), int(mtime)) for name, (size, mtime) in raw["files"].items()}
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        return {}  # an unreadable seal vouches for nothing: every file is then unexpected


def seal(directory: Path, index_dir: Path) -> None:
    """Record the files of ``index_dir`` (the writer has just closed the store), atomically."""
    fd, tmp = tempfile.mkstemp(prefix=".store-seal-", dir=directory)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump({"files": _files(index_dir)}, out)
    os.replace(tmp, directory / SEAL)


def unseal(directory: Path) -> None:
    """Remove the seal: a writer is about to open (and change) the store."""
    (directory / SEAL).unlink(missing_ok=True)


def breach(directory: Path, index_dir: Path) -> str | None:
    """What differs from the seal, as words naming the file; ``None`` when all matches or there
    is no seal (a writer holds the store, one was killed, or the knowledge base predates seals).

    Safe beside a writer: a seal removed while the files were being compared is no verdict.
    """
    sealed = _read(directory)
    if sealed is None:
        return None
    found = _files(index_dir)
    if _read(directory) != sealed:
        return None
    for name, (size, mtime) in sorted(sealed.items()):
        path = str(index_dir / name)
        now = found.get(name)
        if now is None:
            return f"{path!r} is missing"
        if now[0] != size:
            return f"{path!r} is {now[0]} bytes, {size} when its writer closed it"
        if now[1] != mtime:
            return f"{path!r} was modified after its writer closed it"
    added = sorted(set(found) - set(sealed))
    if added:
        return f"{str(index_dir / added[0])!r} appeared after its writer closed the store"
    return None
