"""A reader for .vtt subtitle files: the spoken lines, without cue numbers or timings."""

from toolkernel import hookimpl
from toolkernel.readers import ReadDocument


def read_subtitles(path):
    lines = [
        line.strip()
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip() and "-->" not in line and not line.strip().isdigit() and line.strip() != "WEBVTT"
    ]
    yield ReadDocument(" ".join(lines), kind="text", metadata={"cues": len(lines)})


@hookimpl
def register_readers(registry):
    registry.add("subtitles", read_subtitles, suffixes=[".vtt"])
