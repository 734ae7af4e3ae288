"""Every hook spec is documented where it is declared, and points at an example that implements it."""

import inspect
import re
from pathlib import Path

import pytest

from toolkernel import hookspecs

ROOT = Path(__file__).resolve().parents[2]
SPECS = sorted(
    name for name, fn in vars(hookspecs).items() if callable(fn) and hasattr(fn, "toolkernel_spec")
)


def test_there_are_hooks():
    assert len(SPECS) == 27


@pytest.mark.parametrize("name", SPECS)
def test_spec_is_documented_with_an_example(name):
    doc = inspect.getdoc(getattr(hookspecs, name)) or ""
    assert len(doc.splitlines()[0]) > 20, f"{name}: needs a one-line summary"
    assert ":param " in doc, f"{name}: document its parameters"
    assert ".. versionadded::" in doc, f"{name}: say when it was added"
    found = re.search(r"Example: ``([^`]+)``", doc)
    assert found, f"{name}: point at a runnable example"
    example = ROOT / found.group(1)
    assert example.is_file(), f"{name}: example {example} does not exist"
    assert re.search(rf"@hookimpl\s+def {name}\(", example.read_text()), (
        f"{example} does not implement {name}"
    )
