"""The PostgreSQL backend's cache of term postings: it holds one generation, never mixes two,
moves on by the changed documents alone, warms without pushing out what searches use, and
stays within its size."""

from __future__ import annotations

from toolkernel_rag.postgres.postings_cache import PostingsCache, Snapshot


def _named(snapshot: Snapshot, term: str) -> list[tuple[str, int, int]]:
    """A term's postings in a snapshot as ``(document id, tf, length)``, by id."""
    p = snapshot.postings[term]
    return sorted(
        (snapshot.names[d], int(t), int(n)) for d, t, n in zip(p.documents, p.tf, p.lengths, strict=True)
    )


def test_cached_postings_of_another_generation_are_refused_and_kept_until_the_cache_moves_on() -> None:
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
    assert cache.generation == 1  # not dropped: moved on by the changed documents instead
    assert cache.move_on(1, 2, [], [])
    assert cache.generation == 2
    assert set(cache.cached(["a", "b"])[1]) == {"a"}


def test_postings_of_an_older_generation_are_scored_but_not_kept() -> None:
    cache = PostingsCache()
    cache.add(5, [("a", ["d1"], [1], [3])], {}, None)
    late = cache.add(4, [("b", ["d9", "d1"], [2, 1], [7, 3])], {}, 5)
    assert late is not None
    assert late.generation == 4
    assert [late.names[i] for i in late.postings["b"].documents] == ["d9", "d1"]
    assert cache.cached(["b"]) == (5, {})


def test_moving_on_replaces_the_changed_documents_postings_in_every_cached_term() -> None:
    cache = PostingsCache()
    before = cache.add(
        1,
        [
            ("a", ["d1", "d2", "d3"], [1, 2, 3], [10, 20, 30]),
            ("b", ["d2", "d4"], [5, 1], [20, 40]),
            ("c", ["d4"], [2], [40]),
        ],
        {},
        None,
    )
    assert before is not None
    # Generation 2 re-wrote d2 (now only in "b", longer), removed d3 and added d5 to "a".
    assert cache.move_on(1, 2, ["d2", "d3", "d5"], [("b", ["d2"], [7], [25]), ("a", ["d5"], [1], [12])])
    held, cached = cache.cached(["a", "b", "c"])
    after = cache.add(2, [], cached, held)
    assert after is not None
    assert _named(after, "a") == [("d1", 1, 10), ("d5", 1, 12)]
    assert _named(after, "b") == [("d2", 7, 25), ("d4", 1, 40)]
    assert _named(after, "c") == [("d4", 2, 40)]
    assert cache.size == 5
    # What a search was handed before is what it scores to its end.
    assert _named(before, "a") == [("d1", 1, 10), ("d2", 2, 20), ("d3", 3, 30)]
    assert not cache.move_on(1, 3, ["d1"], [])  # the cache no longer holds generation 1


def test_warming_keeps_frequent_terms_where_they_leave_first_and_within_the_limit() -> None:
    cache = PostingsCache(limit=6)
    cache.add(3, [("searched", ["d1"], [1], [2])], {}, None)
    assert cache.warm(
        3, [("most", ["d1", "d2", "d3"], [1] * 3, [2] * 3), ("next", ["d4", "d5"], [1] * 2, [2] * 2)]
    )
    assert set(cache.cached(["searched", "most", "next"])[1]) == {"searched", "most", "next"}
    assert not cache.warm(4, [("other", ["d6"], [1], [2])])  # another generation: nothing kept
    assert cache.warm(3, [("over", ["d1", "d2"], [1] * 2, [2] * 2)])
    assert "over" not in cache.cached(["over"])[1]  # past the limit
    cache.start_over(5)
    assert cache.warm(5, [("most", ["d1", "d2"], [1] * 2, [2] * 2), ("next", ["d4"], [1], [2])])
    cache.add(5, [("new", ["d9"] * 4, [1] * 4, [2] * 4)], {}, 5)
    # The rarest warmed term left first; the most frequent and the one searched stay.
    assert set(cache.cached(["most", "next", "new"])[1]) == {"new", "most"}


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
