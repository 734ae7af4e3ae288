"""A server offering a skill: a directory holding SKILL.md, which clients load when they need it."""

from pathlib import Path

from toolkernel import MCPServer

app = MCPServer("writer", "1.0.0", skills=[Path(__file__).parent / "skills" / "release-notes"])
