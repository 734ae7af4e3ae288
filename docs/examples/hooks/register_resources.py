"""A plugin that publishes the process environment's variable names, one resource per name."""

import os

from toolkernel import Resource, ResourceTemplate, hookimpl


def variable_names():
    return "\n".join(sorted(os.environ))


def variable(name):
    return os.environ.get(name, "")


@hookimpl
def register_resources(registry):
    registry.add(Resource(uri="env://names", name="env-names", read=variable_names))
    registry.add(
        ResourceTemplate(
            uri_template="env://var/{name}",
            name="env-var",
            read=variable,
            complete={"name": lambda prefix: [n for n in sorted(os.environ) if n.startswith(prefix)]},
        )
    )
