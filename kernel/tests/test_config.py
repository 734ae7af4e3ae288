"""The configuration file chooses plugins and carries their settings; env vars win over it."""

import subprocess
import sys

import pytest
from pydantic import BaseModel

from toolkernel import ConfigError, Kernel, hookimpl
from toolkernel.config import load_config


class Settings(BaseModel):
    size: int = 1
    label: str = "x"


class SettingsPlugin:
    @hookimpl
    def register_settings(self, registry):
        registry.add("demo", Settings)


def write(tmp_path, text):
    path = tmp_path / "toolkernel.toml"
    path.write_text(text)
    return path


def test_file_settings_reach_the_plugin(tmp_path, monkeypatch):
    monkeypatch.delenv("TOOLKERNEL_DEMO_SIZE", raising=False)
    path = write(tmp_path, "[plugins]\nstrict = true\n\n[plugins.demo]\nsize = 7\n")
    kernel = Kernel.from_config(path, load_entry_points=False, plugins=[SettingsPlugin()])
    assert kernel.settings("demo") == Settings(size=7)


def test_env_wins_over_file(tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLKERNEL_DEMO_SIZE", "9")
    path = write(tmp_path, "[plugins.demo]\nsize = 7\n")
    kernel = Kernel.from_config(path, load_entry_points=False, plugins=[SettingsPlugin()])
    assert kernel.settings("demo").size == 9


def test_bad_setting_names_the_field(tmp_path):
    path = write(tmp_path, '[plugins.demo]\nsize = "big"\n')
    kernel = Kernel.from_config(path, load_entry_points=False, plugins=[SettingsPlugin()])
    with pytest.raises(ConfigError) as caught:
        kernel.check()
    assert str(caught.value) == (
        f"settings of plugin 'demo' are invalid: [plugins.demo] size in config file {str(path)!r}: "
        "Input should be a valid integer, unable to parse string as an integer"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[plugins\n", "not valid TOML"),
        ("[server]\nport = 1\n", "unknown top-level key"),
        ("[plugins]\nstrict = 'yes please'\n", "plugins.strict"),
        ("[plugins]\ndemo = 3\n", "plugins.demo must be a table"),
    ],
)
def test_bad_files_are_named(tmp_path, text, message):
    with pytest.raises(ConfigError, match=message):
        load_config(write(tmp_path, text))


def test_missing_file_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.toml")


def test_disable_list_from_file_reaches_the_cli(tmp_path):
    path = write(tmp_path, '[plugins]\ndisable = ["commands"]\n')
    env = {"PATH": "/usr/bin:/bin", "TOOLKERNEL_CONFIG": str(path)}
    done = subprocess.run(
        [sys.executable, "-m", "toolkernel", "plugins"], capture_output=True, text=True, env=env, timeout=60
    )
    # With the built-in commands plugin disabled there is no 'plugins' command at all.
    assert done.returncode == 2
    assert "invalid choice: 'plugins'" in done.stderr
