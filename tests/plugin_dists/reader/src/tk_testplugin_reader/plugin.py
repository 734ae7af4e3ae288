"""Reads ``.recipe`` files: a ``Title:`` line, then ingredients (``- ``) and steps (numbered)."""

from toolkernel import hookimpl
from toolkernel.readers import ReadDocument


def read_recipe(path):
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines or not lines[0].startswith("Title:"):
        raise ValueError("a recipe starts with a 'Title:' line")
    title = lines[0].removeprefix("Title:").strip()
    ingredients = [line[2:].strip() for line in lines[1:] if line.startswith("- ")]
    steps = [line.split(".", 1)[1].strip() for line in lines[1:] if line[:1].isdigit() and "." in line]
    text = "\n\n".join([f"# {title}", "## Ingredients", *(f"- {i}" for i in ingredients), "## Steps", *steps])
    yield ReadDocument(text, kind="markdown", metadata={"title": title, "ingredients": len(ingredients)})


@hookimpl
def register_readers(registry):
    registry.add("recipe", read_recipe, suffixes=[".recipe"])
