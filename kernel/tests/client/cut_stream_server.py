"""An HTTP "server" that answers the handshake, then cuts the tools/call SSE response mid-event.

It prints its port on stdout, then serves until killed.
"""

import asyncio
import json


async def handle(reader, writer):
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            body = await reader.readexactly(length) if length else b""
            method = head.split(b" ")[0]
            if method != b"POST":  # a resuming GET: the stream is gone
                writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
                await writer.drain()
                continue
            msg = json.loads(body)
            if msg.get("method") == "initialize":
                out = json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": msg["id"],
                        "result": {
                            "protocolVersion": msg["params"]["protocolVersion"],
                            "capabilities": {"tools": {}},
                            "serverInfo": {"name": "cut", "version": "0"},
                        },
                    }
                ).encode()
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nmcp-session-id: s1\r\n"
                    b"content-length: %d\r\n\r\n" % len(out) + out
                )
            elif "id" not in msg:
                writer.write(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n")
            elif msg.get("method") == "tools/list":
                out = json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": msg["id"],
                        "result": {"tools": [{"name": "t", "inputSchema": {"type": "object"}}]},
                    }
                ).encode()
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
                    % len(out)
                    + out
                )
            elif msg.get("method") == "tools/call":
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                    b"transfer-encoding: chunked\r\n\r\n"
                )
                # A priming event (an id to resume from), then half an event, then the connection ends.
                part = b'id: 1\nretry: 100\ndata: \n\nevent: message\ndata: {"jsonrpc": "2.0", "id"'
                writer.write(b"%x\r\n" % len(part) + part + b"\r\n")
                await writer.drain()
                writer.close()
                return
            else:
                out = json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {}}).encode()
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
                    % len(out)
                    + out
                )
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()


async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()


asyncio.run(main())
