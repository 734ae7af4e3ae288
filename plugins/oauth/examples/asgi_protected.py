"""Mount a protected MCP endpoint in your own ASGI stack, with the validator built in code."""

from toolkernel import MCPServer
from toolkernel_http import asgi_app
from toolkernel_oauth.resource import ResourceServer
from toolkernel_oauth.settings import JWTSettings
from toolkernel_oauth.validators import JWTValidator

server = MCPServer("notes", "1.0.0")

guard = ResourceServer(
    JWTValidator(JWTSettings(issuer="https://auth.example.com", jwks_uri="https://auth.example.com/jwks")),
    resource="https://notes.example.com/mcp",
    authorization_servers=("https://auth.example.com",),
    scopes_supported=("notes:read", "notes:write"),
)
app = asgi_app(server, auth=guard)
