"""The floor: a raw JSON-lines loop answering initialize, tools/list and tools/call(echo).

No SDK, no validation beyond what the benchmark needs. Anything slower than this is
framework overhead; nothing written in Python over the same pipe will beat it by much.
"""

import json
import sys

TOOL = {
    "name": "echo",
    "description": "Return the text unchanged.",
    "inputSchema": {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    },
}


def main() -> None:
    out = sys.stdout
    dumps = json.dumps
    loads = json.loads
    for line in sys.stdin:
        if not line.strip():
            continue
        msg = loads(line)
        mid = msg.get("id")
        if mid is None:  # notification
            continue
        method = msg.get("method")
        if method == "tools/call":
            params = msg["params"]
            if params.get("name") == "echo":
                text = params["arguments"]["text"]
                result = {"content": [{"type": "text", "text": text}], "isError": False}
            else:
                result = {"content": [{"type": "text", "text": "unknown tool"}], "isError": True}
        elif method == "initialize":
            result = {
                "protocolVersion": msg["params"].get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": "raw-echo", "version": "0"},
            }
        elif method == "tools/list":
            result = {"tools": [TOOL]}
        elif method == "ping":
            result = {}
        else:
            out.write(
                dumps({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no such method"}})
                + "\n"
            )
            out.flush()
            continue
        out.write(dumps({"jsonrpc": "2.0", "id": mid, "result": result}) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
