"""toolkernel-local-embed: offline CPU embedders whose model files ship inside Python packages.

The embedder lives in :mod:`toolkernel_local_embed.embedder` and the models in
:mod:`toolkernel_local_embed.models`; this package imports nothing so loading the plugin
stays cheap.
"""
