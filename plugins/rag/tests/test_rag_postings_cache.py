"""The PostgreSQL backend's cache of term postings: it holds one generation, never mixes two,
and stays within its size."""

from __future__ import annotations

from toolkernel_rag.postgres.postings_cache import PostingsCache


def test_a_newer_generation_empties_the_cache_and_stale_cached_postings_are_refused() -> None:
    cache = PostingsCache()
    held, cached = cache.cached(["a"])
    assert (held, cached) == (None, {})
    snapshot = cache.add(1, [("a", ["d1", "d2"], [1, 2], [5, 6])], cached, held)
    assert snapshot is not None
    assert list(snapshot.names) == ["d1", "d2"]
    held, cached = cache.cached(["a", "b"])
    assert held == 1
    assert set(cached) == {"a"}
    # The database moved on between reading the cache and fetching "b": the cached "a" is stale.
    assert cache.add(2, [("b", ["d3"], [1], [4])], cached, held) is None
    assert cache.generation == 2
    held, cached = cache.cached(["a", "b"])
    assert (held, cached) == (2, {})  # nothing of generation 1 is left


def test_postings_of_an_older_generation_are_scored_but_not_kept() -> None:
    cache = PostingsCache()
    cache.add(5, [("a", ["d1"], [1], [3])], {}, None)
    late = cache.add(4, [("b", ["d9", "d1"], [2, 1], [7, 3])], {}, 5)
    assert late is not None
    assert late.generation == 4
    assert [late.names[i] for i in late.postings["b"].documents] == ["d9", "d1"]
    assert cache.cached(["b"]) == (5, {})


def test_the_least_recently_used_terms_leave_first_and_a_term_over_the_limit_is_not_kept() -> None:
    cache = PostingsCache(limit=4)
    cache.add(1, [("a", ["d1", "d2"], [1, 1], [2, 2]), ("b", ["d3"], [1], [2])], {}, None)
    cache.cached(["a"])  # "a" used last
    cache.add(1, [("c", ["d4", "d5"], [1, 1], [2, 2])], {}, 1)
    assert set(cache.cached(["a", "b", "c"])[1]) == {"a", "c"}
    snapshot = cache.add(1, [("big", ["d1", "d2", "d3", "d4", "d5"], [1] * 5, [2] * 5)], {}, 1)
    assert snapshot is not None
    assert len(snapshot.postings["big"]) == 5
    assert "big" not in cache.cached(["big"])[1]
