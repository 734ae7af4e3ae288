"""Registry metadata and the in-process management API."""

from toolkernel import MCPServer

app = MCPServer(
    "acme-search",
    "1.4.0",
    id="acme-search",
    title="Acme search",
    description="Full-text search over Acme's handbook.",
    instructions="Call search before answering questions about Acme policies.",
    website_url="https://acme.example/search",
    repository={"url": "https://github.com/acme/search-mcp", "source": "github"},
    release_date="2026-11-01",
    packages=[{"registryName": "pypi", "name": "acme-search-mcp", "version": "1.4.0"}],
    remotes=[{"transportType": "streamable-http", "url": "https://mcp.acme.example/search"}],
)


@app.tool
def search(query: str) -> list[str]:
    """Search the handbook."""
    return [f"Handbook section about {query}"]
