"""Set up and run toolkernel from a fresh clone with nothing but Python 3.11 and pip.

    python dev.py demo    # set up, index docs/ as a knowledge base, serve it, ask it a question over MCP
    python dev.py test    # set up, then lint, type-check and run every test (what CI runs)
    python dev.py bench   # set up, then run the side-by-side benchmarks in tests/benchmarks

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
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
