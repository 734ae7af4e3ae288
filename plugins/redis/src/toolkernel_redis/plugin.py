"""toolkernel-redis's hook: the ``redis`` shared-state backend."""
