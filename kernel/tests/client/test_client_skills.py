"""Skills (SEP-2640) from a real server: FastMCP's skills directory provider, over stdio.

Listing reads nothing; loading reads ``SKILL.md`` and the skill's other files and checks
each against its listed size and digest. The server reads files from disk when asked,
so a file changed after the listing is a real mismatch the client must refuse. A
recording stdio proxy shows which requests reached the server.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from toolkernel.client import MCPClient
from toolkernel.errors import MCPClientError

from .conftest import ECHO_APP

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

PROXY = Path(__file__).resolve().parent / "recording_proxy.py"
SKILL_MD = (
    "---\nname: pdf-processing\ndescription: Extract, fill, and assemble PDF documents\n---\n"
    "\nUse FORMS.md.\n"
)
FORMS_MD = "Form fields.\n"
SERVER = """
import sys
from pathlib import Path

from fastmcp import FastMCP
from fastmcp.skills.provider import SkillsDirectoryProvider

app = FastMCP("skills")
# reload: files are read when asked for, so a file changed after listing is served changed.
app.add_provider(SkillsDirectoryProvider([Path(sys.argv[1])], reload=True))
app.run(show_banner=False)
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def skills_server(tmp_path: Path) -> tuple[dict[str, Any], Path, Path]:
    """A FastMCP skills server over one skill directory, behind a recording proxy."""
    root = tmp_path / "skills"
    (root / "pdf-processing" / "references").mkdir(parents=True)
    (root / "pdf-processing" / "SKILL.md").write_text(SKILL_MD)
    (root / "pdf-processing" / "references" / "FORMS.md").write_text(FORMS_MD)
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    log = tmp_path / "methods.log"
    server = {
        "command": sys.executable,
        "args": [str(PROXY), str(log), sys.executable, str(script), str(root)],
        "protocol": "2026-07-28",
        "stderr": "devnull",
    }
    return server, root, log


async def test_listing_reads_nothing_and_loading_verifies_every_file(
    client_kernel: Any, skills_server: tuple[dict[str, Any], Path, Path]
) -> None:
    server, _, log = skills_server
    async with MCPClient({"servers": {"s": server}}, kernel=client_kernel, persist=False) as client:
        (skill,) = await client.list_skills("s")
        assert skill.name == "pdf-processing"
        assert "resources/read" not in log.read_text().split()
        loaded = await client.load_skill("s", skill.uri)
    assert loaded.instructions == SKILL_MD
    assert loaded.files["skill://pdf-processing/references/FORMS.md"] == FORMS_MD.encode()
    assert log.read_text().split().count("resources/read") == 2


async def test_a_file_changed_after_listing_is_refused(
    client_kernel: Any, skills_server: tuple[dict[str, Any], Path, Path]
) -> None:
    server, root, log = skills_server
    async with MCPClient({"servers": {"s": server}}, kernel=client_kernel, persist=False) as client:
        (skill,) = await client.list_skills("s")
        # Same size, other bytes: only the digest check can catch it.
        (root / "pdf-processing" / "SKILL.md").write_text(SKILL_MD.replace("Use", "Eat"))
        with pytest.raises(MCPClientError, match="does not match its digest"):
            await client.load_skill("s", skill)
    # SKILL.md was read and refused; nothing after it was read.
    assert log.read_text().split().count("resources/read") == 1


async def test_a_server_without_skills_says_so(client_kernel: Any) -> None:
    echo = {"command": sys.executable, "args": ["-m", "toolkernel", "serve", f"{ECHO_APP}:app"]}
    async with MCPClient({"servers": {"echo": echo}}, kernel=client_kernel, persist=False) as client:
        with pytest.raises(MCPClientError, match="does not offer skills"):
            await client.list_skills("echo")
