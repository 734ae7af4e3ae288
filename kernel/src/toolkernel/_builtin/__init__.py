"""The kernel's own features, registered as plugins through the public hooks.

Each entry is ``(plugin name, module)``; they load before entry-point plugins and can
be disabled by name like any other plugin.
"""

BUILTIN_PLUGINS: tuple[tuple[str, str], ...] = (
    ("stdio", "toolkernel._builtin.stdio"),
    ("commands", "toolkernel._builtin.commands"),
    ("memory-state", "toolkernel._builtin.memory_state"),
)
