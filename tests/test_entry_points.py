"""Plugins installed as their own distributions are found through the ``toolkernel`` entry points.

Three real distributions under tests/plugin_dists are built and installed into a
temporary directory with uv, then a fresh ``toolkernel`` process discovers them: the
good one is listed and its hooks run, the broken one is reported and skipped, the
disabled one is never imported.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

ROOT = Path(__file__).resolve().parents[1]
DISTS = ROOT / "tests" / "plugin_dists"
TIMEOUT = 120


def _uv() -> str:
    for candidate in (
        os.environ.get("TOOLKERNEL_UV"),
        str(ROOT / ".tools" / "bin" / "uv"),
        shutil.which("uv"),
    ):
        if candidate and Path(candidate).exists():
            return candidate
    pytest.fail("uv is needed to install the test plugin distributions (python dev.py test sets it up)")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding the three installed test distributions."""
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [
            _uv(),
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--python",
            sys.executable,
            "--target",
            str(target),
            *(str(DISTS / name) for name in ("good", "broken", "disabled")),
        ],
        check=True,
        timeout=TIMEOUT,
    )
    return target


def _env(site: Path, tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLKERNEL_")}
    env.update(
        PYTHONPATH=str(site),
        TOOLKERNEL_DISABLE_PLUGINS="toolkernel-testplugin-disabled",
        TK_TESTPLUGIN_MARKER=str(tmp_path / "disabled-imported"),
        TK_TESTPLUGIN_LOG=str(tmp_path / "events.jsonl"),
    )
    env.update(extra)
    return env


def _toolkernel(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolkernel", *args], env=env, capture_output=True, text=True, timeout=TIMEOUT
    )


def test_plugins_are_listed_with_origin_version_and_hooks(site: Path, tmp_path: Path) -> None:
    done = _toolkernel(_env(site, tmp_path), "plugins", "--json")
    assert done.returncode == 0, done.stderr
    plugins = {p["name"]: p for p in json.loads(done.stdout)}

    good = plugins["toolkernel-testplugin-good"]
    assert good["status"] == "loaded"
    assert good["origin"] == "entry point"
    assert good["distribution"] == "toolkernel-testplugin-good"
    assert good["version"] == "1.2.3"
    assert good["hooks"] == ["on_tool_output", "register_commands", "register_tools"]

    broken = plugins["toolkernel-testplugin-broken"]
    assert broken["status"] == "failed"
    assert "RuntimeError: this plugin is broken on purpose" in broken["error"]
    assert "toolkernel-testplugin-broken 1.2.3" in done.stderr

    assert plugins["toolkernel-testplugin-disabled"]["status"] == "disabled"
    assert not (tmp_path / "disabled-imported").exists()
    assert plugins["stdio"]["origin"] == "built-in"


def test_plugin_command_runs_and_disabled_command_is_absent(site: Path, tmp_path: Path) -> None:
    env = _env(site, tmp_path)
    done = _toolkernel(env, "hello", "world")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "hello world from a plugin"
    missing = _toolkernel(env, "disabled-cmd")
    assert missing.returncode == 2
    assert "invalid choice: 'disabled-cmd'" in missing.stderr


def test_enabling_the_disabled_plugin_loads_it(site: Path, tmp_path: Path) -> None:
    env = _env(site, tmp_path, TOOLKERNEL_DISABLE_PLUGINS="")
    done = _toolkernel(env, "disabled-cmd")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "disabled-imported").read_text() == "imported"


def test_load_only_list(site: Path, tmp_path: Path) -> None:
    env = _env(site, tmp_path, TOOLKERNEL_LOAD_PLUGINS="stdio,commands,toolkernel-testplugin-good")
    done = _toolkernel(env, "plugins", "--json")
    assert done.returncode == 0, done.stderr
    status = {p["name"]: p["status"] for p in json.loads(done.stdout)}
    assert status["toolkernel-testplugin-good"] == "loaded"
    assert status["toolkernel-testplugin-broken"] == "disabled"


def test_strict_mode_makes_a_broken_plugin_fatal(site: Path, tmp_path: Path) -> None:
    done = _toolkernel(_env(site, tmp_path, TOOLKERNEL_STRICT_PLUGINS="1"), "plugins")
    assert done.returncode == 2
    assert "toolkernel-testplugin-broken" in done.stderr
    assert "this plugin is broken on purpose" in done.stderr


@pytest.mark.anyio
async def test_plugin_tool_and_event_hook_run_in_a_served_server(site: Path, tmp_path: Path) -> None:
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "toolkernel", "serve", str(ROOT / "docs" / "examples" / "echo_server.py") + ":app"],
        env=_env(site, tmp_path),
    )
    with anyio.fail_after(TIMEOUT):
        async with Client(params, mode="legacy") as client:
            names = [t.name for t in (await client.list_tools()).tools]
            result = await client.call_tool("plugin_echo", {"text": "x"})
            await client.call_tool("echo", {"text": "y"})
    assert names == ["echo", "plugin_echo"]
    assert result.content[0].text == "plugin:x"
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert events == [{"tool": "plugin_echo", "output": "plugin:x"}, {"tool": "echo", "output": "y"}]


@pytest.fixture(scope="module")
def reader_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The third-party reader distribution, installed on its own."""
    target = tmp_path_factory.mktemp("reader-site")
    subprocess.run(
        [_uv(), "pip", "install", "--quiet", "--no-deps", "--python", sys.executable,
         "--target", str(target), str(DISTS / "reader")],
        check=True,
        timeout=TIMEOUT,
    )  # fmt: skip
    return target


@pytest.mark.timeout(300)
def test_a_reader_from_an_entry_point_is_used_by_kb_ingest(reader_site: Path, tmp_path: Path) -> None:
    import toolkernel
    from toolkernel_local_embed import plugin as local_embed
    from toolkernel_qdrant import plugin as qdrant
    from toolkernel_rag import KnowledgeBase
    from toolkernel_rag import plugin as rag

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "soup.recipe").write_text(
        "Title: Leek soup\n- 2 leeks\n- 1 potato\n1. Chop the leeks.\n2. Simmer for twenty minutes.\n",
        encoding="utf-8",
    )
    (docs / "bad.recipe").write_text("no title here\n", encoding="utf-8")
    (docs / "notes.md").write_text("# Notes\n\nBuy leeks.\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLKERNEL_")}
    env.update(PYTHONPATH=str(reader_site))
    where = tmp_path / "kb"
    done = subprocess.run(
        [sys.executable, "-m", "toolkernel", "kb", "ingest", str(docs), "--kb", str(where),
         "--embedder", "local/wordllama-256"],
        env=env, capture_output=True, text=True, timeout=TIMEOUT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["added"], summary["skipped"]) == (2, 1)
    assert f"skipped {docs / 'bad.recipe'}: ValueError: a recipe starts with a 'Title:' line" in done.stderr

    async def read_back() -> tuple[Any, str]:
        kernel = toolkernel.Kernel(load_entry_points=False, plugins=[rag, qdrant, local_embed])
        async with await KnowledgeBase.open(str(where), kernel=kernel) as kb:
            found = kb.document("docs/soup.recipe")
            assert found is not None
            hits = await kb.search("how long to simmer", mode="sparse", top_k=1)
            return found, hits[0].chunk.metadata["headers"]

    (row, text), headers = anyio.run(read_back)
    assert text.startswith("# Leek soup\n\n## Ingredients\n\n- 2 leeks")
    assert row.metadata["kind"] == "recipe"
    assert row.metadata["ingredients"] == 2
    assert headers == ["Leek soup", "Steps"]
