"""How ``kb ingest`` shows its progress: a bar on a terminal, a line every few seconds off one, or JSON.

Ingestion counts the work first (documents in every source), then reports after every
document and batch. Every display shows documents done of the total, the percentage, the
chunks written and chunks per second, and the time left at the rate so far:

* ``bar``: a rich progress bar (a terminal);
* ``lines``: ``ingest 120/5183 documents (2.3%) 812 chunks 54.1 chunks/s ETA 0:25:13``
  on the first report, then at most one line every ``every`` seconds, and a last one at the end;
* ``json``: the same moments, each a JSON object (``"event": "ingest progress"``);
* ``auto``: ``bar`` when stderr is a terminal, else ``lines``; ``none``: nothing.

Everything goes to stderr: stdout carries only the run's JSON summary.
"""

from __future__ import annotations

import json
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal, TextIO

if TYPE_CHECKING:
    from toolkernel_rag.ingestion import IngestReport

Mode = Literal["auto", "bar", "lines", "json", "none"]
MODES: tuple[str, ...] = ("auto", "bar", "lines", "json", "none")


def snapshot(report: IngestReport, elapsed: float) -> dict[str, Any]:
    """What every display shows, from a report and the seconds since the run started."""
    done, total = report.done, max(report.total, report.done)
    rate = done / elapsed if elapsed > 0 else 0.0
    eta = (total - done) / rate if rate > 0 else None
    return {
        "documents": done,
        "total": total,
        "percent": round(100 * done / total, 1) if total else 100.0,
        "chunks": report.chunks,
        "chunks_per_s": round(report.chunks / elapsed, 1) if elapsed > 0 else 0.0,
        "elapsed_s": round(elapsed, 1),
        "eta_s": None if eta is None else round(eta, 1),
    }


def _clock(seconds: float | None) -> str:
    return "?" if seconds is None else str(timedelta(seconds=round(seconds)))


class ProgressDisplay:
    """Receives every report (``update``) and shows it in one of the modes; ``close`` shows the last."""

    def __init__(self, mode: Mode, stream: TextIO, every: float = 5.0) -> None:
        if mode == "auto":
            mode = "bar" if stream.isatty() else "lines"
        self.mode = mode
        self.stream = stream
        self.every = every
        self._started = time.monotonic()
        self._last_shown: float | None = None
        self._last: IngestReport | None = None
        self._bar: Any = None
        self._task: Any = None
        if mode == "bar":
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TaskProgressColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._bar = Progress(
                TextColumn("[bold]ingest"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("documents"),
                TaskProgressColumn(),
                TextColumn("{task.fields[chunks]} chunks ({task.fields[rate]}/s)"),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                TimeElapsedColumn(),
                console=Console(file=stream),
            )
            self._bar.start()
            self._task = self._bar.add_task("ingest", total=None, chunks=0, rate=0.0)

    def update(self, report: IngestReport) -> None:
        """Take the latest report; lines and JSON are shown at most once every ``every`` seconds."""
        self._last = report
        now = time.monotonic()
        if self._bar is not None:
            info = snapshot(report, now - self._started)
            self._bar.update(
                self._task,
                total=info["total"] or None,
                completed=info["documents"],
                chunks=info["chunks"],
                rate=info["chunks_per_s"],
            )
            return
        if self._last_shown is None or now - self._last_shown >= self.every:
            self._show(report, now)

    def close(self) -> None:
        """Show the final state (always, whatever the interval) and release the terminal."""
        if self._bar is not None:
            if self._last is not None:
                self.update(self._last)
            self._bar.stop()
            return
        if self._last is not None:
            self._show(self._last, time.monotonic())

    def _show(self, report: IngestReport, now: float) -> None:
        self._last_shown = now
        info = snapshot(report, now - self._started)
        if self.mode == "json":
            line = json.dumps({"event": "ingest progress", **info})
        elif self.mode == "lines":
            line = (
                f"ingest {info['documents']}/{info['total']} documents ({info['percent']}%) "
                f"{info['chunks']} chunks {info['chunks_per_s']} chunks/s "
                f"elapsed {_clock(info['elapsed_s'])} ETA {_clock(info['eta_s'])}"
            )
        else:
            return
        print(line, file=self.stream, flush=True)
