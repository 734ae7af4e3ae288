"""The stdio server answers a first request before it imports the ``mcp`` SDK, exactly as the SDK would.

Every case runs ``python -m toolkernel serve`` twice as a real subprocess with the same
input, once with the early answer (the default) and once with
``TOOLKERNEL_STDIO_EARLY_INITIALIZE=0`` (every frame through the SDK, as before), and
compares the two transcripts byte for byte. For first frames the early path answers
(``initialize``, and ``server/discover`` of the 2026-07-28 era), the SDK's answer is also
compared with what :func:`toolkernel._handshake.early_answer` makes in-process; for the
others, that it declines them (they take the SDK's path).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from toolkernel._app import ServingAppImpl
from toolkernel._builtin._stdio_server import EARLY_INITIALIZE_ENV
from toolkernel._handshake import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION
from toolkernel._targets import load_server

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 120
MISMATCH = "answered before the SDK loaded"

# Every field the answer carries, with what JSON encoders disagree on: non-ASCII, astral
# characters, U+2028, control characters, quotes and backslashes, "/" and "</".
FULL_SERVER = textwrap.dedent(
    '''
    from toolkernel import MCPServer

    app = MCPServer(
        "früh-🚀",
        "2.0.0-β",
        title='Early "bird" \\\\ </script>',
        description="line\\nbreak\\ttab\\u2028sep\\u0001\\u001f\\u007f é",
        instructions="Use echo.\\n\\u0000 zero, 中文, 𝄞, https://x.test/a?b=c&d",
        website_url="https://example.test/früh",
    )


    @app.tool
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text
    '''
)

# A title that reads differently the second time: the SDK's answer then differs from the early one.
FICKLE_SERVER = textwrap.dedent(
    """
    from toolkernel import MCPServer


    class Fickle(MCPServer):
        reads = 0

        @property
        def title(self):
            Fickle.reads += 1
            return f"read {Fickle.reads}"

        @title.setter
        def title(self, value):
            pass


    app = Fickle("fickle", "1.0.0")
    """
)

# Importing `mcp` waits until the test creates the gate file: an answer that arrives
# meanwhile was made without the SDK.
GATED_SERVER = textwrap.dedent(
    '''
    import os
    import sys
    import time

    from toolkernel import MCPServer

    GATE = os.environ["GATE_FILE"]


    class WaitForGate:
        def find_spec(self, name, path=None, target=None):
            if name == "mcp":
                sys.meta_path.remove(self)
                deadline = time.monotonic() + 60
                while not os.path.exists(GATE) and time.monotonic() < deadline:
                    time.sleep(0.02)
            return None


    sys.meta_path.insert(0, WaitForGate())
    app = MCPServer("gated", "1.0.0")


    @app.tool
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text
    '''
)


def _frame(message: object) -> bytes:
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def _initialize(
    version: object = "2025-06-18", request_id: object = 0, **params: object
) -> dict[str, object]:
    body: dict[str, object] = {
        "protocolVersion": version,
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"},
    }
    body.update(params)
    return {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": body}


INITIALIZED = _frame({"jsonrpc": "2.0", "method": "notifications/initialized"})
TOOLS_LIST = _frame({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
PING = _frame({"jsonrpc": "2.0", "id": 2, "method": "ping"})
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def _discover(request_id: object = 1, **meta: object) -> dict[str, object]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "server/discover",
        "params": {"_meta": {**ENVELOPE, **meta}},
    }


MODERN_TOOLS_LIST = _frame({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": ENVELOPE}})
MODERN_PING = _frame({"jsonrpc": "2.0", "id": 3, "method": "ping", "params": {"_meta": ENVELOPE}})
RICH_CAPABILITIES = {
    "roots": {"listChanged": True},
    "sampling": {"context": {}, "tools": {}},
    "elicitation": {"form": {}, "url": {}},
    "experimental": {"x": {"y": [1, 2.5, None]}},
    "extensions": {"io.modelcontextprotocol/tasks": {}},
}


@dataclass(frozen=True)
class Case:
    name: str
    lines: tuple[bytes, ...]
    early: bool  # whether the first frame is answered before the SDK loads

    def __str__(self) -> str:
        return self.name


def _session(first: bytes, early: bool, name: str) -> Case:
    """``first``, then the rest of a handshake and two requests, so state after the answer is compared too."""
    return Case(name, (first, INITIALIZED, TOOLS_LIST, PING), early)


CASES = [
    *(_session(_frame(_initialize(v)), True, f"version {v}") for v in HANDSHAKE_PROTOCOL_VERSIONS),
    _session(_frame(_initialize("2026-07-28")), True, "modern version asked through initialize"),
    _session(_frame(_initialize("1999-01-01")), True, "unknown version"),
    _session(_frame(_initialize("")), True, "empty version"),
    _session(_frame(_initialize(request_id="é-id")), True, "string id"),
    _session(_frame(_initialize(request_id=-(2**63))), True, "smallest 64-bit id"),
    _session(_frame(_initialize(request_id=2**70)), False, "id beyond 64 bits"),
    _session(_frame(_initialize(capabilities=RICH_CAPABILITIES)), True, "every client capability"),
    _session(
        _frame(
            _initialize(
                clientInfo={
                    "name": "c",
                    "version": "1",
                    "title": "T",
                    "description": "d",
                    "websiteUrl": "https://c.test",
                }
            )
        ),
        True,
        "full clientInfo",
    ),
    _session(
        b'  {"jsonrpc":"2.0","id":7,"method":"initialize","params":'
        + json.dumps(_initialize()["params"]).encode()
        + b"}  \r\n",
        True,
        "spaces and CRLF",
    ),
    Case("blank lines first", (b"\n", b"   \n", _frame(_initialize()), TOOLS_LIST), True),
    Case("no newline at the end of input", (_frame(_initialize())[:-1],), True),
    Case("initialize twice", (_frame(_initialize()), INITIALIZED, _frame(_initialize(request_id=5))), True),
    Case(
        "same id reused after the answer",
        (_frame(_initialize()), INITIALIZED, _frame({"jsonrpc": "2.0", "id": 0, "method": "ping"})),
        True,
    ),
    # declined: these take the SDK's path
    _session(_frame(_initialize(_meta=ENVELOPE)), False, "initialize carrying the 2026 envelope"),
    _session(_frame(_initialize(capabilities={"roots": 5})), False, "capability of the wrong type"),
    _session(
        _frame(_initialize(capabilities={"roots": {"listChanged": None}})), False, "null capability field"
    ),
    _session(_frame(_initialize(capabilities={"tasks": {}})), False, "tasks capability"),
    _session(_frame(_initialize(capabilities={"made-up": {}})), False, "unknown capability"),
    _session(_frame(_initialize(clientInfo={"name": "x"})), False, "clientInfo without version"),
    _session(
        _frame(_initialize(clientInfo={"name": 1, "version": "0"})), False, "clientInfo name not a string"
    ),
    _session(_frame(_initialize(version=20250618)), False, "version not a string"),
    _session(_frame({"jsonrpc": "2.0", "id": 0, "method": "initialize"}), False, "initialize without params"),
    _session(_frame({**_initialize(), "extra": 1}), False, "extra top-level member"),
    _session(_frame({**_initialize(), "jsonrpc": "1.0"}), False, "wrong jsonrpc version"),
    _session(_frame(_initialize(request_id=1.0)), False, "fractional id"),
    _session(_frame(_initialize(request_id=None)), False, "null id"),
    _session(_frame(_initialize(request_id=True)), False, "boolean id"),
    _session(b"\xef\xbb\xbf" + _frame(_initialize()), False, "UTF-8 byte order mark"),
    _session(_frame(_initialize())[:-1].replace(b'"test"', b'"te\xffst"') + b"\n", False, "invalid UTF-8"),
    _session(
        _frame(_initialize())[:-1].replace(b'"test"', b'"\\ud800"') + b"\n", False, "escaped lone surrogate"
    ),
    _session(_frame(_initialize())[:-1].replace(b'"id":0', b'"id":0,"id":1') + b"\n", False, "duplicate key"),
    _session(_frame(_initialize(capabilities={"experimental": {"x": {"n": float("nan")}}})), False, "NaN"),
    _session(b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{\n', False, "truncated JSON"),
    _session(b"not json\n", False, "not JSON"),
    _session(_frame([_initialize()]), False, "batch"),
    _session(
        _frame({"jsonrpc": "2.0", "method": "initialize", "params": _initialize()["params"]}),
        False,
        "as a notification",
    ),
    Case("tools/list before initialize", (TOOLS_LIST, _frame(_initialize()), INITIALIZED, PING), False),
    Case("notification first", (INITIALIZED, _frame(_initialize()), TOOLS_LIST), False),
    # the 2026-07-28 era: server/discover first
    Case("discover", (_frame(_discover()), MODERN_TOOLS_LIST, MODERN_PING), True),
    Case("discover, string id", (_frame(_discover("d")), MODERN_TOOLS_LIST), True),
    Case(
        "discover with every capability and full clientInfo",
        (
            _frame(
                _discover(
                    **{
                        "io.modelcontextprotocol/clientCapabilities": RICH_CAPABILITIES,
                        "io.modelcontextprotocol/clientInfo": {"name": "c", "version": "1", "title": "T"},
                    }
                )
            ),
            MODERN_TOOLS_LIST,
        ),
        True,
    ),
    Case(
        "discover without clientInfo",
        (
            _frame(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "server/discover",
                    "params": {"_meta": {k: v for k, v in ENVELOPE.items() if not k.endswith("clientInfo")}},
                }
            ),
        ),
        True,
    ),
    Case("discover, then a handshake", (_frame(_discover()), _frame(_initialize()), MODERN_PING), True),
    Case(
        "discover at an unknown version",
        (_frame(_discover(**{"io.modelcontextprotocol/protocolVersion": "2099-01-01"})), MODERN_PING),
        False,
    ),
    Case(
        "discover without clientCapabilities",
        (
            _frame(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "server/discover",
                    "params": {
                        "_meta": {k: v for k, v in ENVELOPE.items() if not k.endswith("Capabilities")}
                    },
                }
            ),
            MODERN_PING,
        ),
        False,
    ),
    Case(
        "discover with a log level",
        (_frame(_discover(**{"io.modelcontextprotocol/logLevel": "info"})),),
        False,
    ),
    Case(
        "discover without an envelope",
        (_frame({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}}), MODERN_PING),
        False,
    ),
    Case("tools/list first, 2026-07-28", (MODERN_TOOLS_LIST, _frame(_discover())), False),
    Case("empty input", (), False),
]


def _target(tmp_path: Path, source: str) -> str:
    path = tmp_path / "server.py"
    path.write_text(source)
    return f"{path}:app"


def _serve(
    target: str, lines: tuple[bytes, ...], *, early: bool, env: dict[str, str] | None = None
) -> tuple[bytes, str]:
    """Stdout and stderr of ``toolkernel serve target`` fed ``lines``, then end of input."""
    done = subprocess.run(
        [sys.executable, "-m", "toolkernel", "serve", target],
        input=b"".join(lines),
        capture_output=True,
        cwd=ROOT,
        env={**os.environ, **(env or {}), EARLY_INITIALIZE_ENV: "1" if early else "0"},
        timeout=TIMEOUT,
        check=False,
    )
    stderr = done.stderr.decode(errors="replace")
    assert done.returncode == 0, stderr[-3000:]
    return done.stdout, stderr


def _both(target: str, lines: tuple[bytes, ...]) -> tuple[tuple[bytes, str], tuple[bytes, str]]:
    """The early and the SDK-only run, side by side."""
    with ThreadPoolExecutor(2) as pool:
        early = pool.submit(_serve, target, lines, early=True)
        full = pool.submit(_serve, target, lines, early=False)
        return early.result(), full.result()


@pytest.fixture(scope="module")
def full_target(tmp_path_factory: pytest.TempPathFactory) -> str:
    return _target(tmp_path_factory.mktemp("full"), FULL_SERVER)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_early_answer_is_the_sdks_byte_for_byte(case: Case, full_target: str) -> None:
    first = next((line for line in case.lines if line.strip()), None)
    early = _early(full_target, first) if first is not None else None
    assert (early is not None) == case.early
    (early_out, early_err), (full_out, _) = _both(full_target, case.lines)
    assert early_out == full_out
    assert MISMATCH not in early_err
    if early is not None:
        assert full_out.split(b"\n", 1)[0] == early[1]


def _early(target: str, frame: bytes) -> tuple[int | str, bytes] | None:
    server = load_server(target)
    return ServingAppImpl(server, server.kernel).early_answer(frame)


@pytest.mark.parametrize("target", ["docs/examples/echo_server.py:app", "tests/conformance/server.py:app"])
@pytest.mark.parametrize("version", ["2025-06-18", "2026-07-28", "discover"])
def test_early_answer_matches_for_other_servers(target: str, version: str) -> None:
    """The echo example, and the conformance server with tools running as tasks and skills: the
    handshake-era answer carries no ``extensions``, ``server/discover``'s carries both, in the
    SDK's answer as in the early one."""
    if version == "discover":
        lines = (_frame(_discover()), MODERN_TOOLS_LIST)
    else:
        lines = (_frame(_initialize(version)), INITIALIZED, TOOLS_LIST)
    early = _early(target, lines[0])
    assert early is not None
    (early_out, early_err), (full_out, _) = _both(target, lines)
    assert early_out == full_out
    assert full_out.split(b"\n", 1)[0] == early[1]
    result = json.loads(early[1])["result"]
    if version == "discover":
        extensions = result["capabilities"].get("extensions", {})
        assert sorted(extensions) == (
            [] if "echo" in target else ["io.modelcontextprotocol/skills", "io.modelcontextprotocol/tasks"]
        )
    else:
        assert result["protocolVersion"] == (
            version if version in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION
        )
    assert MISMATCH not in early_err


def test_answer_arrives_before_the_sdk_is_imported(tmp_path: Path) -> None:
    """With ``import mcp`` held until the test says so, the initialize answer still arrives."""
    gate = tmp_path / "gate"
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolkernel", "serve", _target(tmp_path, GATED_SERVER)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, "GATE_FILE": str(gate)},
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    assert proc.stderr is not None
    try:
        proc.stdin.write(_frame(_initialize()))
        proc.stdin.flush()
        answer = json.loads(proc.stdout.readline())  # the gate waits 60 s at most, then the SDK loads
        assert not gate.exists()
        assert answer["result"]["serverInfo"] == {"name": "gated", "version": "1.0.0"}
        gate.touch()
        proc.stdin.write(INITIALIZED + TOOLS_LIST)
        proc.stdin.close()
        tools = json.loads(proc.stdout.readline())
        assert [t["name"] for t in tools["result"]["tools"]] == ["echo"]
        assert proc.wait(timeout=TIMEOUT) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        proc.stdout.close()
        proc.stderr.close()


def test_answer_differing_from_the_sdks_is_logged_and_sent_once(tmp_path: Path) -> None:
    """The SDK's answer to the replayed request is never sent; if it differs from the early one,
    an error says so."""
    out, err = _serve(
        _target(tmp_path, FICKLE_SERVER), (_frame(_initialize()), INITIALIZED, PING), early=True
    )
    answers = [json.loads(line) for line in out.splitlines()]
    assert [a["id"] for a in answers] == [0, 2]
    sent = answers[0]["result"]["serverInfo"]["title"]
    assert MISMATCH in err
    assert sent in err
    assert err.count("read ") >= 2  # the SDK's title, read later, is in the error too


def test_handshake_versions_are_the_sdks() -> None:
    from mcp_types import version

    assert HANDSHAKE_PROTOCOL_VERSIONS == version.HANDSHAKE_PROTOCOL_VERSIONS
    assert LATEST_HANDSHAKE_VERSION == version.LATEST_HANDSHAKE_VERSION


def test_making_the_answer_imports_no_sdk() -> None:
    code = (
        "import sys, toolkernel\n"
        "from toolkernel._targets import load_server\n"
        "from toolkernel._app import ServingAppImpl\n"
        "server = load_server('docs/examples/echo_server.py:app')\n"
        "app = ServingAppImpl(server, server.kernel)\n"
        f"answer = app.early_answer({_frame(_initialize())!r})\n"
        "print(answer is not None, sorted(m for m in ('mcp', 'mcp_types') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=TIMEOUT, check=True
    )
    assert done.stdout.split() == ["True", "[]"]
