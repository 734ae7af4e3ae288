"""toolkernel-redis: the shared state of toolkernel replicas on Redis (``redis://`` URLs)."""
