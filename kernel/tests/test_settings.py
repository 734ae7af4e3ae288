"""One settings mechanism for every factory: table, environment, call options, one model."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field

from toolkernel import ConfigError, Kernel, hookimpl
from toolkernel.config import plugin_settings
from toolkernel.transports import ClientTransportOptions, ServeOptions


class StoreSettings(BaseModel):
    path: Path
    table_prefix: str = ""
    tags: list[str] = Field(default_factory=list)
    timeout: float = Field(10.0, gt=0)


class SettingsStore:
    """Records the settings it was built with; the kit is not run on it."""

    def __init__(self, settings: StoreSettings) -> None:
        self.settings = settings


class PlainStore:
    def __init__(self, **options: Any) -> None:
        self.options = options


class StorePlugin:
    @hookimpl
    def register_settings(self, registry):
        registry.add("lite", StoreSettings)

    @hookimpl
    def register_vector_stores(self, registry):
        registry.add("lite", SettingsStore, settings="lite")
        registry.add("plain", PlainStore)


def config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "toolkernel.toml"
    path.write_text(text)
    return path


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for var in (
        "TOOLKERNEL_LITE_PATH",
        "TOOLKERNEL_LITE_TIMEOUT",
        "TOOLKERNEL_LITE_TAGS",
        "TOOLKERNEL_CONFIG",
    ):
        monkeypatch.delenv(var, raising=False)


def test_the_table_reaches_the_store_factory(tmp_path):
    path = config(tmp_path, '[plugins.lite]\npath = "/data/lite"\ntable_prefix = "kb_"\n')
    kernel = Kernel.from_config(path, load_entry_points=False, plugins=[StorePlugin()])
    store = kernel.vector_store("lite")
    assert isinstance(store, SettingsStore)
    assert store.settings == StoreSettings(path=Path("/data/lite"), table_prefix="kb_")
    assert store.settings == kernel.settings("lite")


def test_environment_beats_the_file_and_call_options_beat_both(tmp_path, monkeypatch):
    path = config(tmp_path, '[plugins.lite]\npath = "/data/lite"\ntimeout = 3\n')
    monkeypatch.setenv("TOOLKERNEL_LITE_TIMEOUT", "5")
    monkeypatch.setenv("TOOLKERNEL_LITE_TAGS", '["a", "b"]')  # JSON for a list field
    kernel = Kernel.from_config(path, load_entry_points=False, plugins=[StorePlugin()])
    assert kernel.vector_store("lite").settings == StoreSettings(
        path=Path("/data/lite"), timeout=5, tags=["a", "b"]
    )
    built = kernel.vector_store("lite", timeout=1.5, path="/elsewhere")
    assert built.settings == StoreSettings(path=Path("/elsewhere"), timeout=1.5, tags=["a", "b"])
    # Options do not stick: the next build sees the configured values again.
    assert kernel.settings("lite").timeout == 5


def test_a_factory_without_settings_still_gets_raw_options(kernel_with):
    kernel = kernel_with(StorePlugin())
    assert kernel.vector_store("plain", url="x").options == {"url": "x"}
    assert kernel.vector_stores.settings_of("plain") is None
    assert kernel.vector_stores.settings_of("lite") == "lite"


def test_a_bad_file_value_names_file_table_and_key(tmp_path):
    path = config(tmp_path, '[plugins.lite]\npath = "/d"\ntimeout = -1\n')
    kernel = Kernel.from_config(path, load_entry_points=False, plugins=[StorePlugin()])
    expected = (
        f"settings of plugin 'lite' are invalid: [plugins.lite] timeout in config file {str(path)!r}: "
        "Input should be greater than 0"
    )
    with pytest.raises(ConfigError) as caught:
        kernel.vector_store("lite")
    assert str(caught.value) == expected
    with pytest.raises(ConfigError) as caught:
        kernel.check()
    assert str(caught.value) == expected


def test_a_bad_environment_value_names_the_variable(kernel_with, monkeypatch):
    monkeypatch.setenv("TOOLKERNEL_LITE_PATH", "/d")
    monkeypatch.setenv("TOOLKERNEL_LITE_TIMEOUT", "soon")
    with pytest.raises(ConfigError) as caught:
        kernel_with(StorePlugin()).vector_store("lite")
    assert str(caught.value) == (
        "settings of plugin 'lite' are invalid: [plugins.lite] timeout from TOOLKERNEL_LITE_TIMEOUT: "
        "Input should be a valid number, unable to parse string as a number"
    )


def test_a_bad_option_names_the_call(kernel_with):
    kernel = kernel_with(StorePlugin(), settings={"lite": {"path": "/d"}})
    with pytest.raises(
        ConfigError, match=r"\[plugins\.lite\] timeout from the call's options: Input should be"
    ):
        kernel.vector_store("lite", timeout=0)


def test_a_missing_required_key_says_where_to_set_it(tmp_path):
    path = config(tmp_path, "[plugins.lite]\n")
    kernel = Kernel.from_config(path, load_entry_points=False, plugins=[StorePlugin()])
    with pytest.raises(ConfigError) as caught:
        kernel.vector_store("lite")
    assert str(caught.value) == (
        f"settings of plugin 'lite' are invalid: [plugins.lite] path: Field required "
        f"(set it in {path} or as TOOLKERNEL_LITE_PATH)"
    )


def test_an_unknown_key_is_a_typo_not_silence(tmp_path):
    path = config(tmp_path, '[plugins.lite]\npath = "/d"\ntimout = 3\n')
    kernel = Kernel.from_config(path, load_entry_points=False, plugins=[StorePlugin()])
    with pytest.raises(ConfigError) as caught:
        kernel.check()
    assert str(caught.value) == (
        f"settings of plugin 'lite' are invalid: [plugins.lite] timout in config file {str(path)!r}: "
        "unknown key (known keys: path, table_prefix, tags, timeout)"
    )


def test_every_mistake_in_a_table_is_reported_at_once(tmp_path):
    """An unknown key does not hide a bad value beside it: one run lists every fix to make."""
    path = config(tmp_path, '[plugins.lite]\npaht = "/d"\ntimeout = 0\ntags = "x"\n')
    kernel = Kernel.from_config(path, load_entry_points=False, plugins=[StorePlugin()])
    with pytest.raises(ConfigError) as caught:
        kernel.check()
    where = f"in config file {str(path)!r}"
    assert str(caught.value) == (
        f"settings of plugin 'lite' are invalid: [plugins.lite] paht {where}: unknown key "
        f"(known keys: path, table_prefix, tags, timeout); "
        f"[plugins.lite] path: Field required (set it in {path} or as TOOLKERNEL_LITE_PATH); "
        f"[plugins.lite] tags {where}: Input should be a valid list; "
        f"[plugins.lite] timeout {where}: Input should be greater than 0"
    )


def test_a_model_that_allows_extra_keys_gets_them():
    class Open(BaseModel):
        model_config = ConfigDict(extra="allow")

    got = plugin_settings("open", Open, table={"anything": 1}, environ={})
    assert got.model_extra == {"anything": 1}


def test_a_longer_section_keeps_its_own_variables():
    class Short(BaseModel):
        model: str = "x"

    environ = {"TOOLKERNEL_LOCAL_EMBED_MODEL": "for-local-embed", "TOOLKERNEL_LOCAL_MODEL": "mine"}
    got = plugin_settings("local", Short, environ=environ, other_sections=["local", "local-embed"])
    assert got.model == "mine"


def test_a_factory_naming_undeclared_settings_fails_check(kernel_with):
    class Orphan:
        @hookimpl
        def register_vector_stores(self, registry):
            registry.add("orphan", SettingsStore, settings="nobody")

    kernel = kernel_with(Orphan())
    message = (
        "vector store 'orphan' (from {}) is built with settings 'nobody', "
        "but no plugin declares them through register_settings"
    )
    origin = kernel.vector_stores.origin("orphan")
    with pytest.raises(ConfigError) as caught:
        kernel.check()
    assert str(caught.value) == message.format(origin)
    with pytest.raises(ConfigError) as caught:
        kernel.vector_store("orphan")
    assert str(caught.value) == message.format(origin)


class Knobs(BaseModel):
    level: int = 1


class EveryKindPlugin:
    """One settings model, read by a factory of every kind."""

    def __init__(self) -> None:
        self.built: dict[str, tuple[Any, ...]] = {}

    @hookimpl
    def register_settings(self, registry):
        registry.add("knobs", Knobs)

    @hookimpl
    def register_embedders(self, registry):
        registry.add(
            "knob",
            lambda model, settings: self.built.setdefault("embedder", (model, settings)),
            settings="knobs",
        )

    @hookimpl
    def register_rerankers(self, registry):
        registry.add(
            "knob", lambda settings: self.built.setdefault("reranker", (settings,)), settings="knobs"
        )

    @hookimpl
    def register_auth_providers(self, registry):
        registry.add("knob", lambda settings: self.built.setdefault("auth", (settings,)), settings="knobs")
        registry.add("bare", lambda settings: self.built.setdefault("bare", (settings,)))

    @hookimpl
    def register_server_transports(self, registry):
        registry.add("knob", self.server, settings="knobs")

    @hookimpl
    def register_client_transports(self, registry):
        registry.add("knob", self.client, schemes=("knob",), settings="knobs")

    def server(self, options: ServeOptions, settings: Knobs) -> Any:
        self.built["server"] = (options, settings)

        class Transport:
            async def serve(self, app: Any) -> None:
                return None

        return Transport()

    def client(self, target: str, options: ClientTransportOptions, settings: Knobs) -> Any:
        self.built["client"] = (target, options, settings)
        return contextlib.nullcontext()


@pytest.mark.anyio
async def test_every_factory_kind_receives_its_settings(kernel_with):
    from toolkernel import MCPServer

    plugin = EveryKindPlugin()
    kernel = kernel_with(plugin, settings={"knobs": {"level": 2}})
    kernel.embedder("knob/small", level=3)
    kernel.reranker("knob")
    kernel.auth_provider("knob", level=4)
    kernel.auth_provider("bare")
    kernel.client_transport("knob://somewhere")
    await kernel.serve(MCPServer("s", kernel=kernel), "knob", ServeOptions(extra={"level": 5}))
    assert plugin.built["embedder"] == ("small", Knobs(level=3))
    assert plugin.built["reranker"] == (Knobs(level=2),)
    assert plugin.built["auth"] == (Knobs(level=4),)
    assert plugin.built["bare"] == (None,)
    assert plugin.built["client"][2] == Knobs(level=2)
    assert plugin.built["server"][1] == Knobs(level=5)
    with pytest.raises(ConfigError, match="auth provider 'bare' takes no settings; got level"):
        kernel.auth_provider("bare", level=1)


def test_a_bad_settings_name_is_refused_at_registration(kernel_with):
    class Bad:
        @hookimpl
        def register_vector_stores(self, registry):
            registry.add("bad", SettingsStore, settings="no spaces please")

    kernel = kernel_with()
    name = kernel.register(Bad(), "bad-plugin")
    assert "bad" not in kernel.vector_stores
    info = {p.name: p for p in kernel.plugins()}[name]
    assert info.status == "failed"
    assert info.error == (
        "register_vector_stores: vector store 'bad': settings must be a settings name, got 'no spaces please'"
    )


def test_an_unconfigured_plugin_with_required_settings_does_not_stop_the_others(kernel_with, monkeypatch):
    kernel = kernel_with(StorePlugin())
    kernel.check()  # nothing sets [plugins.lite], whose path is required: left for first use
    kernel_with(StorePlugin(), settings={"other": {}}).check()
    with pytest.raises(ConfigError, match=r"\[plugins\.lite\] path: Field required"):
        kernel.vector_store("lite")
    monkeypatch.setenv("TOOLKERNEL_LITE_TIMEOUT", "2")  # set at all: then it must be complete
    with pytest.raises(ConfigError, match=r"\[plugins\.lite\] path: Field required"):
        kernel_with(StorePlugin()).check()


def test_a_longer_sections_variable_does_not_count_as_setting_the_shorter(kernel_with, monkeypatch):
    class Required(BaseModel):
        path: Path

    class Two:
        @hookimpl
        def register_settings(self, registry):
            registry.add("lite", Required)
            registry.add("lite-extra", Knobs)

    monkeypatch.setenv("TOOLKERNEL_LITE_EXTRA_LEVEL", "3")  # belongs to lite-extra, not to lite
    kernel = kernel_with(Two())
    kernel.check()
    assert kernel.settings("lite-extra") == Knobs(level=3)
