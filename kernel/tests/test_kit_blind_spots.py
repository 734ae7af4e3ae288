"""The kit fails stores that get range filters subtly wrong, run as a plugin's own test suite would be.

Each case writes a plugin-style test module (a store plus a ``VectorStoreContract``
subclass) with pytester and runs pytest on it in a subprocess, then checks which tests of
the kit failed. The stores are the kernel's reference store with one semantic slip each.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

REFERENCE_STORE = Path(__file__).with_name("test_vectors_contract.py").read_text(encoding="utf-8")

PLUGIN_TESTS = """
import pytest

from memory_store import MemoryStore
from toolkernel.filters import And, Condition, Filter, Nor, Not, Or, coerce_filter, matches
from toolkernel.testing.stores import VectorStoreContract

RANGES = {"$gt", "$gte", "$lt", "$lte"}


def evaluate(node, meta, condition):
    if isinstance(node, Condition):
        return condition(node, meta)
    if isinstance(node, Not):
        return not evaluate(node.item, meta, condition)
    results = [evaluate(item, meta, condition) for item in node.items]
    if isinstance(node, And):
        return all(results)
    return any(results) if isinstance(node, Or) else not any(results)


class SlippedStore(MemoryStore):
    def _selected(self, idx, flt):
        return [
            rid for rid, (_, meta, _) in idx.records.items()
            if flt is None or evaluate(flt.root, meta, self.condition)
        ]

    @staticmethod
    def condition(node, meta):
        return matches(Filter(root=node), meta)


class {name}(SlippedStore):
    @staticmethod
    def condition(node, meta):
{condition}


class TestPlugin(VectorStoreContract):
    batch_size = 100

    @pytest.fixture
    async def vector_store(self):
        yield {name}()
"""

# "$gt" against the smallest element: every element must compare, not any.
WRONG_END = """\
        value = meta.get(node.field)
        if node.op in RANGES and isinstance(value, list):
            return all(matches({node.field: {node.op: node.value}}, {node.field: v}) for v in value)
        return matches(Filter(root=node), meta)"""

# String operands of range operators find nothing (a numeric-only range index).
STRING_RANGES_EMPTY = """\
        if node.op in RANGES and isinstance(node.value, str):
            return False
        return matches(Filter(root=node), meta)"""

CORRECT = """\
        return matches(Filter(root=node), meta)"""

# Chroma's slip: an int value compared with a fractional operand truncated toward zero.
TRUNCATED_OPERAND = """\
        value, operand = meta.get(node.field), node.value
        if isinstance(operand, float) and type(value) is int:
            return matches({node.field: {node.op: float(int(operand))}}, meta)
        return matches(Filter(root=node), meta)"""

# The cosine of a zero vector as NaN (what dividing by a zero norm gives in numpy or SQL).
NAN_FOR_ZERO_VECTORS = """
import math
import memory_store


def _nan_cosine(metric, a, b):
    if metric == "cosine" and not (any(a) and any(b)):
        return math.nan
    return _reference_score(metric, a, b)


_reference_score = memory_store._score
memory_store._score = _nan_cosine
"""


def run_kit(pytester: pytest.Pytester, name: str, condition: str, prelude: str = "") -> pytest.RunResult:
    tests = PLUGIN_TESTS.replace("{name}", name).replace("{condition}", condition)
    pytester.makepyfile(memory_store=REFERENCE_STORE, test_plugin_store=prelude + tests)
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q", "test_plugin_store.py", timeout=300)


def failed_tests(result: pytest.RunResult) -> set[str]:
    return {
        line.split("::")[-1].split(" ")[0]
        for line in result.outlines
        if line.startswith("FAILED ") and "::" in line
    }


@pytest.mark.parametrize(
    ("name", "condition"), [("WrongEndOfLists", WRONG_END), ("StringRangesFindNothing", STRING_RANGES_EMPTY)]
)
def test_the_kit_fails_a_store_with_a_range_slip(
    pytester: pytest.Pytester, name: str, condition: str
) -> None:
    result = run_kit(pytester, name, condition)
    failed = failed_tests(result)
    # Both the fixed cases and the generated ones catch it, for every range operator.
    assert {f"test_filter_operator[{op}]" for op in ("$gt", "$gte", "$lt", "$lte")} <= failed, result.stdout
    assert "test_filters_match_the_reference_on_generated_records" in failed, result.stdout
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_the_kit_fails_a_store_that_truncates_fractional_operands_against_ints(
    pytester: pytest.Pytester,
) -> None:
    # Chroma's server did this; the locked hypothesis database never generated the case.
    result = run_kit(pytester, "TruncatedOperand", TRUNCATED_OPERAND)
    failed = failed_tests(result)
    assert "test_ints_and_floats_compare_as_numbers" in failed, result.stdout
    assert "test_filters_match_the_reference_on_generated_records" in failed, result.stdout


def test_the_kit_fails_a_store_that_scores_zero_vectors_nan(pytester: pytest.Pytester) -> None:
    result = run_kit(pytester, "Correct", CORRECT, prelude=NAN_FOR_ZERO_VECTORS)
    assert failed_tests(result) == {"test_cosine_with_a_zero_vector_scores_zero"}, result.stdout


def test_the_same_harness_passes_a_correct_store(pytester: pytest.Pytester) -> None:
    result = run_kit(pytester, "Correct", CORRECT)
    result.assert_outcomes(passed=35)
