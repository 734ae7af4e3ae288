"""Write the generated part of each hook's section in docs/plugins/hooks.md from hookspecs.py.

Each hook section holds a block between ``<!-- generated from hookspecs.py: NAME -->`` and
``<!-- end of generated part -->``: the spec's exact signature and its docstring in
Markdown (less the docstring's ``Example:`` line: the section shows the example whole).
Run ``python docs/hookref.py`` after editing a docstring in ``toolkernel/hookspecs.py``;
``tests/test_docs.py`` fails while the page and the specs differ (pytest builds its hook
reference from its hookspec docstrings the same way).
"""

from __future__ import annotations

import ast
import inspect
import re
import sys
from pathlib import Path

from toolkernel import hookspecs

HOOKS_MD = Path(__file__).resolve().parent / "plugins" / "hooks.md"
BEGIN = "<!-- generated from hookspecs.py: {name} -->"
END = "<!-- end of generated part -->"


def hook_specs() -> dict[str, tuple[str, str]]:
    """``name -> (signature, docstring)`` for every spec, in the order of hookspecs.py."""
    tree = ast.parse(Path(hookspecs.__file__).read_text(encoding="utf-8"))
    specs = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and any(
            isinstance(d, ast.Name) and d.id == "_spec" for d in node.decorator_list
        ):
            returns = f" -> {ast.unparse(node.returns)}" if node.returns is not None else ""
            signature = f"def {node.name}({ast.unparse(node.args)}){returns}"
            specs[node.name] = (signature, inspect.cleandoc(ast.get_docstring(node, clean=False) or ""))
    return specs


def _inline(text: str) -> str:
    """reST inline markup as Markdown: ``code``, :class:`~a.B` (shown as B), :func:`f`."""

    def role(match: re.Match[str]) -> str:
        target = match.group(2)
        return f"`{target.rsplit('.', 1)[-1] if match.group(1) else target}`"

    text = re.sub(r":(?:class|func|meth|mod|data|attr|exc):`(~?)([^`]+)`", lambda m: role(m), text)
    return re.sub(r"``([^`]+)``", r"`\1`", text).replace("`~", "`")


def render(name: str, signature: str, docstring: str) -> str:
    """The generated block for one hook."""
    out = [BEGIN.format(name=name), "", "```python signature", signature, "```", ""]
    for block in re.split(r"\n\s*\n", docstring):
        if block.startswith("Example: "):
            continue  # the section shows the example itself, in full
        items: list[str] = []
        for line in block.splitlines():
            if line.startswith(":") or not items:
                items.append(line.strip())
            else:
                items[-1] += " " + line.strip()
        for item in items:
            field = re.match(r":(?:param (\w+)|return):\s*(.*)", item)
            version = re.match(r"\.\. versionadded:: (.+)", item)
            if field:
                out.append(
                    f"* {f'`{field.group(1)}`' if field.group(1) else 'returns'}: {_inline(field.group(2))}"
                )
            elif version:
                out.append(f"*New in version {version.group(1)}.*")
            else:
                out.append(_inline(item))
        out.append("")
    out.append(END)
    return "\n".join(out)


def rewrite(markdown: str) -> str:
    """``markdown`` with every hook's generated block rendered afresh from the specs."""
    for name, (signature, docstring) in hook_specs().items():
        begin = BEGIN.format(name=name)
        start = markdown.find(begin)
        if start < 0:
            raise SystemExit(f"{HOOKS_MD}: the section of {name} needs a line {begin!r}")
        end = markdown.index(END, start) + len(END)
        markdown = markdown[:start] + render(name, signature, docstring) + markdown[end:]
    return markdown


def main() -> int:
    current = HOOKS_MD.read_text(encoding="utf-8")
    fresh = rewrite(current)
    if fresh != current:
        HOOKS_MD.write_text(fresh, encoding="utf-8")
        print(f"rewrote {HOOKS_MD}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
