"""Configuration as a union per provider, and the provider registry (code and entry points)."""

from __future__ import annotations

import sys

import pytest

from rolecast.core.config import AutoConfig, Config, LLMConfig, LocalConfig, OpenAIConfig, PluginConfig
from rolecast.errors import ConfigError
from rolecast.llm import create_llm, register_provider
from rolecast.llm.registry import provider_factory
from rolecast.testing import FunctionLLM


def test_each_provider_gets_its_own_fields_and_settings_inside():
    openai_cfg = LLMConfig(api_key="sk-x", temperature=0.2, max_tokens=9)
    assert isinstance(openai_cfg, OpenAIConfig) and openai_cfg.settings.temperature == 0.2
    assert openai_cfg.settings.max_tokens == 9
    assert isinstance(LLMConfig(model="m.gguf", n_ctx=1024), LocalConfig)
    assert isinstance(LLMConfig(), AutoConfig)
    plugin = LLMConfig(provider="echo", greeting="hi")
    assert isinstance(plugin, PluginConfig) and plugin.options == {"greeting": "hi"}


def test_a_typo_or_a_field_of_another_provider_is_a_config_error_naming_it():
    with pytest.raises(ConfigError, match="temprature"):
        LLMConfig(provider="openai", temprature=0.2)
    with pytest.raises(ConfigError, match="n_ctx"):
        LLMConfig(provider="openai", n_ctx=4096)
    with pytest.raises(ConfigError, match="api_key"):
        LLMConfig(provider="local", api_key="sk-x")


def test_yaml_services_and_environment_variables(tmp_path):
    path = tmp_path / "rolecast.yaml"
    path.write_text(
        "llm: {provider: openai, model: gpt-4o-mini, temperature: 0.1}\nservices:\n  fast: {provider: local}\n"
    )
    config = Config.from_env({"ROLECAST_CONFIG": str(path), "OPENAI_API_KEY": "sk-env"})
    assert isinstance(config.llm, OpenAIConfig) and config.llm.api_key is not None
    assert config.llm.settings.temperature == 0.1 and isinstance(config.services["fast"], LocalConfig)
    # OPENAI_* describe the OpenAI provider: with the local one chosen they do not apply
    local = Config.from_env({"ROLECAST_PROVIDER": "local", "OPENAI_API_KEY": "sk-env"}, use_files=False)
    assert isinstance(local.llm, LocalConfig)


def test_a_provider_registered_in_code_builds_models_from_its_config():
    made = []

    def echo(config: PluginConfig, **kwargs):
        made.append(config.options)
        return FunctionLLM(lambda messages: f"{config.options['greeting']}, {messages[-1]['content']}")

    register_provider("echo-test", echo, replace=True)
    llm = create_llm(LLMConfig(provider="echo-test", greeting="hello"))
    assert made == [{"greeting": "hello"}] and isinstance(llm, FunctionLLM)
    with pytest.raises(ConfigError, match="already registered"):
        register_provider("echo-test", lambda config: llm)


def test_a_plugin_package_adds_a_provider_through_its_entry_point(tmp_path, monkeypatch):
    (tmp_path / "rc_plugin_demo.py").write_text(
        "from rolecast.testing import FunctionLLM\n"
        "def from_config(config, **kwargs):\n"
        "    return FunctionLLM(lambda messages: 'from the plugin', model=config.model or 'demo')\n"
    )
    dist = tmp_path / "rc_plugin_demo-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: rc-plugin-demo\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[rolecast.providers]\ndemo = rc_plugin_demo:from_config\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    llm = create_llm(LLMConfig(provider="demo", model="tiny"))
    assert llm.model == "tiny" and "rc_plugin_demo" in sys.modules
    assert provider_factory("demo") is sys.modules["rc_plugin_demo"].from_config
    with pytest.raises(ConfigError, match=r"no model provider named 'nope'; known: .*demo"):
        create_llm(LLMConfig(provider="nope"))
