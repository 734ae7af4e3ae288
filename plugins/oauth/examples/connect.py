"""Call a tool on a protected server with the tokens `toolkernel auth login URL` kept."""

import sys

import anyio

from toolkernel.client import MCPClient


async def main(url: str) -> None:
    config = {"servers": {"notes": {"url": url, "auth": {"type": "oauth"}}}}
    async with MCPClient(config, persist=False) as client:
        out = await client.call_tool("notes_whoami", {})
        print(out.content[0]["text"])


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
