"""An entity extractor that finds acronyms: words of two or more capital letters (NASA, DNA)."""

import re

from toolkernel import hookimpl

ACRONYM = re.compile(r"\b[A-Z]{2,}\b")


class AcronymExtractor:
    name = "acronyms"

    def __init__(self, min_length=2):
        self.min_length = min_length

    def describe(self):
        return {"name": self.name, "min_length": self.min_length}

    async def extract(self, texts):
        return [
            list(dict.fromkeys(a for a in ACRONYM.findall(text) if len(a) >= self.min_length))
            for text in texts
        ]


@hookimpl
def register_entity_extractors(registry):
    registry.add("acronyms", AcronymExtractor)
