"""toolkernel-openai: embeddings from any OpenAI-compatible ``/v1/embeddings`` HTTP API.

The embedder lives in :mod:`toolkernel_openai.embedder`; this package imports nothing so
that loading the plugin stays cheap.
"""
