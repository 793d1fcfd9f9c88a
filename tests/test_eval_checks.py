"""The checks a coding evalset needs (issue 45): reference tests by the evalset's author."""

from __future__ import annotations

import asyncio

import pytest

from rolecast.errors import EvalsetError
from rolecast.eval.checks import run_check
from rolecast.eval.evalset import parse_check
from rolecast.eval.record import RunRecord, Said

GOOD = "```python\ndef add(a, b):\n    return a + b\n```"
BAD = "```python\ndef add(a, b):\n    return a - b\n```"
TESTS = "def test_small():\n    assert add(2, 3) == 5\n\ndef test_negative():\n    assert add(-1, -1) == -2\n"


def _record(code: str) -> RunRecord:
    return RunRecord("r", messages=[Said("user", "", "write add"), Said("Alice", "WriteCode", code)])


def _score(code: str, item: dict, folder=None) -> tuple[bool, str]:
    result = asyncio.run(run_check(_record(code), parse_check("case 'add' check 1", item, folder)))
    return result.passed, result.reason






def test_code_that_defines_its_own_passing_tests_does_not_replace_the_authors():
    sneaky = BAD + "\n\ndef test_small():\n    pass\n"
    # the author's test_small is defined after the code, and only the author's tests are called
    passed, reason = _score(sneaky, {"tests_pass": {"code_from": "Alice", "tests": TESTS}})
    assert not passed and "test_small: AssertionError" in reason








LONG_TESTS = ("def test_add_with_a_rather_long_name_that_would_have_been_cut_in_the_table_before():\n"
              "    assert add(2, 3) == 5, 'add(2, 3) should be five, and this message is long enough to be cut'\n")




SCORERS = '''\
def says_add(record):
    return any("def add" in m.content for m in record.messages)


def share_of_words(record):
    words = record.messages[-1].content.split()
    return min(1.0, len(words) / 10), f"{len(words)} words"


def broken(record):
    return "yes"
'''


def test_a_python_check_calls_the_evalset_authors_function_with_the_run_record(tmp_path):
    (tmp_path / "scorers.py").write_text(SCORERS)
    assert _score(GOOD, {"python": {"function": "scorers:says_add"}}, tmp_path) == (
        True, "scorers:says_add: score 1.00 >= threshold 1.00")
    assert not _score("nothing here", {"python": {"function": "scorers:says_add"}}, tmp_path)[0]


def test_a_python_check_scores_a_run_against_its_threshold(tmp_path):
    (tmp_path / "scorers.py").write_text(SCORERS)
    check = parse_check("c", {"python": {"function": "scorers:share_of_words", "threshold": 0.5}}, tmp_path)
    result = asyncio.run(run_check(_record("one two three four five six"), check))
    assert (result.passed, result.score) == (True, 0.6)
    assert result.reason == "scorers:share_of_words: score 0.60 >= threshold 0.50: 6 words"
    result = asyncio.run(run_check(_record("one two"), check))
    assert (result.passed, result.score) == (False, 0.2)


def test_a_python_check_whose_function_returns_nonsense_fails_saying_so(tmp_path):
    (tmp_path / "scorers.py").write_text(SCORERS)
    passed, reason = _score(GOOD, {"python": {"function": "scorers:broken"}}, tmp_path)
    assert not passed and "returned 'yes'; a check function returns a bool" in reason


@pytest.mark.parametrize("function, said", [
    ("os:system", "there is no"),  # a module on sys.path is never imported: only the evalset's folder
    ("scorers", "is `module:function`"),
    ("../scorers:says_add", "is `module:function`"),
])
def test_a_python_check_imports_only_a_module_of_the_evalsets_folder(tmp_path, function, said):
    (tmp_path / "scorers.py").write_text(SCORERS)
    with pytest.raises(EvalsetError, match=said):
        parse_check("c", {"python": {"function": function}}, tmp_path)
