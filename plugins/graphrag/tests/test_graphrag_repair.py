"""A damaged graph inside a knowledge base: refused with one line naming it and ``kb repair``,
which rebuilds it from the catalog to the same graph."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkernel_graphrag.graph import GraphStateError
from toolkernel_rag import KnowledgeBase
from toolkernel_rag.repair import repair

from .test_graphrag_kb import QUESTION, ingested, kernel, search

pytestmark = pytest.mark.anyio


async def test_a_damaged_graph_is_refused_naming_it_and_kb_repair_rebuilds_it(tmp_path: Path) -> None:
    where = await ingested(tmp_path)
    before = await search(where, {"query": QUESTION, "mode": "graph"})
    graph = Path(where) / "extensions" / "graph" / "graph.npz"
    graph.write_bytes(graph.read_bytes()[:100])

    async with await KnowledgeBase.open(where, kernel=kernel()) as kb:
        with pytest.raises(GraphStateError) as refused:
            await kb.search(QUESTION, mode="graph")
    message = str(refused.value)
    assert "\n" not in message
    assert str(graph) in message
    assert message.endswith(f"run 'toolkernel kb repair --kb {where}'")
    assert refused.value.exit_code == 2

    async with await KnowledgeBase.open(where, kernel=kernel(), writable=True, repair=True) as kb:
        report = await repair(kb)
    assert report.extensions == ("graph",)
    assert await search(where, {"query": QUESTION, "mode": "graph"}) == before
