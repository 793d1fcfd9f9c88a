"""MetaGPT's config2.yaml read unchanged: every api_type resolves to a provider (no request is made),
an unknown one is a ConfigError naming the known ones, and ``rolecast info`` never prints a key."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rolecast.cli import main
from rolecast.core.config import Config, HostedConfig, LLMConfig
from rolecast.core.providers import HOSTED_PROVIDERS, OPENAI_COMPATIBLE
from rolecast.errors import ConfigError
from rolecast.llm import create_llm, register_provider
from rolecast.testing import FunctionLLM

ROOT = Path(__file__).resolve().parent.parent
SECRET = "sk-THE-SECRET-0123456789"

#: api_type -> (class name, where its calls go without a base_url, gen_ai.system)
EXPECTED = {
    "anthropic": ("AnthropicLLM", None, "anthropic"),
    "claude": ("AnthropicLLM", None, "anthropic"),
    "gemini": ("GeminiLLM", None, "gcp.gemini"),
    "ollama": ("OllamaLLM", "http://127.0.0.1:11434/v1", "ollama"),
    "ollama.generate": ("OllamaLLM", "http://127.0.0.1:11434/v1", "ollama"),
    "deepseek": ("OpenAILLM", "https://api.deepseek.com/v1", "deepseek"),
    "moonshot": ("OpenAILLM", "https://api.moonshot.cn/v1", "moonshot"),
    "openrouter": ("OpenAILLM", "https://openrouter.ai/api/v1", "openrouter"),
    "open_router": ("OpenAILLM", "https://openrouter.ai/api/v1", "openrouter"),
    "mistral": ("OpenAILLM", "https://api.mistral.ai/v1", "mistral_ai"),
    "yi": ("OpenAILLM", "https://api.lingyiwanwu.com/v1", "yi"),
    "siliconflow": ("OpenAILLM", "https://api.siliconflow.cn/v1", "siliconflow"),
    "zhipuai": ("OpenAILLM", "https://open.bigmodel.cn/api/paas/v4", "zhipuai"),
    "dashscope": ("OpenAILLM", "https://dashscope.aliyuncs.com/compatible-mode/v1", "dashscope"),
    "fireworks": ("OpenAILLM", "https://api.fireworks.ai/inference/v1", "fireworks"),
    "ark": ("OpenAILLM", "https://ark.cn-beijing.volces.com/api/v3", "ark"),
    "qianfan": ("OpenAILLM", "https://qianfan.baidubce.com/v2", "qianfan"),
    "spark": ("OpenAILLM", "https://spark-api-open.xf-yun.com/v1", "spark"),
    "llama_api": ("OpenAILLM", "https://api.llama.com/compat/v1", "llama_api"),
}


def config2(tmp_path: Path, llm: dict, **more) -> dict[str, str]:
    """An environment whose ROLECAST_CONFIG is a MetaGPT config2.yaml with this ``llm:`` section."""
    path = tmp_path / "config2.yaml"
    path.write_text(yaml.safe_dump({"llm": llm, **more}))
    return {"ROLECAST_CONFIG": str(path)}


@pytest.mark.parametrize("api_type", sorted(EXPECTED))
def test_every_metagpt_api_type_resolves_with_its_default_server_and_base_url_wins(api_type, tmp_path):
    cls, default_url, system = EXPECTED[api_type]
    llm = {"api_type": api_type, "model": "some-model", "api_key": SECRET, "max_token": 300, "temperature": 0.3,
           "proxy": None, "calc_usage": True, "pricing_plan": None, "stream": True, "timeout": 120}
    made = create_llm(Config.from_env(config2(tmp_path, llm)).llm)
    assert type(made).__name__ == cls and made.gen_ai_system == system and made.model == "some-model"
    assert made.settings.max_tokens == 300 and made.settings.temperature == 0.3 and made.timeout == 120
    if default_url is not None:
        assert made.base_url == default_url
    assert SECRET not in repr(made)
    custom = create_llm(Config.from_env(config2(tmp_path, {**llm, "base_url": "http://127.0.0.1:9/v1"})).llm)
    assert custom.base_url in ("http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1".removesuffix("/v1") + "/v1")


def test_azure_takes_endpoint_deployment_and_api_version(tmp_path):
    llm = {"api_type": "azure", "base_url": "https://example.openai.azure.com", "model": "my-gpt4o",
           "api_key": SECRET, "api_version": "2024-10-21"}
    made = create_llm(Config.from_env(config2(tmp_path, llm)).llm)
    assert type(made).__name__ == "AzureOpenAILLM" and made.api_version == "2024-10-21"
    assert made.model == "my-gpt4o" and made.gen_ai_system == "az.ai.openai"
    with pytest.raises(ConfigError, match="api_version"):
        create_llm(Config.from_env(config2(tmp_path, {**llm, "api_version": None})).llm)


def test_what_a_preset_lacks_is_a_config_error_saying_what_to_set(tmp_path):
    with pytest.raises(ConfigError, match="DEEPSEEK_API_KEY"):
        create_llm(Config.from_env(config2(tmp_path, {"api_type": "deepseek", "model": "deepseek-chat"})).llm)
    keyed = Config.from_env({**config2(tmp_path, {"api_type": "deepseek", "model": "deepseek-chat"}),
                             "DEEPSEEK_API_KEY": SECRET, "OPENAI_API_KEY": "sk-openai"})
    assert keyed.llm.api_key.get_secret_value() == SECRET  # its own variable, never OpenAI's
    with pytest.raises(ConfigError, match="base_url"):
        create_llm(Config.from_env(config2(tmp_path, {"api_type": "open_llm", "model": "m"})).llm)
    with pytest.raises(ConfigError, match="region_name"):
        create_llm(Config.from_env(config2(tmp_path, {"api_type": "bedrock", "model": "m", "api_key": "k"})).llm)
    bedrock = create_llm(LLMConfig(api_type="bedrock", model="openai.gpt-oss-20b-1:0", api_key="k",
                                   region_name="us-west-2"))
    assert bedrock.base_url == "https://bedrock-runtime.us-west-2.amazonaws.com/openai/v1"
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        create_llm(LLMConfig(api_type="claude"))


def test_every_hosted_name_is_built_in_and_named_models_are_services(tmp_path):
    for name in HOSTED_PROVIDERS:
        assert isinstance(LLMConfig(api_type=name), HostedConfig)
    assert type(create_llm(LLMConfig(api_type="human"))).__name__ == "HumanProvider"  # MetaGPT's human
    assert set(OPENAI_COMPATIBLE) <= set(HOSTED_PROVIDERS)
    env = config2(tmp_path, {"api_type": "openai", "model": "gpt-4o-mini", "api_key": SECRET},
                  models={"claude": {"api_type": "claude", "model": "claude-haiku-4-5", "api_key": SECRET}})
    config = Config.from_env(env)
    assert isinstance(config.services["claude"], HostedConfig) and config.services["claude"].provider == "claude"


def test_an_unknown_api_type_is_a_config_error_in_a_run_and_in_info(tmp_path, capsys, monkeypatch):
    env = config2(tmp_path, {"api_type": "anthropik", "model": "m", "api_key": SECRET})
    with pytest.raises(ConfigError, match=r"no model provider named 'anthropik' \(did you mean 'anthropic'\?\); "
                                          r"known: anthropic, ark, azure"):
        create_llm(Config.from_env(env).llm)
    monkeypatch.setenv("ROLECAST_CONFIG", env["ROLECAST_CONFIG"])
    assert main(["info"]) == 2
    out, err = capsys.readouterr()
    assert "no model provider named 'anthropik'" in err and "provider" not in out and SECRET not in out + err


@pytest.mark.parametrize("api_type", ["openai", "anthropic", "claude", "gemini", "azure", "deepseek", "ollama"])
def test_info_never_prints_the_key(api_type, tmp_path, capsys, monkeypatch):
    llm = {"api_type": api_type, "model": "m", "api_key": SECRET, "base_url": "https://example.invalid/v1",
           "api_version": "2024-10-21" if api_type == "azure" else None}
    monkeypatch.setenv("ROLECAST_CONFIG", config2(tmp_path, llm)["ROLECAST_CONFIG"])
    assert main(["info"]) == 0
    out, err = capsys.readouterr()
    assert f"provider           : {api_type}" in out and "api_key            : set" in out
    assert SECRET not in out + err


def test_info_never_prints_a_plugins_credentials(tmp_path, capsys, monkeypatch):
    register_provider("vault-test", lambda config, **kw: FunctionLLM(lambda m: "x"), replace=True)
    llm = {"api_type": "vault-test", "access_token": SECRET, "secret_key": SECRET, "region": "eu",
           "auth": {"bearer": SECRET}, "headers": {"X-Api-Key": SECRET, "Accept": "json"}}
    monkeypatch.setenv("ROLECAST_CONFIG", config2(tmp_path, llm)["ROLECAST_CONFIG"])
    assert main(["info"]) == 0
    out, err = capsys.readouterr()
    assert SECRET not in out + err
    assert "access_token       : set" in out and "region             : eu" in out and "'Accept': 'json'" in out


def test_configuring_a_native_provider_imports_no_sdk_until_its_first_call(tmp_path):
    code = (
        "import sys\n"
        "from rolecast.core.config import LLMConfig\n"
        "from rolecast.llm import create_llm\n"
        "models = [create_llm(LLMConfig(api_type=t, model='m', api_key='k')) for t in ('claude', 'gemini')]\n"
        "print(','.join(m for m in ('anthropic', 'google.genai') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""


def test_an_invalid_configuration_says_where_without_echoing_its_values(tmp_path):
    env = config2(tmp_path, {"api_type": "spark", "model": "lite", "api_key": SECRET, "api_secret": SECRET})
    with pytest.raises(ConfigError, match=r"llm\.api_secret: unknown setting") as caught:
        Config.from_env(env)
    assert SECRET not in str(caught.value) and caught.value.__cause__ is None
    env = config2(tmp_path, {"api_type": "claude", "model": "m", "api_key": {"nested": SECRET}})
    with pytest.raises(ConfigError, match="api_key") as caught:
        Config.from_env(env)
    assert SECRET not in str(caught.value)


def test_a_full_metagpt_config2_reads_unchanged_and_its_global_proxy_applies(tmp_path):
    env = config2(
        tmp_path, {"api_type": "claude", "model": "claude-sonnet-4-6", "api_key": SECRET},
        proxy="http://127.0.0.1:3128", repair_llm_output=True, embedding={"api_type": "openai", "api_key": SECRET},
        search={"api_type": "ddg"}, mermaid={"engine": "nodejs"}, workspace={"path": "/tmp"},
        models={"fast": {"api_type": "deepseek", "model": "deepseek-chat", "api_key": SECRET}},
    )
    config = Config.from_env(env)
    assert config.llm.proxy == "http://127.0.0.1:3128" and config.services["fast"].proxy == "http://127.0.0.1:3128"
    with pytest.raises(ConfigError, match="not_a_metagpt_section"):
        Config.from_env(config2(tmp_path, {"api_type": "claude"}, not_a_metagpt_section=1))
