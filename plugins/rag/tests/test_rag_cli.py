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


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--embedder", "local/nosuch"], "--embedder 'local/nosuch': no local embedding model 'nosuch'"),
        (["--store", "qdrnt"], "--store 'qdrnt': no vector store of that name (installed: "),
        (["--chunker", "htm"], "--chunker 'htm': no chunker named 'htm'"),
        (["--store-options", "{not json"], "--store-options: not valid JSON"),
    ],
)
def test_an_unknown_choice_is_one_line_and_creates_nothing(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], says: str
) -> None:
    assert main(["kb", "ingest", str(corpus), "--kb", "typo", "--quiet", *args]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("toolkernel: error: ")
    assert says in line
    assert not (tmp_path / "kb-home" / "typo").exists()


def test_a_missing_source_is_one_line_and_creates_nothing(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It printed 'skipped nosuchdir: does not exist', exited 0 and created an empty knowledge base."""
    missing = str(tmp_path / "nosuchdir")
    assert main(["kb", "ingest", str(corpus), missing, "--kb", "typo", "--embedder", EMBEDDER]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line == f"toolkernel: error: source {missing!r} does not exist; nothing was ingested"
    assert not (tmp_path / "kb-home" / "typo").exists()


@pytest.mark.parametrize("action", ["serve", "stats", "repair", "delete"])
def test_a_knowledge_base_that_does_not_exist_is_one_line_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], action: str
) -> None:
    assert main(["kb", action, "--kb", "nowhere"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"toolkernel: error: no knowledge base at '{tmp_path / 'kb-home' / 'nowhere'}'")
    assert not (tmp_path / "kb-home").exists()


@pytest.mark.parametrize("content", ["{", '{"format": 1, "name": "x"}', '{"format": 99}'])
def test_a_malformed_manifest_is_one_line_for_stats(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str
) -> None:
    assert main(["kb", "ingest", str(corpus), "--kb", "kb1", "--embedder", EMBEDDER, "--quiet"]) == 0
    (tmp_path / "kb-home" / "kb1" / "manifest.json").write_text(content)
    capsys.readouterr()
    assert main(["kb", "stats", "--kb", "kb1"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("toolkernel: error: knowledge base ")
    assert "manifest.json" in line or "layout format 99" in line


def test_delete_drops_the_index_of_a_store_kept_outside_the_directory(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A store with a path outside the knowledge base kept the deleted knowledge base's index
    for good; now only that index goes, and another knowledge base's in the same store stays."""
    import anyio

    from toolkernel import Kernel

    outside = tmp_path / "shared-store"
    store = ["--store", "qdrant", "--store-options", json.dumps({"path": str(outside)})]
    for name in ("kb1", "kb2"):
        args = ["kb", "ingest", str(corpus), "--kb", name, "--embedder", EMBEDDER, "--quiet", *store]
        assert main([*args, "--no-extensions"]) == 0

    async def indexes() -> list[str]:
        opened = Kernel.from_config(None).vector_store("qdrant", path=str(outside))
        try:
            return sorted(await opened.list_indexes())
        finally:
            await opened.aclose()

    assert anyio.run(indexes) == ["kb1", "kb2"]
    capsys.readouterr()
    assert main(["kb", "delete", "--kb", "kb1", "--yes"]) == 0
    assert not (tmp_path / "kb-home" / "kb1").exists()
    assert capsys.readouterr().err.strip().endswith(f"and the index 'kb1' in the qdrant store at {outside}")
    assert anyio.run(indexes) == ["kb2"]


def test_delete_refuses_when_the_store_cannot_drop_the_index(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing is deleted when the index outside cannot be dropped: the manifest is all that
    says where it lives (here its store's plugin is no longer installed)."""
    store = ["--store", "qdrant", "--store-options", json.dumps({"path": str(tmp_path / "elsewhere")})]
    args = ["kb", "ingest", str(corpus), "--kb", "kb1", "--embedder", EMBEDDER, "--quiet", *store]
    assert main([*args, "--no-extensions"]) == 0
    manifest = tmp_path / "kb-home" / "kb1" / "manifest.json"
    data = json.loads(manifest.read_text())
    data["store"]["name"] = "gone"
    manifest.write_text(json.dumps(data))
    capsys.readouterr()
    assert main(["kb", "delete", "--kb", "kb1", "--yes"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(
        f"toolkernel: error: kb delete: cannot drop the index 'kb1' from the gone store at {tmp_path}"
    ), line
    assert line.endswith("; nothing was deleted"), line
    assert manifest.exists()


def test_delete_without_a_terminal_asks_for_yes(corpus: Path, tmp_path: Path) -> None:
    """``kb delete --kb X </dev/null`` ended in an EOFError traceback."""
    import os
    import subprocess
    import sys

    assert main(["kb", "ingest", str(corpus), "--kb", "kb1", "--embedder", EMBEDDER, "--quiet"]) == 0
    toolkernel = str(Path(sys.executable).with_name("toolkernel"))
    done = subprocess.run(
        [toolkernel, "kb", "delete", "--kb", "kb1"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "TOOLKERNEL_KB_HOME": str(tmp_path / "kb-home")},
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "toolkernel: error: kb delete --kb kb1: no terminal to confirm on; pass --yes to delete"
    ]
    assert (tmp_path / "kb-home" / "kb1" / "manifest.json").exists()
