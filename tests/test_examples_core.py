"""The core examples run end to end, with a scripted model, as a user would start them."""

from __future__ import annotations

import importlib.util
import re

import pytest
import support


def run_example(*args: str) -> str:
    out = support.run_example(*args)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_multi_agents_example_runs_coder_tester_reviewer():
    out = run_example(
        "examples/build_customized_multi_agents.py", "--scripted", "--no-console",
        "write a function that adds two numbers",
    )
    assert "--- Alice (SimpleWriteCode)\ndef add(a, b):" in out
    assert "--- Bob (SimpleWriteTest)" in out
    assert "--- Charlie (SimpleWriteReview)" in out
    assert "of $3.0000" in out


def test_scripted_examples_answer_about_the_idea_given():
    out = run_example("examples/build_customized_multi_agents.py", "--scripted", "--no-console",
                      "write a function that computes a product of numbers")
    assert "def product(numbers):" in out and "assert product([2, 3, 4]) == 24" in out
    assert "def add" not in out
    out = run_example("examples/build_customized_multi_agents.py", "--scripted", "--no-console",
                      "sort words by length")
    assert "def sort_words_by_length(*args):" in out and "NotImplementedError" in out
    out = run_example("examples/debate.py", "--scripted", "--no-console", "--n-round", "2",
                      "Is tea better than coffee?")
    assert "on 'Is tea better than coffee?', I argue for" in out


def test_the_examples_console_is_plain_text_in_a_pipe():
    out = run_example("examples/debate.py", "--scripted", "--n-round", "2", "Cats or dogs?")
    lines = out.splitlines()
    assert lines[0].startswith("── run ") and "── round 1 ──" in lines
    assert "Ada (Optimist) → Ben · SpeakAloud" in lines
    assert "── run summary ──" in lines and "\x1b[" not in out
    assert lines[-1].startswith("stopped: n_round after 2 round(s) · run id ")


def test_an_example_failure_is_one_line_not_a_traceback():
    env_url = "http://127.0.0.1:9/v1"  # nothing listens on port 9 (discard)
    out = support.run_example("examples/debate.py", "--n-round", "1", env={
        "OPENAI_BASE_URL": env_url, "OPENAI_API_KEY": "x",
    })
    assert out.returncode == 1
    errors = [line for line in out.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "ActionFailed" in errors[0] and "127.0.0.1:9" in errors[0], out.stderr[-2000:]
    assert "Traceback" not in out.stderr


def test_debate_example_alternates_speakers():
    out = run_example("examples/debate.py", "--scripted", "--no-console", "--n-round", "4")
    speakers = [line[4:] for line in out.splitlines() if line.startswith("--- ")]
    assert speakers == ["user", "Ada", "Ben", "Ada", "Ben"]


def test_customized_agent_example_runs_the_code_in_the_sandbox():
    out = run_example("examples/build_customized_agent.py", "--scripted")
    assert out.rstrip().endswith("--- RunnableCoder (SimpleRunCode)\n55")


@pytest.mark.parametrize("command", [["info"]])
def test_cli_info_names_the_provider(command):
    out = run_example("-m", "rolecast.cli", *command)
    assert "provider" in out


@pytest.mark.skipif(importlib.util.find_spec("xllamacpp") is None, reason="needs the llama.cpp engine (xllamacpp)")
def test_cli_info_names_the_engine_its_cpu_features_and_threads():
    out = support.run_example("-m", "rolecast.cli", "info", env={"ROLECAST_PROVIDER": "local", "OPENAI_API_KEY": ""})
    assert out.returncode == 0, out.stderr
    rows = dict(line.split(" : ", 1) for line in out.stdout.splitlines() if " : " in line)
    assert rows["engine".ljust(18)].startswith("llama.cpp (xllamacpp 20")
    assert rows["CPU features".ljust(18)].strip()  # whatever this CPU has, llama.cpp names it
    threads = rows["threads".ljust(18)]
    assert re.fullmatch(r"\d+ generating, \d+ evaluating prompts \(\d+ cores, \d+\.\d free now\)", threads)


def test_cli_version_and_the_model_info_would_run(tmp_path):
    import rolecast

    assert run_example("-m", "rolecast.cli", "--version").strip() == f"rolecast {rolecast.__version__}"
    fake = tmp_path / "model.gguf"
    fake.write_bytes(b"GGUF" + b"\0" * 2048)
    out = support.run_example("-m", "rolecast.cli", "info", env={"ROLECAST_MODEL_PATH": str(fake)})
    assert out.returncode == 0, out.stderr
    assert "model              : model" in out.stdout
    assert f"model file         : {fake} (0.0 MiB)" in out.stdout


@pytest.mark.parametrize(("content", "why"), [(None, "does not exist"), (b"not a model", "is not a GGUF model file")])
def test_cli_info_fails_on_a_missing_or_broken_gguf(tmp_path, content, why):
    path = tmp_path / "broken.gguf"
    if content is not None:
        path.write_bytes(content)
    out = support.run_example("-m", "rolecast.cli", "info", env={"ROLECAST_MODEL_PATH": str(path)})
    assert out.returncode == 2
    assert "rolecast: ConfigError: " in out.stderr and why in out.stderr and str(path) in out.stderr


@pytest.mark.parametrize("example", ["react_agent.py", "data_plan.py"])  # the same three lines in each
def test_a_replaying_example_refuses_another_question_instead_of_ignoring_it(example):
    out = support.run_example(f"examples/{example}", "--scripted", "What is 2 + 2?")
    assert out.returncode == 2 and "--scripted replays a recorded run about" in out.stderr


def test_the_customized_agent_writes_code_about_the_instruction():
    out = run_example("examples/build_customized_agent.py", "--scripted", "compute 10 factorial")
    assert out.rstrip().endswith("--- RunnableCoder (SimpleRunCode)\n3628800")
