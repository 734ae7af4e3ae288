"""A service with its own credentials (client credentials grant): no user, no browser."""

import os

from toolkernel.client import MCPClient

client = MCPClient(
    {
        "servers": {
            "notes": {
                "url": "https://notes.example.com/mcp",
                "auth": {
                    "type": "oauth",
                    "grant": "client_credentials",
                    "client_id": "reporting-job",
                    "client_secret": os.environ.get("NOTES_CLIENT_SECRET", ""),
                    "issuer": "https://auth.example.com",
                    "scope": "notes:read",
                    "store": "memory",
                },
            }
        }
    },
    persist=False,
)
