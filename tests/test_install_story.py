"""One distribution from this checkout, installed alone into a fresh virtual environment with
the one documented command (``python3 dev.py install 'toolkernel-X[test]' --into VENV``),
passes that plugin's own tests there.

``pip install ./plugins/rag`` cannot do this: the plugin needs its workspace siblings
(``toolkernel``, ``toolkernel-qdrant``, ``toolkernel-local-embed[minilm]``) that no registry
holds. The three plugins install side by side, each into its own venv, and run a chosen part
of their tests (named in ``PLUGINS``) to keep this within CI's time: what the fresh
environment proves is that the plugin imports, registers and works with only what its
metadata declares.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PLUGINS = {
    "rag": ["plugins/rag/tests/test_rag_cli.py", "plugins/rag/tests/test_rag_rerank_weighted.py"],
    "http": ["plugins/http/tests/test_http_plumbing.py", "plugins/http/tests/test_http_bad_input.py"],
    "oauth": ["plugins/oauth/tests/test_oauth_validators.py", "plugins/oauth/tests/test_oauth_resource.py"],
}
"""Each plugin and the test files it runs in its own environment."""


@pytest.mark.timeout(1500)
def test_each_plugin_installs_alone_and_passes_its_tests(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    installs = {
        name: subprocess.Popen(
            [sys.executable, "dev.py", "install", f"toolkernel-{name}[test]", "--into", str(tmp_path / name)],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for name in PLUGINS
    }
    for name, proc in installs.items():
        out, _ = proc.communicate(timeout=900)
        assert proc.returncode == 0, f"installing toolkernel-{name}:\n{out[-4000:]}"
    for name, files in PLUGINS.items():
        python = tmp_path / name / ("Scripts" if os.name == "nt" else "bin") / "python"
        listed = subprocess.run(
            [str(python), "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True, timeout=120
        )
        installed = {line.split("==")[0].lower() for line in listed.stdout.splitlines()}
        assert f"toolkernel-{name}" in installed
        assert "toolkernel-chroma" not in installed  # only what this plugin needs
        run = subprocess.run(
            [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", *files],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert run.returncode == 0, f"toolkernel-{name}'s tests in its own venv:\n{run.stdout[-4000:]}"
        assert " passed" in run.stdout.splitlines()[-1]
        assert (
            f"{tmp_path / name}"
            in subprocess.run(
                [str(python), "-c", f"import toolkernel_{name}; print(toolkernel_{name}.__file__)"],
                capture_output=True,
                text=True,
                timeout=120,
            ).stdout
        )  # the installed wheel was tested, not the checkout's source
