"""Configuration sources, provider resolution errors, price table and budget arithmetic."""

from __future__ import annotations

import pytest

from rolecast.accounting.cost import CostManager
from rolecast.context import Context
from rolecast.core.config import Config, LLMConfig
from rolecast.errors import BudgetExceeded, ConfigError
from rolecast.llm import create_llm


def test_environment_variables_fill_the_config():
    cfg = Config.from_env(
        {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "ROLECAST_MODEL": "m1"},
        use_files=False,
    )
    assert cfg.llm.api_key is not None and cfg.llm.api_key.get_secret_value() == "sk-test"
    assert cfg.llm.base_url == "http://127.0.0.1:9/v1" and cfg.llm.model == "m1"
    assert "sk-test" not in repr(cfg)  # the key never shows in logs


def test_yaml_file_then_environment_on_top(tmp_path):
    path = tmp_path / "rolecast.yaml"
    path.write_text(
        "llm:\n  provider: openai\n  model: from-file\n  timeout: 5\nservices:\n  fast:\n    provider: local\n"
    )
    cfg = Config.from_env({"ROLECAST_CONFIG": str(path), "ROLECAST_MODEL": "from-env"})
    assert cfg.llm.provider == "openai" and cfg.llm.timeout == 5
    assert cfg.llm.model == "from-env"
    assert cfg.services["fast"].provider == "local"


def test_a_missing_or_invalid_config_file_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        Config.from_env({"ROLECAST_CONFIG": str(tmp_path / "nope.yaml")})
    bad = tmp_path / "bad.yaml"
    bad.write_text("llm:\n  temprature: 2\n")
    with pytest.raises(ConfigError, match="invalid"):
        Config.from_env({"ROLECAST_CONFIG": str(bad)})
    # any name may be a plugin's provider: an unknown one fails when the model is made, naming the known ones
    with pytest.raises(ConfigError, match=r"no model provider named 'claud' \(did you mean 'claude'\?\); known: "
                       r".*anthropic.*claude.*gemini.*local.*openai"):
        create_llm(Config.from_env({"ROLECAST_PROVIDER": "claud"}, use_files=False).llm)
    with pytest.raises(ConfigError, match="ROLECAST_PROVIDER"):
        Config.from_env({"ROLECAST_PROVIDER": "no such/thing"}, use_files=False)


def test_config_is_read_only_when_a_model_is_first_needed(monkeypatch):
    calls = []
    monkeypatch.setattr(Config, "from_env", classmethod(lambda cls, *a, **k: calls.append(1) or Config()))
    ctx = Context()
    assert calls == []
    _ = ctx.config
    assert calls == [1]


def test_no_model_anywhere_names_both_ways_out(monkeypatch):
    import rolecast.llm as llm_mod

    monkeypatch.setattr(llm_mod, "local_model_available", lambda: False)
    ctx = Context(config=Config(llm=LLMConfig()))
    with pytest.raises(ConfigError) as info:
        ctx.llm()
    message = str(info.value)
    assert "OPENAI_API_KEY" in message and "rolecast[local]" in message


def test_prices_match_dated_snapshots_and_unknown_models_cost_zero_once(caplog):
    cm = CostManager()
    assert cm.price_of("gpt-4o-mini-2024-07-18") == cm.prices["gpt-4o-mini"]
    assert cm.price_of("openai/gpt-4o") == cm.prices["gpt-4o"]
    assert cm.cost_of("gpt-4o", 1_000_000, 1_000_000) == pytest.approx(12.5)
    assert cm.cost_of("my-own-model", 10**6, 10**6) == 0.0
    assert "my-own-model" in cm._unpriced_warned
    assert cm.cost_of("anything", 10**6, 0, free=True) == 0.0


def test_a_price_table_changed_at_run_time_prices_the_next_call():
    cm = CostManager()
    assert cm.price_of("my-own-model-v2") is None and cm.price_of("gpt-4o-2024-08-06") == cm.prices["gpt-4o"]
    cm.prices["my-own-model"] = (1.0, 2.0)  # a new family: its dated names find it
    assert cm.price_of("my-own-model-v2") == (1.0, 2.0)
    cm.prices["gpt-4o"] = (5.0, 20.0)  # a new price under the same name
    assert cm.cost_of("gpt-4o-2024-08-06", 10**6, 0) == pytest.approx(5.0)
    del cm.prices["my-own-model"]
    cm.prices["my-own"] = (3.0, 3.0)  # as many names as before, not the same ones
    assert cm.price_of("my-own-model-v2") == (3.0, 3.0)
    cm.prices = {"gpt": (0.5, 0.5)}  # a new table
    assert cm.price_of("gpt-4o-2024-08-06") == (0.5, 0.5) and cm.price_of("my-own-model-v2") is None


def test_budget_check_refuses_a_call_whose_prompt_would_pass_the_limit():
    cm = CostManager(max_budget=1.0)
    cm.record("gpt-4o", 300_000, 0, role="A")  # $0.75
    cm.check("gpt-4o", 50_000)  # +$0.125 fits
    with pytest.raises(BudgetExceeded) as info:
        cm.check("gpt-4o", 200_000, role="A")  # +$0.50 would pass $1
    assert info.value.spent == pytest.approx(0.75) and info.value.limit == 1.0
    assert info.value.role == "A"


def test_summary_lists_roles_and_total():
    cm = CostManager(max_budget=2.0)
    cm.record("gpt-4o-mini", 1000, 500, role="Alice")
    text = cm.summary()
    assert text.startswith("Alice: 1 calls, 1000+500 tokens")
    assert "of $2.0000" in text
