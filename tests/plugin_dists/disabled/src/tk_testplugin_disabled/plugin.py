"""A plugin the tests disable by name; importing it leaves a marker file behind."""

import os
from pathlib import Path

from toolkernel import hookimpl

if os.environ.get("TK_TESTPLUGIN_MARKER"):
    Path(os.environ["TK_TESTPLUGIN_MARKER"]).write_text("imported")


@hookimpl
def register_commands(registry):
    registry.add("disabled-cmd", lambda parser: None, lambda args, kernel: 0, help="Must not appear.")
