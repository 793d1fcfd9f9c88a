"""The per-conversation state cache of the embedded model (bookkeeping, with fake llama.cpp state)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from rolecast.config import LLMConfig, LocalConfig
from rolecast.context import Context
from rolecast.errors import ConfigError
from rolecast.llm import prefix_cache
from rolecast.llm.prefix_cache import PrefixCache, SavedState, conversation_key


class FakeLlama:
    """Stands for a llama context: ``tokens`` is its KV cache, ``_seed`` its sampling seed."""

    def __init__(self) -> None:
        self.tokens: list[int] = []
        self._seed = 42


def fake_cache(budget: int, bytes_per_token: int = 100) -> PrefixCache:
    def snapshot(llama: FakeLlama) -> SavedState | None:
        if not llama.tokens:
            return None
        tokens = np.array(llama.tokens, dtype=np.int32)
        return SavedState(tokens=tokens, kv=None, kv_size=bytes_per_token * len(tokens), seed=llama._seed)

    def apply(llama: FakeLlama, state: SavedState) -> None:
        llama.tokens = state.tokens.tolist()
        llama._seed = state.seed

    def clear(llama: FakeLlama) -> None:
        llama.tokens = []

    return PrefixCache(budget, snapshot=snapshot, apply=apply, clear=clear, initial_seed=7)


def call(cache: PrefixCache, llama: FakeLlama, key: Any, tokens: list[int]) -> int:
    """One model call by ``key`` that leaves ``tokens`` in the context; returns the tokens it started from."""
    restored = cache.begin(llama, key)
    llama.tokens = tokens
    cache.end(llama, key)
    return restored


def test_each_key_starts_from_its_own_state_never_another_keys() -> None:
    cache, llama = fake_cache(10**6), FakeLlama()
    assert call(cache, llama, "alice", [1, 2, 3]) == 0
    assert call(cache, llama, "bob", [9, 9]) == 0  # bob does not start from alice's tokens
    cache.begin(llama, "alice")
    assert llama.tokens == [1, 2, 3]
    llama.tokens = [1, 2, 3, 4]
    cache.end(llama, "alice")
    cache.begin(llama, "bob")
    assert llama.tokens == [9, 9]
    stats = cache.stats()
    assert (stats.hits, stats.misses, stats.entries) == (2, 2, 2)


def test_a_new_key_gets_the_initial_sampling_seed_not_the_last_callers() -> None:
    cache, llama = fake_cache(10**6), FakeLlama()
    cache.begin(llama, "alice")
    llama._seed, llama.tokens = 12345, [1]
    cache.end(llama, "alice")
    cache.begin(llama, "bob")
    assert llama._seed == 7
    cache.begin(llama, "alice")
    assert llama._seed == 12345


def seeds_after(cache: PrefixCache, llama: FakeLlama, script: list[tuple[str, int]]) -> list[int]:
    """Calls by the keys in ``script``, each moving the running seed on by its number; the seed each started with."""
    started = []
    for key, step in script:
        cache.begin(llama, key)
        started.append(llama._seed)
        llama._seed, llama.tokens = llama._seed + step, [step] * 4  # what llama-cpp-python does without a seed
        cache.end(llama, key)
    return started


def test_a_keys_running_seed_does_not_depend_on_the_budget_eviction_or_clearing() -> None:
    script = [("alice", 10), ("bob", 100), ("alice", 1000), ("bob", 1), ("alice", 2)]
    kept = seeds_after(fake_cache(10**6), FakeLlama(), script)
    assert kept == [7, 7, 17, 107, 1017]  # each key's own chain, from the initial seed
    assert seeds_after(fake_cache(0), FakeLlama(), script) == kept  # reuse off: no state, same seeds
    assert seeds_after(fake_cache(budget=400, bytes_per_token=100), FakeLlama(), script) == kept  # one state fits
    cleared, llama = fake_cache(10**6), FakeLlama()
    seeds_after(cleared, llama, script[:2])
    cleared.clear()
    assert seeds_after(cleared, llama, script[2:]) == kept[2:]


def test_the_running_seeds_kept_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prefix_cache, "SEED_KEYS", 2)
    cache, llama = fake_cache(0), FakeLlama()
    assert seeds_after(cache, llama, [("a", 1), ("b", 1), ("a", 1), ("c", 1), ("a", 1), ("b", 1)]) == [7, 7, 8, 7, 9, 7]


def test_least_recently_used_states_are_evicted_beyond_the_budget() -> None:
    cache, llama = fake_cache(budget=1000, bytes_per_token=100), FakeLlama()  # 10 tokens worth
    call(cache, llama, "a", [1] * 4)
    call(cache, llama, "b", [2] * 4)
    cache.begin(llama, "a")  # a is now the most recently used
    call(cache, llama, "c", [3] * 4)
    assert cache.keys() == ["a", "c"]
    stats = cache.stats()
    assert stats.evictions == 1 and stats.bytes <= stats.budget_bytes
    cache.budget_bytes = 500  # shrinking evicts at once
    assert cache.keys() == ["c"]


def test_a_state_larger_than_the_budget_is_not_kept_and_a_zero_budget_keeps_nothing() -> None:
    cache, llama = fake_cache(budget=300, bytes_per_token=100), FakeLlama()
    call(cache, llama, "big", [1] * 5)
    assert cache.keys() == [] and cache.stats().bytes == 0
    off, llama = fake_cache(budget=0), FakeLlama()
    call(off, llama, "a", [1])
    assert call(off, llama, "a", [1, 2]) == 0 and off.keys() == []


def test_a_failed_call_forgets_the_keys_state() -> None:
    cache, llama = fake_cache(10**6), FakeLlama()
    call(cache, llama, "a", [1, 2])
    cache.begin(llama, "a")
    cache.discard("a")  # what LocalLLM does when the call raised
    assert cache.begin(llama, "a") == 0 and llama.tokens == []


def test_the_key_is_the_running_role_of_its_team_else_the_system_prompt() -> None:
    messages = [{"role": "system", "content": "You are Alice."}, {"role": "user", "content": "hi"}]
    team_a, team_b = Context(), Context()
    with team_a.scope(role="Alice"):
        alice_a = conversation_key(messages)
        assert conversation_key([{"role": "user", "content": "other"}]) == alice_a
    with team_a.scope(role="Bob"):
        assert conversation_key(messages) != alice_a
    with team_b.scope(role="Alice"):
        assert conversation_key(messages) != alice_a  # the same name in another team
    no_role = conversation_key(messages)
    assert no_role == conversation_key([messages[0], {"role": "user", "content": "else"}])
    assert no_role != conversation_key([{"role": "system", "content": "You are Bob."}])


def test_the_budget_is_configurable_and_checked() -> None:
    assert LocalConfig().prefix_cache_mib == 256
    config = LLMConfig(prefix_cache_mib=0)  # a local-only option: it means the local provider
    assert isinstance(config, LocalConfig) and config.prefix_cache_mib == 0
    with pytest.raises(ConfigError):
        LLMConfig(prefix_cache_mib=-1)


def test_saved_state_size_counts_the_kv_bytes_and_tokens() -> None:
    state = SavedState(tokens=np.zeros(10, dtype=np.int32), kv=SimpleNamespace(), kv_size=1000, seed=0)
    assert state.nbytes == 1040
