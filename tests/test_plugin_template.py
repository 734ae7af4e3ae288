"""``toolkernel plugin new`` writes distributions that install and pass their own tests.

Every kind is generated into a temporary directory, installed with the kernel (from this
checkout, not editable) into a fresh virtual environment, listed by ``toolkernel
plugins`` there, and its generated tests are run by that environment's pytest.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from toolkernel import ConfigError
from toolkernel._scaffold import KINDS, new_plugin
from toolkernel.cli import main

ROOT = Path(__file__).resolve().parents[1]


def _uv() -> str | None:
    bundled = ROOT / ".tools" / "bin" / "uv"
    return str(bundled) if bundled.exists() else shutil.which("uv")


def _run(args: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOOLKERNEL_", "VIRTUAL_ENV", "PYTEST_"))}
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Path]]:
    """Every kind generated and installed, with the kernel, into one fresh virtual environment."""
    root = tmp_path_factory.mktemp("generated")
    plugins = {
        kind: new_plugin(f"demo-{kind}", kind, root / f"toolkernel-demo-{kind}")[0].parent for kind in KINDS
    }
    venv = root / "venv"
    python = venv / "bin" / "python"
    uv = _uv()
    if uv is not None:
        created = _run([uv, "venv", "-q", "--python", sys.executable, str(venv)], root, 120)
        install = [uv, "pip", "install", "-q", "--python", str(python)]
    else:  # pragma: no cover - CI has uv from dev.py setup
        created = _run([sys.executable, "-m", "venv", str(venv)], root, 300)
        install = [str(python), "-m", "pip", "install", "-q"]
    assert created.returncode == 0, created.stderr
    packages = [f"{ROOT / 'kernel'}[test]", *(str(path) for path in plugins.values())]
    installed = _run([*install, *packages], root, 600)
    assert installed.returncode == 0, installed.stderr[-4000:]
    return venv, plugins


@pytest.mark.timeout(900)
def test_every_kind_is_listed_by_toolkernel_plugins(generated):
    venv, plugins = generated
    done = _run([str(venv / "bin" / "toolkernel"), "plugins"], venv.parent, 120)
    assert done.returncode == 0, done.stderr
    for kind in plugins:
        assert f"toolkernel-demo-{kind} [toolkernel-demo-{kind} 0.1.0] (entry point, loaded)" in done.stdout
    # The templates ship inside the installed kernel, not only in this checkout.
    probe = venv.parent / "probe"
    done = _run(
        [str(venv / "bin" / "toolkernel"), "plugin", "new", "probe", "--kind", "store", "--dir", str(probe)],
        venv.parent,
        120,
    )
    assert done.returncode == 0, done.stderr
    assert (probe / "src" / "toolkernel_probe" / "store.py").is_file()


@pytest.mark.timeout(900)
@pytest.mark.parametrize("kind", KINDS)
def test_generated_plugin_passes_its_own_tests(generated, kind):
    venv, plugins = generated
    done = _run(
        [str(venv / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider"], plugins[kind], 600
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout, done.stdout[-2000:]
    assert "skipped" not in done.stdout, done.stdout[-2000:]


@pytest.mark.timeout(600)
def test_generated_code_is_lint_and_type_clean(tmp_path):
    for kind in KINDS:
        new_plugin(f"lint-{kind}", kind, tmp_path / kind)
    done = _run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], tmp_path, 120)
    assert done.returncode == 0, done.stdout
    done = _run([sys.executable, "-m", "ruff", "format", "--check", "--no-cache", "."], tmp_path, 120)
    assert done.returncode == 0, done.stdout
    # mypy --strict on every package: registering a typed factory must type-check as written.
    packages = [arg for kind in KINDS for arg in ("-p", f"toolkernel_lint_{kind}")]
    env_path = os.pathsep.join(str(tmp_path / kind / "src") for kind in KINDS)
    mypy = [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / ".mypy"), *packages]
    done = subprocess.run(
        mypy,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=500,
        env={**os.environ, "MYPYPATH": env_path},
    )
    assert done.returncode == 0, done.stdout


def test_the_command_writes_a_store_plugin(tmp_path, capsys):
    assert main(["plugin", "new", "lancedb", "--kind", "store", "--dir", str(tmp_path / "out")]) == 0
    written = capsys.readouterr().out.split()
    assert sorted(Path(p).relative_to(tmp_path / "out").as_posix() for p in written) == [
        ".gitignore",
        "README.md",
        "pyproject.toml",
        "src/toolkernel_lancedb/__init__.py",
        "src/toolkernel_lancedb/plugin.py",
        "src/toolkernel_lancedb/store.py",
        "tests/test_lancedb_store.py",
    ]
    pyproject = (tmp_path / "out" / "pyproject.toml").read_text()
    assert '[project.entry-points.toolkernel]\ntoolkernel-lancedb = "toolkernel_lancedb.plugin"' in pyproject
    assert "{{" not in "".join(Path(p).read_text() for p in written)


@pytest.mark.parametrize(
    ("name", "kind", "message"),
    [
        ("LanceDB", "store", "plugin name 'LanceDB' is not valid"),
        ("my_store", "store", "plugin name 'my_store' is not valid"),
        (
            "lancedb",
            "database",
            "--kind 'database' is not one of store, embedder, reranker, transport, tools",
        ),
    ],
)
def test_bad_names_and_kinds_are_refused(tmp_path, name, kind, message):
    with pytest.raises(ConfigError, match=message):
        new_plugin(name, kind, tmp_path / "x")


def test_a_non_empty_directory_is_never_overwritten(tmp_path, capsys):
    (tmp_path / "keep.txt").write_text("mine")
    assert main(["plugin", "new", "lancedb", "--kind", "store", "--dir", str(tmp_path)]) == 2
    assert "already exists and is not an empty directory" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]
