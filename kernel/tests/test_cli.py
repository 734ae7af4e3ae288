"""The `toolkernel` command line, run as real subprocesses (started side by side to keep it quick)
and, for the many bad-argument forms, through `cli.main()` in-process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from toolkernel.cli import main

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 90
ECHO_TARGET = "docs/examples/echo_server.py:app"
ECHO_COMMAND = f"{sys.executable} -m toolkernel serve {ROOT / ECHO_TARGET}"

COMMANDS: dict[str, tuple[list[str], dict[str, str]]] = {
    "version": (["version"], {}),
    "plugins": (["plugins", "--json"], {}),
    "call_ok": (["call", ECHO_COMMAND, "echo", "--args", '{"text": "héllo"}'], {}),
    "call_error": (["call", ECHO_COMMAND, "echo", "--args", '{"text": 5}'], {}),
    "inspect": (["inspect", ECHO_COMMAND, "--json"], {}),
    "bad_target": (["serve", "no-colon-here"], {}),
    "http_missing": (
        ["serve", ECHO_TARGET, "--transport", "http"],
        {"TOOLKERNEL_DISABLE_PLUGINS": "toolkernel-http"},
    ),
}


@pytest.fixture(scope="module")
def runs() -> dict[str, subprocess.CompletedProcess[str]]:
    """Every command in COMMANDS, run once, all at the same time."""
    procs = {}
    for name, (args, extra_env) in COMMANDS.items():
        env = {**os.environ, "TOOLKERNEL_LOG_LEVEL": "WARNING", **extra_env}
        procs[name] = subprocess.Popen(
            [sys.executable, "-m", "toolkernel", *args],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )
    done = {}
    try:
        for name, proc in procs.items():
            out, err = proc.communicate(timeout=TIMEOUT)
            done[name] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    finally:
        for proc in procs.values():
            if proc.returncode is None:
                proc.kill()
                proc.wait(timeout=10)
    return done


def test_version(runs):
    run = runs["version"]
    assert run.returncode == 0, run.stderr
    python = sys.version.split()[0]
    assert run.stdout == f"toolkernel {version('toolkernel')} (mcp {version('mcp')}, python {python})\n"


def test_plugins_json_lists_builtins_with_hooks(runs):
    run = runs["plugins"]
    assert run.returncode == 0, run.stderr
    plugins = {p["name"]: p for p in json.loads(run.stdout)}
    assert plugins["stdio"] == {
        "name": "stdio",
        "origin": "built-in",
        "module": "toolkernel._builtin.stdio",
        "distribution": None,
        "version": None,
        "hooks": ["register_client_transports", "register_server_transports"],
        "status": "loaded",
        "error": None,
    }
    assert plugins["commands"]["hooks"] == ["register_commands"]
    assert plugins["commands"]["status"] == "loaded"
    assert list(plugins)[:2] == ["stdio", "commands"]


def test_plugins_text_in_process(capsys):
    assert main(["plugins"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:4] == [
        "stdio (built-in, loaded)",
        "    hooks: register_client_transports, register_server_transports",
        "commands (built-in, loaded)",
        "    hooks: register_commands",
    ]


def test_call_success_exits_0(runs):
    run = runs["call_ok"]
    assert run.returncode == 0, run.stderr
    assert run.stdout == "héllo\n"


def test_call_error_result_exits_1(runs):
    run = runs["call_error"]
    assert run.returncode == 1, run.stderr
    assert run.stdout == "Invalid input for tool 'echo': text: Input should be a valid string\n"


def test_inspect_json(runs):
    run = runs["inspect"]
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["server"]["name"] == "echo"
    assert report["server"]["version"] == "1.0.0"
    assert report["protocol_version"] == "2026-07-28"
    assert [t["name"] for t in report["tools"]] == ["echo"]
    assert report["tools"][0]["inputSchema"]["required"] == ["text"]
    assert report["resources"] == []
    assert report["prompts"] == []


def test_bad_target_exits_2_naming_it(runs):
    run = runs["bad_target"]
    assert run.returncode == 2
    assert run.stdout == ""
    assert run.stderr == (
        "toolkernel: error: TARGET 'no-colon-here' must look like path/file.py:attr or package.module:attr\n"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            "{text: 1}",
            "--args is not valid JSON: Expecting property name enclosed in double quotes at line 1 column 2",
        ),
        ("", "--args is not valid JSON: Expecting value at line 1 column 1"),
        ("[1, 2]", "--args must be a JSON object, got list"),
        ('"text"', "--args must be a JSON object, got str"),
    ],
)
def test_bad_args_exit_2_naming_the_problem(args, message, capsys):
    assert main(["call", ECHO_COMMAND, "echo", "--args", args]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"toolkernel: error: {message}\n"


def test_call_json_in_process(capsys):
    assert main(["call", ECHO_COMMAND, "echo", "--args", '{"text": "j"}', "--json", "--mode", "legacy"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["content"] == [{"type": "text", "text": "j"}]
    assert result["isError"] is False


def test_serve_http_without_the_plugin_names_the_package(runs):
    run = runs["http_missing"]
    assert run.returncode == 2
    assert run.stderr == (
        "toolkernel: error: --transport 'http' is not installed (pip install toolkernel-http); "
        "available: stdio\n"
    )


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (":app", "TARGET ':app' must look like path/file.py:attr or package.module:attr"),
        ("file.py:", "TARGET 'file.py:' must look like path/file.py:attr or package.module:attr"),
        ("nowhere/missing.py:app", "TARGET 'nowhere/missing.py:app': no such file 'nowhere/missing.py'"),
        (
            f"{ECHO_TARGET[:-4]}:nope",
            f"TARGET '{ECHO_TARGET[:-4]}:nope': 'docs/examples/echo_server.py' has no attribute 'nope'",
        ),
        ("toolkernel_no_such_module:app", "TARGET 'toolkernel_no_such_module:app': cannot import module"),
        ("os:sep", "TARGET 'os:sep' is a str, not a toolkernel.MCPServer"),
        ("json:dumps", "TARGET 'json:dumps': calling 'dumps' to make the server raised TypeError"),
    ],
)
def test_bad_target_forms_in_process(target, message, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("TOOLKERNEL_DISABLE_PLUGINS", "toolkernel-http")
    assert main(["serve", target]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"toolkernel: error: {message}")
    assert captured.err.count("\n") == 1


def test_target_whose_import_raises(tmp_path, capsys):
    broken = tmp_path / "broken_server.py"
    broken.write_text("raise RuntimeError('import-time failure')\n")
    assert main(["serve", f"{broken}:app"]) == 2
    assert capsys.readouterr().err == (
        f"toolkernel: error: TARGET '{broken}:app': importing '{broken}' raised "
        "RuntimeError: import-time failure\n"
    )


def test_unknown_command_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as info:
        main(["frobnicate"])
    assert info.value.code == 2
    assert "invalid choice: 'frobnicate'" in capsys.readouterr().err


LOOP_SERVER = '''
import asyncio

from toolkernel import MCPServer

app = MCPServer("loop")


@app.tool
async def loop_module() -> str:
    """The module of the event loop this server runs on."""
    return type(asyncio.get_running_loop()).__module__
'''


@pytest.mark.parametrize(
    ("choice", "module"), [("asyncio", "asyncio"), ("uvloop", "uvloop"), ("auto", "uvloop")]
)
def test_serve_loop_option_picks_the_event_loop(tmp_path, choice, module):
    (tmp_path / "loop_server.py").write_text(LOOP_SERVER)
    serve = f"{sys.executable} -m toolkernel serve {tmp_path / 'loop_server.py'}:app --loop {choice}"
    run = subprocess.run(
        [sys.executable, "-m", "toolkernel", "call", serve, "loop_module"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().startswith(module), run.stdout


def test_serve_loop_uvloop_when_missing_is_a_config_error(capsys, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec

    def without_uvloop(name: str, *args: object) -> object:
        return None if name == "uvloop" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", without_uvloop)
    assert main(["serve", ECHO_TARGET, "--loop", "uvloop"]) == 2
    assert "--loop uvloop: uvloop is not installed" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--header", "X-A: 1"], "--header applies to a URL server, not to a command line"),
        (["--env", "NO_EQUALS"], "--env 'NO_EQUALS': expected NAME=VALUE"),
        (["--env", "=value"], "--env '=value': expected NAME=VALUE"),
    ],
)
def test_bad_header_or_env_for_a_command_exits_2(extra, message, capsys):
    assert main(["call", ECHO_COMMAND, "echo", *extra]) == 2
    assert capsys.readouterr().err == f"toolkernel: error: {message}\n"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--env", "A=1"], "--env applies to a command-line server, not to a URL"),
        (["--header", "no colon"], "--header 'no colon': expected NAME:VALUE"),
    ],
)
def test_bad_header_or_env_for_a_url_exits_2(extra, message, capsys):
    assert main(["inspect", "http://127.0.0.1:9/mcp", *extra]) == 2
    assert capsys.readouterr().err == f"toolkernel: error: {message}\n"


ENV_SERVER = '''
import os

from toolkernel import MCPServer

app = MCPServer("env")


@app.tool
def read_env(name: str) -> str:
    """The value of environment variable ``name``."""
    return os.environ.get(name, "<unset>")
'''


def test_call_passes_env_to_a_command_line_server(tmp_path, capsys):
    (tmp_path / "env_server.py").write_text(ENV_SERVER)
    serve = f"{sys.executable} -m toolkernel serve {tmp_path / 'env_server.py'}:app"
    args = ["call", serve, "read_env", "--args", '{"name": "TK_CLI_VALUE"}', "--env", "TK_CLI_VALUE=a=b c"]
    assert main(args) == 0
    assert capsys.readouterr().out == "a=b c\n"


def test_call_treats_a_command_line_holding_a_url_as_a_command(tmp_path, capsys):
    # e.g. "toolkernel kb serve --kb X --home postgresql://..." is a stdio server, not a URL.
    (tmp_path / "env_server.py").write_text(ENV_SERVER)
    app = f"{tmp_path / 'env_server.py'}:app"
    serve = f"env TK_CLI_URL=postgresql://db/kb {sys.executable} -m toolkernel serve {app}"
    assert main(["call", serve, "read_env", "--args", '{"name": "TK_CLI_URL"}']) == 0
    assert capsys.readouterr().out == "postgresql://db/kb\n"


def _exit_code(argv: list[str]) -> int:
    """``main(argv)``'s exit status, whether it returned it or a usage error raised it."""
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        (["--log-level", "verbose", "version"], {}, "--log-level 'verbose': unknown level"),
        (["version"], {"TOOLKERNEL_LOG_LEVEL": "verbose"}, "TOOLKERNEL_LOG_LEVEL 'verbose': unknown level"),
        (["serve", ECHO_TARGET, "--transport", "http", "--port", "99999"], {}, "99999 is not a port number"),
        (
            ["serve", ECHO_TARGET, "--transport", "http", "--path", "mcp"],
            {},
            "serve: path: String should match",
        ),
        (["dev", ECHO_TARGET, "--port", "-1"], {}, "-1 is not a port number"),
        (["call", ECHO_COMMAND, "echo", "--timeout", "nan"], {}, "'nan' is not a positive, finite number"),
        (["inspect", ECHO_COMMAND, "--timeout", "-1"], {}, "'-1' is not a positive, finite number"),
        (
            ["plugin", "new", "ok", "--kind", "store", "--dir", "/proc/no/such"],
            {},
            "plugin new: cannot write",
        ),
        (["frobnicate"], {}, "invalid choice: 'frobnicate'"),
        (["serve"], {}, "serve: the following arguments are required: TARGET"),
    ],
    ids=[
        "log-level",
        "log-level-env",
        "port",
        "path",
        "dev-port",
        "timeout-nan",
        "timeout-negative",
        "unwritable-dir",
        "unknown-command",
        "missing-argument",
    ],
)
def test_user_mistakes_are_one_line_and_exit_2(argv, env, message, capsys, monkeypatch):
    """Each mistake a user can make outside `kb`: one `toolkernel: error:` line, no traceback, exit 2."""
    monkeypatch.chdir(ROOT)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    if "TOOLKERNEL_LOG_LEVEL" not in env:
        monkeypatch.delenv("TOOLKERNEL_LOG_LEVEL", raising=False)
    assert _exit_code(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("toolkernel: error: "), captured.err
    assert captured.err.count("\n") == 1, captured.err
    assert message in captured.err


def test_stdout_closed_early_is_one_line_not_a_traceback():
    """`toolkernel call … | head -c 1`: the reader leaves before the output is written."""
    text = "x" * 100_000  # more than a pipe holds, so the write meets the closed end
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "toolkernel",
            "call",
            ECHO_COMMAND,
            "echo",
            "--args",
            json.dumps({"text": text}),
        ],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    proc.stdout.close()  # as `head` does once it has what it wants
    _, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 2, err
    assert err == "toolkernel: error: stdout was closed before the output was written\n"
