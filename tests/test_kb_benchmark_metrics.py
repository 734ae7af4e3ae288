"""The retrieval metrics and the BEIR loader the knowledge-base benchmarks report with.

``tests/benchmarks/beir.py`` is a script module, not a package; it is loaded from its path.
The expected values are worked out by hand from the metric definitions (BEIR's nDCG with
graded gains and a log2 discount, Recall@k, All@k).
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load_beir() -> ModuleType:
    spec = importlib.util.spec_from_file_location("kb_bench_beir", ROOT / "tests" / "benchmarks" / "beir.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


beir = _load_beir()


def test_ndcg_uses_graded_gains_and_a_log2_discount() -> None:
    relevant = {"a": 2, "b": 1}
    assert beir.ndcg_at(["a", "b", "x"], relevant) == pytest.approx(1.0)
    # b first (gain 1, discount 1), a third (gain 2, discount 1/log2(4) = 1/2): 2 / (2 + 1/log2(3))
    assert beir.ndcg_at(["b", "x", "a"], relevant) == pytest.approx(2 / (2 + 1 / math.log2(3)))
    assert beir.ndcg_at(["x", "y"], relevant) == 0.0
    # only the top k count, and a document repeated in a ranking counts once
    assert beir.ndcg_at(["x", "a"], relevant, k=1) == 0.0
    assert beir.ndcg_at(["b", "b"], {"b": 1}) == pytest.approx(1.0)
    assert beir.ndcg_at(["a"], {}) == 0.0


def test_recall_and_all_at_k() -> None:
    relevant = {"a": 1, "b": 1, "c": 0}
    assert beir.recall_at(["a", "x", "b"], relevant, k=2) == 0.5
    assert beir.recall_at(["a", "x", "b"], relevant, k=3) == 1.0
    assert beir.all_at(["a", "x", "b"], relevant, k=2) == 0.0
    assert beir.all_at(["b", "a"], relevant, k=2) == 1.0
    assert beir.recall_at(["c"], relevant) == 0.0  # a zero grade is not relevant


def test_evaluate_averages_over_queries(tmp_path: Path) -> None:
    (tmp_path / "corpus.jsonl").write_text(
        '{"id": "d1", "title": "T", "text": "one"}\n{"id": "d2", "title": "", "text": "two"}\n'
    )
    (tmp_path / "queries.jsonl").write_text(
        '{"id": "q1", "text": "first"}\n{"id": "q2", "text": "second"}\n{"id": "q3", "text": "unjudged"}\n'
    )
    (tmp_path / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td1\t1\nq2\td2\t1\n")
    data = beir.load(tmp_path)
    assert data.query_ids == ["q1", "q2"]  # the unjudged query is dropped
    assert data.docs == ["T one", "two"]
    quality = beir.evaluate(data, [["d1"], ["d2", "x"]])
    assert quality.ndcg_at_10 == pytest.approx((1.0 + 1 / (1 + 1 / math.log2(3))) / 2)
    assert quality.recall_at_10 == pytest.approx(0.75)
    assert quality.all_at_10 == pytest.approx(0.5)
    with pytest.raises(ValueError, match="1 rankings for 2 queries"):
        beir.evaluate(data, [["d1"]])


def test_loader_names_what_is_missing(tmp_path: Path) -> None:
    (tmp_path / "corpus.jsonl").write_text("")
    with pytest.raises(FileNotFoundError, match=r"missing queries\.jsonl, qrels\.tsv"):
        beir.load(tmp_path)


def test_percentile_interpolates() -> None:
    assert beir.percentile([3.0, 1.0, 2.0, 4.0], 0.5) == pytest.approx(2.5)
    assert beir.percentile([5.0], 0.99) == 5.0
    assert beir.percentile(list(map(float, range(101))), 0.99) == pytest.approx(99.0)
    with pytest.raises(ValueError, match="no samples"):
        beir.percentile([], 0.5)
