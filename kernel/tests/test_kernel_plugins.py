"""Kernel plugin management: failures reported per plugin, strict mode, load policy, listing."""

from __future__ import annotations

import types

import pytest

from toolkernel import Kernel, PluginLoadError, hookimpl, tool
from toolkernel._loading import LoadPolicy


def store_factory(**options):
    return ("store", options)


def other_factory(**options):
    return ("other", options)


class StoreA:
    @hookimpl
    def register_vector_stores(self, registry):
        registry.add("dup", store_factory)
        registry.add("only-a", store_factory)


class StoreB:
    @hookimpl
    def register_vector_stores(self, registry):
        registry.add("dup", other_factory)


class Exploding:
    """Adds a tool, then raises; also listens to an event it must no longer receive."""

    def __init__(self) -> None:
        self.outputs = 0

    @hookimpl
    def register_tools(self, registry):
        registry.add(tool(lambda: "partial", name="partial"))
        raise RuntimeError("registry hook exploded")

    @hookimpl
    def on_tool_output(self, event):
        self.outputs += 1


class Healthy:
    @hookimpl
    def register_tools(self, registry):
        @tool
        def healthy() -> str:
            """I am fine."""
            return "fine"

        registry.add(healthy)


def _infos(kernel: Kernel) -> dict[str, object]:
    return {i.name: i for i in kernel.plugins()}


def test_duplicate_registration_names_both_plugins_and_keeps_the_first(kernel, log_events):
    kernel.register(StoreA(), name="plug-a")
    kernel.register(StoreB(), name="plug-b")
    assert kernel.vector_store("dup") == ("store", {})
    assert kernel.vector_stores.origin("dup") == "plug-a"
    assert kernel.vector_stores.origin("only-a") == "plug-a"
    info = {i.name: i for i in kernel.plugins()}["plug-b"]
    assert info.status == "failed"
    assert info.error == (
        "register_vector_stores: vector store 'dup' is registered twice: first by plug-a, "
        "again by plug-b; disable one of the two plugins (TOOLKERNEL_DISABLE_PLUGINS)"
    )
    assert {i.name: i for i in kernel.plugins()}["plug-a"].status == "loaded"
    warnings = [e["event"] for e in log_events if e["log_level"] == "warning"]
    assert warnings == [f"plugin 'plug-b' (registered) was not loaded: {info.error}"]


def test_raising_registration_hook_is_reported_and_others_survive(kernel):
    exploding = Exploding()
    kernel.register(exploding, name="exploding")
    kernel.register(Healthy(), name="healthy")
    assert list(kernel.tools) == ["healthy"]
    infos = {i.name: i for i in kernel.plugins()}
    assert infos["exploding"].status == "failed"
    assert infos["exploding"].error == "register_tools raised RuntimeError: registry hook exploded"
    assert infos["exploding"].hooks == ["on_tool_output", "register_tools"]
    assert infos["healthy"].status == "loaded"
    assert infos["healthy"].error is None


@pytest.mark.anyio
async def test_failed_plugin_takes_no_further_part(kernel):
    from toolkernel import MCPServer

    exploding = Exploding()
    kernel.register(exploding, name="exploding")
    kernel.register(Healthy(), name="healthy")
    server = MCPServer("s", kernel=kernel)
    assert await server.execute_tool("healthy") == "fine"
    assert kernel.has_plugin("exploding") is False
    assert kernel.listens("on_tool_output") is False
    assert exploding.outputs == 0
    assert server.get_tool_info("partial") is None


def test_strict_mode_raises_plugin_load_error():
    kernel = Kernel(load_entry_points=False, strict=True)
    kernel.register(Exploding(), name="exploding")
    with pytest.raises(PluginLoadError) as info:
        kernel.tools  # noqa: B018 - filling the registry runs the hook
    assert str(info.value) == "plugin 'exploding' failed in register_tools: registry hook exploded"


def test_strict_mode_from_the_environment(monkeypatch):
    monkeypatch.setenv("TOOLKERNEL_STRICT_PLUGINS", "true")
    kernel = Kernel(load_entry_points=False)
    kernel.register(StoreA(), name="plug-a")
    kernel.register(StoreB(), name="plug-b")
    with pytest.raises(
        PluginLoadError, match=r"plugin 'plug-b' failed in register_vector_stores: .*again by plug-b"
    ):
        kernel.vector_stores  # noqa: B018


def test_unknown_hook_name_is_rejected(kernel):
    class Typo:
        @hookimpl
        def register_tool(self, registry):  # missing the s
            pass

        @hookimpl
        def on_tool_exploded(self, event):
            pass

    with pytest.raises(PluginLoadError) as info:
        kernel.register(Typo(), name="typo")
    assert str(info.value) == "implements unknown hook(s): on_tool_exploded, register_tool"
    assert kernel.has_plugin("typo") is False
    assert {i.name: i for i in kernel.plugins()}["typo"].status == "failed"


def test_registering_a_taken_name_is_refused_and_the_first_plugin_stays_loaded(kernel):
    kernel.register(StoreA(), name="same")
    with pytest.raises(PluginLoadError, match=r"a plugin named 'same' is already registered"):
        kernel.register(StoreB(), name="same")
    info = {i.name: i for i in kernel.plugins()}["same"]
    assert info.status == "loaded"
    assert info.hooks == ["register_vector_stores"]
    assert kernel.vector_store("dup") == ("store", {})


def test_plugins_lists_hooks_per_plugin(kernel):
    module = types.ModuleType("my_plugin_module")

    @hookimpl
    def register_rerankers(registry):
        registry.add("r", other_factory)

    @hookimpl
    def on_server_start(server):
        return None

    module.register_rerankers = register_rerankers  # type: ignore[attr-defined]
    module.on_server_start = on_server_start  # type: ignore[attr-defined]
    module.not_a_hook = lambda: None  # type: ignore[attr-defined]
    assert kernel.register(module) == "my_plugin_module"
    listed = [(i.name, i.origin, i.status, i.hooks) for i in kernel.plugins()]
    assert listed == [
        ("stdio", "built-in", "loaded", ["register_client_transports", "register_server_transports"]),
        ("commands", "built-in", "loaded", ["register_commands"]),
        ("memory-state", "built-in", "loaded", ["register_shared_state"]),
        ("my_plugin_module", "registered", "loaded", ["on_server_start", "register_rerankers"]),
    ]
    assert kernel.rerankers.origin("r") == "my_plugin_module"
    as_dict = kernel.plugins()[3].as_dict()
    assert as_dict == {
        "name": "my_plugin_module",
        "origin": "registered",
        "module": "my_plugin_module",
        "distribution": None,
        "version": None,
        "hooks": ["on_server_start", "register_rerankers"],
        "status": "loaded",
        "error": None,
    }


def test_instance_plugin_default_name_is_module_and_class(kernel):
    name = kernel.register(StoreA())
    assert name.endswith(".StoreA")
    assert kernel.has_plugin(name)


def test_unregister_removes_the_plugin_and_its_entries(kernel):
    kernel.register(StoreA(), name="plug-a")
    assert "dup" in kernel.vector_stores
    kernel.unregister("plug-a")
    assert "dup" not in kernel.vector_stores
    assert "plug-a" not in {i.name for i in kernel.plugins()}


ALL_LOADED = {"stdio": "loaded", "commands": "loaded", "memory-state": "loaded"}
"""The built-in plugins, every one loaded."""


def test_only_and_disable_arguments():
    # ``only`` limits installed plugins; the built-ins load unless disabled by name.
    only = Kernel(load_entry_points=False, only=["stdio"])
    assert {i.name: i.status for i in only.plugins()} == ALL_LOADED
    assert "serve" in only.commands
    assert list(only.server_transports) == ["stdio"]

    disabled = Kernel(load_entry_points=False, disable=["stdio"])
    assert {i.name: i.status for i in disabled.plugins()} == {**ALL_LOADED, "stdio": "disabled"}
    assert list(disabled.server_transports) == []
    assert "serve" in disabled.commands


def test_load_and_disable_environment_variables(monkeypatch):
    # A load-only list limits installed plugins; built-ins still load unless disabled by name.
    monkeypatch.setenv("TOOLKERNEL_LOAD_PLUGINS", " commands , ")
    kernel = Kernel(load_entry_points=False)
    assert {i.name: i.status for i in kernel.plugins()} == ALL_LOADED

    monkeypatch.delenv("TOOLKERNEL_LOAD_PLUGINS")
    monkeypatch.setenv("TOOLKERNEL_DISABLE_PLUGINS", "commands,stdio,memory-state")
    kernel = Kernel(load_entry_points=False)
    assert {i.name: i.status for i in kernel.plugins()} == {
        "stdio": "disabled",
        "commands": "disabled",
        "memory-state": "disabled",
    }

    # Arguments win over the environment.
    kernel = Kernel(load_entry_points=False, disable=[])
    assert {i.name: i.status for i in kernel.plugins()} == ALL_LOADED


def test_load_policy_resolution():
    env = {
        "TOOLKERNEL_LOAD_PLUGINS": "a,b",
        "TOOLKERNEL_DISABLE_PLUGINS": "b",
        "TOOLKERNEL_STRICT_PLUGINS": "1",
    }
    policy = LoadPolicy.resolve(None, None, None, env)
    assert policy == LoadPolicy(frozenset({"a", "b"}), frozenset({"b"}), True)
    assert policy.allows("a") is True
    assert policy.allows("b") is False
    assert policy.allows("c") is False
    assert LoadPolicy.resolve(None, None, None, {}) == LoadPolicy(None, frozenset(), False)
    assert LoadPolicy.resolve(["x"], ["y"], False, env) == LoadPolicy(
        frozenset({"x"}), frozenset({"y"}), False
    )
