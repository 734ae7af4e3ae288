"""The typed registries: name checks, duplicates naming both origins, lookups, transports by scheme."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from toolkernel import Prompt, RegistrationError, Resource, ResourceTemplate, tool
from toolkernel.cli import CommandRegistry
from toolkernel.registries import (
    ClientTransportRegistry,
    EmbedderRegistry,
    MiddlewareRegistry,
    PromptRegistry,
    ResourceRegistry,
    ServerTransportRegistry,
    SettingsRegistry,
    ToolRegistry,
    VectorStoreRegistry,
)


def factory(*args, **kwargs):
    return None


@pytest.mark.parametrize("bad", ["", " lead", "-dash-first", "has space", "tab\t", "ä"])
def test_invalid_names_are_rejected(bad):
    registry = VectorStoreRegistry()
    with pytest.raises(RegistrationError, match=r"vector store name .* is not valid"):
        registry.add(bad, factory)
    assert len(registry) == 0


@pytest.mark.parametrize("good", ["a", "A1", "x.y", "x-y_z", "ns/name", "9lives"])
def test_valid_names_are_accepted(good):
    registry = VectorStoreRegistry()
    registry.add(good, factory)
    assert good in registry
    assert registry.get(good) is factory


def test_non_callable_factory_is_rejected():
    registry = ServerTransportRegistry()
    with pytest.raises(
        RegistrationError, match=r"server transport 'x': expected a callable factory, got int"
    ):
        registry.add("x", 42)  # type: ignore[arg-type]


def test_duplicate_names_both_origins_using_the_resolver():
    origins = iter(["plugin-one", "plugin-two"])
    registry = VectorStoreRegistry(lambda module: next(origins))
    registry.add("mem", factory)
    with pytest.raises(RegistrationError) as info:
        registry.add("mem", factory)
    assert str(info.value) == (
        "vector store 'mem' is registered twice: first by plugin-one, again by plugin-two; "
        "disable one of the two plugins (TOOLKERNEL_DISABLE_PLUGINS)"
    )
    assert registry.origin("mem") == "plugin-one"


def test_origin_without_a_resolver_is_the_calling_module():
    registry = RerankerRegistryLike()
    registry.add("r", factory)
    assert registry.origin("r") == __name__


def RerankerRegistryLike():
    from toolkernel.registries import RerankerRegistry

    return RerankerRegistry()


def test_lookup_of_an_unknown_name_lists_the_known_ones():
    registry = VectorStoreRegistry()
    with pytest.raises(LookupError, match=r"no vector store named 'x' \(registered: none\)"):
        registry.get("x")
    registry.add("b", factory)
    registry.add("a", factory)
    with pytest.raises(LookupError, match=r"no vector store named 'x' \(registered: a, b\)"):
        registry.get("x")
    assert list(registry) == ["b", "a"]
    assert [e.name for e in registry.entries()] == ["b", "a"]


def test_client_transport_for_target_by_scheme():
    registry = ClientTransportRegistry()
    registry.add("stdio", factory)
    registry.add("web", factory, schemes=("HTTP", "https"))
    assert registry.get("web").schemes == ("http", "https")
    assert registry.for_target("python -m server") == "stdio"
    assert registry.for_target("HTTPS://example.com/mcp") == "web"
    assert registry.for_target("http://localhost:8000/mcp") == "web"
    with pytest.raises(LookupError, match=r"no client transport reaches 'ws://x'"):
        registry.for_target("ws://x")


@pytest.mark.parametrize("url", ["http://localhost:8000/mcp", "https://example.com/mcp"])
def test_http_url_without_http_transport_names_the_package(url):
    registry = ClientTransportRegistry()
    registry.add("stdio", factory)
    scheme = url.split(":")[0]
    with pytest.raises(LookupError) as info:
        registry.for_target(url)
    assert str(info.value) == (
        f"no client transport for {scheme}:// URLs is installed: pip install toolkernel-http"
    )


def test_empty_client_registry_reaches_nothing():
    with pytest.raises(LookupError, match=r"no client transport reaches 'cmd'"):
        ClientTransportRegistry().for_target("cmd")


def test_embedder_provider_must_not_contain_a_slash():
    registry = EmbedderRegistry()
    with pytest.raises(RegistrationError, match=r"embedder provider 'a/b' must not contain '/'"):
        registry.add("a/b", factory)
    registry.add("local", factory)
    assert registry.get("local") is factory


def test_tool_registry_takes_tools_only():
    registry = ToolRegistry()
    with pytest.raises(RegistrationError, match=r"register_tools: expected a toolkernel.Tool, got function"):
        registry.add(factory)  # type: ignore[arg-type]

    @tool
    def hello() -> str:
        """Hi."""
        return "hi"

    registry.add(hello)
    assert registry.get("hello") is hello
    with pytest.raises(RegistrationError, match=r"tool 'hello' is registered twice"):
        registry.add(hello)


def test_resource_registry_keys_by_uri_and_template():
    registry = ResourceRegistry(lambda module: "res-plugin")
    fixed = Resource("mem://a", "a", lambda: "x")
    template = ResourceTemplate("mem://u/{id}", "u", lambda id: id)
    registry.add(fixed)
    registry.add(template)
    assert list(registry) == ["mem://a", "mem://u/{id}"]
    with pytest.raises(RegistrationError) as info:
        registry.add(Resource("mem://a", "again", lambda: "y"))
    assert (
        str(info.value) == "resource 'mem://a' is registered twice: first by res-plugin, again by res-plugin"
    )
    with pytest.raises(RegistrationError, match=r"expected a Resource or ResourceTemplate, got str"):
        registry.add("mem://b")  # type: ignore[arg-type]


def test_prompt_registry_tells_versions_apart():
    registry = PromptRegistry()
    registry.add(Prompt("greet", lambda: "v1", version="1"))
    registry.add(Prompt("greet", lambda: "v2", version="2"))
    registry.add(Prompt("plain", lambda: "p"))
    assert list(registry) == ["greet@1", "greet@2", "plain"]
    with pytest.raises(RegistrationError, match=r"prompt 'greet@1' is registered twice"):
        registry.add(Prompt("greet", lambda: "again", version="1"))
    with pytest.raises(RegistrationError, match=r"expected a toolkernel.Prompt, got dict"):
        registry.add({"name": "x"})  # type: ignore[arg-type]


def test_middleware_registry_names_by_qualname_or_given_name():
    async def gate(call, call_next):
        return await call_next(call)

    registry = MiddlewareRegistry()
    registry.add(gate)
    registry.add(gate, name="second")
    registry.add(lambda call, call_next: call_next(call))
    assert list(registry) == [
        "test_middleware_registry_names_by_qualname_or_given_name.locals.gate",
        "second",
        "test_middleware_registry_names_by_qualname_or_given_name.locals.lambda",
    ]
    with pytest.raises(RegistrationError, match=r"tool middleware 'x': expected a callable factory"):
        registry.add("nope", name="x")  # type: ignore[arg-type]


def test_settings_registry_takes_pydantic_models():
    class Opts(BaseModel):
        level: int = 1

    registry = SettingsRegistry()
    registry.add("p", Opts)
    assert registry.get("p") is Opts
    with pytest.raises(RegistrationError, match=r"settings 'q': expected a pydantic model class"):
        registry.add("q", dict)  # type: ignore[arg-type]
    with pytest.raises(RegistrationError, match=r"settings 'r': expected a pydantic model class"):
        registry.add("r", Opts())  # type: ignore[arg-type]


def test_command_registry_requires_callables():
    registry = CommandRegistry()
    with pytest.raises(RegistrationError, match=r"command 'x': configure and run must be callable"):
        registry.add("x", None, factory)  # type: ignore[arg-type]
    registry.add("y", factory, factory, help="Why.")
    assert registry.get("y").help == "Why."
