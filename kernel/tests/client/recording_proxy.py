"""A stdio pass-through that writes the method of every message the client sends to a file.

``python recording_proxy.py LOG COMMAND [ARGS...]`` runs COMMAND as the real server and
relays both pipes unchanged, so a test can see on the wire which requests a client made.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading


def main() -> None:
    log_path, command = sys.argv[1], sys.argv[2:]
    server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert server.stdin is not None
    assert server.stdout is not None
    server_out = server.stdout

    def relay_out() -> None:
        for line in server_out:
            sys.stdout.buffer.write(line)
            sys.stdout.buffer.flush()

    threading.Thread(target=relay_out, daemon=True).start()
    with open(log_path, "a", encoding="utf-8") as log:
        for line in sys.stdin.buffer:
            try:
                method = json.loads(line).get("method")
            except (ValueError, AttributeError):
                method = None
            if method:
                log.write(method + "\n")
                log.flush()
            server.stdin.write(line)
            server.stdin.flush()
    server.stdin.close()
    server.wait(timeout=10)


if __name__ == "__main__":
    main()
