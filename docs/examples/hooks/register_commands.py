"""A ``toolkernel backends`` command: which plugin provides each store, embedder and reranker."""

from toolkernel import hookimpl


def configure(parser):
    parser.add_argument("--kind", choices=["stores", "embedders", "rerankers"], help="only this kind")


def run(args, kernel):
    registries = {
        "stores": kernel.vector_stores,
        "embedders": kernel.embedders,
        "rerankers": kernel.rerankers,
    }
    for kind, registry in registries.items():
        if args.kind in (None, kind):
            for name in registry:
                print(f"{kind}: {name} (from {registry.origin(name)})")
    return 0


@hookimpl
def register_commands(registry):
    registry.add("backends", configure, run, help="List storage, embedding and reranking backends.")
