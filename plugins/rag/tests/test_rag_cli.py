"""``toolkernel kb``: ingest, list, stats, delete, run as the command line runs them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolkernel.cli import main

from .conftest import EMBEDDER


def test_ingest_list_stats_delete(corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["kb", "ingest", str(corpus), "--kb", "handbook", "--embedder", EMBEDDER, "--quiet"]
    assert main([*args, "--no-extensions"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["kb"] == str(tmp_path / "kb-home" / "handbook")
    assert (summary["added"], summary["chunks"] > 0, summary["skipped"]) == (5, True, 0)
    assert summary["embed_seconds"] >= 0

    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["unchanged"] == 5

    assert main(["kb", "list"]) == 0
    [line] = capsys.readouterr().out.splitlines()
    assert line.split("\t")[:3] == ["handbook", EMBEDDER, "qdrant"]

    assert main(["kb", "stats", "--kb", "handbook"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert (stats["documents"], stats["pending"]) == (5, 0)
    assert stats["vectors"] == stats["chunks"]
    assert stats["manifest"]["embedder"]["name"] == EMBEDDER

    assert main(["kb", "delete", "--kb", "handbook", "--yes"]) == 0
    assert not (tmp_path / "kb-home" / "handbook").exists()
    assert main(["kb", "delete", "--kb", "handbook", "--yes"]) == 2
    assert "no knowledge base at" in capsys.readouterr().err


def test_a_mismatched_embedder_is_a_one_line_error(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kb", "ingest", str(corpus), "--kb", "kb1", "--embedder", EMBEDDER, "--quiet"]) == 0
    capsys.readouterr()
    assert main(["kb", "ingest", str(corpus), "--kb", "kb1", "--embedder", "local/minilm-l6-int8"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("toolkernel: error: knowledge base ")
    assert "was embedded with 'local/wordllama-256'" in err
