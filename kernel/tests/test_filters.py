"""The filter language: parsing into the AST, error paths, operator sets and reference semantics."""

from __future__ import annotations

import re
from typing import Any

import pytest

from toolkernel.errors import ToolkernelError
from toolkernel.filters import (
    ALL_OPERATORS,
    And,
    Condition,
    Filter,
    Nor,
    Not,
    Or,
    coerce_filter,
    matches,
    parse_filter,
    require_supported,
)
from toolkernel.vectors import InvalidFilterError, UnsupportedFilterError


def test_shorthands_expand_to_eq_and_in() -> None:
    assert parse_filter({"color": "red"}).root == Condition(field="color", op="$eq", value="red")
    assert parse_filter({"color": ["red", "blue"]}).root == Condition(
        field="color", op="$in", value=("red", "blue")
    )


def test_several_keys_and_several_operators_are_anded() -> None:
    root = parse_filter({"a": 1, "b": {"$gt": 2, "$lt": 5}}).root
    assert root == And(
        items=(
            Condition(field="a", op="$eq", value=1),
            And(items=(Condition(field="b", op="$gt", value=2), Condition(field="b", op="$lt", value=5))),
        )
    )


def test_logical_operators_build_nodes() -> None:
    root = parse_filter(
        {"$or": [{"a": 1}, {"$nor": [{"b": 2}]}], "$not": {"c": 3}, "d": {"$not": {"$exists": True}}}
    ).root
    assert isinstance(root, And)
    or_, not_, field_not = root.items
    assert isinstance(or_, Or)
    assert isinstance(or_.items[1], Nor)
    assert not_ == Not(item=Condition(field="c", op="$eq", value=3))
    assert field_not == Not(item=Condition(field="d", op="$exists", value=True))


def test_operators_lists_every_operator_used() -> None:
    flt = parse_filter(
        {"$or": [{"a": 1}, {"b": ["x"]}], "c": {"$not": {"$regex": "^z"}}, "d": {"$all": [1, 2]}}
    )
    assert flt.operators() == {"$and", "$or", "$eq", "$in", "$not", "$regex", "$all"}
    assert parse_filter({}).operators() == frozenset()


def test_empty_filter_is_coerced_to_none() -> None:
    assert coerce_filter(None) is None
    assert coerce_filter({}) is None
    assert coerce_filter({"a": 1}) == parse_filter({"a": 1})


def test_filter_model_validates_the_mongo_form() -> None:
    assert Filter.model_validate({"a": {"$gte": 1}}) == parse_filter({"a": {"$gte": 1}})
    assert parse_filter(parse_filter({"a": 1})) == parse_filter({"a": 1})
    # a metadata field named "root" is a filter, not the model's field
    assert Filter.model_validate({"root": "x"}).root == Condition(field="root", op="$eq", value="x")


@pytest.mark.parametrize(
    ("flt", "message"),
    [
        (
            {"$and": [{"a": 1}, {"price": {"$gt": None}}]},
            r"filter\.\$and\[1\]\.price: \$gt needs a number or string",
        ),
        ({"price": {"$gt": True}}, r"filter\.price: \$gt needs a number or string"),
        ({"a": {"$in": []}}, r"filter\.a: \$in needs a non-empty list"),
        ({"a": {"$nin": [1, {"x": 1}]}}, r"filter\.a\[1\]: \$nin needs a string, number or boolean"),
        ({"a": None}, r"filter\.a: \$eq .* \(use \$exists"),
        ({"a": {"$exists": 1}}, r"filter\.a: \$exists needs true or false"),
        ({"a": {"$regex": "("}}, r"filter\.a: invalid regular expression"),
        ({"a": {"$like": "x"}}, r"filter\.a: unknown operator '\$like'"),
        ({"a": {"b": 1}}, r"filter\.a: nested objects are not supported"),
        ({"a": {}}, r"filter\.a: an empty operator mapping"),
        ({"$or": []}, r"filter\.\$or: \$or needs a non-empty list"),
        ({"$or": [{"a": 1}, 5]}, r"filter\.\$or\[1\]: expected a mapping"),
        ({"$gt": 5}, r"filter\.\$gt: \$gt is not a filter operator at this level"),
        ({"a": {"$not": 5}}, r"filter\.a: \$not needs a mapping"),
        ({"a": float("nan")}, r"filter\.a: \$eq needs"),
        ([1], r"filter: expected a mapping"),
    ],
)
def test_errors_name_the_path(flt: Any, message: str) -> None:
    with pytest.raises(InvalidFilterError, match=message):
        parse_filter(flt)


def test_errors_are_toolkernel_errors_and_value_errors() -> None:
    with pytest.raises(ToolkernelError):
        parse_filter({"a": {"$bad": 1}})
    with pytest.raises(ValueError, match="unknown operator"):
        parse_filter({"a": {"$bad": 1}})


def test_require_supported_names_store_and_operator() -> None:
    flt = parse_filter({"a": {"$regex": "x"}, "b": 1})
    require_supported("s", ALL_OPERATORS, flt)
    with pytest.raises(
        UnsupportedFilterError, match=r"'qdrant' does not support the filter operator \$regex"
    ) as caught:
        require_supported("qdrant", {"$eq", "$and"}, flt)
    assert (caught.value.store, caught.value.operator) == ("qdrant", "$regex")


RECORD = {"color": "red", "price": 2.5, "qty": 3, "tags": ["a", "b"], "flag": True, "name": "Ünïcode"}


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        ({"color": "red"}, True),
        ({"color": "blue"}, False),
        ({"tags": "a"}, True),  # any element of a list
        ({"tags": {"$ne": "a"}}, False),  # no element may equal
        ({"tags": {"$ne": "z"}}, True),
        ({"missing": {"$ne": 1}}, True),
        ({"missing": {"$nin": [1]}}, True),
        ({"missing": 1}, False),
        ({"missing": {"$gt": 0}}, False),
        ({"flag": 1}, False),  # booleans never equal numbers
        ({"qty": True}, False),
        ({"qty": 3.0}, True),  # ints and floats compare as numbers
        ({"flag": {"$gt": 0}}, False),
        ({"price": {"$gt": 2, "$lte": 2.5}}, True),
        ({"price": {"$gt": "a"}}, False),  # mixed types never match
        ({"color": {"$gte": "r", "$lt": "s"}}, True),  # strings by code point
        ({"color": ["blue", "red"]}, True),
        ({"tags": {"$in": ["z", "b"]}}, True),
        ({"tags": {"$nin": ["z", "b"]}}, False),
        ({"tags": {"$all": ["b", "a"]}}, True),
        ({"tags": {"$all": ["a", "z"]}}, False),
        ({"color": {"$all": ["red"]}}, True),  # a scalar acts as a one-element list
        ({"price": {"$exists": True}}, True),
        ({"missing": {"$exists": False}}, True),
        ({"name": {"$regex": "(?i)^ün"}}, True),
        ({"qty": {"$regex": "3"}}, False),  # $regex only matches strings
        ({"$and": [{"color": "red"}, {"qty": {"$lt": 3}}]}, False),
        ({"$or": [{"color": "blue"}, {"qty": {"$lte": 3}}]}, True),
        ({"$nor": [{"color": "blue"}, {"qty": 4}]}, True),
        ({"$not": {"color": "red"}}, False),
        ({"missing": {"$not": {"$gt": 5}}}, True),
        ({}, True),
    ],
)
def test_matches_reference_semantics(flt: dict[str, Any], expected: bool) -> None:
    assert matches(flt, RECORD) is expected


# -- limits on untrusted filters ----------------------------------------------------------


@pytest.mark.parametrize(
    ("flt", "named"),
    [
        ({"$or": [{"a": i} for i in range(20_000)]}, "filter.$or: 20000 filters, over max_branches (100)"),
        ({"a": {"$in": list(range(5_000))}}, "filter.a.$in: 5000 values, over max_values (1000)"),
        ({"a": list(range(5_000))}, "filter.a: 5000 values, over max_values (1000)"),
        ({"a": "x" * 5_000}, "filter.a: a string of 5000 characters, over max_string (4096)"),
        ({"a": {"$regex": "x" * 5_000}}, "over max_string (4096)"),
        ({"$and": [{"$or": [{f"k{i}": {"$in": list(range(900))}} for i in range(3)]}]}, "(max_nodes)"),
    ],
)
def test_filters_over_a_limit_are_refused_naming_it(flt: dict[str, Any], named: str) -> None:
    from toolkernel.filters import check_filter_limits

    with pytest.raises(InvalidFilterError, match=re.escape(named)):
        check_filter_limits(flt)


def test_deep_nesting_is_refused_before_recursion_can_fail() -> None:
    from toolkernel.filters import check_filter_limits

    deep: dict[str, Any] = {"a": 1}
    for _ in range(100_000):
        deep = {"$not": deep}
    with pytest.raises(InvalidFilterError, match=r"nested more than 32 levels deep \(max_depth\)"):
        check_filter_limits(deep)


def test_a_huge_object_is_refused_without_walking_its_keys() -> None:
    from toolkernel.filters import FilterLimits, check_filter_limits

    class Counted(dict[str, Any]):
        """A dict that counts the entries the check reads."""

        read = 0

        def items(self) -> Any:
            for item in super().items():
                Counted.read += 1
                yield item

    huge = Counted((f"k{i}", i) for i in range(100_000))
    with pytest.raises(InvalidFilterError, match="max_nodes"):
        check_filter_limits(huge, FilterLimits(max_nodes=100))
    # Refused on its size alone, as an over-long array is: the limit bounds the work done.
    assert Counted.read == 0


def test_limits_can_be_raised_and_honest_filters_pass() -> None:
    from toolkernel.filters import FilterLimits, check_filter_limits

    big_or = {"$or": [{"a": i} for i in range(500)]}
    with pytest.raises(InvalidFilterError, match="max_branches"):
        check_filter_limits(big_or)
    check_filter_limits(big_or, FilterLimits(max_branches=500))
    for flt in (
        {"lang": "en", "year": {"$gte": 2020, "$lt": 2025}, "tags": ["ai", "db"]},
        {"$or": [{"lang": "fr"}, {"lang": {"$nin": ["de", "en"]}}], "title": {"$not": {"$regex": "^draft"}}},
        {"id": {"$in": [f"doc-{i}" for i in range(1_000)]}},
    ):
        check_filter_limits(flt)


def test_a_tool_check_input_runs_before_schema_validation() -> None:
    from toolkernel.tools import ToolInputError, create_tool

    seen: list[str] = []

    def small(args: Any) -> None:
        seen.append("checked")
        if len(str(args.get("q", ""))) > 5:
            raise ValueError("q: over max_q (5)")

    tool = create_tool(
        id="t",
        description="d",
        input_schema={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
        execute=lambda args, ctx: None,
        check_input=small,
    )
    with pytest.raises(ToolInputError, match=r"^q: over max_q \(5\)$"):
        tool.validate_input({"q": "x" * 10})
    with pytest.raises(ToolInputError, match="is a required property"):
        tool.validate_input({})
    assert seen == ["checked", "checked"]
