"""toolkernel-hello: a greeting tool for every toolkernel server."""
