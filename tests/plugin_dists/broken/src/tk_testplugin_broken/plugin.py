"""A plugin that fails to import, as a broken third-party release would."""

raise RuntimeError("this plugin is broken on purpose")
