"""The chunk graph: entities and normalisation, links, incremental updates, determinism, filters, PageRank."""

from __future__ import annotations

import random

import numpy as np
import pytest
import scipy.sparse as sp

from toolkernel_graphrag.graph import ChunkGraph, ChunkInput, GraphStateError
from toolkernel_graphrag.links import document_keys, extract_links
from toolkernel_graphrag.mastra import similarity_graph
from toolkernel_graphrag.normalise import Normalisation, alias_table, normalise
from toolkernel_graphrag.pagerank import PRECISION, iterations, personalized_pagerank, transition_matrix
from toolkernel_graphrag.phrases import extract_phrases, sub_phrases
from toolkernel_graphrag.settings import GraphSettings, WalkSettings
from toolkernel_graphrag.walk import GraphWalker

PEOPLE = ["Ada Lovelace", "Alan Turing", "Grace Hopper", "Edsger Dijkstra", "Barbara Liskov", "Ken Thompson"]
PLACES = ["London", "Manchester", "New York", "Rotterdam", "Boston", "Berkeley"]
THINGS = ["Analytical Engine", "Enigma", "COBOL", "ALGOL 60", "CLU", "Unix"]


def corpus(n_docs: int = 40, seed: int = 7, dimension: int = 8) -> list[ChunkInput]:
    """Synthetic documents that name people, places and things, some by another document's title."""
    rng = random.Random(seed)
    vectors = np.random.default_rng(seed).normal(size=(n_docs * 2, dimension))
    titles = [f"{rng.choice(PEOPLE)} {i}" if i % 3 else rng.choice(THINGS) for i in range(n_docs)]
    chunks = []
    for i in range(n_docs):
        named = [*rng.sample(PEOPLE + PLACES + THINGS, 3), titles[rng.randrange(n_docs)]]
        for part in range(2):
            text = f"In this part {part}, {named[0]} met {named[1]} in {named[2]}. See also {named[3]}."
            if part and i % 5 == 0:
                text += f" [more](doc{(i + 1) % n_docs}.md)"
            chunks.append(
                ChunkInput(
                    id=f"doc{i}#{part}",
                    document_id=f"doc{i}",
                    text=text,
                    title=titles[i],
                    source=f"docs/doc{i}.md",
                    metadata={"lang": "en" if i % 2 else "fr", "doc": i},
                    vector=vectors[2 * i + part].tolist(),
                )
            )
    return chunks


def build(chunks: list[ChunkInput], settings: GraphSettings | None = None) -> ChunkGraph:
    graph = ChunkGraph(settings or GraphSettings(knn=3))
    graph.apply(chunks, [extract_phrases(c.text) for c in chunks])
    return graph


def rankings(graph: ChunkGraph, allowed_lang: str | None = None) -> list[list[tuple[str, float]]]:
    """Rankings for a fixed set of queries (seeds and entities), rounded scores included."""
    walker = GraphWalker(graph, WalkSettings(seeds=5))
    allowed = None
    if allowed_lang is not None:
        allowed = np.array(
            [
                graph.chunk_at(s) is not None and graph.metadata(s).get("lang") == allowed_lang
                for s in range(graph.slot_count)
            ]
        )
    out = []
    for q in range(12):
        seeds = [f"doc{(q * 7 + j) % 40}#{j % 2}" for j in range(5)]
        entities = [graph.key(PEOPLE[q % len(PEOPLE)]), graph.key(PLACES[q % len(PLACES)])]
        ranked = walker.rank(seeds, entities, allowed, top_k=15)
        out.append([(r.chunk_id, round(r.score, 9)) for r in ranked])
    return out


# -- extraction and normalisation ----------------------------------------------------------


def test_phrases_find_names_titles_and_identifiers():
    text = (
        "Kiss and Tell is a 1945 film starring Shirley Temple as Corliss Archer. In the U.S. it was "
        '"A Big Hit". Importantly, the IL-6 and p53 genes and Apollo 11 appear; on July 16 1966.'
    )
    found = extract_phrases(text)
    for expected in [
        "Kiss and Tell",
        "Shirley Temple",
        "Corliss Archer",
        "Big Hit",
        "IL-6",
        "p53",
        "Apollo 11",
    ]:
        assert expected in found
    assert "Importantly" not in found  # a lone capital opening a sentence says nothing
    assert "July 16 1966" not in found  # dates link passages that share nothing
    assert found.index("Kiss and Tell") < found.index("Shirley Temple")


def test_sub_phrases_split_joined_names():
    assert "Local H" in sub_phrases("Local H and For Against")
    assert "Richard Nixon" in sub_phrases("President Richard Nixon")
    assert sub_phrases("Nixon") == ["Nixon"]


@pytest.mark.parametrize(
    ("surface", "key"),
    [
        ("The Beatles", "beatle"),
        ("beatles'", "beatle"),
        ("Kiss and Tell (1945 film)", "kiss and tell"),
        ("Bill Cosby's", "bill cosby"),
        ("Café Müller", "cafe muller"),
        ("Universities", "university"),
        ("Analysis", "analysis"),
    ],
)
def test_full_normalisation_folds_variants(surface, key):
    assert normalise(surface) == key


def test_weaker_normalisations_keep_variants_apart():
    assert normalise("The Beatles", Normalisation.CASE) == "the beatles"
    assert normalise("The  Beatles", Normalisation.EXACT) == "The Beatles"
    aliases = alias_table({"USA": "United States", "U.S.": "United States"})
    assert (
        normalise("USA", aliases=aliases) == normalise("United States") == normalise("U.S.", aliases=aliases)
    )


def test_links_markdown_and_html_reach_documents_by_id_or_path():
    text = (
        'See [the guide](../docs/guide.md#hooks), <a href="/api/Reference.html">ref</a>, '
        "[x](#top), [m](mailto:a@b)"
    )
    assert extract_links(text) == ["link:guide", "link:reference"]
    assert "link:guide" in document_keys("guide", "docs/guide.md")
    assert extract_links("[site](https://example.org/guide)") == ["link:example.org/guide"]


# -- the graph -------------------------------------------------------------------------------


def test_title_mentions_and_links_join_chunks():
    chunks = [
        ChunkInput("a", "a", "Kiss and Tell starred Shirley Temple.", title="Kiss and Tell (1945 film)"),
        ChunkInput("b", "b", "She was an ambassador to Ghana.", title="Shirley Temple"),
        ChunkInput("c", "c", "Bananas grow in Ecuador, see [a](a.md).", title="Bananas"),
        ChunkInput("d", "d", "Unrelated text about Ecuador.", title="Ecuador"),
    ]
    graph = ChunkGraph(GraphSettings(knn=0))
    graph.apply(chunks, [extract_phrases(c.text) for c in chunks])
    assert "shirley temple" in graph.entities("a")
    assert "shirley temple" in graph.entities("b")
    assert "link:a" in graph.entities("c")
    assert "link:a" in graph.entities("a")
    ranked = GraphWalker(graph).rank(["a"], [], top_k=4)
    assert [r.chunk_id for r in ranked][:2] == ["a", "b"]  # the title mention leads to b
    # An entity only one chunk names links nothing: no node for it.
    assert graph.entity_node("ghana") is None
    assert graph.entity_slots("ghana") == [graph.slot("b")]


def test_incremental_updates_rank_like_a_full_rebuild():
    chunks = corpus()
    full = build(chunks)
    rng = random.Random(3)
    batches = list(range(0, len(chunks), 14))
    graph = ChunkGraph(GraphSettings(knn=3))
    # Grow in batches, with an early version of some documents that is later replaced, and a
    # document added then deleted.
    stale = [
        ChunkInput(
            c.id,
            c.document_id,
            "An older text naming Grace Hopper and Unix.",
            c.title,
            c.source,
            c.metadata,
            list(reversed(c.vector or [])),
        )
        for c in chunks[:6]
    ]
    graph.apply(stale, [extract_phrases(c.text) for c in stale])
    doomed = [
        ChunkInput(
            "gone#0", "gone", "Alan Turing in London with Enigma.", "Gone", None, {"lang": "en"}, [1.0] * 8
        )
    ]
    graph.apply(doomed, [extract_phrases(doomed[0].text)])
    order = list(range(len(batches)))
    rng.shuffle(order)
    for b in order:
        part = chunks[batches[b] : batches[b] + 14]
        graph.apply(
            part, [extract_phrases(c.text) for c in part], delete_documents={c.document_id for c in part}
        )
    graph.apply(delete_documents=["gone"])
    assert graph.chunk_ids() == full.chunk_ids()
    for cid in full.chunk_ids():
        assert graph.entities(cid) == full.entities(cid)
    assert rankings(graph) == rankings(full)
    assert rankings(graph, "en") == rankings(full, "en")


def test_two_builds_of_the_same_corpus_rank_identically_whatever_the_order():
    chunks = corpus()
    shuffled = chunks[:]
    random.Random(11).shuffle(shuffled)
    first, second, third = build(chunks), build(chunks), build(shuffled)
    assert rankings(first) == rankings(second) == rankings(third)
    assert (first.adjacency() != second.adjacency()).nnz == 0


@pytest.mark.parametrize("fusion", ["rrf", "pagerank"])
def test_rankings_hold_each_document_once(fusion):
    graph = build(corpus())
    walker = GraphWalker(graph, WalkSettings(seeds=10, fusion=fusion))
    seeds = [f"doc{d}#{part}" for d in range(10) for part in (1, 0)]  # both chunks of ten documents
    ranked = walker.rank(seeds, [graph.key("Alan Turing")], top_k=30)
    documents = [graph.document_at(graph.slot(r.chunk_id) or 0) for r in ranked]
    assert len(ranked) == 30
    assert len(set(documents)) == len(documents)


def test_filters_keep_every_result_inside_the_allowed_chunks():
    graph = build(corpus())
    for ranking in rankings(graph, "en"):
        assert ranking
        for chunk_id, _ in ranking:
            slot = graph.slot(chunk_id)
            assert slot is not None
            assert graph.metadata(slot)["lang"] == "en"
    unfiltered = {cid for ranking in rankings(graph) for cid, _ in ranking}
    assert any(graph.metadata(graph.slot(c))["lang"] == "fr" for c in unfiltered)


def test_saved_graph_reads_back_and_refuses_other_settings(tmp_path):
    graph = build(corpus())
    graph.save(tmp_path)
    loaded = ChunkGraph.load(tmp_path, GraphSettings(knn=3))
    assert rankings(loaded) == rankings(graph)
    more = corpus(44, seed=8)[80:]
    for g in (graph, loaded):
        g.apply(more, [extract_phrases(c.text) for c in more])
    assert rankings(loaded) == rankings(graph)
    with pytest.raises(GraphStateError, match="rebuild it"):
        ChunkGraph.load(tmp_path, GraphSettings(knn=3, title_weight=1.0))
    with pytest.raises(GraphStateError, match="no graph"):
        ChunkGraph.load(tmp_path / "missing")


def test_similarity_edges_need_vectors_of_one_dimension():
    graph = ChunkGraph(GraphSettings(knn=2))
    with pytest.raises(ValueError, match="needs a vector"):
        graph.apply([ChunkInput("a", "a", "text")], [[]])
    graph.apply([ChunkInput("a", "a", "text", vector=[1.0, 0.0])], [[]])
    with pytest.raises(ValueError, match="dimension 3"):
        graph.apply([ChunkInput("b", "b", "text", vector=[1.0, 0.0, 0.0])], [[]])


def test_knn_lists_after_updates_equal_a_fresh_computation():
    chunks = corpus()
    full = build(chunks)
    graph = build(chunks[:30])
    graph.apply(chunks[30:], [extract_phrases(c.text) for c in chunks[30:]])
    graph.apply(delete_documents=["doc3", "doc17"])
    fresh = build([c for c in chunks if c.document_id not in ("doc3", "doc17")])
    for cid in fresh.chunk_ids():
        mine = [graph.chunk_at(int(s)) for s in graph._knn[graph.slot(cid)] if s >= 0]
        theirs = [fresh.chunk_at(int(s)) for s in fresh._knn[fresh.slot(cid)] if s >= 0]
        assert mine == theirs, cid
    assert full  # the untouched full build is still valid


def test_knn_lists_equal_a_brute_force_ranking_with_ties_broken_by_id():
    # Enough chunks that each block's candidates come from a sample of the columns; clustered
    # vectors and exact duplicates make many near and exactly equal similarities.
    rng = np.random.default_rng(3)
    n = 3000
    vectors = rng.normal(size=(40, 16))[rng.integers(0, 40, n)] + 0.3 * rng.normal(size=(n, 16))
    vectors[1::7] = vectors[::7][: len(vectors[1::7])]
    ids = [f"c{i:05d}" for i in rng.permutation(n)]
    chunks = [
        ChunkInput(id=i, document_id=i, text="", vector=v.tolist()) for i, v in zip(ids, vectors, strict=True)
    ]
    graph = ChunkGraph(GraphSettings(knn=5))
    graph.apply(chunks, [[] for _ in chunks])
    unit = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
    sims = np.round((unit @ unit.T).astype(np.float64), 4)
    for row in range(0, n, 13):
        others = [j for j in range(n) if j != row]
        expected = sorted(others, key=lambda j: (-sims[row, j], ids[j]))[:5]
        got = [graph.chunk_at(int(s)) for s in graph._knn[graph.slot(ids[row])]]
        assert got == [ids[j] for j in expected], row


# -- PageRank --------------------------------------------------------------------------------


def test_pagerank_matches_the_closed_form():
    rng = np.random.default_rng(0)
    dense = rng.random((30, 30)) * (rng.random((30, 30)) < 0.2)
    dense = dense + dense.T
    np.fill_diagonal(dense, 0)
    dense[:, 0] = dense[0, :] = 0.0  # a node without edges: its mass restarts
    adjacency = sp.csr_array(dense)
    restart = np.zeros(30)
    restart[[0, 3, 7]] = [0.2, 0.5, 0.3]
    damping = 0.7
    got = personalized_pagerank(transition_matrix(adjacency), restart, damping)
    # Stationary x = d P x + (1 - sum(d P x)) r, solved directly.
    p = transition_matrix(adjacency).toarray()
    leak = 1 - damping * p.sum(axis=0)
    system = np.eye(30) - damping * p - np.outer(restart, leak)
    _, _, vh = np.linalg.svd(system)
    x = np.abs(vh[-1]) / np.abs(vh[-1]).sum()
    # At most PRECISION of the mass is still moving: the L1 distance to the fixed point is within twice that.
    assert np.abs(got - x).sum() <= 2 * PRECISION
    assert abs(got.sum() - 1) < 1e-9
    assert 0.7 ** iterations(0.7) <= PRECISION < 0.7 ** (iterations(0.7) - 1)


def test_pagerank_restricted_to_allowed_nodes():
    adjacency = sp.csr_array(np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]], dtype=float))
    allowed = np.array([True, True, False])
    scores = personalized_pagerank(transition_matrix(adjacency, allowed), np.array([1.0, 0, 0]), 0.5)
    assert scores[2] == 0.0
    assert scores[1] > 0


# -- Mastra's similarity graph -------------------------------------------------------------------


@pytest.mark.parametrize("block", [7, 30, 1024])
def test_similarity_graph_has_every_pair_above_the_threshold_once(block):
    rng = np.random.default_rng(1)
    vectors = (rng.normal(size=(4, 8))[rng.integers(0, 4, 30)] + 0.4 * rng.normal(size=(30, 8))).astype(
        np.float32
    )
    graph = similarity_graph(vectors, 0.7, block=block)
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    sims = unit @ unit.T
    expected = {(i, j) for i in range(30) for j in range(30) if i != j and sims[i, j] > 0.7}
    rows, cols = graph.nonzero()
    assert set(zip(rows.tolist(), cols.tolist(), strict=True)) == expected
    assert 0 < len(expected) < 30 * 29
    assert np.allclose(graph.toarray()[rows, cols], sims[rows, cols], atol=1e-6)
