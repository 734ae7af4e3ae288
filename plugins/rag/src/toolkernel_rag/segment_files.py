"""An extension's segmented state in an embedded knowledge base: one file per segment.

The segments of state ``key`` are the files of ``extensions/<name>/<key>.segments/``, named by
their sequence number (16 digits, so names sort as numbers). A segment is written to a hidden
temporary file, flushed, and renamed into place, so a reader sees it whole or not at all and a
writer killed midway leaves only a temporary file, which the next append removes. A merge
(:func:`replace_segments`) renames the merged file over the last segment of the range, then
unlinks the others: a reader listing in between may read an old segment and the merged one,
which the contract allows (segments replay safely), and a segment that vanished between the
listing and the read makes the reader list again.
"""

from __future__ import annotations

import os
from pathlib import Path

LIST_ATTEMPTS = 20
"""How often a reader lists again when a merge removed a segment under it."""


def _name(sequence: int) -> str:
    return f"{sequence:016d}"


def _sequences(directory: Path) -> list[int]:
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(int(n) for n in names if n.isdigit())


def _write(directory: Path, sequence: int, data: bytes) -> None:
    """``data`` as segment ``sequence``, replacing one of that number atomically."""
    tmp = directory / f".{_name(sequence)}.tmp"
    with tmp.open("wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, directory / _name(sequence))
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)  # the rename itself survives a crash
    finally:
        os.close(fd)


def append_segment(directory: Path, data: bytes) -> int:
    """Write ``data`` as the segment after the last one; the caller is the only writer."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in os.listdir(directory):
        if name.startswith("."):  # a killed writer's unfinished segment
            (directory / name).unlink(missing_ok=True)
    existing = _sequences(directory)
    sequence = existing[-1] + 1 if existing else 1
    _write(directory, sequence, data)
    return sequence


def load_segments(directory: Path, after: int) -> list[tuple[int, bytes]]:
    """``(sequence, data)`` of every segment numbered above ``after``, in order."""
    for _ in range(LIST_ATTEMPTS):
        found: list[tuple[int, bytes]] = []
        try:
            for sequence in _sequences(directory):
                if sequence > after:
                    found.append((sequence, (directory / _name(sequence)).read_bytes()))
        except FileNotFoundError:
            continue  # merged away under us: the merged segment is there now
        return found
    raise RuntimeError(f"{directory}: segments kept changing while being read")


def replace_segments(directory: Path, first: int, last: int, data: bytes) -> None:
    """Replace segments ``first``..``last`` with ``data`` numbered ``last``."""
    _write(directory, last, data)
    for sequence in _sequences(directory):
        if first <= sequence < last:
            (directory / _name(sequence)).unlink(missing_ok=True)
