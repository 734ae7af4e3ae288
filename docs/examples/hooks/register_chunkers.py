"""A chunker that makes one chunk per paragraph (text between blank lines)."""

import re

from toolkernel import hookimpl
from toolkernel.chunkers import Chunk


class ParagraphChunker:
    name = "paragraph"

    def __init__(self, min_chars=1):
        self.min_chars = min_chars

    def describe(self):
        return {"name": self.name, "min_chars": self.min_chars}

    def chunk(self, text):
        return [
            Chunk(m.group(), m.start(), m.end())
            for m in re.finditer(r"\S(?:.|\n(?!\s*\n))*", text)
            if len(m.group()) >= self.min_chars
        ]


@hookimpl
def register_chunkers(registry):
    registry.add("paragraph", ParagraphChunker)
