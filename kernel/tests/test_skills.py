"""Skills read from directories: what is served, and the mistakes that stop a skill loading."""

from __future__ import annotations

import hashlib

import pytest

from toolkernel import MCPServer
from toolkernel.errors import ConfigError
from toolkernel.skills import Skill

MANIFEST = "---\nname: {name}\ndescription: {description}\n---\n\nBody.\n"


def _skill(tmp_path, name="pdf-tools", description="Work with PDFs", folder=None):
    root = tmp_path / (folder or name)
    (root / "refs" / "deep").mkdir(parents=True)
    (root / "SKILL.md").write_text(MANIFEST.format(name=name, description=description))
    (root / "refs" / "FORMS.md").write_text("forms")
    (root / "refs" / "deep" / "x.txt").write_bytes(b"\xff\x00")
    return root


def test_entry_lists_every_file_with_digest_and_size(tmp_path):
    skill = Skill(_skill(tmp_path))
    entry = skill.entry()
    assert entry["uri"] == "skill://pdf-tools/SKILL.md"
    assert entry["frontmatter"] == {"name": "pdf-tools", "description": "Work with PDFs"}
    forms = {
        "uri": "skill://pdf-tools/refs/FORMS.md",
        "digest": "sha256:" + hashlib.sha256(b"forms").hexdigest(),
    }
    assert {**forms, "size": 5} in entry["resources"]
    assert len(entry["resources"]) == 3
    assert skill.read("skill://pdf-tools/refs/deep/x.txt") == b"\xff\x00"
    assert skill.read("skill://other/SKILL.md") is None


def test_children_of_directories_only(tmp_path):
    skill = Skill(_skill(tmp_path))
    top = skill.children("skill://pdf-tools")
    assert top == [
        {"uri": "skill://pdf-tools/refs", "name": "refs", "mimeType": "inode/directory"},
        {"uri": "skill://pdf-tools/SKILL.md", "name": "SKILL.md", "mimeType": "text/markdown"},
    ]
    assert [c["uri"] for c in skill.children("skill://pdf-tools/refs") or []] == [
        "skill://pdf-tools/refs/deep",
        "skill://pdf-tools/refs/FORMS.md",
    ]
    assert skill.children("skill://pdf-tools/SKILL.md") is None
    assert skill.children("skill://pdf-tools/nope") is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"folder": "other-name"}, "must be named after it"),
        ({"name": "Bad Name"}, "lowercase words"),
        ({"description": "''"}, "non-empty description"),
    ],
)
def test_bad_skills_are_config_errors(tmp_path, kwargs, message):
    with pytest.raises(ConfigError, match=message):
        Skill(_skill(tmp_path, **kwargs))


def test_missing_manifest_or_frontmatter(tmp_path):
    with pytest.raises(ConfigError, match=r"no SKILL\.md"):
        Skill(tmp_path)
    (tmp_path / "SKILL.md").write_text("no frontmatter here")
    with pytest.raises(ConfigError, match="YAML frontmatter"):
        Skill(tmp_path)


def test_server_refuses_a_skill_twice(tmp_path):
    root = _skill(tmp_path)
    server = MCPServer("s", skills=[root])
    assert list(server.skills) == ["pdf-tools"]
    with pytest.raises(ConfigError, match="defined twice"):
        server.add_skill(root)
