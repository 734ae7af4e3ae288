"""docs/client.md's first example runs as written and prints what its comments say."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from .conftest import ROOT

DOC = ROOT / "docs" / "client.md"


@pytest.mark.timeout(120)
def test_the_first_example_runs() -> None:
    code = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)[0]
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=100, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["['echo_echo']", "hello"]
