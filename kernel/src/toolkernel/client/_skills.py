"""Skills (the ``io.modelcontextprotocol/skills`` extension, SEP-2640): list them, load one verified.

A server lists skill entries (``skills/list``): the ``SKILL.md`` URI, its frontmatter
and, for a static skill, every file with its SHA-256 digest and size. Nothing is read
until a skill is loaded; then each file is read once and checked against its entry
(size, then digest), and the ``SKILL.md`` frontmatter must equal the listed one field
by field. Content that fails any check is never handed out.
"""

from __future__ import annotations

import base64
import functools
import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from toolkernel.errors import MCPClientError

if TYPE_CHECKING:
    import mcp_types as types

SKILLS_EXTENSION = "io.modelcontextprotocol/skills"
"""The extension identifier servers and clients advertise under ``capabilities.extensions``."""


class SkillFile(BaseModel):
    """One file of a static skill, as the server lists it."""

    model_config = ConfigDict(frozen=True)

    uri: str
    digest: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    size: int = Field(ge=0)


class Skill(BaseModel):
    """A skill entry from ``skills/list``: ``resources`` is ``"dynamic"`` when files are not listed."""

    model_config = ConfigDict(frozen=True, populate_by_name=True)

    uri: str
    frontmatter: dict[str, Any]
    resources: list[SkillFile] | Literal["dynamic"]
    meta: dict[str, Any] | None = Field(None, alias="_meta")

    @property
    def name(self) -> str:
        return str(self.frontmatter.get("name", ""))

    @property
    def description(self) -> str:
        return str(self.frontmatter.get("description", ""))


@dataclass(frozen=True)
class LoadedSkill:
    """A skill whose files were read and verified: ``files`` maps each URI to its bytes."""

    server: str
    skill: Skill
    files: dict[str, bytes] = field(default_factory=dict)

    @property
    def instructions(self) -> str:
        """The ``SKILL.md`` text."""
        return self.files[self.skill.uri].decode("utf-8")


@functools.cache
def wire_types() -> tuple[type[Any], type[BaseModel]]:
    """The ``skills/list`` request and result models (built on first use: mcp_types loads late)."""
    from typing import Literal as Lit

    import mcp_types as types

    class ListSkillsRequest(types.Request[types.PaginatedRequestParams, Lit["skills/list"]]):
        method: Lit["skills/list"] = "skills/list"
        params: types.PaginatedRequestParams

    class ListSkillsResult(types.PaginatedResult):
        skills: list[Skill]

    return ListSkillsRequest, ListSkillsResult


def file_bytes(result: types.ReadResourceResult, uri: str) -> bytes:
    """The bytes of ``uri`` in a ``resources/read`` result (text as UTF-8, blobs decoded)."""
    for contents in result.contents:
        if str(contents.uri) != uri:
            continue
        text = getattr(contents, "text", None)
        if text is not None:
            return str(text).encode("utf-8")
        return base64.b64decode(getattr(contents, "blob", ""))
    raise ValueError(f"the server's answer holds no contents for {uri}")


def verify_file(server: str, entry: SkillFile, data: bytes) -> None:
    """Raise :class:`MCPClientError` unless ``data`` has the entry's size and digest."""
    if len(data) != entry.size:
        raise MCPClientError(
            server, f"skill file {entry.uri} is {len(data)} bytes, its entry says {entry.size}: not used"
        )
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    if digest != entry.digest:
        raise MCPClientError(
            server, f"skill file {entry.uri} does not match its digest {entry.digest}: not used"
        )


def verify_frontmatter(server: str, skill: Skill, text: str) -> None:
    """Raise :class:`MCPClientError` unless ``SKILL.md``'s YAML frontmatter equals the listed one."""
    import yaml  # type: ignore[import-untyped]  # (no stubs in the lock)

    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        raise MCPClientError(server, f"{skill.uri} has no YAML frontmatter: skill not loaded")
    end = next((i for i, line in enumerate(lines[1:], 1) if line.strip() == "---"), None)
    if end is None:
        raise MCPClientError(server, f"{skill.uri}: the frontmatter is not closed by '---': skill not loaded")
    try:
        found = yaml.safe_load("\n".join(lines[1:end])) or {}
    except yaml.YAMLError as exc:
        raise MCPClientError(server, f"{skill.uri}: the frontmatter is not valid YAML ({exc})") from None
    if not isinstance(found, dict):
        raise MCPClientError(server, f"{skill.uri}: the frontmatter is not a mapping: skill not loaded")
    differing = sorted(
        k for k in found.keys() | skill.frontmatter.keys() if found.get(k) != skill.frontmatter.get(k)
    )
    if differing:
        raise MCPClientError(
            server,
            f"{skill.uri}: the frontmatter differs from the listed entry in {', '.join(differing)}: "
            "skill not loaded",
        )
