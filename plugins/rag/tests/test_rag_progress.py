"""``kb ingest`` progress as a person (or a log collector) sees it: on a terminal (a pty) and off one.

Why: the bar showed no total, percentage or ETA, its document counter stayed at 0 until the
first batch was written, nothing was printed off a terminal until the end, and bm25s's
DEBUG lines appeared at the default log level.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from toolkernel_rag.ingestion import IngestReport
from toolkernel_rag.progress import snapshot

from .conftest import write_records

LINE = re.compile(
    r"^ingest (\d+)/(\d+) documents \((\d+\.\d)%\) (\d+) chunks ([\d.]+) chunks/s "
    r"elapsed \d+:\d\d:\d\d ETA (\d+:\d\d:\d\d|\?)$"
)


@pytest.fixture
def sources(tmp_path: Path) -> list[str]:
    docs = tmp_path / "docs"
    docs.mkdir()
    for n in range(3):
        (docs / f"page{n}.md").write_text(f"# Page {n}\n\nLighthouses guide ships, part {n}.\n")
    rows = [{"id": f"r{i}", "text": f"record {i}"} for i in range(4)]
    records = write_records(tmp_path / "corpus.jsonl", rows)
    return [str(docs), str(records)]


def _command(tmp_path: Path, sources: list[str], *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "toolkernel", "kb", "ingest", *sources, "--kb", str(tmp_path / "kb"),
        "--embedder", "local/wordllama-256", *extra,
    ]  # fmt: skip


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLKERNEL_")}
    env.update(COLUMNS="160", TERM="xterm-256color")
    return env


def test_off_a_terminal_lines_count_the_work_first(tmp_path, sources):
    done = subprocess.run(
        _command(tmp_path, sources, "--progress-every", "0"),
        capture_output=True, text=True, timeout=300, env=_env(), stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["added"] == 7  # stdout holds the summary alone
    assert "DEBUG" not in done.stderr
    lines = [LINE.match(line) for line in done.stderr.splitlines() if line.startswith("ingest ")]
    assert lines
    assert all(lines), done.stderr
    counts = [(int(m.group(1)), int(m.group(2))) for m in lines if m]
    assert counts[0] == (0, 7)  # the total is known before any document is read
    assert counts[-1] == (7, 7)
    assert lines[-1] is not None
    assert lines[-1].group(3) == "100.0"
    assert [c[0] for c in counts] == sorted(c[0] for c in counts)


def test_off_a_terminal_by_default_a_line_at_the_start_and_the_end(tmp_path, sources):
    done = subprocess.run(
        _command(tmp_path, sources), capture_output=True, text=True, timeout=300, env=_env()
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("ingest ")]
    # A quick run: the first report and the last; at most one line every 5 s between them.
    assert lines[0].startswith("ingest 0/7 documents (0.0%)")
    assert lines[-1].startswith("ingest 7/7 documents (100.0%)")
    assert "DEBUG" not in done.stderr


def test_json_progress_lines_for_machines(tmp_path, sources):
    done = subprocess.run(
        _command(tmp_path, sources, "--progress", "json", "--progress-every", "0"),
        capture_output=True, text=True, timeout=300, env=_env(),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stderr.splitlines() if line.startswith('{"event": "ingest')]
    assert events[0]["documents"] == 0
    assert events[0]["total"] == 7
    assert events[-1]["documents"] == events[-1]["total"] == 7
    assert events[-1]["percent"] == 100.0
    assert set(events[-1]) == {
        "event", "documents", "total", "percent", "chunks", "chunks_per_s", "elapsed_s", "eta_s"
    }  # fmt: skip


def test_on_a_terminal_a_bar_with_total_percentage_and_eta(tmp_path, sources):
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        _command(tmp_path, sources),
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=terminal, env=_env(),
    )  # fmt: skip
    os.close(terminal)
    seen = b""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        ready, _, _ = select.select([controller], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
        elif process.poll() is not None:
            break
    os.close(controller)
    stdout, _ = process.communicate(timeout=60)
    assert process.returncode == 0, seen.decode(errors="replace")
    assert json.loads(stdout)["added"] == 7
    screen = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", seen.decode(errors="replace"))
    assert "━" in screen  # the bar itself
    assert re.search(r"ingest .*7/7 documents\s+100%", screen), screen
    assert "chunks (" in screen
    assert "ETA" in screen
    assert "DEBUG" not in screen


def test_the_snapshot_estimates_time_left_from_the_rate_so_far():
    report = IngestReport(total=100, added=20, unchanged=5, chunks=300)
    assert snapshot(report, 10.0) == {
        "documents": 25, "total": 100, "percent": 25.0, "chunks": 300, "chunks_per_s": 30.0,
        "elapsed_s": 10.0, "eta_s": 30.0,
    }  # fmt: skip
    assert snapshot(IngestReport(total=5), 3.0)["eta_s"] is None  # nothing done yet: no rate


@pytest.mark.parametrize("quiet", [("--quiet",), ("--progress", "none")])
def test_no_progress_means_none_from_the_embedder_either(tmp_path, sources, quiet):
    """Why: ``--quiet`` still printed the local embedder's own "embedding progress" lines."""
    config = tmp_path / "toolkernel.toml"
    config.write_text("[plugins.local]\nbatch_size = 1\nlog_every = 1\n")  # a line per text, were it shown
    command = _command(tmp_path, sources, *quiet)
    done = subprocess.run(
        [*command[:3], "--config", str(config), *command[3:]],
        capture_output=True, text=True, timeout=300, env=_env(),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["added"] == 7
    assert done.stderr == ""


def test_a_corrupt_pdf_is_one_skip_line_and_no_library_warning(tmp_path):
    """Why: pypdf printed ``WARNING pypdf._reader: EOF marker not found`` beside the skip line."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "broken.pdf").write_bytes(b"%PDF-1.4 nothing more")
    (docs / "fine.txt").write_text("Lighthouses guide ships.")
    done = subprocess.run(
        _command(tmp_path, [str(docs)], "--quiet"), capture_output=True, text=True, timeout=300, env=_env()
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["added"] == 1
    [line] = done.stderr.splitlines()
    assert line.startswith(f"skipped {docs / 'broken.pdf'}: ")
