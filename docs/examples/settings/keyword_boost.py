"""A reranker built from its plugin's settings: the [plugins.keyword-boost] table."""

from pydantic import BaseModel, Field

from toolkernel import hookimpl


class BoostSettings(BaseModel):
    keywords: list[str] = []
    weight: float = Field(1.0, gt=0)


class KeywordBoost:
    """Scores a passage by the query words and configured keywords it contains."""

    def __init__(self, settings: BoostSettings):  # validated settings; no kernel needed
        self.keywords = [k.lower() for k in settings.keywords]
        self.weight = settings.weight

    async def score(self, query, passages):
        words = query.lower().split()
        return [
            sum(w in p.lower() for w in words) + self.weight * sum(k in p.lower() for k in self.keywords)
            for p in passages
        ]


@hookimpl
def register_settings(registry):
    registry.add("keyword-boost", BoostSettings)


@hookimpl
def register_rerankers(registry):
    registry.add("keyword-boost", KeywordBoost, settings="keyword-boost")
