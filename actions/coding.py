"""MetaGPT's executable feedback as stock actions: write code, write tests, run them, debug, review.

MetaGPT's engineer runs its code and tests, reads what failed and debugs (the paper: HumanEval 85.9 % and
MBPP 87.7 % pass@1 on GPT-4, +4.2 and +5.4 points over the same team without it). These are the same
steps, with MetaGPT's names and prompt semantics, in single-file form:

* :class:`WriteCode` — the code for a requirement (and, given a bug report, its rewrite). ``k`` > 1
  samples up to ``k`` candidates and keeps the first that passes the requirement's **visible examples**
  (``>>>`` lines of its docstring), run in the sandbox: sampling with verification;
* :class:`WriteTest` — test functions (``def test_...``) for the code;
* :class:`RunCode` — runs code and tests in rolecast's sandbox (a separate, confined process: model code
  never runs in the framework's process) and returns a :class:`RunCodeResult` (stdout, stderr, outcome);
* :class:`DebugError` — reads a failed run, decides whether the code or the test is wrong (a constrained
  choice, as a role's ``_think`` chooses a state) and rewrites that one;
* :class:`WriteCodeReview` — reviews the code, LGTM or LBTM (a constrained choice), and rewrites it on LBTM.

What differs from MetaGPT: MetaGPT's actions read a project (PRD, system design, task list, a git
repository of files, ``CodingContext`` / ``RunCodeContext`` documents); these take the requirement and
the code as text, one file, and return text (code in one fenced block) or a :class:`RunCodeResult`.
MetaGPT's ``RunCode`` also asks a model whom to blame; here that decision is :class:`DebugError`'s.

Every answer that must be code is asked under a grammar on models that decode under one (the embedded
model): a fenced Python block and nothing else, valid in form by construction; elsewhere the block is
read from the answer (:func:`~actions.structured.parse_code`).
"""

from __future__ import annotations

import ast
import doctest
import zlib
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field

from rolecast.errors import UsageError
from rolecast.llm.grammar import literal

from .action import Action
from .structured import parse_code
from .tools.harness import run_tests

#: a code answer: one fenced Python block (the model can write nothing else when it decodes under a grammar)
CODE_GRAMMAR = 'root ::= "```python\\n" [^`]+ "```"'
#: seconds the sandbox gives one run of code and tests
DEFAULT_TIMEOUT = 20.0
#: the temperature candidates after the first are sampled at (the first is the model's settings')
SAMPLING_TEMPERATURE = 0.8


def fenced(code: str) -> str:
    """``code`` in one fenced Python block (how the coding actions' messages carry code)."""
    return f"```python\n{code.strip()}\n```"


def visible_examples(requirement: str) -> str:
    """The ``>>>`` examples of ``requirement`` (a docstring, or code whose functions' docstrings hold them,
    as a HumanEval prompt) as doctest source, or "" when it has none. Parsed by the standard library's
    doctest parser (text only: nothing is run here)."""
    texts = _docstrings(requirement) or [requirement]
    lines = []
    for text in texts:
        try:
            examples = doctest.DocTestParser().get_examples(text)
        except ValueError:  # (a malformed example: indentation doctest refuses)
            continue
        for example in examples:
            source = example.source.rstrip("\n").replace("\n", "\n... ")
            lines.append(f">>> {source}\n{example.want}")
    return "\n".join(lines)


def _docstrings(code: str) -> list[str]:
    """The docstrings of the functions ``code`` defines, when it parses as Python ([] otherwise)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            text = ast.get_docstring(node)
            if text:
                found.append(text)
    return found


def with_imports(code: str, requirement: str) -> str:
    """``code`` after the requirement's top-level imports it does not make itself (a HumanEval prompt's
    ``from typing import List``: the code's annotations need it when the code runs alone)."""
    try:
        tree = ast.parse(requirement)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return code
    missing = [ast.unparse(node) for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
    missing = [line for line in missing if line not in code]
    return "\n".join([*missing, code]) if missing else code


def function_stub(requirement: str) -> str:
    """The requirement as the start of its code when it is a function stub — Python whose last function has
    only a docstring, as a HumanEval prompt (helpers before it may have bodies) — else "". WriteCode then
    asks for the body alone: the answer starts with the stub, written by the grammar, and the model
    continues it (the completion HumanEval's problems were made for)."""
    last = _last_function(requirement)
    if last is None or _does_something(last):
        return ""
    return requirement.rstrip() + "\n"


def stub_grammar(stub: str) -> str:
    """The grammar of a stub's continuation: one fenced block that starts with ``stub`` and whose next line
    is a statement at the body's indentation — the model writes a body, it cannot leave the function empty
    and go on at the top level (what a small model does, with example calls)."""
    last = _last_function(stub)
    indent = " " * (last.body[0].col_offset if last is not None and last.body else 4)
    return f'root ::= "```python\\n" {literal(stub)} {literal(indent)} [^ \\t\\n`] [^`]* "```"'


def until_function_ends(code: str, stub: str) -> str:
    """``code`` without what the model wrote after the function's body at the top level (example calls,
    prints), when it starts with ``stub`` (as the grammar writes it); any other code as it is."""
    if not code.startswith(stub):
        return code
    kept = []
    for line in code[len(stub):].splitlines():
        if line.strip() and not line[:1].isspace() and not line.startswith(("def ", "async def ", "@", "class ")):
            break
        kept.append(line)
    return stub + "\n".join(kept).rstrip() + "\n"


def defined_functions(code: str) -> list[str]:
    """The names of the top-level functions ``code`` defines ([] when it does not parse)."""
    tree = _parsed(code)
    return [node.name for node in (tree.body if tree is not None else [])
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _parsed(code: str) -> ast.Module | None:
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _last_function(code: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    tree = _parsed(code)
    last = tree.body[-1] if tree is not None and tree.body else None
    return last if isinstance(last, (ast.FunctionDef, ast.AsyncFunctionDef)) else None


def _does_something(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    body = [b for b in node.body if not (isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant))]
    return bool(body) and not all(isinstance(b, ast.Pass) for b in body)


def _has_body(code: str, name: str = "") -> bool:
    """Whether ``code`` defines a function that does something (not only a docstring, ``pass`` or ``...``);
    with ``name``, whether the function of that name does (its last definition)."""
    tree = _parsed(code)
    functions = [node for node in (tree.body if tree is not None else [])
                 if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if name:
        functions = [node for node in functions if node.name == name][-1:]
    return any(_does_something(node) for node in functions)


def examples_as_test(examples: str) -> str:
    """A test function that runs doctest ``examples`` against the code it is run with (in the sandbox)."""
    return (
        "def test_visible_examples():\n"
        "    import doctest as _doctest\n"
        f"    _test = _doctest.DocTestParser().get_doctest({examples!r}, dict(globals()), 'examples', None, 0)\n"
        "    _lines = []\n"
        "    _runner = _doctest.DocTestRunner(optionflags=_doctest.NORMALIZE_WHITESPACE | _doctest.ELLIPSIS)\n"
        "    _runner.run(_test, out=_lines.append)\n"
        "    _report = [_line for _line in ''.join(_lines).splitlines() if not _line.startswith(('File ', '***'))]\n"
        "    assert _runner.failures == 0, chr(10).join(_report)[-600:]\n"
    )


class RunCodeResult(BaseModel):
    """What :class:`RunCode` saw: the tests' outcome, what the run printed, and a one-paragraph summary."""

    outcome: Literal["passed", "failed", "error", "timeout"]
    passed: list[str] = Field(default_factory=list)
    failed: dict[str, str] = Field(default_factory=dict)
    stdout: str = ""
    stderr: str = ""

    @property
    def ok(self) -> bool:
        """Every test passed (and there was at least one)."""
        return self.outcome == "passed"

    @property
    def summary(self) -> str:
        """What a developer reads: how many tests passed, and each failure (MetaGPT's ``summary``)."""
        if self.outcome == "timeout":
            return "The code and tests did not finish in time (an endless loop?)."
        if self.outcome == "error":
            tail = "\n".join(self.stderr.strip().splitlines()[-6:])
            return f"The code or the tests could not run:\n{tail}"
        lines = [f"{len(self.passed)} passed, {len(self.failed)} failed."]
        lines += [f"{name}: {why}" for name, why in self.failed.items()]
        return "\n".join(lines)


class RunCode(Action):
    """Run ``code`` and ``tests`` in rolecast's sandbox, never in this process (MetaGPT's RunCode).

    Each ``test_`` function the tests define is called (top-level asserts count as one test); the outcome
    reaches the framework on a channel the code cannot write (see :func:`actions.tools.harness.run_tests`).
    """

    name: str = "RunCode"
    timeout: float = DEFAULT_TIMEOUT

    async def run(self, code: str, tests: str, timeout: float | None = None) -> RunCodeResult:  # type: ignore[override]
        results, sandboxed = await run_tests(parse_code(code), parse_code(tests), timeout or self.timeout)
        stdout, stderr = str(sandboxed.stdout)[-4000:], str(sandboxed.stderr)[-4000:]
        if results is None:
            outcome: Literal["error", "timeout"] = "timeout" if sandboxed.timed_out else "error"
            return RunCodeResult(outcome=outcome, stdout=stdout, stderr=stderr)
        passed = [name for name, why in results.items() if why == "passed"]
        failed = {name: why for name, why in results.items() if why != "passed"}
        outcome2: Literal["passed", "failed"] = "passed" if passed and not failed else "failed"
        return RunCodeResult(outcome=outcome2, passed=passed, failed=failed, stdout=stdout, stderr=stderr)


class WriteCode(Action):
    """The code for a requirement, in one fenced block (MetaGPT's WriteCode, single-file form).

    ``run(requirement, code="", feedback="")``: with ``code`` and ``feedback`` (a bug report, a failed
    test's output) it rewrites ``code`` so that the feedback no longer applies. ``k`` > 1 samples up to
    ``k`` candidates (the first at the action's settings, the rest at :data:`SAMPLING_TEMPERATURE`) and
    keeps the first that defines a function and passes the requirement's visible examples in the sandbox;
    when none does, the first that at least parses; a candidate met before is not run again. Rewriting,
    every other candidate is asked afresh from the requirement alone (a small model shown failing code
    copies it). A rewrite of code that passes the visible examples
    must pass them too (the bug report may come from a wrong test): when no rewrite does, the code comes
    back unchanged. The candidates asked are in the run log as ordinary calls (a replayed run answers
    them from it).
    """

    name: str = "WriteCode"
    PROMPT_TEMPLATE: ClassVar[str] = """NOTICE
Role: You are a professional engineer; the main goal is to write correct, complete, PEP8-compliant Python 3 code.
Write the code for the requirement below, in ONE file: every function it asks for, complete, with the imports it needs.
{rewrite}
## Requirement
{requirement}
{existing}{feedback}
## Code
Return the code in one ```python block, with NO other text.
"""
    REWRITE_NOTE: ClassVar[str] = "The code below failed. Rewrite it so that the failure is fixed.\n"
    #: the prompt when the requirement is a function stub (signature and docstring): the body is asked for
    BODY_TEMPLATE: ClassVar[str] = """Complete the Python function below. Write its body.
{feedback}
{stub}
"""
    k: int = 1
    timeout: float = DEFAULT_TIMEOUT

    def prompt(self, requirement: str, code: str = "", feedback: str = "") -> str:
        """The prompt for ``requirement`` (and, when rewriting, the code and the feedback on it)."""
        rewriting = bool(code and feedback)
        return self.PROMPT_TEMPLATE.format(
            requirement=requirement.strip(),
            rewrite=self.REWRITE_NOTE if rewriting else "",
            existing=f"## Existing code\n{fenced(code)}\n" if rewriting else "",
            feedback=f"## Bug report\n{feedback.strip()}\n" if rewriting else "",
        )

    async def run(self, requirement: str, code: str = "", feedback: str = "") -> str:  # type: ignore[override]
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise UsageError(f"WriteCode k is a whole number of candidates >= 1, not {self.k!r}")
        stub = function_stub(requirement)
        prompt = self.prompt(requirement, code, feedback) if not stub else self.BODY_TEMPLATE.format(
            stub=fenced(stub), feedback=f"\n## Bug report on the last version\n{feedback.strip()}\n{fenced(code)}\n"
            if code and feedback else "")
        grammar = stub_grammar(stub) if stub else CODE_GRAMMAR
        asked = defined_functions(stub)[-1] if stub else ""  # the stub's function: its body is what is asked
        examples = visible_examples(requirement)
        if code and feedback and examples and (await self._passes(parse_code(code), examples)):
            # a rewrite must keep what already works: the bug report may come from a wrong test (a small
            # model's tests often are), and a rewrite that breaks the requirement's own examples is worse
            return await self._rewrite_keeping(prompt, grammar, stub, requirement, examples, parse_code(code), asked)
        prompts, seed = [prompt], 0
        if code and feedback and self.k > 1:
            # a rewrite's prompt shows the failing code, and a small model copies it: every other candidate
            # is asked afresh, from the requirement alone, with seeds of its own (from the failing code: a
            # replayed run asks the same) so it is not one of the first round's samples again
            prompts.append(self.prompt(requirement) if not stub else self.BODY_TEMPLATE.format(stub=fenced(stub),
                                                                                                 feedback=""))
            seed = zlib.crc32(code.encode()) % 100_000 * self.k
        first_valid, tried = "", set()
        for attempt in range(self.k):
            candidate = await self._candidate(prompts[attempt % len(prompts)], attempt, grammar, stub, requirement,
                                              seed)
            if not _has_body(candidate, asked) or candidate in tried:
                continue
            tried.add(candidate)
            if self.k == 1 or not examples:
                return fenced(candidate)
            first_valid = first_valid or candidate
            if await self._passes(candidate, examples):
                return fenced(candidate)
        return fenced(first_valid or candidate)

    async def _passes(self, code: str, examples: str) -> bool:
        return (await RunCode(timeout=self.timeout).run(code, examples_as_test(examples))).ok

    async def _rewrite_keeping(self, prompt: str, grammar: str, stub: str, requirement: str, examples: str,
                               code: str, asked: str) -> str:
        """Up to ``k`` rewrites of ``code`` (which passes the visible examples): the first that still passes
        them, or ``code`` itself when none does."""
        for attempt in range(self.k):
            candidate = await self._candidate(prompt, attempt, grammar, stub, requirement)
            if (_has_body(candidate, asked) and candidate.strip() != code.strip()
                    and await self._passes(candidate, examples)):
                return fenced(candidate)
        return fenced(code)

    async def _candidate(self, prompt: str, attempt: int, grammar: str, stub: str, requirement: str,
                         seed: int = 0) -> str:
        """One answer to ``prompt``: the code, cut where the stub's function ends, with the imports it needs."""
        systems = [self.prefix] if self.prefix else []
        settings: dict[str, Any] = self.settings.model_dump(exclude_none=True) if self.settings else {}
        if attempt:  # later candidates sampled: other answers to the same prompt
            settings.update(temperature=SAMPLING_TEMPERATURE, seed=seed + attempt)
        answer = await self.llm.ask(prompt, systems, settings=settings or None, grammar=grammar)
        code = parse_code(answer)
        return with_imports(until_function_ends(code, stub) if stub else code, requirement)


class WriteTest(Action):
    """Test functions for the code (MetaGPT's WriteTest, single-file form): ``def test_...`` with asserts,
    assuming the code is imported; the requirement's visible examples become one more test."""

    name: str = "WriteTest"
    PROMPT_TEMPLATE: ClassVar[str] = """NOTICE
1. Role: You are a QA engineer; the main goal is to design, develop, and execute PEP8 compliant, well-structured, \
maintainable test cases for Python 3.
2. Requirement: write {k} unit tests for the code below, each a function whose name starts with test_, that calls \
the code's functions and checks the result with assert. The code is already imported: do not import it.
{requirement}
## Code to be tested
{code}
## Test
Return the tests in one ```python block, with NO other text.
"""
    k: int = 3

    async def run(self, code: str, requirement: str = "") -> str:  # type: ignore[override]
        source = parse_code(code)
        prompt = self.PROMPT_TEMPLATE.format(
            k=self.k, code=fenced(source),
            requirement=f"## Requirement of the code\n{requirement.strip()}\n" if requirement.strip() else "",
        )
        tests = parse_code(await self._aask(prompt, grammar=CODE_GRAMMAR))
        if not any(name.startswith("test") for name in defined_functions(tests)):
            tests = ""  # (no test function: only the examples test below, if any)
        examples = visible_examples(requirement)
        if examples:
            tests = f"{tests}\n\n{examples_as_test(examples)}".strip()
        return fenced(tests) if tests else ""


class DebugResult(BaseModel):
    """:class:`DebugError`'s decision and the rewrite: ``blame`` is ``"code"`` or ``"test"``."""

    blame: Literal["code", "test"]
    code: str
    reason: str = ""


class DebugError(Action):
    """Read a failed run and rewrite the code or the test, whichever is wrong (MetaGPT's DebugError).

    The decision is a constrained choice (``llm.choose``: an answer among two numbered options, valid by
    construction on grammar models, parsed strictly elsewhere); then the one that is wrong is rewritten
    with the run's output as its bug report."""

    name: str = "DebugError"
    BLAME_TEMPLATE: ClassVar[str] = """NOTICE
Role: You are a Development Engineer or QA engineer. The tests below were run against the code and failed.
Decide which one is wrong.
## Requirement
{requirement}
## Code
{code}
## Test
{tests}
## Test output
{summary}
Now choose one of the following:
0. the code is wrong
1. the test is wrong
Just answer a number between 0-1.
"""
    TEST_FIX_TEMPLATE: ClassVar[str] = """NOTICE
Role: You are a QA engineer. These tests fail against code that is correct: the tests are wrong.
Rewrite the tests so that they check what the requirement asks, with correct expected values.
## Requirement
{requirement}
## Code
{code}
## Test
{tests}
## Test output
{summary}
## Rewritten test
Return the tests in one ```python block, with NO other text.
"""

    async def run(  # type: ignore[override]
        self, code: str, tests: str, result: RunCodeResult, requirement: str = "", *, rewrite_code: bool = True,
    ) -> DebugResult:
        """Decide whom to blame for ``result``; rewrite the tests, or the code (``rewrite_code=False``: the
        code is left to its author, as the QaEngineer leaves it to the Engineer with a bug report)."""
        source, test_source = parse_code(code), parse_code(tests)
        parts = {"requirement": requirement.strip() or "(as the code says)", "code": fenced(source),
                 "tests": fenced(test_source), "summary": result.summary}
        if "test_visible_examples" in result.failed:
            choice = 0  # the requirement's own examples failed: the code is wrong, whatever a model says
        else:
            choice = await self.llm.choose(self.BLAME_TEMPLATE.format(**parts), 2)
        if choice == 1:
            answer = await self._aask(self.TEST_FIX_TEMPLATE.format(**parts), grammar=CODE_GRAMMAR)
            rewritten = parse_code(answer)
            if "test_visible_examples" in test_source and "test_visible_examples" not in rewritten:
                rewritten += "\n\n" + test_source[test_source.index("def test_visible_examples"):]
            return DebugResult(blame="test", code=fenced(rewritten), reason="the test was wrong")
        if not rewrite_code:
            return DebugResult(blame="code", code=fenced(source), reason=result.summary)
        rewrite = WriteCode(k=1)
        rewrite.llm = self.llm
        fixed = await rewrite.run(requirement or source, source, result.summary)
        return DebugResult(blame="code", code=fixed, reason=result.summary)


class WriteCodeReview(Action):
    """Review the code against its requirement: LGTM keeps it, LBTM rewrites it with the review's comments
    (MetaGPT's WriteCodeReview; the verdict a constrained choice)."""

    name: str = "WriteCodeReview"
    REVIEW_TEMPLATE: ClassVar[str] = """NOTICE
Role: You are a professional software engineer; your main task is to review and revise the code.
## Requirement
{requirement}
## Code to be reviewed
{code}
## Code review
Does the code fully and correctly implement the requirement? List each bug in one line; say "no bugs" when \
there are none.
"""
    VERDICT_TEMPLATE: ClassVar[str] = """## Code
{code}
## Code review
{review}
Now choose one of the following:
0. LGTM: the code is correct as it is
1. LBTM: the code must be rewritten
Just answer a number between 0-1.
"""

    async def run(self, code: str, requirement: str = "") -> str:  # type: ignore[override]
        source = fenced(parse_code(code))
        review = await self._aask(self.REVIEW_TEMPLATE.format(requirement=requirement.strip(), code=source))
        if await self.llm.choose(self.VERDICT_TEMPLATE.format(code=source, review=review), 2) != 1:
            return source
        rewrite = WriteCode(k=1)
        rewrite.llm = self.llm
        return await rewrite.run(requirement or source, source, review)


__all__ = [
    "CODE_GRAMMAR", "DebugError", "DebugResult", "RunCode", "RunCodeResult", "WriteCode", "WriteCodeReview",
    "WriteTest", "defined_functions", "examples_as_test", "fenced", "function_stub", "until_function_ends",
    "visible_examples", "with_imports",
]
