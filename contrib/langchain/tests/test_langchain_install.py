"""``pip install ./contrib/langchain`` resolves beside ``mcp`` 2.x (langchain-mcp-adapters pins mcp<2).

uv resolves the distribution as a user would install it, outside this workspace: from
its directory, with the kernel from ``./kernel``, ``mcp`` pinned to the 2.x the kernel
needs, and LangGraph for the prebuilt agent, against the package index.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _uv() -> str:
    for candidate in (os.environ.get("TOOLKERNEL_UV"), str(ROOT / ".tools/bin/uv"), shutil.which("uv")):
        if candidate and Path(candidate).exists():
            return candidate
    pytest.fail("uv is needed to resolve the install (python dev.py test sets it up)")


@pytest.mark.timeout(180)
def test_installs_beside_mcp_2(tmp_path: Path) -> None:
    wanted = tmp_path / "requirements.in"
    wanted.write_text("mcp==2.3.0\n./kernel\n./contrib/langchain\nlanggraph>=1.0\n")
    run = subprocess.run(
        [_uv(), "pip", "compile", "--quiet", "--python-version", "3.11", str(wanted)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=150,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    pins = {line.split("==")[0]: line.split("==")[1] for line in run.stdout.splitlines() if "==" in line}
    assert pins["mcp"] == "2.3.0"
    assert pins["langchain-core"].startswith("1.")
    assert pins["langgraph"].startswith("1.")
