"""A stdio "server" that answers the handshake, then breaks the protocol on tools/call as argv[1] says.

garbage: a line that is not JSON-RPC; wrong-id: an answer for a request never sent;
null-id: an error with id null; long: a line over the client's 64 MiB limit; exit: the
process exits mid-call; hang: never answers.
"""

import json
import sys
import time

mode = sys.argv[1]
out = sys.stdout.buffer


def send(message: dict) -> None:
    out.write(json.dumps(message).encode() + b"\n")
    out.flush()


for line in sys.stdin.buffer:
    message = json.loads(line)
    method, request_id = message.get("method"), message.get("id")
    if method == "initialize":
        version = message["params"]["protocolVersion"]
        info = {"name": "faulty", "version": "0"}
        send(
            {
                "jsonrpc": "2.0",
                "id": request_id,
                "result": {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": info},
            }
        )
    elif method == "tools/list":
        send(
            {
                "jsonrpc": "2.0",
                "id": request_id,
                "result": {"tools": [{"name": "t", "inputSchema": {"type": "object"}}]},
            }
        )
    elif method == "tools/call":
        if mode == "garbage":
            out.write(b"Traceback (most recent call last): this is not JSON-RPC\n")
            out.flush()
        elif mode == "wrong-id":
            send({"jsonrpc": "2.0", "id": request_id + 1000, "result": {"content": []}})
        elif mode == "null-id":
            send(
                {
                    "jsonrpc": "2.0",
                    "id": None,
                    "error": {"code": -32600, "message": "Invalid Request: broken"},
                }
            )
        elif mode == "long":
            head = b'{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":"' % request_id
            out.write(head + b"x" * (65 * 1024 * 1024) + b'"}]}}\n')
            out.flush()
        elif mode == "exit":
            sys.exit(3)
        elif mode == "hang":
            time.sleep(3600)
    elif request_id is not None and method is not None:
        send({"jsonrpc": "2.0", "id": request_id, "result": {}})
