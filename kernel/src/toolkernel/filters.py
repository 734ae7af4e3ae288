"""The metadata filter language every vector store accepts: a Mongo-style subset.

A filter is a mapping. Field keys name metadata keys (flat: no dotted paths); keys that
start with ``$`` are operators::

    {"category": "news"}                                  # shorthand for {"$eq": "news"}
    {"tags": ["a", "b"]}                                  # shorthand for {"$in": ["a", "b"]}
    {"price": {"$gte": 10, "$lt": 20}, "stock": {"$exists": True}}   # several keys: all must hold
    {"$or": [{"lang": "fr"}, {"lang": {"$nin": ["de", "en"]}}]}
    {"title": {"$not": {"$regex": "^draft"}}}

:func:`parse_filter` checks a mapping and turns it into a small typed AST (:class:`Filter`);
errors name the path inside the filter (``filter.$and[1].price: $gt needs a number or
string``). :func:`matches` is the reference semantics in pure Python: store translators must
agree with it, and the conformance kit computes expected results with it.

Semantics, as in MongoDB: a condition on a list-valued field holds if it holds for *any*
element (``$ne`` and ``$nin`` hold if it holds for *no* element; ``$all`` needs every listed
value among the elements). A missing field satisfies only ``$ne``, ``$nin``,
``{"$exists": False}`` and negations. Booleans never equal numbers. Range operators compare
numbers with numbers and strings with strings (by code point); mixed types never match.
``$regex`` patterns are RE2 syntax (https://github.com/google/re2/wiki/Syntax), searched
anywhere in the value (anchor with ``^``/``$``); inline flags such as ``(?i)`` work, and
``\\pL`` names Unicode letters while ``\\w``, ``\\d``, ``\\s`` and ``\\b`` are
ASCII-only. RE2 runs in time linear in the text and has no backreferences or lookaround
(such a pattern is refused when the filter is parsed), so no pattern can stall a server.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, cast

from pydantic import BaseModel, ConfigDict, Field, model_validator

from toolkernel.vectors import InvalidFilterError, UnsupportedFilterError

if TYPE_CHECKING:
    from collections.abc import Collection, Iterator

    from toolkernel.vectors import FilterInput

__all__ = [
    "ALL_OPERATORS",
    "And",
    "Condition",
    "FIELD_OPERATORS",
    "FieldOperator",
    "Filter",
    "FilterLimits",
    "LOGICAL_OPERATORS",
    "Node",
    "Nor",
    "Not",
    "Or",
    "Scalar",
    "check_filter_limits",
    "coerce_filter",
    "matches",
    "parse_filter",
    "regex_search",
    "require_supported",
]

FieldOperator: TypeAlias = Literal[
    "$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$all", "$exists", "$regex"
]
"""An operator that tests one metadata field."""

FIELD_OPERATORS: frozenset[str] = frozenset(
    {"$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$all", "$exists", "$regex"}
)
LOGICAL_OPERATORS: frozenset[str] = frozenset({"$and", "$or", "$not", "$nor"})
ALL_OPERATORS: frozenset[str] = FIELD_OPERATORS | LOGICAL_OPERATORS
"""Every operator of the language; a store's ``supported_filter_operators`` is a subset."""

Scalar: TypeAlias = str | int | float | bool


# ---------------------------------------------------------------------------
# The AST
# ---------------------------------------------------------------------------


class Condition(BaseModel):
    """``field <op> value``: one test on one metadata field."""

    model_config = ConfigDict(frozen=True)

    field: str
    op: FieldOperator
    value: Scalar | tuple[Scalar, ...]


class And(BaseModel):
    """Every item holds (an empty ``And`` always holds)."""

    model_config = ConfigDict(frozen=True)

    items: tuple[Node, ...]


class Or(BaseModel):
    """At least one item holds."""

    model_config = ConfigDict(frozen=True)

    items: tuple[Node, ...]


class Nor(BaseModel):
    """No item holds."""

    model_config = ConfigDict(frozen=True)

    items: tuple[Node, ...]


class Not(BaseModel):
    """The item does not hold."""

    model_config = ConfigDict(frozen=True)

    item: Node


Node: TypeAlias = Condition | And | Or | Nor | Not
"""A node of a parsed filter."""

And.model_rebuild()
Or.model_rebuild()
Nor.model_rebuild()
Not.model_rebuild()


class Filter(BaseModel):
    """A parsed, valid filter; ``Filter.model_validate(mapping)`` parses the Mongo-style form."""

    model_config = ConfigDict(frozen=True)

    root: Node

    @model_validator(mode="before")
    @classmethod
    def _parse_mapping(cls, data: Any) -> Any:
        """Accept the Mongo-style mapping wherever a :class:`Filter` is validated."""
        if isinstance(data, Mapping) and not (
            set(data) == {"root"} and isinstance(data["root"], Condition | And | Or | Nor | Not)
        ):
            return {"root": _parse_document(data, "filter")}
        return data

    def operators(self) -> frozenset[str]:
        """Every operator the filter uses, shorthands spelled out (``{k: v}`` counts as ``$eq``)."""
        return frozenset(_operators(self.root))

    @property
    def is_empty(self) -> bool:
        """True for ``{}``, which every record matches."""
        return isinstance(self.root, And) and not self.root.items


def _operators(node: Node) -> Iterator[str]:
    if isinstance(node, Condition):
        yield node.op
    elif isinstance(node, Not):
        yield "$not"
        yield from _operators(node.item)
    else:
        # An empty And is the empty filter, which uses no operator.
        if node.items or not isinstance(node, And):
            yield {And: "$and", Or: "$or", Nor: "$nor"}[type(node)]
        for item in node.items:
            yield from _operators(item)


# ---------------------------------------------------------------------------
# Limits
# ---------------------------------------------------------------------------


class FilterLimits(BaseModel):
    """Bounds on a filter from an untrusted caller, checked on the raw JSON before any other work.

    The defaults are far above what a person or a model writes by hand, and far below what
    costs a server noticeable time: a 20,000-branch ``$or`` (0.5 MB of JSON) took 20 s to
    validate and evaluate. Raise a field where a deployment needs more.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_depth: int = Field(32, gt=0, description="How deeply objects and arrays may nest.")
    max_nodes: int = Field(2_000, gt=0, description="Objects, arrays, keys and values in the whole filter.")
    max_branches: int = Field(100, gt=0, description="Filters in one $and, $or or $nor.")
    max_values: int = Field(1_000, gt=0, description="Values in one $in, $nin or $all.")
    max_string: int = Field(4_096, gt=0, description="Characters in one key, value or $regex pattern.")


_BRANCHING = frozenset({"$and", "$or", "$nor"})
_LISTING = frozenset({"$in", "$nin", "$all"})


def check_filter_limits(filter: Any, limits: FilterLimits | None = None, path: str = "filter") -> None:
    """Refuse a raw filter over ``limits`` (the defaults when ``None``), naming the limit and where.

    Walks the JSON iteratively and stops at the first limit passed, so a huge or deeply nested
    filter costs no more than the limit's worth of work (and never Python's recursion limit).

    :raises InvalidFilterError: e.g. ``filter.$or: 20000 filters, over max_branches (100)``.
    """
    lim = limits or FilterLimits()
    nodes = 0
    stack: list[tuple[Any, str, int, str | None]] = [(filter, path, 1, None)]
    while stack:
        value, where, depth, key = stack.pop()
        nodes += 1
        if nodes > lim.max_nodes:
            raise _too_many_nodes(path, lim)
        if depth > lim.max_depth and isinstance(value, Mapping | list | tuple):
            raise InvalidFilterError(f"{where}: nested more than {lim.max_depth} levels deep (max_depth)")
        if isinstance(value, str):
            if len(value) > lim.max_string:
                raise InvalidFilterError(
                    f"{where}: a string of {len(value)} characters, over max_string ({lim.max_string})"
                )
        elif isinstance(value, Mapping):
            if nodes + len(value) > lim.max_nodes:
                raise _too_many_nodes(path, lim)
            for k, v in value.items():
                if isinstance(k, str) and len(k) > lim.max_string:
                    raise InvalidFilterError(
                        f"{where}: a key of {len(k)} characters, over max_string ({lim.max_string})"
                    )
                stack.append((v, f"{where}.{k}", depth + 1, k if isinstance(k, str) else None))
            nodes += len(value)
        elif isinstance(value, list | tuple):
            if key in _BRANCHING and len(value) > lim.max_branches:
                raise InvalidFilterError(
                    f"{where}: {len(value)} filters, over max_branches ({lim.max_branches})"
                )
            listed = key in _LISTING or (key is not None and not key.startswith("$"))  # {k: [..]} is $in
            if listed and len(value) > lim.max_values:
                raise InvalidFilterError(f"{where}: {len(value)} values, over max_values ({lim.max_values})")
            if nodes + len(value) > lim.max_nodes:
                raise _too_many_nodes(path, lim)
            stack.extend((v, f"{where}[{i}]", depth + 1, None) for i, v in enumerate(value))


def _too_many_nodes(path: str, limits: FilterLimits) -> InvalidFilterError:
    return InvalidFilterError(f"{path}: more than {limits.max_nodes} objects, keys and values (max_nodes)")


# ---------------------------------------------------------------------------
# Parsing
# ---------------------------------------------------------------------------


def parse_filter(filter: FilterInput) -> Filter:
    """Parse a Mongo-style mapping into a :class:`Filter` (a ``Filter`` is returned as is).

    :raises InvalidFilterError: naming the path inside the filter that is wrong.
    """
    if isinstance(filter, Filter):
        return filter
    return Filter(root=_parse_document(filter, "filter"))


def coerce_filter(filter: FilterInput | None) -> Filter | None:
    """The parsed filter, or ``None`` when there is no condition to apply (``None`` or ``{}``)."""
    if filter is None:
        return None
    parsed = parse_filter(filter)
    return None if parsed.is_empty else parsed


def require_supported(store: str, supported: Collection[str], filter: Filter) -> None:
    """Raise :class:`UnsupportedFilterError` for the first operator ``filter`` uses that ``store`` lacks.

    Store translators call this before translating, so a condition is never dropped silently.
    """
    missing = sorted(filter.operators() - frozenset(supported))
    if missing:
        raise UnsupportedFilterError(store, missing[0])


def _parse_document(doc: Any, path: str) -> Node:
    if not isinstance(doc, Mapping):
        raise InvalidFilterError(f"{path}: expected a mapping of field names and operators, got {doc!r}")
    nodes: list[Node] = []
    for key, value in doc.items():
        if not isinstance(key, str) or not key:
            raise InvalidFilterError(f"{path}: keys must be non-empty strings, got {key!r}")
        here = f"{path}.{key}"
        if key in ("$and", "$or", "$nor"):
            if not isinstance(value, list | tuple) or not value:
                raise InvalidFilterError(f"{here}: {key} needs a non-empty list of filters")
            items = tuple(_parse_document(item, f"{here}[{i}]") for i, item in enumerate(value))
            nodes.append(
                And(items=items) if key == "$and" else Or(items=items) if key == "$or" else Nor(items=items)
            )
        elif key == "$not":
            nodes.append(Not(item=_parse_document(value, here)))
        elif key.startswith("$"):
            raise InvalidFilterError(
                f"{here}: {key} is not a filter operator at this level "
                f"(top level: $and, $or, $nor, $not; field operators go inside {{field: {{...}}}})"
            )
        else:
            nodes.append(_parse_field(key, value, here))
    return nodes[0] if len(nodes) == 1 else And(items=tuple(nodes))


def _parse_field(field: str, spec: Any, path: str) -> Node:
    if isinstance(spec, Mapping):
        if not spec:
            raise InvalidFilterError(f"{path}: an empty operator mapping tests nothing")
        if not all(isinstance(k, str) and k.startswith("$") for k in spec):
            raise InvalidFilterError(
                f"{path}: nested objects are not supported (metadata is flat); "
                "use operators such as {'$eq': ...} here"
            )
        nodes = [_parse_operator(field, op, value, path) for op, value in spec.items()]
        return nodes[0] if len(nodes) == 1 else And(items=tuple(nodes))
    if isinstance(spec, list | tuple):
        return _parse_operator(field, "$in", spec, path)
    return _parse_operator(field, "$eq", spec, path)


def _parse_operator(field: str, name: str, value: Any, path: str) -> Node:
    if name == "$not":
        if not isinstance(value, Mapping):
            raise InvalidFilterError(f"{path}: $not needs a mapping of operators, e.g. {{'$gt': 5}}")
        return Not(item=_parse_field(field, value, path))
    op = cast(FieldOperator, name)
    if op in ("$eq", "$ne"):
        return Condition(field=field, op=op, value=_scalar(value, op, path))
    if op in ("$gt", "$gte", "$lt", "$lte"):
        if isinstance(value, bool) or not isinstance(value, int | float | str) or _nan(value):
            raise InvalidFilterError(f"{path}: {op} needs a number or string, got {value!r}")
        return Condition(field=field, op=op, value=value)
    if op in ("$in", "$nin", "$all"):
        if not isinstance(value, list | tuple) or not value:
            raise InvalidFilterError(f"{path}: {op} needs a non-empty list of strings, numbers or booleans")
        items = tuple(_scalar(v, op, f"{path}[{i}]") for i, v in enumerate(value))
        return Condition(field=field, op=op, value=items)
    if op == "$exists":
        if not isinstance(value, bool):
            raise InvalidFilterError(f"{path}: $exists needs true or false, got {value!r}")
        return Condition(field=field, op=op, value=value)
    if op == "$regex":
        if not isinstance(value, str):
            raise InvalidFilterError(f"{path}: $regex needs a pattern string, got {value!r}")
        try:
            _regex(value)
        except ValueError as exc:
            raise InvalidFilterError(f"{path}: invalid regular expression (RE2 syntax): {exc}") from None
        return Condition(field=field, op=op, value=value)
    known = ", ".join(sorted(FIELD_OPERATORS | {"$not"}))
    raise InvalidFilterError(f"{path}: unknown operator {name!r} (field operators: {known})")


def _scalar(value: Any, op: str, path: str) -> Scalar:
    if not isinstance(value, str | int | float | bool) or _nan(value):
        raise InvalidFilterError(
            f"{path}: {op} needs a string, number or boolean, got {value!r}"
            + (" (use $exists to test for a missing field)" if value is None else "")
        )
    return value


def _nan(value: Any) -> bool:
    return isinstance(value, float) and value != value


# ---------------------------------------------------------------------------
# Reference evaluation
# ---------------------------------------------------------------------------

_MISSING: Any = object()


def matches(filter: FilterInput, metadata: Mapping[str, Any]) -> bool:
    """Whether a record with ``metadata`` satisfies ``filter``: the semantics every store must agree with."""
    return _eval(parse_filter(filter).root, metadata)


def _eval(node: Node, metadata: Mapping[str, Any]) -> bool:
    if isinstance(node, Condition):
        return _eval_condition(node, metadata.get(node.field, _MISSING))
    if isinstance(node, Not):
        return not _eval(node.item, metadata)
    if isinstance(node, And):
        return all(_eval(item, metadata) for item in node.items)
    if isinstance(node, Or):
        return any(_eval(item, metadata) for item in node.items)
    return not any(_eval(item, metadata) for item in node.items)


def _eval_condition(cond: Condition, actual: Any) -> bool:
    op, want = cond.op, cond.value
    if op == "$exists":
        return (actual is not _MISSING) == want
    if actual is _MISSING:
        return op in ("$ne", "$nin")
    values = list(actual) if isinstance(actual, list | tuple) else [actual]
    if op == "$eq":
        return any(_equal(v, want) for v in values)
    if op == "$ne":
        return not any(_equal(v, want) for v in values)
    if op == "$in":
        return any(_equal(v, w) for v in values for w in _as_tuple(want))
    if op == "$nin":
        return not any(_equal(v, w) for v in values for w in _as_tuple(want))
    if op == "$all":
        return all(any(_equal(v, w) for v in values) for w in _as_tuple(want))
    if op == "$regex":
        pattern = _regex(str(want))
        return any(isinstance(v, str) and pattern.search(v) is not None for v in values)
    return any(_compare(v, op, want) for v in values)


def regex_search(pattern: str, value: str) -> bool:
    """Whether the RE2 ``pattern`` matches anywhere in ``value``: ``$regex`` as :func:`matches` tests it.

    Stores that evaluate ``$regex`` themselves in Python (say, as an SQLite function) call
    this, so they agree with the reference and take time linear in ``value``.

    :raises ValueError: ``pattern`` is not valid RE2 syntax.
    """
    return _regex(pattern).search(value) is not None


@lru_cache(maxsize=256)
def _regex(pattern: str) -> Any:
    """``pattern`` compiled by RE2 (linear-time matching); :class:`ValueError` names what is wrong.

    Imported here, on first use, so the kernel starts without loading the RE2 extension.
    """
    import re2  # type: ignore[import-untyped]

    options = re2.Options()
    options.log_errors = False  # the error is raised to the caller, not printed on stderr
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        raise ValueError(reason.decode() if isinstance(reason, bytes) else str(reason)) from None


def _as_tuple(value: Scalar | tuple[Scalar, ...]) -> tuple[Scalar, ...]:
    return value if isinstance(value, tuple) else (value,)


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    return bool(a == b)


def _compare(actual: Any, op: str, want: Any) -> bool:
    if isinstance(actual, bool):
        return False
    numeric = isinstance(actual, int | float) and isinstance(want, int | float)
    textual = isinstance(actual, str) and isinstance(want, str)
    if not (numeric or textual):
        return False
    if op == "$gt":
        return bool(actual > want)
    if op == "$gte":
        return bool(actual >= want)
    if op == "$lt":
        return bool(actual < want)
    return bool(actual <= want)
