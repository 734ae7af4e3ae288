"""Set up and run toolkernel from a fresh clone with nothing but Python 3.11 and pip.

    python dev.py demo    # set up, index docs/ as a knowledge base, serve it, ask it a question over MCP
    python dev.py test    # set up, then lint, type-check and run every test (what CI runs)
    python dev.py bench   # set up, then run the side-by-side benchmarks in tests/benchmarks
    python dev.py install 'toolkernel-rag[test]' --into VENV
                          # one distribution from this checkout into a virtual environment

Set-up is idempotent: a private uv in .tools/, the locked workspace in .venv/ (every
package, every plugin's extras), and the npm peers the tests talk to in tests/node/.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import venv
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
TOOLS = ROOT / ".tools"
VENV = ROOT / ".venv"
NODE_DIR = ROOT / "tests" / "node"
UV_VERSION = "0.13.9"
BIN = "Scripts" if os.name == "nt" else "bin"


def run(*cmd: str | Path, cwd: Path = ROOT, env: dict[str, str] | None = None) -> None:
    """Run a command, echoing it; exit with its code if it fails."""
    print("+", " ".join(str(c) for c in cmd), flush=True)
    done = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env)
    if done.returncode != 0:
        sys.exit(done.returncode)


def uv() -> Path:
    """A pinned uv in .tools/, installed with pip on first use."""
    exe = TOOLS / BIN / "uv"
    if not exe.exists():
        venv.create(TOOLS, with_pip=True)
        run(TOOLS / BIN / "python", "-m", "pip", "install", "--quiet", f"uv=={UV_VERSION}")
    return exe


def setup(*groups: str, npm: bool = True) -> None:
    """Install the locked workspace into .venv and (for tests) the npm peers into tests/node."""
    args = ["sync", "--all-packages", "--all-extras", "--locked"]
    for group in groups:
        args += ["--group", group]
    run(uv(), *args, env={**os.environ, "UV_PROJECT_ENVIRONMENT": str(VENV)})
    if not npm:
        return
    if shutil.which("npm") is None:
        sys.exit("npm is needed for the MCP peers the tests use (Node 20+): apt-get install nodejs npm")
    stamp = NODE_DIR / "node_modules" / ".package-lock.json"
    lock = NODE_DIR / "package-lock.json"
    if not stamp.exists() or stamp.stat().st_mtime < lock.stat().st_mtime:
        run("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error", cwd=NODE_DIR)


def py(*args: str | Path) -> list[str | Path]:
    """A command line for the workspace interpreter."""
    return [VENV / BIN / "python", *args]


def packages() -> list[str]:
    """Every import package in the workspace: the kernel and each plugin's src/<pkg>."""
    found = ["toolkernel"]
    for src in sorted([*ROOT.glob("plugins/*/src/*"), *ROOT.glob("contrib/*/src/*")]):
        if (src / "__init__.py").exists():
            found.append(src.name)
    return found


DEMO_QUESTION = "How do I add a vector store plugin?"


def demo(args: list[str]) -> None:
    """The main job on the embedded default: ingest docs/ into a knowledge base, serve it over
    stdio, and ask it a question through an MCP client, printing the top passages and sources.

    A rerun re-embeds only the documents that changed. ``python dev.py demo "a question"``
    asks something else.
    """
    import json

    setup(npm=False)
    toolkernel = VENV / BIN / "toolkernel"
    kb = TOOLS / "demo-kb"
    run(toolkernel, "kb", "ingest", "docs", "--kb", kb)
    question = " ".join(args) or DEMO_QUESTION
    print(f"\nQ: {question}\n", flush=True)
    server = f"{toolkernel} kb serve --kb {kb}"
    query = json.dumps({"query": question, "top_k": 3})
    run(toolkernel, "call", server, "search", "--args", query, "--timeout", "300")


def test(pytest_args: list[str]) -> None:
    """Lint, type-check and run the whole test suite."""
    setup()
    started = time.monotonic()
    run(*py("-m", "ruff", "check", "."))
    mypy = py("-m", "mypy")
    for package in packages():
        mypy += ["-p", package]
    run(*mypy)
    run(*py("-m", "pytest", *pytest_args))
    print(f"dev.py test: all checks passed in {time.monotonic() - started:.0f}s", flush=True)


def bench(args: list[str]) -> None:
    """Run every benchmark script (they print tables and write tests/benchmarks/results/)."""
    setup("bench")
    scripts = args or [str(p.relative_to(ROOT)) for p in sorted((ROOT / "tests" / "benchmarks").glob("*.py"))]
    for script in scripts:
        run(*py(script))


def wheels(out: Path) -> dict[str, Path]:
    """Build every workspace distribution as a wheel into ``out``; name -> wheel."""
    run(uv(), "build", "--all-packages", "--wheel", "--quiet", "--out-dir", out)
    return {_normal(wheel.name.split("-")[0]): wheel for wheel in out.glob("*.whl")}


def _normal(name: str) -> str:
    import re

    return re.sub(r"[-_.]+", "-", name).lower()


def _workspace_closure(target: str, extras: set[str], built: dict[str, Path]) -> list[str]:
    """The wheels ``target[extras]`` needs from this workspace: itself and the workspace
    distributions it requires, read from each wheel's metadata (extras and all)."""
    import re
    import zipfile

    wanted: dict[str, set[str]] = {}
    todo = [(target, extras)]
    while todo:
        name, want = todo.pop()
        seen = wanted.get(name)
        if seen is not None and want <= seen:
            continue
        wanted[name] = (seen or set()) | want
        with zipfile.ZipFile(built[name]) as archive:
            meta = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
            lines = archive.read(meta).decode().splitlines()
        for line in lines:
            if not line.startswith("Requires-Dist:"):
                continue
            requirement, _, marker = line.removeprefix("Requires-Dist:").partition(";")
            found = re.match(r"\s*([A-Za-z0-9._-]+)\s*(?:\[([^\]]*)\])?", requirement)
            if found is None or _normal(found.group(1)) not in built:
                continue
            extra = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", marker)
            if extra is not None and _normal(extra.group(1)) not in {_normal(e) for e in wanted[name]}:
                continue
            needed = {e.strip() for e in (found.group(2) or "").split(",") if e.strip()}
            todo.append((_normal(found.group(1)), needed))
    return [f"{built[name]}[{','.join(sorted(e))}]" if e else str(built[name]) for name, e in wanted.items()]


def install(args: list[str]) -> None:
    """Install one distribution of this checkout (``toolkernel-rag``, ``'toolkernel-http[test]'``)
    into the virtual environment ``--into VENV`` (made if missing).

    Every workspace distribution is built as a wheel (into a temporary directory of this
    run's own, so several installs may run at once); the target and the
    workspace distributions it depends on are installed from there (never from the package
    registry, whatever it holds under those names), everything else from the registry at
    the versions uv.lock pins (``--unpinned``: the newest that fit instead).
    """
    import argparse
    import re
    import tempfile

    parser = argparse.ArgumentParser(prog="dev.py install")
    parser.add_argument("distribution", help="e.g. toolkernel-rag or 'toolkernel-http[test]'")
    parser.add_argument("--into", required=True, type=Path, help="the virtual environment (made if missing)")
    parser.add_argument("--unpinned", action="store_true", help="newest dependencies, not uv.lock's pins")
    opts = parser.parse_args(args)
    found = re.fullmatch(r"\s*([A-Za-z0-9._-]+)\s*(?:\[([^\]]*)\])?\s*", opts.distribution)
    with tempfile.TemporaryDirectory() as tmp:
        _install_from(opts, found, wheels(Path(tmp)), Path(tmp))


def _install_from(opts: Any, found: Any, built: dict[str, Path], tmp: Path) -> None:
    if found is None or _normal(found.group(1)) not in built:
        known = ", ".join(sorted(built))
        sys.exit(f"dev.py install: {opts.distribution!r} is not a distribution here; one of: {known}")
    extras = {e.strip() for e in (found.group(2) or "").split(",") if e.strip()}
    if not (opts.into / BIN / "python").exists():
        venv.create(opts.into, with_pip=True)
    command: list[str | Path] = [uv(), "pip", "install", "--python", opts.into / BIN / "python"]
    command += _workspace_closure(_normal(found.group(1)), extras, built)
    if not opts.unpinned:
        pins = tmp / "constraints.txt"
        export = [uv(), "export", "--frozen", "--all-packages", "--all-extras", "--no-hashes"]
        export += ["--no-emit-workspace", "--quiet", "--output-file", pins]
        run(*export)
        command += ["--constraint", pins]
    run(*command)


def main() -> None:
    command, rest = (sys.argv[1], sys.argv[2:]) if len(sys.argv) > 1 else ("", [])
    if command == "demo":
        demo(rest)
    elif command == "test":
        test(rest)
    elif command == "bench":
        bench(rest)
    elif command == "setup":
        setup()
    elif command == "install":
        install(rest)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
