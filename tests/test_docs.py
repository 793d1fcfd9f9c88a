"""Every code block of README.md and docs/**/*.md is checked by this test, pages added later too.

A block runs unless the line before its fence (HTML comments may stand between) marks it:

- ``<!-- docs-test: integration -->``  it runs on the embedded model (only in integration runs);
- ``<!-- docs-test: fragment REASON -->``  a python excerpt (top-level ``await``, names from the
  page's prose): compiled, not run;
- ``<!-- docs-test: skip REASON -->``  not run, for the reason given (installing packages,
  starting a server).

python blocks run in a fresh interpreter with this checkout first on the path; bash blocks run
under ``bash -euo pipefail``; yaml blocks are parsed. The summary test prints how many blocks
ran, were compiled, or were skipped and why: none is skipped silently, and an unmarked block of
another language, or a marker without a reason, fails.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^```(\S*)\s*$")
MARKER = re.compile(r"^<!--\s*docs-test:\s*(integration|fragment|skip)\s*(.*?)\s*-->\s*$")
LANGUAGES = ("python", "bash", "yaml", "text", "mermaid")


@dataclass(frozen=True)
class Block:
    path: str
    line: int
    language: str
    code: str
    mode: str  # "run", "integration", "fragment", "skip"
    reason: str

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}"


def pages() -> list[Path]:
    """README.md and every page under docs/."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks_of(path: Path) -> list[Block]:
    """The fenced code blocks of one page, each with its marker."""
    found: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    marker: tuple[str, str] | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        mark = MARKER.match(line.strip())
        fence = FENCE.match(line)
        if mark:
            marker = (mark.group(1), mark.group(2))
        elif fence:
            start = i + 1
            i += 1
            body = []
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            mode, reason = marker or ("run", "")
            found.append(Block(str(path.relative_to(ROOT)), start, fence.group(1) or "(none)",
                               "\n".join(body) + "\n", mode, reason))
            marker = None
        elif line.strip() and not line.strip().startswith("<!--"):
            marker = None
        i += 1
    return found


BLOCKS = [block for page in pages() for block in blocks_of(page)]


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ROLECAST_MODEL", "ROLECAST_PROVIDER"):
        env.pop(name, None)
    return env


def _check(block: Block) -> None:
    if block.language == "python":
        compile(block.code, block.id, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        if block.mode in ("run", "integration"):
            result = subprocess.run([sys.executable, "-c", block.code], cwd=ROOT, env=_env(),
                                    capture_output=True, text=True, timeout=600)
            assert result.returncode == 0, f"{block.id}:\n{result.stdout}\n{result.stderr}"
    elif block.language == "bash":
        result = subprocess.run(["bash", "-n", "-c", block.code], capture_output=True, text=True)
        assert result.returncode == 0, f"{block.id}: not valid bash: {result.stderr}"
        if block.mode in ("run", "integration"):
            result = subprocess.run(["bash", "-euo", "pipefail", "-c", block.code], cwd=ROOT, env=_env(),
                                    capture_output=True, text=True, timeout=600)
            assert result.returncode == 0, f"{block.id}:\n{result.stdout}\n{result.stderr}"
    elif block.language == "yaml":
        yaml.safe_load(block.code)


def _params(mode: str) -> list[object]:
    return [pytest.param(b, id=b.id) for b in BLOCKS if b.mode == mode]


def test_every_block_is_accounted_for(capsys):
    """Each block is of a known language, each marker gives its reason; the tally is printed."""
    problems = [f"{b.id}: a block of language {b.language!r}" for b in BLOCKS if b.language not in LANGUAGES]
    problems += [f"{b.id}: a {b.mode} marker without a reason" for b in BLOCKS
                 if b.mode in ("fragment", "skip") and not b.reason]
    problems += [f"{b.id}: a fragment marker on a {b.language} block" for b in BLOCKS
                 if b.mode == "fragment" and b.language != "python"]
    assert problems == []
    assert any(b.path == "README.md" for b in BLOCKS)
    tally = {mode: sum(b.mode == mode for b in BLOCKS) for mode in ("run", "integration", "fragment", "skip")}
    with capsys.disabled():
        print(f"\ndoc code blocks: {len(BLOCKS)} in {len(pages())} pages — run {tally['run']}, "
              f"run on the embedded model (integration) {tally['integration']}, "
              f"compiled only (fragments) {tally['fragment']}, skipped {tally['skip']}:")
        for b in BLOCKS:
            if b.mode in ("fragment", "skip"):
                print(f"  {b.mode:<8} {b.id} ({b.language}): {b.reason}")


@pytest.mark.parametrize("block", _params("run"))
def test_block_runs(block: Block):
    _check(block)


@pytest.mark.integration
@pytest.mark.parametrize("block", _params("integration"))
def test_block_runs_on_the_embedded_model(block: Block):
    _check(block)


@pytest.mark.parametrize("block", _params("fragment") + _params("skip"))
def test_block_is_well_formed(block: Block):
    """Fragments compile; skipped bash blocks are valid bash; yaml parses."""
    _check(block)
