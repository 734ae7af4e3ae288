"""The reader conformance kit: a pytest class a reader plugin subclasses.

Usage, in a plugin's test module (unique file name, e.g. ``tests/test_myformat_reader.py``)::

    import pytest
    from toolkernel.testing.readers import ReaderContract

    class TestMyReader(ReaderContract):
        suffixes = (".myf",)

        @pytest.fixture
        def reader(self):
            return read_myformat              # the function (or Reader) you register

        @pytest.fixture
        def sample(self, tmp_path):
            path = tmp_path / "a.myf"         # a real file of the format, written by its library
            path.write_bytes(...)
            return path

        @pytest.fixture
        def corrupt(self, tmp_path):
            path = tmp_path / "bad.myf"       # a damaged file of the same type
            path.write_bytes(b"garbage")
            return path

The kit checks what ``toolkernel kb ingest`` relies on: the sample yields at least one
:class:`~toolkernel.readers.ReadDocument` with text, a known ``kind`` and metadata every
store keeps (scalars, or non-empty lists of scalars); reading is repeatable; record ids are
unique non-empty strings; ``page_starts`` rise inside the text; a corrupt file raises an
``Exception`` (not ``SystemExit`` or a hang) whose message is one line, or yields only
:class:`~toolkernel.readers.Skipped`; a missing file raises ``OSError``; the reader
registers under its suffixes through a real :class:`~toolkernel.registries.ReaderRegistry`.
Override ``expected_text`` to also check that the sample's text holds given passages.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar

import pytest

from toolkernel.readers import ReadDocument, Reader, ReaderFunction, Skipped
from toolkernel.registries import ReaderRegistry

__all__ = ["ReaderContract"]

_KINDS = frozenset({"text", "markdown", "json", "code"})
"""The document kinds the ``auto`` chunker knows."""


def _read(reader: Reader | ReaderFunction, path: Path) -> list[ReadDocument | Skipped]:
    read = reader.read if isinstance(reader, Reader) else reader
    items = read(path)
    assert isinstance(items, Iterable), f"read() must return an iterable, got {type(items).__name__}"
    return list(items)


def _storable(value: Any) -> bool:
    if isinstance(value, bool | int | str):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    return (
        isinstance(value, list)
        and bool(value)
        and all(_storable(v) and not isinstance(v, list) for v in value)
    )


class ReaderContract:
    """Behaviour every reader must show; subclass it and provide the fixtures."""

    suffixes: ClassVar[tuple[str, ...]] = ()
    """The suffixes the reader is registered for (with their dot)."""

    expected_text: ClassVar[tuple[str, ...]] = ()
    """Passages the sample's text must hold."""

    @pytest.fixture
    def reader(self) -> Reader | ReaderFunction:
        raise NotImplementedError("provide a `reader` fixture: the reader you register")

    @pytest.fixture
    def sample(self, tmp_path: Path) -> Path:
        raise NotImplementedError("provide a `sample` fixture: the path of a real file of the format")

    @pytest.fixture
    def corrupt(self, tmp_path: Path) -> Path:
        raise NotImplementedError("provide a `corrupt` fixture: the path of a damaged file of the format")

    def test_the_sample_gives_documents_with_text(self, reader: Any, sample: Path) -> None:
        documents = [d for d in _read(reader, sample) if isinstance(d, ReadDocument)]
        assert documents, "the sample gave no document"
        for document in documents:
            assert isinstance(document.text, str)
            assert document.text.strip(), "a document without text"
            assert document.kind in _KINDS, f"kind {document.kind!r} is not one of {sorted(_KINDS)}"
        text = "\n".join(d.text for d in documents)
        for passage in self.expected_text:
            assert passage in text, f"the sample's text lacks {passage!r}"

    def test_everything_yielded_is_a_document_or_a_skip(self, reader: Any, sample: Path) -> None:
        for item in _read(reader, sample):
            assert isinstance(item, ReadDocument | Skipped), f"yielded a {type(item).__name__}"
            if isinstance(item, Skipped):
                assert item.where
                assert item.reason
                assert "\n" not in item.reason

    def test_metadata_is_what_every_store_keeps(self, reader: Any, sample: Path) -> None:
        for document in _read(reader, sample):
            if not isinstance(document, ReadDocument):
                continue
            for key, value in document.metadata.items():
                assert isinstance(key, str)
                assert key
                assert _storable(value), f"metadata {key!r}={value!r}: scalars or non-empty lists of scalars"
            json.dumps(dict(document.metadata))
            if document.kind == "code":
                assert isinstance(document.metadata.get("language"), str), "code needs metadata['language']"

    def test_record_ids_are_unique_strings(self, reader: Any, sample: Path) -> None:
        documents = [d for d in _read(reader, sample) if isinstance(d, ReadDocument)]
        ids = [d.id for d in documents]
        if all(i is None for i in ids):
            assert len(documents) == 1, "several documents from one file need an id each"
            return
        assert all(isinstance(i, str) and i for i in ids), "give every record an id, or none at all"
        assert len(set(ids)) == len(ids), "record ids repeat"

    def test_page_starts_rise_inside_the_text(self, reader: Any, sample: Path) -> None:
        for document in _read(reader, sample):
            if isinstance(document, ReadDocument) and document.page_starts:
                starts = list(document.page_starts)
                assert starts[0] == 0
                assert starts == sorted(starts)
                assert starts[-1] <= len(document.text)

    def test_reading_twice_gives_the_same_documents(self, reader: Any, sample: Path) -> None:
        assert _read(reader, sample) == _read(reader, sample)

    def test_a_corrupt_file_raises_one_line_or_skips(self, reader: Any, corrupt: Path) -> None:
        try:
            items = _read(reader, corrupt)
        except Exception as exc:  # any Exception is a refusal; SystemExit is not
            raised: Exception | None = exc
        else:
            raised = None
        if raised is not None:
            message = str(raised).strip()
            assert message, f"{type(raised).__name__} without a message"
            assert "\n" not in message, f"the message must be one line: {message!r}"
            return
        documents = [i for i in items if isinstance(i, ReadDocument) and i.text.strip()]
        assert not documents, "a corrupt file gave documents: raise, or yield Skipped"

    def test_a_missing_file_raises_oserror(self, reader: Any, tmp_path: Path) -> None:
        with pytest.raises(OSError):  # noqa: PT011 - FileNotFoundError or any OSError the library raises
            _read(reader, tmp_path / f"missing{self.suffixes[0] if self.suffixes else '.txt'}")

    def test_it_registers_under_its_suffixes(self, reader: Any) -> None:
        assert self.suffixes, "set `suffixes` on the test class: the suffixes you register"
        registry = ReaderRegistry()
        registry.add("under-test", reader, suffixes=self.suffixes)
        for suffix in self.suffixes:
            assert registry.for_suffix(suffix.upper()) == "under-test"
